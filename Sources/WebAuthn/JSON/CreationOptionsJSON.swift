/// `PublicKeyCredentialCreationOptionsJSON` (Level 3 §5.1.8), the registration options a
/// relying party sends. Browsers read it with `PublicKeyCredential.parseCreationOptionsFromJSON`,
/// Android Credential Manager takes it as a string, iOS apps read `challenge`, `user.id` and `rp.id`.
public struct PublicKeyCredentialCreationOptionsJSON: Codable, Sendable {
    /// The relying party the credential is for (§5.4.2).
    public var rp: PublicKeyCredentialRpEntity
    /// The user account the credential is for (§5.4.3).
    public var user: PublicKeyCredentialUserEntityJSON
    /// The ceremony's random challenge (base64url in JSON); the response must carry it back in clientDataJSON.
    public var challenge: Base64URLBytes
    /// The credential algorithms the relying party accepts, most preferred first (§5.3).
    public var pubKeyCredParams: [PublicKeyCredentialParameters]
    /// How long the client should wait for the user, in milliseconds (a hint); `nil` omits it.
    public var timeout: Int?
    /// Credentials the user already has, so an authenticator holding one does not create another (§5.4).
    public var excludeCredentials: [PublicKeyCredentialDescriptorJSON]
    /// Requirements on the authenticator (§5.4.4); `nil` omits the member and leaves the client's defaults.
    public var authenticatorSelection: AuthenticatorSelectionCriteria?
    /// User-agent hints, most preferred first: `security-key`, `client-device`, `hybrid` (§5.8.8).
    public var hints: [String]
    /// Attestation conveyance preference (§5.4.7): `none`, `indirect`, `direct` or `enterprise`.
    public var attestation: String
    /// Client extension inputs (§5.7.1), such as `{"credProps": true}`; `nil` omits the member.
    public var extensions: [String: JSONValue]?

    /// Makes registration options; the defaults match the specification's (no exclusions, no hints, attestation
    /// `none`, no selection criteria, no extensions).
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

    private enum CodingKeys: String, CodingKey {
        case rp, user, challenge, pubKeyCredParams, timeout, excludeCredentials, authenticatorSelection, hints, attestation, extensions
    }

    /// Decodes any valid Level 3 JSON (§5.1.8): members with defaults may be absent
    /// (`excludeCredentials` and `hints` default to `[]`, `attestation` to `"none"`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        rp = try container.decode(PublicKeyCredentialRpEntity.self, forKey: .rp)
        user = try container.decode(PublicKeyCredentialUserEntityJSON.self, forKey: .user)
        challenge = try container.decode(Base64URLBytes.self, forKey: .challenge)
        pubKeyCredParams = try container.decode([PublicKeyCredentialParameters].self, forKey: .pubKeyCredParams)
        timeout = try container.decodeIfPresent(Int.self, forKey: .timeout)
        excludeCredentials = try container.decodeIfPresent([PublicKeyCredentialDescriptorJSON].self, forKey: .excludeCredentials) ?? []
        authenticatorSelection = try container.decodeIfPresent(AuthenticatorSelectionCriteria.self, forKey: .authenticatorSelection)
        hints = try container.decodeIfPresent([String].self, forKey: .hints) ?? []
        attestation = try container.decodeIfPresent(String.self, forKey: .attestation) ?? "none"
        extensions = try container.decodeIfPresent([String: JSONValue].self, forKey: .extensions)
    }
}

/// `PublicKeyCredentialRpEntity` (Level 3 §5.4.2): the relying party named in registration options.
public struct PublicKeyCredentialRpEntity: Codable, Sendable, Hashable {
    /// The RP ID: the domain credentials are scoped to, such as `example.com` (§5.4.2).
    public var id: String
    /// A human-palatable name for the relying party, shown by some clients (§5.4.1).
    public var name: String
    /// Makes the entity from an RP ID and a display name.
    public init(id: String, name: String) {
        self.id = id
        self.name = name
    }
}

/// `PublicKeyCredentialUserEntityJSON` (Level 3 §5.1.8): the user account named in registration options.
public struct PublicKeyCredentialUserEntityJSON: Codable, Sendable, Hashable {
    /// The user handle (§5.4.3): opaque, at most 64 bytes, no personal data; base64url in JSON.
    public var id: Base64URLBytes
    /// A human-palatable account identifier, such as a username or e-mail address (§5.4.3).
    public var name: String
    /// A human-palatable name for the account, such as the user's full name (§5.4.3).
    public var displayName: String
    /// Makes the entity from the raw user handle bytes and its two names.
    public init(id: [UInt8], name: String, displayName: String) {
        self.id = Base64URLBytes(id)
        self.name = name
        self.displayName = displayName
    }
}

/// `PublicKeyCredentialParameters` (Level 3 §5.3): one credential type and algorithm the relying party accepts.
public struct PublicKeyCredentialParameters: Codable, Sendable, Hashable {
    /// The credential type (§5.8.2); always `public-key`.
    public var type: String
    /// The COSE algorithm (§5.8.5), a number in JSON: -7 is ES256.
    public var alg: COSEAlgorithmIdentifier
    /// A `public-key` parameter for `alg`.
    public init(alg: COSEAlgorithmIdentifier) {
        self.type = "public-key"
        self.alg = alg
    }
}

/// `PublicKeyCredentialDescriptorJSON` (Level 3 §5.1.8; §5.8.3): a credential ID with its transports.
public struct PublicKeyCredentialDescriptorJSON: Codable, Sendable, Hashable {
    /// The credential type (§5.8.2); always `public-key`.
    public var type: String
    /// The credential ID (base64url in JSON).
    public var id: Base64URLBytes
    /// How the client may reach the authenticator (§5.8.4): `usb`, `nfc`, `ble`, `smart-card`, `hybrid`,
    /// `internal`; `nil` when unknown, which omits the member.
    public var transports: [String]?
    /// Makes a descriptor from raw credential ID bytes; empty `transports` are stored as `nil`.
    public init(id: [UInt8], transports: [String]? = nil) {
        self.type = "public-key"
        self.id = Base64URLBytes(id)
        self.transports = (transports?.isEmpty ?? true) ? nil : transports
    }
}

/// `AuthenticatorSelectionCriteria` (Level 3 §5.4.4): requirements on the authenticator that creates a
/// credential. A `nil` member is omitted from JSON.
public struct AuthenticatorSelectionCriteria: Codable, Sendable, Hashable {
    /// `platform` or `cross-platform` (§5.4.5); `nil` accepts either.
    public var authenticatorAttachment: String?
    /// Whether to create a discoverable credential (§5.4.6): `discouraged`, `preferred` or `required`.
    public var residentKey: String?
    /// The Level 1 form of ``residentKey``: `true` exactly when it is `required` (§5.4.4).
    public var requireResidentKey: Bool?
    /// User verification requirement (§5.8.6): `required`, `preferred` or `discouraged`; clients default to
    /// `preferred`.
    public var userVerification: String?
}

/// `PublicKeyCredentialRequestOptionsJSON` (Level 3 §5.1.9): the authentication options a relying party sends.
public struct PublicKeyCredentialRequestOptionsJSON: Codable, Sendable {
    /// The ceremony's random challenge (base64url in JSON); the response must carry it back in clientDataJSON.
    public var challenge: Base64URLBytes
    /// How long the client should wait for the user, in milliseconds (a hint); `nil` omits it.
    public var timeout: Int?
    /// The RP ID the credential must be scoped to, such as `example.com` (§5.5).
    public var rpId: String
    /// The credentials that may answer, most preferred first; empty for a discoverable (username-less) sign-in
    /// (§5.5).
    public var allowCredentials: [PublicKeyCredentialDescriptorJSON]
    /// User verification requirement (§5.8.6): `required`, `preferred` or `discouraged`.
    public var userVerification: String
    /// User-agent hints, most preferred first: `security-key`, `client-device`, `hybrid` (§5.8.8).
    public var hints: [String]
    /// Client extension inputs (§5.7.1); `nil` omits the member.
    public var extensions: [String: JSONValue]?

    /// Makes authentication options; `hints` and `extensions` default to none.
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

    private enum CodingKeys: String, CodingKey {
        case challenge, timeout, rpId, allowCredentials, userVerification, hints, extensions
    }

    /// Decodes any valid Level 3 JSON (§5.1.9) whose `rpId` is given: members with defaults may be
    /// absent (`allowCredentials` and `hints` default to `[]`, `userVerification` to
    /// `"preferred"`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        challenge = try container.decode(Base64URLBytes.self, forKey: .challenge)
        timeout = try container.decodeIfPresent(Int.self, forKey: .timeout)
        rpId = try container.decode(String.self, forKey: .rpId)
        allowCredentials = try container.decodeIfPresent([PublicKeyCredentialDescriptorJSON].self, forKey: .allowCredentials) ?? []
        userVerification = try container.decodeIfPresent(String.self, forKey: .userVerification) ?? "preferred"
        hints = try container.decodeIfPresent([String].self, forKey: .hints) ?? []
        extensions = try container.decodeIfPresent([String: JSONValue].self, forKey: .extensions)
    }
}
