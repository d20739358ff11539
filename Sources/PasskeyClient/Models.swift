import Foundation

/// The signed-in person, as passkeyd describes them.
public struct PasskeyUser: Codable, Sendable, Hashable, Identifiable {
    /// The account's id (a UUID): stable, never the username.
    public var id: String
    public var username: String
    public var displayName: String
    /// The WebAuthn user handle (`user.id` of the options), base64url.
    public var userHandle: String
    /// The integrating app's own id for this person, when the server API set one.
    public var externalId: String?
}

/// One of the account's passkeys.
public struct Passkey: Codable, Sendable, Hashable, Identifiable {
    /// The credential ID, base64url.
    public var id: String
    public var name: String
    /// The provider's name from its AAGUID ("iCloud Keychain", "Google Password Manager"), when known.
    public var provider: String?
    public var aaguid: String
    public var createdAt: Date
    public var lastUsedAt: Date?
    /// Synced by its provider.
    public var backedUp: Bool
    public var backupEligible: Bool
    public var deviceBound: Bool
    public var transports: [String]
    public var attestationFormat: String
    public var userVerified: Bool
    /// `credProps.rk` as the platform reported it at registration: a discoverable passkey
    /// (offered without a username); `nil`: not reported.
    public var discoverable: Bool?
    /// Whether the passkey supports PRF (end-to-end encryption keys); `nil`: unknown (not asked).
    public var prf: Bool?
    /// The credProtect level the authenticator applied (1, 2 or 3); `nil`: none reported.
    public var credProtect: Int?
    /// Whether the passkey can store a large blob; `nil`: not asked.
    public var largeBlob: Bool?
    /// The authenticator's minimum PIN length, when the server asked and it reported one.
    public var minPinLength: Int?
}

/// How a session began.
public enum SignInMethod: String, Codable, Sendable {
    case passkey
    case signUp = "sign_up"
    case password
    case recoveryCode = "recovery_code"
    case recoveryLink = "recovery_link"
    case unknown
}

/// A short-lived signed JWT for the app's own backend (docs/integration.md).
public struct AccessToken: Codable, Sendable, Hashable {
    public var token: String
    public var expiresAt: Date
    public init(token: String, expiresAt: Date) {
        self.token = token
        self.expiresAt = expiresAt
    }
}

/// The answer to a sign-up or sign-in: who is signed in now.
public struct SignInResult: Sendable {
    public var user: PasskeyUser
    public var method: SignInMethod
    /// Sign-up only: the new passkey.
    public var passkey: Passkey?
    /// The account has no passkey (password or recovery sign-in): offer ``PasskeyClient/addPasskey(name:)``.
    public var canCreatePasskey: Bool
    /// Signed in by recovery: every other session was ended; register a new passkey next.
    public var recovery: Bool
    public var sessionExpiresAt: Date?
    public var accessToken: AccessToken?
    /// What PRF gave, when the sign-up or sign-in asked for it (a ``PRFRequest``); `nil` otherwise.
    public var prf: PRFResult?
    /// The passkey that signed up or in (its ``Passkey/id``): with PRF, whose key ``prf`` is, so
    /// the app picks what that passkey wrapped. `nil` for the other ways in.
    public var passkeyID: Passkey.ID?
}

/// The current session (`GET /api/auth/session`).
public struct SessionInfo: Codable, Sendable {
    public var user: PasskeyUser
    public var rpId: String
    public var createdAt: Date
    public var expiresAt: Date
    public var hasPassword: Bool?
    public var recoveryCodesLeft: Int?
}

/// One of the account's live sessions (`GET /api/auth/sessions`).
public struct DeviceSession: Codable, Sendable, Identifiable {
    public var id: String
    public var createdAt: Date
    public var expiresAt: Date
    public var lastSeenAt: Date?
    public var method: String
    public var current: Bool
    /// "Safari on iPhone", "iOS app", … from the User-Agent.
    public var device: String
    public var passkeyId: String?
}

/// What the client keeps between launches, per server: the session token (secret) and the
/// newest access token.
public struct StoredSession: Codable, Sendable, Equatable {
    public var sessionToken: String
    public var expiresAt: Date?
    public var username: String?
    public var accessToken: String?
    public var accessTokenExpiresAt: Date?
    public init(
        sessionToken: String, expiresAt: Date? = nil, username: String? = nil, accessToken: String? = nil, accessTokenExpiresAt: Date? = nil
    ) {
        self.sessionToken = sessionToken
        self.expiresAt = expiresAt
        self.username = username
        self.accessToken = accessToken
        self.accessTokenExpiresAt = accessTokenExpiresAt
    }
}

// MARK: Wire forms

/// `PublicKeyCredentialCreationOptionsJSON`: the members a client reads.
struct CreationOptionsJSON: Decodable {
    struct RP: Decodable {
        var id: String
        var name: String?
    }
    struct User: Decodable {
        var id: String
        var name: String
        var displayName: String?
    }
    struct Parameter: Decodable { var alg: Int }
    struct Descriptor: Decodable {
        var id: String
        var transports: [String]?
    }
    struct Selection: Decodable {
        var residentKey: String?
        var userVerification: String?
    }
    var rp: RP
    var user: User
    var challenge: String
    var pubKeyCredParams: [Parameter]?
    var timeout: Double?
    var excludeCredentials: [Descriptor]?
    var authenticatorSelection: Selection?
    var attestation: String?
    var extensions: ExtensionsJSON?
}

/// The `extensions` of the options, as far as the client acts on them (Level 3 JSON encodings).
struct ExtensionsJSON: Decodable {
    struct Values: Decodable {
        var first: String
        var second: String?

        func decoded(_ field: String) throws -> PRFInputValues {
            PRFInputValues(first: try PasskeyClient.bytes(first, field), second: try second.map { try PasskeyClient.bytes($0, field) })
        }
    }
    struct PRF: Decodable {
        var eval: Values?
        var evalByCredential: [String: Values]?
    }
    var prf: PRF?

    /// The registration input (`prf.eval` only: evalByCredential is not for registration).
    func prfRegistration() throws -> PRFRegistrationInput? {
        guard let prf else { return nil }
        return PRFRegistrationInput(eval: try prf.eval?.decoded("extensions.prf.eval"))
    }

    func prfAssertion() throws -> PRFAssertionInput? {
        guard let prf else { return nil }
        var byCredential: [Data: PRFInputValues] = [:]
        for (id, values) in prf.evalByCredential ?? [:] {
            byCredential[try PasskeyClient.bytes(id, "extensions.prf.evalByCredential")] = try values.decoded(
                "extensions.prf.evalByCredential")
        }
        return PRFAssertionInput(eval: try prf.eval?.decoded("extensions.prf.eval"), evalByCredential: byCredential)
    }
}

/// `PublicKeyCredentialRequestOptionsJSON`: the members a client reads.
struct RequestOptionsJSON: Decodable {
    var challenge: String
    var rpId: String
    var timeout: Double?
    var allowCredentials: [CreationOptionsJSON.Descriptor]?
    var userVerification: String?
    var extensions: ExtensionsJSON?
}

/// Every sign-in answer's shape (sign-up, passkey, password, recovery).
struct SignInAnswer: Decodable {
    var user: PasskeyUser
    var passkey: Passkey?
    var token: String?
    var expiresAt: Date?
    var method: SignInMethod?
    var canCreatePasskey: Bool?
    var recovery: Bool?
    var accessToken: String?
    var accessTokenExpiresAt: Date?
}

struct PasskeyList: Decodable { var passkeys: [Passkey] }
struct SessionList: Decodable { var sessions: [DeviceSession] }
struct RecoveryCodes: Decodable { var codes: [String] }
struct TokenAnswer: Decodable {
    var accessToken: String
    var accessTokenExpiresAt: Date
}
struct ErrorAnswer: Decodable {
    struct Body: Decodable {
        var code: String
        var message: String?
    }
    var error: Body
}

extension Duration {
    /// A WebAuthn `timeout` (milliseconds), when there is a sensible one.
    init?(milliseconds: Double?) {
        guard let milliseconds, milliseconds.isFinite, milliseconds > 0 else { return nil }
        self = .milliseconds(Int64(min(milliseconds, 86_400_000)))
    }
}
