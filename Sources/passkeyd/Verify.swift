import ArgumentParser
import Foundation
import WebAuthn

struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the full ceremony check on a response read from standard input and print one JSON verdict.",
        discussion: "Exit status: 0 verified, 1 rejected (the verdict names the error code), 2 bad usage.")

    enum Ceremony: String, ExpressibleByArgument { case registration, authentication }

    @Argument(help: "registration or authentication")
    var ceremony: Ceremony

    @Option(name: .customLong("rp-id"), help: "The RP ID (e.g. example.com).")
    var rpID: String

    @Option(name: .customLong("origin"), help: "An allowed origin (repeat for several).")
    var origins: [String]

    @Option(help: "The challenge the server sent, base64url.")
    var challenge: String

    @Option(name: .customLong("credential-public-key"), help: "Authentication: the stored COSE public key, base64url.")
    var credentialPublicKey: String?

    @Option(name: .customLong("sign-count"), help: "Authentication: the stored signature counter.")
    var signCount: UInt32 = 0

    @Option(name: .customLong("user-verification"), help: "required, preferred or discouraged.")
    var userVerification: String = "required"

    @Option(
        name: .customLong("trust-anchor"),
        help: "A PEM file of attestation root certificates (repeatable); the attestation must chain to one.")
    var trustAnchors: [String] = []

    @Option(help: "Check certificate validity at this time (ISO 8601), e.g. 2021-09-03T21:07:20Z.")
    var at: String?

    @Flag(name: .customLong("allow-cross-origin"), help: "Accept ceremonies run in a cross-origin iframe.")
    var allowCrossOrigin = false

    @Option(name: .customLong("top-origin"), help: "An allowed top-level origin for cross-origin ceremonies (repeatable).")
    var topOrigins: [String] = []

    @Flag(name: .customLong("unsafe-allow-sha1"), help: "Accept credential keys that sign with RS1 (RSASSA-PKCS1-v1_5 with SHA-1).")
    var unsafeAllowSHA1 = false

    @Flag(
        name: .customLong("refuse-sha1-attestation"),
        help: "Refuse attestation statements that rely on SHA-1 (accepted and reported as attestationUsedSHA1 by default).")
    var refuseSHA1Attestation = false

    @Option(
        name: .customLong("alg"),
        help:
            "An algorithm the options offered: a name (ES256, EdDSA, RS256, PS256, ML-DSA-65 …) or a COSE number as --alg=-7; repeatable. Default: every one this build can verify."
    )
    var offeredAlgorithms: [String] = []

    /// Every algorithm the library can verify.
    static let verifiable: [COSEAlgorithmIdentifier] =
        RelyingParty.defaultAlgorithms + [.ed25519, .rs384, .rs512, .ps384, .ps512, .mlDSA65, .mlDSA87]

    /// `--alg` values: a COSE number (`-7`) or a name (`ES256`, case ignored).
    static func algorithm(_ text: String) -> COSEAlgorithmIdentifier? {
        if let number = Int(text) { return COSEAlgorithmIdentifier(rawValue: number) }
        let names: [(String, COSEAlgorithmIdentifier)] = [
            ("ES256", .es256), ("ES384", .es384), ("ES512", .es512), ("EdDSA", .edDSA), ("Ed25519", .ed25519), ("RS256", .rs256),
            ("RS384", .rs384), ("RS512", .rs512), ("PS256", .ps256), ("PS384", .ps384), ("PS512", .ps512), ("RS1", .rs1),
            ("ML-DSA-44", .mlDSA44), ("ML-DSA-65", .mlDSA65), ("ML-DSA-87", .mlDSA87),
        ]
        return names.first { $0.0.lowercased() == text.lowercased() }?.1
    }

    struct Verdict: Encodable {
        var ok: Bool
        var code: String?
        var message: String?
        var fmt: String?
        var credentialId: String?
        var aaguid: String?
        var signCount: UInt32?
        var userVerified: Bool?
        var backupEligible: Bool?
        var backupState: Bool?
        var attestationTrusted: Bool?
        var attestationType: String?
        var attestationUntrustedReason: String?
        var attestationUsedSHA1: Bool?
    }

    func run() async throws {
        guard let expectedChallenge = Base64URLBytes(encoded: challenge)?.bytes else {
            throw ValidationError("--challenge is not base64url")
        }
        guard let uv = UserVerificationRequirement(rawValue: userVerification) else {
            throw ValidationError("--user-verification must be required, preferred or discouraged")
        }
        var verificationTime = Date()
        if let at {
            guard let date = ISO8601DateFormatter().date(from: at) else { throw ValidationError("--at is not an ISO 8601 time") }
            verificationTime = date
        }
        var policy = AttestationPolicy(allowSHA1Attestation: !refuseSHA1Attestation)
        for path in trustAnchors {
            guard let pem = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read --trust-anchor \(path)") }
            do {
                policy.trustAnchors += try AttestationPolicy.certificates(pem: String(decoding: pem, as: UTF8.self))
            } catch {
                throw ValidationError("--trust-anchor \(path): \(error.reason)")
            }
        }
        policy.requireTrustedAttestation = !policy.trustAnchors.isEmpty
        // What the options offered (§7.1 step 19): as given, else everything verifiable here. An
        // algorithm nobody here can verify (ML-DSA-44) still yields a verdict, `unsupported_algorithm`.
        var algorithms = Self.verifiable
        if !offeredAlgorithms.isEmpty {
            algorithms = try offeredAlgorithms.map { text in
                guard let algorithm = Self.algorithm(text) else { throw ValidationError("--alg \(text) is not a COSE algorithm") }
                return algorithm
            }
        }
        if unsafeAllowSHA1 && !algorithms.contains(.rs1) { algorithms.append(.rs1) }
        let rp: RelyingParty
        do {
            rp = try RelyingParty(
                .init(
                    rpID: rpID, rpName: rpID, origins: origins, userVerification: uv, algorithms: algorithms,
                    attestation: .direct, attestationPolicy: policy, allowCrossOrigin: allowCrossOrigin,
                    allowedTopOrigins: topOrigins))
        } catch {
            throw ValidationError(error.reason)
        }
        var storedKey: CredentialPublicKey?
        if ceremony == .authentication {
            guard let encoded = credentialPublicKey, let bytes = Base64URLBytes(encoded: encoded)?.bytes else {
                throw ValidationError("authentication needs --credential-public-key (base64url COSE key)")
            }
            do {
                storedKey = try CredentialPublicKey(cose: bytes)
            } catch {
                throw ValidationError("--credential-public-key: \(error.reason)")
            }
        }

        let input = Array(FileHandle.standardInput.readDataToEndOfFile())
        var verdict = Verdict(ok: false)
        do {
            switch ceremony {
            case .registration:
                let response = try RegistrationResponseJSON.decode(input)
                let verified = try await rp.finishRegistration(
                    response: response, expectedChallenge: expectedChallenge, now: verificationTime)
                verdict = Verdict(
                    ok: true, fmt: verified.attestation.format, credentialId: Base64URLBytes(verified.credentialID).base64URL,
                    aaguid: verified.aaguid.description, signCount: verified.signCount, userVerified: verified.userVerified,
                    backupEligible: verified.backupEligible, backupState: verified.backedUp,
                    attestationTrusted: verified.attestation.trusted, attestationType: verified.attestation.type.rawValue,
                    attestationUntrustedReason: verified.attestation.untrustedReason, attestationUsedSHA1: verified.attestation.usedSHA1)
            case .authentication:
                let response = try AuthenticationResponseJSON.decode(input)
                guard let storedKey else { throw ExitCode(2) }
                let stored = StoredCredential(
                    id: response.rawId.bytes, publicKey: storedKey, signCount: signCount,
                    userHandle: response.response.userHandle?.bytes ?? [])
                let verified = try rp.finishAuthentication(response: response, expectedChallenge: expectedChallenge, credential: stored)
                verdict = Verdict(
                    ok: true, credentialId: Base64URLBytes(verified.credentialID).base64URL, signCount: verified.newSignCount,
                    userVerified: verified.userVerified, backupEligible: verified.backupEligible, backupState: verified.backedUp)
            }
        } catch let error as WebAuthnError {
            verdict = Verdict(ok: false, code: error.code.rawValue, message: error.reason)
        }
        try printJSON(verdict)
        if !verdict.ok { throw ExitCode(1) }
    }
}
