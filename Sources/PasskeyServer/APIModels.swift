import Foundation
import PasskeyCore
import PasskeyModels
import WebAuthn

/// Response bodies of the native API.
struct UserJSON: Encodable, Sendable {
    let id: String
    let username: String
    let displayName: String
    /// The WebAuthn user handle (base64url), for the browser's signal methods.
    let userHandle: String
    /// The integrating app's own id for this person, when it set one (server API).
    let externalId: String?
    init(_ account: Account) {
        id = account.id.uuidString.lowercased()
        username = account.username
        displayName = account.displayName
        userHandle = Base64URLBytes(account.userHandle).base64URL
        externalId = account.externalID
    }
}

/// A short-lived signed access token (JWT) for the app's own backend (docs/integration.md).
struct AccessTokenJSON: Encodable, Sendable {
    let accessToken: String
    let accessTokenExpiresAt: Date
    let tokenType = "Bearer"
    init(_ minted: AccessTokens.Minted) {
        accessToken = minted.token
        accessTokenExpiresAt = minted.expiresAt
    }
}

/// A passkey as the API (and `passkeyd admin`) shows it.
public struct PasskeyJSON: Encodable, Sendable {
    public let id: String
    public let name: String
    public let provider: String?
    /// The provider's icon, a `data:` URL, when the FIDO metadata has one.
    public let providerIcon: String?
    public let aaguid: String
    public let createdAt: Date
    public let lastUsedAt: Date?
    /// BS: synced by its provider now.
    public let backedUp: Bool
    /// BE: a multi-device (syncable) passkey; false means bound to one device.
    public let backupEligible: Bool
    public let deviceBound: Bool
    public let transports: [String]
    public let attestationFormat: String
    public let userVerified: Bool
    /// `credProps.rk` at registration: usable without a username. Absent when not reported
    /// (as for every extension fact below).
    public let discoverable: Bool?
    /// The passkey can derive secrets for the app (`prf.enabled`, or `hmac-secret`).
    public let prf: Bool?
    /// The credProtect level (1 to 3) the authenticator applied.
    public let credProtect: Int?
    /// `largeBlob.supported`.
    public let largeBlob: Bool?
    /// The authenticator's minimum PIN length.
    public let minPinLength: Int?

    /// - Parameter metadata: FIDO metadata in force: its entry for the passkey's AAGUID names the
    ///   provider (and gives its icon) before the bundled AAGUID list does.
    public init(_ passkey: Passkey, metadata: FIDOMetadata? = nil) {
        id = Base64URLBytes(passkey.credentialID).base64URL
        name = passkey.name
        let model = AAGUID(passkey.aaguid)
        let entry = model.flatMap { metadata?.entry(for: $0) }
        provider = entry?.description ?? model?.providerName
        providerIcon = entry?.icon
        aaguid = passkey.aaguid
        createdAt = passkey.createdAt
        lastUsedAt = passkey.lastUsedAt
        backedUp = passkey.backedUp
        backupEligible = passkey.backupEligible
        deviceBound = !passkey.backupEligible
        transports = passkey.transports
        attestationFormat = passkey.attestationFormat
        userVerified = passkey.userVerified
        discoverable = passkey.extensions.discoverable
        prf = passkey.extensions.prfEnabled
        credProtect = passkey.extensions.credProtect
        largeBlob = passkey.extensions.largeBlob
        minPinLength = passkey.extensions.minPinLength
    }
}

struct RegisterVerifyJSON: Encodable, Sendable {
    let verified = true
    let user: UserJSON
    let passkey: PasskeyJSON
    let token: String?
    let accessToken: String?
    let accessTokenExpiresAt: Date?
}

/// Request options whose `allowCredentials` IDs are written in unpadded standard base64 (for
/// the GET form of `authenticate/options`); every other member as in Level 3 JSON.
struct AtobRequestOptionsJSON: Encodable, Sendable {
    let options: PublicKeyCredentialRequestOptionsJSON

    private struct Descriptor: Encodable {
        let type: String
        let id: String
        let transports: [String]?
    }
    private enum Keys: String, CodingKey { case challenge, timeout, rpId, allowCredentials, userVerification, hints, extensions }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(options.challenge.base64Unpadded, forKey: .challenge)
        try container.encodeIfPresent(options.timeout, forKey: .timeout)
        try container.encode(options.rpId, forKey: .rpId)
        try container.encode(
            options.allowCredentials.map { Descriptor(type: $0.type, id: $0.id.base64Unpadded, transports: $0.transports) },
            forKey: .allowCredentials)
        try container.encode(options.userVerification, forKey: .userVerification)
        try container.encode(options.hints, forKey: .hints)
        try container.encodeIfPresent(options.extensions, forKey: .extensions)
    }
}

struct SignInJSON: Encodable, Sendable {
    let verified = true
    let user: UserJSON
    let token: String
    let expiresAt: Date
    let accessToken: String
    let accessTokenExpiresAt: Date
    /// The stored `prf` fact of the passkey that signed in: whether it was registered with PRF
    /// (`prf.enabled` or `hmac-secret`); absent when that was never reported. Clients that asked
    /// for PRF and got no output say `not-evaluated` only when this is true (docs/extensions.md).
    var prfEnabled: Bool? = nil
}

struct SessionJSON: Encodable, Sendable {
    let user: UserJSON
    let rpId: String
    let createdAt: Date
    let expiresAt: Date
    /// The account still has a password (it can be turned off once it has a passkey).
    let hasPassword: Bool
    let recoveryCodesLeft: Int
}

/// A password or recovery sign-in.
struct OtherSignInJSON: Encodable, Sendable {
    let verified = true
    let user: UserJSON
    let token: String
    let expiresAt: Date
    /// `password`, `recovery_code` or `recovery_link`.
    let method: String
    /// The account has no passkey: offer (or, with conditional create, just make) one.
    let canCreatePasskey: Bool
    /// Signed in by recovery: other sessions were revoked; register a new passkey next.
    let recovery: Bool
    let accessToken: String
    let accessTokenExpiresAt: Date
}

struct RecoveryCodesJSON: Encodable, Sendable {
    let codes: [String]
}

struct PasskeyListJSON: Encodable, Sendable {
    let passkeys: [PasskeyJSON]
    /// Whose list this is, read with it: a browser's `signalAllAcceptedCredentials` names the
    /// user and RP ID of exactly this list (never a session read before or after it).
    /// (Only on the account's own list; the server API's answer has neither.)
    var rpId: String? = nil
    var userHandle: String? = nil
}

/// `GET /api/auth/sessions`: the account's live sessions, newest first.
struct SessionListJSON: Encodable, Sendable {
    struct Item: Encodable, Sendable {
        /// base64url of the session's token hash (never the token): names it for `DELETE /api/auth/sessions/{id}`.
        let id: String
        let createdAt: Date
        let expiresAt: Date
        let userAgent: String?
        let ipAddress: String?
        /// How it was made: passkey, sign_up, password, recovery_code, recovery_link (unknown before v5).
        let method: String
        /// The passkey that made it (base64url credential ID), if any.
        let passkeyId: String?
        /// The session this request came with.
        let current: Bool
        /// "Safari on iPhone", "Chrome on Windows", "iOS app", … from the User-Agent.
        let device: String
        /// When the session was last used (to the minute); nil before its first use.
        let lastSeenAt: Date?

        init(_ session: SessionRecord, current: Bool) {
            device = DeviceName.describe(userAgent: session.userAgent)
            lastSeenAt = session.lastSeenAt
            id = Base64URLBytes(session.tokenHash).base64URL
            createdAt = session.createdAt
            expiresAt = session.expiresAt
            userAgent = session.userAgent
            ipAddress = session.ipAddress
            method = session.method
            passkeyId = session.credentialID.map { Base64URLBytes($0).base64URL }
            self.current = current
        }
    }

    let sessions: [Item]
}

/// A short, human name for the device behind a User-Agent: the browser and the system
/// ("Safari on iPhone", "Chrome on Android", "Firefox on Linux"), the native apps ("iOS app",
/// "Android app"), or "Unknown device". Only for people recognising their sessions; never
/// used for a decision.
enum DeviceName {
    static func describe(userAgent: String?) -> String {
        guard let agent = userAgent, !agent.isEmpty else { return "Unknown device" }
        let system: String? =
            if agent.contains("iPhone") { "iPhone" } else if agent.contains("iPad") { "iPad" } else if agent.contains("Android") {
                "Android"
            } else if agent.contains("Mac OS X") || agent.contains("Macintosh") { "macOS" } else if agent.contains("Windows") {
                "Windows"
            } else if agent.contains("CrOS") { "ChromeOS" } else if agent.contains("Linux") { "Linux" } else { nil }
        // Native clients: URLSession (CFNetwork/Darwin) and OkHttp send no browser token.
        if agent.contains("CFNetwork") || agent.contains("Darwin/") { return "iOS app" }
        if agent.hasPrefix("okhttp") || agent.contains("Dalvik") { return "Android app" }
        let browser: String? =
            if agent.contains("Edg/") { "Edge" } else if agent.contains("OPR/") { "Opera" } else if agent.contains("Firefox/") {
                "Firefox"
            } else if agent.contains("Chrome/") || agent.contains("CriOS/") || agent.contains("HeadlessChrome") {
                "Chrome"
            } else if agent.contains("Safari/") { "Safari" } else { nil }
        switch (browser, system) {
        case (let browser?, let system?): return "\(browser) on \(system)"
        case (let browser?, nil): return browser
        case (nil, let system?): return system
        default: return String(agent.prefix(40))
        }
    }
}
