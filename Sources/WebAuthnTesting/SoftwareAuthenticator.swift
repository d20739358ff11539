import Crypto
import Foundation
import SwiftASN1
import WebAuthn
import X509

/// A software passkey provider: creates credentials and assertions with real keys, producing
/// exactly the `RegistrationResponseJSON` / `AuthenticationResponseJSON` a browser would.
///
/// Every knob a test needs to reach a rejection path is here: flags, counter, origin, client
/// data type and challenge, attestation format, and the encoding of binary fields.
///
/// ```swift
/// var authenticator = SoftwareAuthenticator()
/// let (registration, credential) = try authenticator.register(options: begin.options, origin: "https://example.com")
/// let assertion = try authenticator.authenticate(options: request.options, origin: "https://example.com", credential: credential)
/// ```
public struct SoftwareAuthenticator: Sendable {
    public enum AttestationMode: Sendable {
        case none
        case packedSelf
        case packedFull(AttestationCA)
    }

    /// Flags and values used for the next operation.
    public var aaguid = AAGUID("c0ffee00-0000-4000-8000-00000000cafe")!
    /// Whether a packed attestation certificate carries id-fido-gen-ce-aaguid.
    public var attestationCertificateNamesAAGUID = true
    public var userPresent = true
    public var userVerified = true
    public var backupEligible = true
    public var backedUp = true
    public var keyType: SoftwareCredential.KeyType = .es256
    public var attestation: AttestationMode = .none
    public var transports = ["internal", "hybrid"]
    /// The length of the credential IDs it makes (default 32); any length, 0 and over 1023
    /// included, to model hostile authenticators.
    public var credentialIDLength: Int?
    /// Deterministic keys and credential IDs derived from this seed (`nil`: random).
    public var seed: [UInt8]?
    /// Which extensions it implements (all by default; see `SoftwareAuthenticator+Extensions`).
    /// Turn one off to model a client or authenticator without it.
    public var supportsCredProps = true
    /// PRF through CTAP2 hmac-secret: credentials get a CredRandom, `prf` inputs get outputs.
    public var supportsPRF = true
    /// Whether PRF `eval` is evaluated at creation too (CTAP2.2 hmac-secret-mc); `false` models the
    /// platforms that report `prf.enabled` at creation and give outputs only when signing in.
    public var evaluatesPRFAtCreation = true
    public var supportsLargeBlob = true
    public var supportsCredProtect = true
    /// The minimum PIN length reported to `minPinLength` (CTAP2 §12.4); `nil`: not supported.
    public var minPinLength: UInt8? = 6
    private var created = 0

    public init(seed: [UInt8]? = nil) { self.seed = seed }

    /// How the client data is built; change fields to produce the payloads of odd or hostile clients.
    public struct ClientDataOverrides: Sendable {
        public var type: String?
        /// The exact `challenge` string to put in clientDataJSON (default: base64url of the challenge bytes).
        public var challenge: String?
        public var crossOrigin: Bool?
        public var topOrigin: String?
        public init(type: String? = nil, challenge: String? = nil, crossOrigin: Bool? = nil, topOrigin: String? = nil) {
            self.type = type
            self.challenge = challenge
            self.crossOrigin = crossOrigin
            self.topOrigin = topOrigin
        }
    }

    static func clientDataJSON(type: String, challenge: [UInt8], origin: String, overrides: ClientDataOverrides) -> [UInt8] {
        func quote(_ s: String) -> String {
            let data = try? JSONEncoder().encode(s)
            return data.map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        }
        var json =
            "{\"type\":\(quote(overrides.type ?? type)),\"challenge\":\(quote(overrides.challenge ?? Base64URLBytes(challenge).base64URL)),\"origin\":\(quote(origin)),\"crossOrigin\":\(overrides.crossOrigin ?? false ? "true" : "false")"
        if let top = overrides.topOrigin { json += ",\"topOrigin\":\(quote(top))" }
        json += "}"
        return Array(json.utf8)
    }

    func flagsByte(attested: Bool, extensions: Bool = false) -> UInt8 {
        var flags: UInt8 = 0
        if userPresent { flags |= 0x01 }
        if userVerified { flags |= 0x04 }
        if backupEligible { flags |= 0x08 }
        if backedUp { flags |= 0x10 }
        if attested { flags |= 0x40 }
        if extensions { flags |= 0x80 }
        return flags
    }

    private mutating func nextSeed(_ label: String) -> [UInt8]? {
        guard let seed else { return nil }
        created += 1
        return seed + Array(label.utf8) + withUnsafeBytes(of: created.bigEndian) { Array($0) }
    }

    /// Creates a passkey for `options` (as a browser's `navigator.credentials.create` would) and
    /// returns the response JSON and the new credential. The options' `extensions` are processed
    /// (``SoftwareAuthenticator/ClientError`` when a browser would refuse them); `extensions`, when
    /// given, replaces the authenticator extension map with exactly that CBOR.
    public mutating func register(
        options: PublicKeyCredentialCreationOptionsJSON, origin: String,
        overrides: ClientDataOverrides = ClientDataOverrides(), rpID: String? = nil,
        signCount: UInt32 = 0, extensions: CBORValue? = nil
    ) throws -> (RegistrationResponseJSON, SoftwareCredential) {
        let rp = rpID ?? options.rp.id
        let idSeed = nextSeed("credential-id")
        var credentialID = idSeed.map { Array(SHA256.hash(data: $0)) } ?? Array(SHA256.hash(data: RelyingParty.makeChallenge()))
        if let length = credentialIDLength {
            credentialID = (0..<length).map { credentialID[$0 % credentialID.count] &+ UInt8(truncatingIfNeeded: $0 / credentialID.count) }
        }
        var credential = SoftwareCredential(
            id: credentialID, keyType: keyType, privateKey: try SoftwareCredential.makePrivateKey(keyType, seed: nextSeed("key")),
            rpID: rp, userHandle: options.user.id.bytes, userName: options.user.name, signCount: signCount,
            prfSecret: makePRFSecret(credentialID: credentialID))
        let outputs = try registrationExtensions(options.extensions, credential: credential)
        credential.credProtect = outputs.credProtect
        let extensionBytes = extensions.map { CBORWriter.encode($0) } ?? outputs.authenticatorDataBytes
        let cose = try credential.cosePublicKey()
        var authData = Array(SHA256.hash(data: Array(rp.utf8)))
        authData.append(flagsByte(attested: true, extensions: extensionBytes != nil))
        authData += withUnsafeBytes(of: signCount.bigEndian) { Array($0) }
        authData += aaguid.bytes
        authData += [UInt8(credentialID.count >> 8), UInt8(credentialID.count & 0xff)] + credentialID + cose
        if let extensionBytes { authData += extensionBytes }

        let clientData = Self.clientDataJSON(
            type: "webauthn.create", challenge: options.challenge.bytes, origin: origin, overrides: overrides)
        let clientDataHash = Array(SHA256.hash(data: clientData))
        let (format, statement) = try attestationStatement(authData: authData, clientDataHash: clientDataHash, credential: credential)
        let attestationObject = CBORWriter.encode(
            .map([
                CBORMapEntry(.text("fmt"), .text(format)), CBORMapEntry(.text("attStmt"), statement),
                CBORMapEntry(.text("authData"), .bytes(authData)),
            ]))
        credential.signCount = signCount
        let response = RegistrationResponseJSON(
            id: Base64URLBytes(credentialID).base64URL, rawId: Base64URLBytes(credentialID),
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: Base64URLBytes(clientData), attestationObject: Base64URLBytes(attestationObject),
                authenticatorData: Base64URLBytes(authData), transports: transports,
                publicKey: nil, publicKeyAlgorithm: keyType.algorithm.rawValue),
            authenticatorAttachment: "platform", clientExtensionResults: outputs.client)
        return (response, credential)
    }

    private func attestationStatement(authData: [UInt8], clientDataHash: [UInt8], credential: SoftwareCredential) throws -> (
        String, CBORValue
    ) {
        switch attestation {
        case .none:
            return ("none", .map([]))
        case .packedSelf:
            let sig = try credential.sign(authData + clientDataHash)
            return (
                "packed",
                .map([CBORMapEntry(.text("alg"), .int(Int64(keyType.algorithm.rawValue))), CBORMapEntry(.text("sig"), .bytes(sig))])
            )
        case .packedFull(let ca):
            let attestationKey = P256.Signing.PrivateKey()
            let certificate = try ca.issueAttestationCertificate(
                for: attestationKey, aaguid: attestationCertificateNamesAAGUID ? aaguid : nil)
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            let sig = Array(try attestationKey.signature(for: authData + clientDataHash).derRepresentation)
            return (
                "packed",
                .map([
                    CBORMapEntry(.text("alg"), .int(-7)), CBORMapEntry(.text("sig"), .bytes(sig)),
                    CBORMapEntry(.text("x5c"), .array([.bytes(serializer.serializedBytes)])),
                ])
            )
        }
    }

    /// Signs an assertion for `options` with `credential` (as `navigator.credentials.get`
    /// would), advancing the credential's counter by `counterStep` (0 models a synced passkey).
    /// The options' `extensions` are processed; a `largeBlob.write` is kept in `credential`.
    public func authenticate(
        options: PublicKeyCredentialRequestOptionsJSON, origin: String, credential: inout SoftwareCredential,
        overrides: ClientDataOverrides = ClientDataOverrides(), counterStep: UInt32 = 1,
        includeUserHandle: Bool = true
    ) throws -> AuthenticationResponseJSON {
        try checkCredentialProtection(credential, allowCredentials: options.allowCredentials)
        var updated = credential
        let outputs = try authenticationExtensions(options.extensions, allowCredentials: options.allowCredentials, credential: &updated)
        let extensionBytes = outputs.authenticatorDataBytes
        updated.signCount &+= counterStep
        credential = updated
        var authData = Array(SHA256.hash(data: Array(credential.rpID.utf8)))
        authData.append(flagsByte(attested: false, extensions: extensionBytes != nil))
        authData += withUnsafeBytes(of: credential.signCount.bigEndian) { Array($0) }
        if let extensionBytes { authData += extensionBytes }
        let clientData = Self.clientDataJSON(type: "webauthn.get", challenge: options.challenge.bytes, origin: origin, overrides: overrides)
        let signature = try credential.sign(authData + Array(SHA256.hash(data: clientData)))
        return AuthenticationResponseJSON(
            id: Base64URLBytes(credential.id).base64URL, rawId: Base64URLBytes(credential.id),
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: Base64URLBytes(clientData), authenticatorData: Base64URLBytes(authData),
                signature: Base64URLBytes(signature), userHandle: includeUserHandle ? Base64URLBytes(credential.userHandle) : nil),
            authenticatorAttachment: "platform", clientExtensionResults: outputs.client)
    }
}
