import Crypto
import Foundation
import Testing
import WebAuthn
import WebAuthnTesting

/// The software authenticator's WebAuthn extensions: what it writes in the authenticator data
/// (read back with the strict parser) and in `clientExtensionResults`, and how it refuses what a
/// browser refuses.
@Suite("Software authenticator extensions")
struct SoftwareAuthenticatorExtensionTests {
    static let origin = "https://example.com"
    static let salt = Array(repeating: UInt8(0x5a), count: 32)

    static func creationOptions(_ extensions: [String: JSONValue]?) -> PublicKeyCredentialCreationOptionsJSON {
        PublicKeyCredentialCreationOptionsJSON(
            rp: PublicKeyCredentialRpEntity(id: "example.com", name: "Example"),
            user: PublicKeyCredentialUserEntityJSON(id: Array(repeating: 0x42, count: 16), name: "ada", displayName: "Ada"),
            challenge: Base64URLBytes(Array(repeating: 7, count: 32)), pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256)],
            timeout: nil, extensions: extensions)
    }

    static func requestOptions(_ extensions: [String: JSONValue]?, allow: [[UInt8]] = []) -> PublicKeyCredentialRequestOptionsJSON {
        PublicKeyCredentialRequestOptionsJSON(
            challenge: Base64URLBytes(Array(repeating: 9, count: 32)), timeout: nil, rpId: "example.com",
            allowCredentials: allow.map { PublicKeyCredentialDescriptorJSON(id: $0) }, userVerification: "preferred",
            extensions: extensions)
    }

    static func text(_ bytes: [UInt8]) -> JSONValue { .string(Base64URLBytes(bytes).base64URL) }

    static func prf(first: [UInt8], second: [UInt8]? = nil) -> JSONValue {
        var values: [String: JSONValue] = ["first": text(first)]
        if let second { values["second"] = text(second) }
        return .object(values)
    }

    /// The authenticator data of a registration, parsed strictly.
    static func authData(_ response: RegistrationResponseJSON) throws -> AuthenticatorData {
        let object = try CBORReader.decode(response.response.attestationObject.bytes)
        return try AuthenticatorData(bytes: object[text: "authData"]?.bytesValue ?? [])
    }

    static func authData(_ response: AuthenticationResponseJSON) throws -> AuthenticatorData {
        try AuthenticatorData(bytes: response.response.authenticatorData.bytes)
    }

    static func bytes(_ value: JSONValue?) -> [UInt8]? {
        guard case .string(let text)? = value else { return nil }
        return Base64URLBytes(encoded: text)?.bytes
    }

    /// WebAuthn L3 §10.1.4 computed here, apart from the authenticator's code.
    static func expectedPRF(secret: [UInt8], input: [UInt8]) -> [UInt8] {
        let salt = Array(SHA256.hash(data: Array("WebAuthn PRF".utf8) + [0] + input))
        return Array(HMAC<SHA256>.authenticationCode(for: salt, using: SymmetricKey(data: secret)))
    }

    @Test func withoutExtensionsTheShapeIsUnchanged() throws {
        // The same seed: the same keys and IDs, so the bytes can be compared.
        var plain = SoftwareAuthenticator(seed: Array("shape".utf8))
        var asked = SoftwareAuthenticator(seed: Array("shape".utf8))
        let (registration, credential) = try plain.register(options: Self.creationOptions(nil), origin: Self.origin)
        let (credPropsOnly, _) = try asked.register(options: Self.creationOptions(["credProps": .bool(true)]), origin: Self.origin)
        let data = try Self.authData(registration)
        #expect(!data.flags.contains(.extensionData) && data.extensions == nil)
        #expect(registration.clientExtensionResults == ["credProps": .object(["rk": .bool(true)])])
        // credProps is a client extension: the authenticator data is byte for byte the same.
        #expect(credPropsOnly.response.attestationObject == registration.response.attestationObject)
        #expect(credPropsOnly.clientExtensionResults == registration.clientExtensionResults)

        var signer = credential
        let assertion = try plain.authenticate(options: Self.requestOptions(nil), origin: Self.origin, credential: &signer)
        let assertionData = try Self.authData(assertion)
        #expect(assertion.response.authenticatorData.bytes.count == 37 && assertionData.extensions == nil)
        #expect(assertion.clientExtensionResults == [:])
    }

    @Test func prfAtRegistrationReportsHmacSecretAndEvaluatesEval() throws {
        var authenticator = SoftwareAuthenticator()
        let (supportOnly, _) = try authenticator.register(options: Self.creationOptions(["prf": .object([:])]), origin: Self.origin)
        let data = try Self.authData(supportOnly)
        #expect(data.flags.contains(.extensionData))
        #expect(data.extensions == .map([CBORMapEntry(.text("hmac-secret"), .bool(true))]))
        #expect(supportOnly.clientExtensionResults?["prf"] == .object(["enabled": .bool(true)]))

        let options = Self.creationOptions(["prf": .object(["eval": Self.prf(first: Self.salt)])])
        let (evaluated, credential) = try authenticator.register(options: options, origin: Self.origin)
        let secret = try #require(credential.prfSecret)
        #expect(secret.count == 32)
        #expect(evaluated.clientExtensionResults?["prf"]?["enabled"] == .bool(true))
        #expect(
            Self.bytes(evaluated.clientExtensionResults?["prf"]?["results"]?["first"]) == Self.expectedPRF(secret: secret, input: Self.salt)
        )
    }

    @Test func prfOutputIsTheSpecifiedHMAC() {
        // HMAC-SHA256(CredRandom = 00..1f, SHA-256("WebAuthn PRF" || 0x00 || "passkeyd")), computed apart.
        let credential = SoftwareCredential(
            id: [1], keyType: .es256, privateKey: [], rpID: "example.com", userHandle: [2], userName: "ada", prfSecret: Array(0..<32))
        let output = credential.prfOutput(Array("passkeyd".utf8)) ?? []
        #expect(
            output.map { String(format: "%02x", $0) }.joined() == "c1e99f32427b60d2b59e45948d8258853d1af4cc312fe30fffca27f155eb8a9d")
    }

    @Test func prfIsStablePerCredentialAndSalt() throws {
        var authenticator = SoftwareAuthenticator()
        var (_, ada) = try authenticator.register(options: Self.creationOptions(["prf": .object([:])]), origin: Self.origin)
        var (_, other) = try authenticator.register(options: Self.creationOptions(["prf": .object([:])]), origin: Self.origin)
        func first(_ credential: inout SoftwareCredential, _ salt: [UInt8]) throws -> [UInt8]? {
            let options = Self.requestOptions(["prf": .object(["eval": Self.prf(first: salt)])])
            let assertion = try authenticator.authenticate(options: options, origin: Self.origin, credential: &credential)
            return Self.bytes(assertion.clientExtensionResults?["prf"]?["results"]?["first"])
        }
        let once = try #require(try first(&ada, Self.salt))
        #expect(once.count == 32)
        #expect(try first(&ada, Self.salt) == once)
        #expect(try first(&ada, Self.salt) == once)
        #expect(try first(&other, Self.salt) != once)
        #expect(try first(&ada, Array(repeating: 0x5b, count: 32)) != once)
    }

    @Test func prfAssertionWritesAnHmacSecretOutputAndASecondResult() throws {
        var authenticator = SoftwareAuthenticator()
        var (_, credential) = try authenticator.register(options: Self.creationOptions(nil), origin: Self.origin)
        let second = Array(repeating: UInt8(0x01), count: 32)
        let options = Self.requestOptions(["prf": .object(["eval": Self.prf(first: Self.salt, second: second)])])
        let assertion = try authenticator.authenticate(options: options, origin: Self.origin, credential: &credential)
        let results = assertion.clientExtensionResults?["prf"]?["results"]
        let secret = try #require(credential.prfSecret)
        let firstOutput = try #require(Self.bytes(results?["first"]))
        #expect(firstOutput == Self.expectedPRF(secret: secret, input: Self.salt))
        #expect(Self.bytes(results?["second"]) == Self.expectedPRF(secret: secret, input: second))
        let data = try Self.authData(assertion)
        #expect(data.flags.contains(.extensionData))
        // CTAP2 hmac-secret: 32 bytes per salt, never the PRF output itself.
        let transported = try #require(data.extensions?[text: "hmac-secret"]?.bytesValue)
        #expect(transported.count == 64 && Array(transported.prefix(32)) != firstOutput)
        #expect(data.extensions?.mapValue?.count == 1)
    }

    @Test func evalByCredentialWinsForItsCredential() throws {
        var authenticator = SoftwareAuthenticator()
        var (_, ada) = try authenticator.register(options: Self.creationOptions(nil), origin: Self.origin)
        let (_, other) = try authenticator.register(options: Self.creationOptions(nil), origin: Self.origin)
        let own = Array(repeating: UInt8(0x33), count: 32)
        let secret = try #require(ada.prfSecret)
        func output(_ byCredential: [String: JSONValue]) throws -> [UInt8]? {
            let options = Self.requestOptions(
                ["prf": .object(["eval": Self.prf(first: Self.salt), "evalByCredential": .object(byCredential)])],
                allow: [ada.id, other.id])
            let assertion = try authenticator.authenticate(options: options, origin: Self.origin, credential: &ada)
            return Self.bytes(assertion.clientExtensionResults?["prf"]?["results"]?["first"])
        }
        #expect(try output([Base64URLBytes(ada.id).base64URL: Self.prf(first: own)]) == Self.expectedPRF(secret: secret, input: own))
        // Another credential's entry does not apply: `eval` does.
        #expect(
            try output([Base64URLBytes(other.id).base64URL: Self.prf(first: own)]) == Self.expectedPRF(secret: secret, input: Self.salt))
    }

    @Test func prfMisuseIsRefusedLikeABrowser() throws {
        var authenticator = SoftwareAuthenticator()
        var (_, credential) = try authenticator.register(options: Self.creationOptions(nil), origin: Self.origin)
        let byCredential: JSONValue = .object([Base64URLBytes(credential.id).base64URL: Self.prf(first: Self.salt)])
        // §10.1.4: evalByCredential needs allowCredentials, names only them, and is not for create().
        #expect(throws: SoftwareAuthenticator.ClientError("NotSupportedError", "")) {
            try authenticator.authenticate(
                options: Self.requestOptions(["prf": .object(["evalByCredential": byCredential])]), origin: Self.origin,
                credential: &credential)
        }
        #expect(throws: SoftwareAuthenticator.ClientError("SyntaxError", "")) {
            try authenticator.authenticate(
                options: Self.requestOptions(["prf": .object(["evalByCredential": byCredential])], allow: [[9, 9]]), origin: Self.origin,
                credential: &credential)
        }
        #expect(throws: SoftwareAuthenticator.ClientError("NotSupportedError", "")) {
            try authenticator.register(
                options: Self.creationOptions(["prf": .object(["evalByCredential": byCredential])]), origin: Self.origin)
        }
        #expect(throws: SoftwareAuthenticator.ClientError("TypeError", "")) {
            try authenticator.register(
                options: Self.creationOptions(["prf": .object(["eval": .object(["first": .string("not base64url!")])])]),
                origin: Self.origin)
        }
    }

    @Test func withoutPRFSupportNothingIsReported() throws {
        var authenticator = SoftwareAuthenticator()
        authenticator.supportsPRF = false
        let options = Self.creationOptions(["prf": .object(["eval": Self.prf(first: Self.salt)])])
        var (registration, credential) = try authenticator.register(options: options, origin: Self.origin)
        #expect(credential.prfSecret == nil)
        #expect(registration.clientExtensionResults?["prf"] == .object(["enabled": .bool(false)]))
        #expect(try Self.authData(registration).extensions == nil)
        let assertion = try authenticator.authenticate(
            options: Self.requestOptions(["prf": .object(["eval": Self.prf(first: Self.salt)])]), origin: Self.origin,
            credential: &credential)
        #expect(assertion.clientExtensionResults?["prf"] == nil)
        #expect(try Self.authData(assertion).extensions == nil)
    }

    @Test(arguments: [
        ("userVerificationOptional", UInt64(1)), ("userVerificationOptionalWithCredentialIDList", 2), ("userVerificationRequired", 3),
    ])
    func credentialProtectionPolicyBecomesCredProtect(_ policy: String, _ level: UInt64) throws {
        var authenticator = SoftwareAuthenticator()
        let options = Self.creationOptions([
            "credentialProtectionPolicy": .string(policy), "enforceCredentialProtectionPolicy": .bool(true),
        ])
        let (registration, credential) = try authenticator.register(options: options, origin: Self.origin)
        #expect(try Self.authData(registration).extensions == .map([CBORMapEntry(.text("credProtect"), .unsigned(level))]))
        #expect(credential.credProtect == UInt8(level))
        #expect(registration.clientExtensionResults?["credentialProtectionPolicy"] == nil)

        authenticator.supportsCredProtect = false
        if level > 1 {
            // §10.2.1: enforced and not applicable: no credential.
            #expect(throws: SoftwareAuthenticator.ClientError("NotAllowedError", "")) {
                try authenticator.register(options: options, origin: Self.origin)
            }
        }
        let relaxed = Self.creationOptions(["credentialProtectionPolicy": .string(policy)])
        let (unprotected, made) = try authenticator.register(options: relaxed, origin: Self.origin)
        #expect(try Self.authData(unprotected).extensions == nil && made.credProtect == nil)
    }

    @Test func credProtectLimitsAssertionsWithoutUserVerification() throws {
        var authenticator = SoftwareAuthenticator()
        func made(_ policy: String) throws -> SoftwareCredential {
            try authenticator.register(options: Self.creationOptions(["credentialProtectionPolicy": .string(policy)]), origin: Self.origin)
                .1
        }
        var required = try made("userVerificationRequired")
        var listed = try made("userVerificationOptionalWithCredentialIDList")
        authenticator.userVerified = false
        #expect(throws: SoftwareAuthenticator.ClientError("NotAllowedError", "")) {
            try authenticator.authenticate(
                options: Self.requestOptions(nil, allow: [required.id]), origin: Self.origin, credential: &required)
        }
        #expect(throws: SoftwareAuthenticator.ClientError("NotAllowedError", "")) {
            try authenticator.authenticate(options: Self.requestOptions(nil), origin: Self.origin, credential: &listed)
        }
        _ = try authenticator.authenticate(options: Self.requestOptions(nil, allow: [listed.id]), origin: Self.origin, credential: &listed)
        authenticator.userVerified = true
        _ = try authenticator.authenticate(options: Self.requestOptions(nil), origin: Self.origin, credential: &required)
    }

    @Test func minPinLengthIsReportedWhenSupported() throws {
        var authenticator = SoftwareAuthenticator()
        let options = Self.creationOptions(["minPinLength": .bool(true)])
        #expect(
            try Self.authData(try authenticator.register(options: options, origin: Self.origin).0).extensions
                == .map([CBORMapEntry(.text("minPinLength"), .unsigned(6))]))
        authenticator.minPinLength = nil
        #expect(try Self.authData(try authenticator.register(options: options, origin: Self.origin).0).extensions == nil)
    }

    @Test func theExtensionMapIsCanonicalCBOR() throws {
        var authenticator = SoftwareAuthenticator()
        let options = Self.creationOptions([
            "minPinLength": .bool(true), "prf": .object([:]), "credentialProtectionPolicy": .string("userVerificationRequired"),
        ])
        let (registration, _) = try authenticator.register(options: options, origin: Self.origin)
        let data = try Self.authData(registration)
        let map = try #require(data.extensions)
        // CTAP2 §6: keys by encoded length, then bytewise ("credProtect" < "hmac-secret" < "minPinLength").
        #expect(map.mapValue?.map(\.key.textValue) == ["credProtect", "hmac-secret", "minPinLength"])
        let encoded = CBORWriter.encode(map)
        #expect(Array(data.bytes.suffix(encoded.count)) == encoded)
    }

    @Test func largeBlobIsSupportedWrittenAndRead() throws {
        var authenticator = SoftwareAuthenticator()
        let support = Self.creationOptions(["largeBlob": .object(["support": .string("preferred")])])
        var (registration, credential) = try authenticator.register(options: support, origin: Self.origin)
        #expect(registration.clientExtensionResults?["largeBlob"] == .object(["supported": .bool(true)]))
        #expect(try Self.authData(registration).extensions == nil)

        let read = Self.requestOptions(["largeBlob": .object(["read": .bool(true)])])
        #expect(
            try authenticator.authenticate(options: read, origin: Self.origin, credential: &credential).clientExtensionResults?["largeBlob"]
                == .object([:]))
        let blob = Array("a wrapped data key".utf8)
        let write = Self.requestOptions(["largeBlob": .object(["write": Self.text(blob)])], allow: [credential.id])
        let written = try authenticator.authenticate(options: write, origin: Self.origin, credential: &credential)
        #expect(written.clientExtensionResults?["largeBlob"] == .object(["written": .bool(true)]))
        #expect(credential.largeBlob == blob)
        let again = try authenticator.authenticate(options: read, origin: Self.origin, credential: &credential)
        #expect(Self.bytes(again.clientExtensionResults?["largeBlob"]?["blob"]) == blob)

        #expect(throws: SoftwareAuthenticator.ClientError("NotSupportedError", "")) {
            try authenticator.authenticate(
                options: Self.requestOptions(["largeBlob": .object(["read": .bool(true), "write": Self.text(blob)])]), origin: Self.origin,
                credential: &credential)
        }
    }

    @Test func withoutLargeBlobSupportNothingIsStored() throws {
        var authenticator = SoftwareAuthenticator()
        authenticator.supportsLargeBlob = false
        let support = Self.creationOptions(["largeBlob": .object(["support": .string("required")])])
        var (registration, credential) = try authenticator.register(options: support, origin: Self.origin)
        #expect(registration.clientExtensionResults?["largeBlob"] == .object(["supported": .bool(false)]))
        let write = Self.requestOptions(["largeBlob": .object(["write": Self.text([1, 2, 3])])])
        let written = try authenticator.authenticate(options: write, origin: Self.origin, credential: &credential)
        #expect(written.clientExtensionResults?["largeBlob"] == .object(["written": .bool(false)]))
        #expect(credential.largeBlob == nil)
    }

    @Test func withoutCredPropsSupportNoRkIsReported() throws {
        var authenticator = SoftwareAuthenticator()
        authenticator.supportsCredProps = false
        let (registration, _) = try authenticator.register(options: Self.creationOptions(["credProps": .bool(true)]), origin: Self.origin)
        #expect(registration.clientExtensionResults == [:])
    }

    @Test func theRelyingPartyReadsWhatItAskedFor() async throws {
        var harness = try CeremonyHarness()
        let requested = RegistrationExtensionInputs(
            prf: .init(eval: PRFValues(first: Self.salt)), largeBlob: .preferred,
            credentialProtection: .init(policy: .userVerificationRequired, enforce: true, requireFor: .all), minPinLength: true)
        let begin = harness.rp.beginRegistration(user: harness.user, extensions: requested)
        var (response, credential) = try harness.authenticator.register(options: begin.options, origin: CeremonyHarness.origin)
        // The PRF output is the client's: posted, the relying party refuses it; removed, it verifies.
        #expect(response.clientExtensionResults?["prf"]?["results"] != nil)
        await #expect(throws: WebAuthnError(.prfOutputPosted, "")) {
            try await harness.rp.finishRegistration(response: response, state: begin.state)
        }
        response.clientExtensionResults?["prf"] = .object(["enabled": .bool(true)])
        let verified = try await harness.rp.finishRegistration(response: response, state: begin.state)
        #expect(verified.clientExtensions.discoverable == true && verified.clientExtensions.prfEnabled == true)
        #expect(verified.clientExtensions.largeBlobSupported == true)
        #expect(verified.authenticatorExtensions.hmacSecret == true && verified.authenticatorExtensions.minPinLength == 6)
        #expect(verified.authenticatorExtensions.credProtect == .userVerificationRequired)

        let stored = StoredCredential(
            id: verified.credentialID, publicKey: verified.publicKey, signCount: verified.signCount, userHandle: harness.user.id)
        let signIn = harness.rp.beginAuthentication(
            allowCredentials: [CredentialDescriptor(id: credential.id)],
            extensions: AuthenticationExtensionInputs(prf: .init(evalByCredential: [credential.id: PRFValues(first: Self.salt)])))
        var assertion = try harness.authenticator.authenticate(
            options: signIn.options, origin: CeremonyHarness.origin, credential: &credential)
        let output = try #require(Self.bytes(assertion.clientExtensionResults?["prf"]?["results"]?["first"]))
        #expect(output == Self.expectedPRF(secret: try #require(credential.prfSecret), input: Self.salt))
        assertion.clientExtensionResults = [:]
        let signedIn = try harness.rp.finishAuthentication(response: assertion, state: signIn.state, credential: stored)
        #expect(signedIn.authenticatorExtensions.hmacSecretOutput?.count == 32)
    }

    @Test func credentialsFromBeforeExtensionsStillLoad() throws {
        // A keychain entry written before PRF and largeBlob: no prfSecret, largeBlob, credProtect.
        let old = Data(
            #"{"id":[1,2,3],"keyType":"es256","privateKey":[4,5],"rpID":"example.com","userHandle":[6],"userName":"ada","signCount":7}"#
                .utf8)
        let credential = try JSONDecoder().decode(SoftwareCredential.self, from: old)
        #expect(credential.id == [1, 2, 3] && credential.signCount == 7)
        #expect(credential.prfSecret == nil && credential.largeBlob == nil && credential.credProtect == nil)
        #expect(credential.prfOutput(Self.salt) == nil)

        var current = credential
        current.prfSecret = Array(0..<32)
        current.largeBlob = [9]
        current.credProtect = 2
        let decoded = try JSONDecoder().decode(SoftwareCredential.self, from: try JSONEncoder().encode(current))
        #expect(decoded == current)
    }
}
