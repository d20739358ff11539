/// `PublicKeyCredentialCreationOptionsJSON` (Level 3 §5.1.x), the registration options a
/// relying party sends. Browsers read it with `PublicKeyCredential.parseCreationOptionsFromJSON`,
/// Android Credential Manager takes it as a string, iOS apps read `challenge`, `user.id` and `rp.id`.
public struct PublicKeyCredentialCreationOptionsJSON: Codable, Sendable {
    public var rp: PublicKeyCredentialRpEntity
    public var user: PublicKeyCredentialUserEntityJSON
    public var challenge: Base64URLBytes
    public var pubKeyCredParams: [PublicKeyCredentialParameters]
    public var timeout: Int?
    public var excludeCredentials: [PublicKeyCredentialDescriptorJSON]
    public var authenticatorSelection: AuthenticatorSelectionCriteria?
    public var hints: [String]
    public var attestation: String
    public var extensions: [String: JSONValue]?

    public init(
        rp: PublicKeyCredentialRpEntity, user: PublicKeyCredentialUserEntityJSON, challenge: Base64URLBytes,
        pubKeyCredParams: [PublicKeyCredentialParameters], timeout: Int?, excludeCredentials: [PublicKeyCredentialDescriptorJSON] = [],
        authenticatorSelection: AuthenticatorSelectionCriteria? = nil, hints: [String] = [], attestation: String = "none",
        extensions: [String: JSONValue]? = nil
    ) {
        self.rp = rp
        self.user = user
        self.challenge = challenge
        self.pubKeyCredParams = pubKeyCredParams
        self.timeout = timeout
        self.excludeCredentials = excludeCredentials
        self.authenticatorSelection = authenticatorSelection
        self.hints = hints
        self.attestation = attestation
        self.extensions = extensions
    }
}

public struct PublicKeyCredentialRpEntity: Codable, Sendable, Hashable {
    public var id: String
    public var name: String
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

public struct PublicKeyCredentialUserEntityJSON: Codable, Sendable, Hashable {
    public var id: Base64URLBytes
    public var name: String
    public var displayName: String
    public init(id: [UInt8], name: String, displayName: String) {
        self.id = Base64URLBytes(id)
        self.name = name
        self.displayName = displayName
    }
}

public struct PublicKeyCredentialParameters: Codable, Sendable, Hashable {
    public var type: String
    public var alg: COSEAlgorithmIdentifier
    public init(alg: COSEAlgorithmIdentifier) {
        self.type = "public-key"
        self.alg = alg
    }
}

/// `PublicKeyCredentialDescriptorJSON`: a credential ID with its transports.
public struct PublicKeyCredentialDescriptorJSON: Codable, Sendable, Hashable {
    public var type: String
    public var id: Base64URLBytes
    public var transports: [String]?
    public init(id: [UInt8], transports: [String]? = nil) {
        self.type = "public-key"
        self.id = Base64URLBytes(id)
        self.transports = (transports?.isEmpty ?? true) ? nil : transports
    }
}

public struct AuthenticatorSelectionCriteria: Codable, Sendable, Hashable {
    public var authenticatorAttachment: String?
    public var residentKey: String?
    public var requireResidentKey: Bool?
    public var userVerification: String?
}

/// `PublicKeyCredentialRequestOptionsJSON`: the authentication options a relying party sends.
public struct PublicKeyCredentialRequestOptionsJSON: Codable, Sendable {
    public var challenge: Base64URLBytes
    public var timeout: Int?
    public var rpId: String
    public var allowCredentials: [PublicKeyCredentialDescriptorJSON]
    public var userVerification: String
    public var hints: [String]
    public var extensions: [String: JSONValue]?

    public init(
        challenge: Base64URLBytes, timeout: Int?, rpId: String, allowCredentials: [PublicKeyCredentialDescriptorJSON],
        userVerification: String, hints: [String] = [], extensions: [String: JSONValue]? = nil
    ) {
        self.challenge = challenge
        self.timeout = timeout
        self.rpId = rpId
        self.allowCredentials = allowCredentials
        self.userVerification = userVerification
        self.hints = hints
        self.extensions = extensions
    }
}
