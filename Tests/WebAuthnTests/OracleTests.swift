import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

/// Cross-check with an independent implementation: every registration and assertion passkeyd
/// accepts here must verify with py_webauthn too (scripts/crosscheck.py).
///
/// `./scripts/test` installs py_webauthn into .venv and sets PASSKEYD_PYTHON and
/// PASSKEYD_REQUIRE_ORACLE=1, so there a missing oracle is a failure. A plain `swift test` on a
/// machine without py_webauthn skips this suite.
enum PythonOracle {
    static let python = ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"] ?? "/usr/bin/env"
    static var arguments: [String] { ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"] == nil ? ["python3"] : [] }
    static let required = ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_ORACLE"] == "1"
    static let script = Fixtures.directory.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent(
        "scripts/crosscheck.py"
    ).path

    static let available: Bool = {
        if required { return true }
        return (try? run(arguments + ["-c", "import webauthn"], stdin: []).status) == 0
    }()

    static func run(_ args: [String], stdin: [UInt8]) throws -> (status: Int32, output: String) {
        let result = try Subprocess.run(URL(fileURLWithPath: python), args, stdin: stdin)
        return (result.status, result.stdout + result.stderr)
    }

    static func verify(_ request: [String: JSONValue]) throws -> (status: Int32, output: String) {
        try run(arguments + [script], stdin: Array(try JSONEncoder().encode(request)))
    }
}

@Suite("py_webauthn agrees", .enabled(if: PythonOracle.available))
struct OracleTests {
    static let origin = "https://example.com"

    static func json(_ value: some Encodable) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
    }

    @Test(arguments: SoftwareCredential.KeyType.allCases)
    func whatPasskeydAcceptsPyWebAuthnAccepts(_ keyType: SoftwareCredential.KeyType) async throws {
        let ca = try AttestationCA()
        for (label, mode) in [
            ("none", SoftwareAuthenticator.AttestationMode.none), ("packed self", .packedSelf), ("packed full", .packedFull(ca)),
        ] {
            let rp = try RelyingParty(.init(rpID: "example.com", origins: [Self.origin], attestation: .direct))
            var authenticator = SoftwareAuthenticator()
            authenticator.keyType = keyType
            authenticator.attestation = mode
            let begin = rp.beginRegistration(user: .init(id: RelyingParty.makeUserHandle(), name: "ada", displayName: "Ada"))
            var (registration, credential) = try authenticator.register(options: begin.options, origin: Self.origin)
            let verified = try await rp.finishRegistration(response: registration, expectedChallenge: begin.challenge)

            let reg = try PythonOracle.verify([
                "ceremony": .string("registration"), "credential": try Self.json(registration),
                "challenge": .string(Base64URLBytes(begin.challenge).base64URL),
                "origin": .string(Self.origin), "rpId": .string("example.com"), "requireUserVerification": .bool(true),
            ])
            #expect(reg.status == 0, "\(keyType) \(label): \(reg.output)")
            let oracle = try JSONReader.parse(Array(reg.output.utf8))
            #expect(oracle["credentialPublicKey"] == .string(Base64URLBytes(verified.publicKey.coseBytes).base64URL))
            #expect(oracle["credentialId"] == .string(Base64URLBytes(verified.credentialID).base64URL))

            let request = rp.beginAuthentication()
            let assertion = try authenticator.authenticate(options: request.options, origin: Self.origin, credential: &credential)
            let stored = StoredCredential(
                id: verified.credentialID, publicKey: verified.publicKey, signCount: 0, userHandle: credential.userHandle)
            let accepted = try rp.finishAuthentication(response: assertion, expectedChallenge: request.challenge, credential: stored)
            let auth = try PythonOracle.verify([
                "ceremony": .string("authentication"), "credential": try Self.json(assertion),
                "challenge": .string(Base64URLBytes(request.challenge).base64URL),
                "origin": .string(Self.origin), "rpId": .string("example.com"), "requireUserVerification": .bool(true),
                "credentialPublicKey": .string(Base64URLBytes(verified.publicKey.coseBytes).base64URL), "signCount": .number(0),
            ])
            #expect(auth.status == 0, "\(keyType) \(label): \(auth.output)")
            #expect(try JSONReader.parse(Array(auth.output.utf8))["newSignCount"] == .number(Double(accepted.newSignCount)))
        }
    }

    @Test func theOracleRejectsWhatPasskeydRejects() async throws {
        // A tampered assertion: both refuse it (guards against an oracle that accepts anything).
        let rp = try RelyingParty(.init(rpID: "example.com", origins: [Self.origin]))
        var authenticator = SoftwareAuthenticator()
        let begin = rp.beginRegistration(user: .init(id: [1, 2, 3], name: "bo", displayName: "Bo"))
        var (registration, credential) = try authenticator.register(options: begin.options, origin: Self.origin)
        let verified = try await rp.finishRegistration(response: registration, expectedChallenge: begin.challenge)
        let request = rp.beginAuthentication()
        var assertion = try authenticator.authenticate(options: request.options, origin: Self.origin, credential: &credential)
        assertion.response.signature.bytes[12] ^= 1
        let stored = StoredCredential(id: verified.credentialID, publicKey: verified.publicKey, signCount: 0, userHandle: [1, 2, 3])
        #expect(throws: WebAuthnError(.signatureInvalid, "")) {
            try rp.finishAuthentication(response: assertion, expectedChallenge: request.challenge, credential: stored)
        }
        let oracle = try PythonOracle.verify([
            "ceremony": .string("authentication"), "credential": try Self.json(assertion),
            "challenge": .string(Base64URLBytes(request.challenge).base64URL),
            "origin": .string(Self.origin), "rpId": .string("example.com"),
            "credentialPublicKey": .string(Base64URLBytes(verified.publicKey.coseBytes).base64URL), "signCount": .number(0),
        ])
        #expect(oracle.status == 1, "\(oracle.output)")
        _ = registration
    }
}
