import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

/// `passkeyd inspect` and `passkeyd verify`, run as a user would run them.
@Suite("passkeyd inspect / verify")
struct CLITests {
    static func vector(_ id: String) throws -> TestVector {
        try #require(TestVector.all.first { $0.id == id })
    }

    static func arguments(for vector: TestVector) -> [String] {
        var args = [
            "verify", vector["ceremony"]?.string ?? "", "--rp-id", vector["rpId"]?.string ?? "",
            "--challenge", vector["expectedChallenge"]?.string ?? "",
            "--user-verification", vector["requireUserVerification"]?.bool == true ? "required" : "discouraged",
        ]
        let origins = vector["expectedOrigin"]?.string.map { [$0] } ?? vector["expectedOrigin"]?.array?.compactMap(\.string) ?? []
        for origin in origins { args += ["--origin", origin] }
        if let at = vector["verifyAt"]?.string { args += ["--at", at] }
        if let key = vector["credentialPublicKey"]?.string {
            args += ["--credential-public-key", key, "--sign-count", String(Int(vector["storedSignCount"]?.number ?? 0))]
        }
        return args
    }

    static func response(_ vector: TestVector) throws -> [UInt8] {
        Array(try JSONEncoder().encode(vector["response"]))
    }

    struct Verdict: Decodable {
        var ok: Bool
        var code: String?
        var fmt: String?
        var aaguid: String?
        var signCount: Int?
        var attestationTrusted: Bool?
        var attestationUsedSHA1: Bool?
    }

    @Test(arguments: [
        "pywebauthn/tpm-es256-ecc", "pywebauthn/android-safetynet-1", "webauthn-rs/authentication-yk5", "pywebauthn/auth-eddsa",
    ])
    func verifyAcceptsRealResponses(_ id: String) throws {
        let vector = try Self.vector(id)
        // Windows Hello TPMs sign certInfo with SHA-1 (RS1): accepted by default, and flagged.
        let result = try CLI.run(Self.arguments(for: vector), stdin: try Self.response(vector))
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let verdict = try JSONDecoder().decode(Verdict.self, from: Data(result.stdout.utf8))
        #expect(verdict.ok)
        #expect(verdict.fmt == vector["expect"]?["fmt"]?.string)
        #expect(verdict.signCount.map(Double.init) == vector["expect"]?["signCount"]?.number)
    }

    @Test func aSHA1TPMStatementVerifiesAndIsFlaggedUnlessRefused() throws {
        // A real TPM's certInfo signed with RS1: accepted by default, as the peers do, and said so.
        let vector = try Self.vector("pywebauthn/tpm-es256-ecc")
        let result = try CLI.run(Self.arguments(for: vector), stdin: try Self.response(vector))
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        let verdict = try JSONDecoder().decode(Verdict.self, from: Data(result.stdout.utf8))
        #expect(verdict.ok && verdict.attestationUsedSHA1 == true)
        let strict = try CLI.run(Self.arguments(for: vector) + ["--refuse-sha1-attestation"], stdin: try Self.response(vector))
        #expect(strict.status == 1)
        #expect(try JSONDecoder().decode(Verdict.self, from: Data(strict.stdout.utf8)).code == "unsupported_algorithm")
    }

    @Test func verifyAcceptsEveryAlgorithmItCanCheckUnlessToldWhatWasOffered() throws {
        let mldsa87 = try Self.vector("pywebauthn/none-mldsa87")
        let accepted = try CLI.run(Self.arguments(for: mldsa87), stdin: try Self.response(mldsa87))
        #expect(accepted.status == 0, "\(accepted.stdout) \(accepted.stderr)")
        // Told the options offered only ES256 and EdDSA: a verdict, not a usage error.
        let offered = try CLI.run(Self.arguments(for: mldsa87) + ["--alg", "ES256", "--alg=-8"], stdin: try Self.response(mldsa87))
        #expect(offered.status == 1)
        #expect(try JSONDecoder().decode(Verdict.self, from: Data(offered.stdout.utf8)).code == "unsupported_algorithm")
        // ML-DSA-44 cannot be checked here: the JSON verdict says so, exit 1.
        let mldsa44 = try Self.vector("pywebauthn/none-mldsa44")
        let unsupported = try CLI.run(Self.arguments(for: mldsa44), stdin: try Self.response(mldsa44))
        #expect(unsupported.status == 1, "\(unsupported.stderr)")
        #expect(try JSONDecoder().decode(Verdict.self, from: Data(unsupported.stdout.utf8)).code == "unsupported_algorithm")
        #expect(try CLI.run(Self.arguments(for: mldsa87) + ["--alg", "ES999"], stdin: try Self.response(mldsa87)).status == 2)
    }

    @Test func verifyRejectsWithTheErrorCodeAndExitStatus1() throws {
        let vector = try Self.vector("simplewebauthn/reg/throw-an-error-if-origin-not-in-list-of-expected-origins")
        let result = try CLI.run(Self.arguments(for: vector), stdin: try Self.response(vector))
        #expect(result.status == 1)
        let verdict = try JSONDecoder().decode(Verdict.self, from: Data(result.stdout.utf8))
        #expect(!verdict.ok && verdict.code == "origin_not_allowed")
    }

    @Test func verifyChecksTheChainWhenGivenATrustAnchor() throws {
        let vector = try Self.vector("pywebauthn/packed-wrong-root-neg")
        let anchors = vector["trustAnchorsPEM"]?.array?.compactMap(\.string) ?? []
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("anchor-\(UUID()).pem")
        try anchors.joined(separator: "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try CLI.run(Self.arguments(for: vector) + ["--trust-anchor", file.path], stdin: try Self.response(vector))
        #expect(result.status == 1)
        #expect(try JSONDecoder().decode(Verdict.self, from: Data(result.stdout.utf8)).code == "attestation_untrusted")
    }

    @Test(arguments: [
        ["verify", "registration"],
        ["verify", "registration", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "!!"],
        ["verify", "authentication", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "AAAA"],
        ["verify", "registration", "--rp-id", "Bad Domain", "--origin", "https://example.com", "--challenge", "AAAA"],
        [
            "verify", "registration", "--rp-id", "example.com", "--origin", "https://example.com", "--challenge", "AAAA", "--at",
            "yesterday",
        ],
        ["frobnicate"],
    ])
    func badUsageExitsWith2(_ arguments: [String]) throws {
        let result = try CLI.run(arguments)
        #expect(result.status == 2, "\(arguments): \(result.stderr)")
        #expect(!result.stderr.isEmpty)
    }

    @Test func inspectPrintsTheProviderAndCertificates() throws {
        let vector = try Self.vector("pywebauthn/tpm-es256-ecc")
        let result = try CLI.run(["inspect", "-"], stdin: try Self.response(vector))
        #expect(result.status == 0)
        #expect(result.stdout.contains("Windows Hello"))
        #expect(result.stdout.contains("fmt:           tpm"))
        #expect(result.stdout.contains("x5c[0]"))
        #expect(result.stdout.contains("webauthn.create"))
    }

    @Test func inspectJSONAndRawAttestationObjects() throws {
        let vector = try Self.vector("webauthn-rs/registration_packed_attestation")
        let json = try CLI.run(["inspect", "--json", "-"], stdin: try Self.response(vector))
        #expect(json.status == 0)
        let object = try JSONDecoder().decode([String: JSONValue].self, from: Data(json.stdout.utf8))
        #expect(object["kind"] == .string("registration response"))
        #expect(object["authenticatorData"]?["provider"] == .string("Chrome on Mac"))
        // The bare attestation object, as base64url text and as raw CBOR bytes.
        let attestationObject = vector["response"]?["response"]?["attestationObject"]?.string ?? ""
        let text = try CLI.run(["inspect", "-"], stdin: Array(attestationObject.utf8))
        #expect(text.status == 0 && text.stdout.contains("attestation object") && text.stdout.contains("packed"))
        let raw = try CLI.run(["inspect", "-"], stdin: (Base64URLBytes(encoded: attestationObject)?.bytes ?? []))
        #expect(raw.status == 0 && raw.stdout.contains("AAGUID"))
    }

    @Test func inspectReportsWhatItCannotRead() throws {
        let result = try CLI.run(["inspect", "-"], stdin: Array("this is not a passkey".utf8))
        #expect(result.status == 1)
        #expect(result.stdout.contains("malformed_attestation_object"))
        let authentication = try CLI.run(["inspect", "-"], stdin: try Self.response(try Self.vector("pywebauthn/auth-eddsa")))
        #expect(
            authentication.status == 0 && authentication.stdout.contains("authentication response")
                && authentication.stdout.contains("signature"))
    }
}
