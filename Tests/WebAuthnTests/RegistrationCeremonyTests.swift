import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

/// A relying party and a software authenticator wired together for ceremony tests.
struct CeremonyHarness {
    static let origin = "https://example.com"
    var rp: RelyingParty
    var authenticator = SoftwareAuthenticator(seed: Array("harness".utf8))
    let user = PublicKeyCredentialUserEntity(id: Array(repeating: 0x42, count: 32), name: "ada", displayName: "Ada")

    init(_ configure: (inout RelyingParty.Configuration) -> Void = { _ in }) throws {
        var configuration = RelyingParty.Configuration(
            rpID: "example.com", rpName: "Example", origins: [Self.origin, "https://login.example.com"])
        configure(&configuration)
        rp = try RelyingParty(configuration)
    }

    /// Runs a registration and returns the verdict (or throws the verification error).
    mutating func register(
        origin: String = origin, overrides: SoftwareAuthenticator.ClientDataOverrides = .init(), rpID: String? = nil,
        expectedChallenge: [UInt8]? = nil, mutate: (inout RegistrationResponseJSON) -> Void = { _ in }
    )
        async throws -> (VerifiedRegistration, SoftwareCredential)
    {
        let begin = rp.beginRegistration(user: user)
        var (response, credential) = try authenticator.register(options: begin.options, origin: origin, overrides: overrides, rpID: rpID)
        mutate(&response)
        let verified = try await rp.finishRegistration(response: response, expectedChallenge: expectedChallenge ?? begin.challenge)
        return (verified, credential)
    }
}

@Suite("Registration ceremony (§7.1)")
struct RegistrationCeremonyTests {
    @Test(arguments: SoftwareCredential.KeyType.allCases)
    func aPasskeyRegisters(_ keyType: SoftwareCredential.KeyType) async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.keyType = keyType
        let (verified, credential) = try await harness.register()
        #expect(verified.credentialID == credential.id)
        #expect(verified.publicKey.algorithm == keyType.algorithm)
        #expect(verified.attestation.format == "none" && verified.attestation.type == .none && !verified.attestation.trusted)
        #expect(verified.backupEligible && verified.backedUp && verified.userVerified)
        #expect(verified.transports == ["internal", "hybrid"])
        #expect(verified.discoverable == true)
        #expect(verified.origin == CeremonyHarness.origin)
    }

    @Test func optionsDescribeAPasskey() async throws {
        let harness = try CeremonyHarness()
        let options = harness.rp.beginRegistration(
            user: harness.user, excludeCredentials: [CredentialDescriptor(id: [1, 2], transports: ["usb"])]
        ).options
        #expect(options.challenge.bytes.count == 32)
        #expect(options.pubKeyCredParams.map(\.alg).prefix(3) == [.edDSA, .es256, .rs256])
        #expect(options.authenticatorSelection?.residentKey == "required")
        #expect(options.authenticatorSelection?.userVerification == "required")
        #expect(options.excludeCredentials.first?.transports == ["usb"])
        #expect(options.rp.id == "example.com")
        #expect(options.timeout == 300_000)
        let json = String(decoding: try JSONEncoder().encode(options), as: UTF8.self)
        #expect(json.contains("\"challenge\":\"") && !json.contains("="))
    }

    @Test func challengesAreFreshAndRandom() {
        #expect(RelyingParty.makeChallenge() != RelyingParty.makeChallenge())
        #expect(RelyingParty.makeUserHandle().count == 64)
    }

    /// The system generator fills whole buffers of any size, every byte value turns up, and no
    /// two draws repeat: a fill that stopped short or left zeros would fail here.
    @Test func randomBytesFillWholeBuffers() {
        #expect(RelyingParty.randomBytes(0).isEmpty && RelyingParty.randomBytes(-1).isEmpty)
        for count in [1, 7, 8, 9, 32, 55, 4096] { #expect(RelyingParty.randomBytes(count).count == count) }
        let large = RelyingParty.randomBytes(1 << 16)
        var seen = [Int](repeating: 0, count: 256)
        for byte in large { seen[Int(byte)] += 1 }
        // 65,536 bytes: each value ~256 times; below 150 or above 380 is ~10^-10 unlikely.
        #expect(seen.allSatisfy { (150...380).contains($0) })
        #expect(large.suffix(64).contains { $0 != 0 })
        #expect(Set((0..<200).map { _ in RelyingParty.randomBytes(16) }).count == 200)
    }

    // §7.1 step 7
    @Test func wrongClientDataTypeIsRejected() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.typeMismatch, "")) { try await harness.register(overrides: .init(type: "webauthn.get")) }
    }

    // §7.1 step 8
    @Test func anotherChallengeIsRejected() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.challengeMismatch, "")) {
            try await harness.register(expectedChallenge: RelyingParty.makeChallenge())
        }
    }

    // §7.1 step 9
    @Test func anOriginNotConfiguredIsRejected() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.originNotAllowed, "")) { try await harness.register(origin: "https://evil.example") }
        await #expect(throws: WebAuthnError(.originNotAllowed, "")) { try await harness.register(origin: "https://example.com:8443") }
        await #expect(throws: Never.self) { try await harness.register(origin: "https://login.example.com") }
    }

    // §7.1 step 10
    @Test func crossOriginIframesNeedPermission() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.crossOriginNotAllowed, "")) { try await harness.register(overrides: .init(crossOrigin: true)) }
        var permissive = try CeremonyHarness {
            $0.allowCrossOrigin = true
            $0.allowedTopOrigins = ["https://shop.example"]
        }
        // With top origins listed, a cross-origin ceremony must name one.
        await #expect(throws: WebAuthnError(.topOriginNotAllowed, "")) {
            try await permissive.register(overrides: .init(crossOrigin: true))
        }
        await #expect(throws: Never.self) {
            try await permissive.register(overrides: .init(crossOrigin: true, topOrigin: "https://shop.example"))
        }
        // Listed top origins alone do not allow cross-origin use.
        var listedOnly = try CeremonyHarness { $0.allowedTopOrigins = ["https://shop.example"] }
        await #expect(throws: WebAuthnError(.crossOriginNotAllowed, "")) {
            try await listedOnly.register(overrides: .init(crossOrigin: true, topOrigin: "https://shop.example"))
        }
        // Allowed without a list: Level 2 clients (no topOrigin) are accepted.
        var anyTop = try CeremonyHarness { $0.allowCrossOrigin = true }
        await #expect(throws: Never.self) { try await anyTop.register(overrides: .init(crossOrigin: true)) }
        await #expect(throws: WebAuthnError(.topOriginNotAllowed, "")) {
            try await permissive.register(overrides: .init(crossOrigin: true, topOrigin: "https://other.example"))
        }
        await #expect(throws: WebAuthnError(.topOriginNotAllowed, "")) {
            try await harness.register(overrides: .init(topOrigin: "https://shop.example"))
        }
    }

    // §7.1 step 13
    @Test func anotherRPIDIsRejected() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.rpIDHashMismatch, "")) { try await harness.register(rpID: "evil.example") }
    }

    // §7.1 step 14
    @Test func userPresenceIsRequired() async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.userPresent = false
        await #expect(throws: WebAuthnError(.userNotPresent, "")) { try await harness.register() }
    }

    // §7.1 step 15
    @Test func userVerificationIsRequiredByDefault() async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.userVerified = false
        await #expect(throws: WebAuthnError(.userNotVerified, "")) { try await harness.register() }
        var lenient = try CeremonyHarness { $0.userVerification = .preferred }
        lenient.authenticator.userVerified = false
        #expect(try await lenient.register().0.userVerified == false)
    }

    // §7.1 step 16
    @Test func backupStateWithoutEligibilityIsRejected() async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.backupEligible = false
        await #expect(throws: WebAuthnError(.invalidBackupFlags, "")) { try await harness.register() }
    }

    // §7.1 step 19
    @Test func anAlgorithmNotOfferedIsRejected() async throws {
        var harness = try CeremonyHarness { $0.algorithms = [.es256] }
        harness.authenticator.keyType = .ed25519
        await #expect(throws: WebAuthnError(.unsupportedAlgorithm, "")) { try await harness.register() }
    }

    // Level 3 credential record: the stored ID must be the attested one.
    @Test func rawIdMustBeTheAttestedCredentialID() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.credentialIDMismatch, "")) {
            try await harness.register {
                $0.rawId = Base64URLBytes([9, 9, 9])
                $0.id = Base64URLBytes([9, 9, 9]).base64URL
            }
        }
        await #expect(throws: WebAuthnError(.credentialIDMismatch, "")) { try await harness.register { $0.id = "AAAA" } }
        await #expect(throws: WebAuthnError(.malformedCredential, "")) { try await harness.register { $0.type = "password" } }
    }

    @Test func garbageInsideTheResponseIsMalformed() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.malformedClientData, "")) {
            try await harness.register { $0.response.clientDataJSON = Base64URLBytes(Array("{}".utf8)) }
        }
        await #expect(throws: WebAuthnError(.malformedClientData, "")) {
            try await harness.register { $0.response.clientDataJSON = Base64URLBytes([0xff, 0x00]) }
        }
        await #expect(throws: WebAuthnError(.malformedAttestationObject, "")) {
            try await harness.register { $0.response.attestationObject = Base64URLBytes([0xa0]) }
        }
        await #expect(throws: WebAuthnError(.malformedAttestationObject, "")) {
            try await harness.register { $0.response.attestationObject = Base64URLBytes([0xff]) }
        }
    }

    @Test func responseJSONDecodingNamesTheBadField() {
        #expect(throws: WebAuthnError(.malformedJSON, "")) { try RegistrationResponseJSON.decode(Array("{".utf8)) }
        do {
            _ = try RegistrationResponseJSON.decode(
                Array(#"{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":"!!","attestationObject":"AA"}}"#.utf8))
            Issue.record("garbage base64 must not decode")
        } catch {
            #expect(error.code == .malformedJSON)
            #expect(error.reason.contains("clientDataJSON"))
        }
    }
}

@Suite("Relying party configuration")
struct ConfigurationTests {
    @Test(
        arguments: [
            { (c: inout RelyingParty.Configuration) in c.rpID = "" },
            { $0.rpID = "Example.com" },
            { $0.rpID = "exa mple.com" },
            { $0.origins = [] },
            { $0.origins = ["http://example.com"] },
            { $0.origins = ["https://example.com/login"] },
            { $0.origins = ["example.com"] },
            { $0.origins = ["android:apk-key-hash:short"] },
            { $0.algorithms = [] },
            { $0.algorithms = [COSEAlgorithmIdentifier(rawValue: 12345)] },
            { $0.timeout = .zero },
        ] as [@Sendable (inout RelyingParty.Configuration) -> Void])
    func badValuesAreRefused(_ change: @Sendable (inout RelyingParty.Configuration) -> Void) {
        var configuration = RelyingParty.Configuration(rpID: "example.com", origins: ["https://example.com"])
        change(&configuration)
        #expect(throws: WebAuthnError(.invalidConfiguration, "")) { try RelyingParty(configuration) }
    }

    @Test func developmentAndAndroidOriginsAreAccepted() async throws {
        _ = try RelyingParty(.init())
        _ = try RelyingParty(
            .init(
                rpID: "example.com",
                origins: [
                    "https://example.com", "android:apk-key-hash:" + Base64URLBytes(Array(repeating: 1, count: 32)).base64URL,
                ]))
    }
}
