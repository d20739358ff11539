import Foundation

/// An account: one person, any number of passkeys.
public struct Account: Sendable, Hashable, Codable {
    public var id: UUID
    /// The display form (as entered at sign-up, width-mapped and NFC); unique by its comparison
    /// key (``Username``), so neither case, width nor composition tells two accounts apart.
    public var username: String
    public var displayName: String
    /// The WebAuthn user handle: 64 random bytes, never derived from the username.
    public var userHandle: [UInt8]
    public var createdAt: Date
    public var disabled: Bool
    /// The last successful sign-in (any method); nil before the first.
    public var lastSignInAt: Date?
    /// The password hash of an account moving from passwords to passkeys: scrypt in the PHC
    /// string format, or an imported bcrypt hash (`$2b$…`) until its next sign-in; nil when the
    /// account has no password (or turned it off).
    public var passwordHash: String?
    /// The integrating app's own id for this person (server API), unique when set.
    public var externalID: String?

    public init(
        id: UUID = .random(), username: String, displayName: String, userHandle: [UInt8], createdAt: Date, disabled: Bool = false,
        lastSignInAt: Date? = nil, passwordHash: String? = nil, externalID: String? = nil
    ) {
        self.externalID = externalID
        self.id = id
        self.username = username
        self.displayName = displayName
        self.userHandle = userHandle
        self.createdAt = createdAt
        self.disabled = disabled
        self.lastSignInAt = lastSignInAt
        self.passwordHash = passwordHash
    }

    /// The comparison key uniqueness is checked on (PRECIS UsernameCaseMapped: width-mapped,
    /// lower-cased, NFC; see ``Username``).
    public static func key(for username: String) -> String { Username.key(username) }
}

/// A stored passkey (the WebAuthn credential record, §4) with what the account page shows.
public struct Passkey: Sendable, Hashable, Codable {
    public var credentialID: [UInt8]
    public var accountID: UUID
    /// COSE_Key bytes exactly as the authenticator produced them.
    public var publicKey: [UInt8]
    public var signCount: UInt32
    public var aaguid: String
    public var transports: [String]
    public var backupEligible: Bool
    public var backedUp: Bool
    public var userVerified: Bool
    public var attestationFormat: String
    public var attestationTrusted: Bool
    public var name: String
    public var createdAt: Date
    public var lastUsedAt: Date?
    /// How many sign-ins reported a counter that did not increase (possible clone).
    public var counterAnomalies: Int
    /// What the WebAuthn extensions told at registration; `nil` when nothing was reported.
    public var extensions: PasskeyExtensions
    /// The PRF input this passkey is evaluated with (32 random bytes, public); `nil` until made.
    public var prfSalt: [UInt8]?

    public init(
        credentialID: [UInt8], accountID: UUID, publicKey: [UInt8], signCount: UInt32, aaguid: String, transports: [String],
        backupEligible: Bool, backedUp: Bool, userVerified: Bool, attestationFormat: String, attestationTrusted: Bool,
        name: String, createdAt: Date, lastUsedAt: Date? = nil, counterAnomalies: Int = 0,
        extensions: PasskeyExtensions = PasskeyExtensions(), prfSalt: [UInt8]? = nil
    ) {
        self.credentialID = credentialID
        self.accountID = accountID
        self.publicKey = publicKey
        self.signCount = signCount
        self.aaguid = aaguid
        self.transports = transports
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.userVerified = userVerified
        self.attestationFormat = attestationFormat
        self.attestationTrusted = attestationTrusted
        self.name = name
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.counterAnomalies = counterAnomalies
        self.extensions = extensions
        self.prfSalt = prfSalt
    }
}

/// What a passkey's registration reported through the WebAuthn extensions; each `nil` when not
/// reported.
public struct PasskeyExtensions: Sendable, Hashable, Codable {
    /// `credProps.rk`: the passkey is discoverable (usable without a username).
    public var discoverable: Bool?
    /// `prf.enabled` (or `hmac-secret`): the passkey can derive secrets for the client.
    public var prfEnabled: Bool?
    /// The credProtect level (1 to 3) the authenticator applied.
    public var credProtect: Int?
    /// `largeBlob.supported`.
    public var largeBlob: Bool?
    /// The authenticator's minimum PIN length, when it reported one.
    public var minPinLength: Int?

    public init(
        discoverable: Bool? = nil, prfEnabled: Bool? = nil, credProtect: Int? = nil, largeBlob: Bool? = nil, minPinLength: Int? = nil
    ) {
        self.discoverable = discoverable
        self.prfEnabled = prfEnabled
        self.credProtect = credProtect
        self.largeBlob = largeBlob
        self.minPinLength = minPinLength
    }
}

/// A ceremony in progress: the challenge a `begin` call issued, bound to its ceremony and
/// account, single use and expiring. Stored under SHA-256 of the challenge, so the finishing
/// request (on any instance) finds it from the challenge its client data carries.
public struct ChallengeRecord: Sendable, Hashable {
    public enum Ceremony: String, Sendable, Codable { case registration, authentication }

    public var challenge: [UInt8]
    public var ceremony: Ceremony
    /// The account the ceremony is for: adding a passkey, or a username-first sign-in.
    public var accountID: UUID?
    /// Sign-up: the account to create when the passkey verifies.
    public var pendingUsername: String?
    public var pendingDisplayName: String?
    public var pendingUserHandle: [UInt8]?
    /// Sign-up: the ID the account will get (the compatibility API hands it out as `userId`).
    public var pendingAccountID: UUID?
    /// Sign-up: the address given with it (unverified until its owner proves it).
    public var pendingEmail: String?
    /// A username-first sign-in for a username that does not exist: it can never succeed.
    public var unknownUser: Bool
    /// Which API issued it (`native` or `compat`), so the other cannot finish it.
    public var api: String
    public var userVerification: String
    /// Registration options meant for `mediation: "conditional"` (automatic passkey creation).
    public var conditional: Bool
    /// The ceremony's state as the `WebAuthn` library made it (`RegistrationState` /
    /// `AuthenticationState`, encoded by the server): kept opaquely, handed back at the finish.
    /// Nil only in rows written before migration 6: such a ceremony can no longer be finished.
    public var state: [UInt8]?
    public var createdAt: Date
    public var expiresAt: Date

    public init(
        challenge: [UInt8], ceremony: Ceremony, accountID: UUID? = nil, pendingUsername: String? = nil,
        pendingDisplayName: String? = nil, pendingUserHandle: [UInt8]? = nil, pendingAccountID: UUID? = nil, unknownUser: Bool = false,
        api: String = "native", userVerification: String, conditional: Bool = false, state: [UInt8]? = nil, createdAt: Date,
        expiresAt: Date, pendingEmail: String? = nil
    ) {
        self.pendingEmail = pendingEmail
        self.challenge = challenge
        self.ceremony = ceremony
        self.accountID = accountID
        self.pendingUsername = pendingUsername
        self.pendingDisplayName = pendingDisplayName
        self.pendingUserHandle = pendingUserHandle
        self.pendingAccountID = pendingAccountID
        self.unknownUser = unknownUser
        self.api = api
        self.userVerification = userVerification
        self.conditional = conditional
        self.state = state
        self.createdAt = createdAt
        self.expiresAt = expiresAt
    }
}

/// A signed-in session. Only the SHA-256 of its token is stored.
public struct SessionRecord: Sendable, Hashable {
    public var tokenHash: [UInt8]
    public var accountID: UUID
    public var createdAt: Date
    public var expiresAt: Date
    public var userAgent: String?
    public var ipAddress: String?
    /// How the session was made: `passkey`, `sign_up`, `password`, `recovery_code`,
    /// `recovery_link` (`unknown` for sessions made before passkeyd recorded it).
    public var method: String
    /// The passkey that made it (passkey sign-in or sign-up): deleting or replacing that passkey
    /// ends the session.
    public var credentialID: [UInt8]?
    /// When the session was last used (kept to the minute); nil before its first use.
    public var lastSeenAt: Date?

    public init(
        tokenHash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date, userAgent: String? = nil, ipAddress: String? = nil,
        method: String = "unknown", credentialID: [UInt8]? = nil, lastSeenAt: Date? = nil
    ) {
        self.lastSeenAt = lastSeenAt
        self.tokenHash = tokenHash
        self.accountID = accountID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.userAgent = userAgent
        self.ipAddress = ipAddress
        self.method = method
        self.credentialID = credentialID
    }
}

/// One line of the audit log.
public struct AuditEvent: Sendable, Hashable, Codable {
    /// Every kind of line passkeyd writes (stored as its raw value).
    public enum Kind: String, Sendable, CaseIterable, Codable {
        case signUp = "sign_up"
        case signIn = "sign_in"
        case signInFailed = "sign_in_failed"
        case registrationFailed = "registration_failed"
        case counterAnomaly = "counter_anomaly"
        case passkeyAdded = "passkey_added"
        case passkeyRenamed = "passkey_renamed"
        case passkeyReplaced = "passkey_replaced"
        case passkeyDeleted = "passkey_deleted"
        case sessionRevoked = "session_revoked"
        case passwordChanged = "password_changed"
        case passwordRemoved = "password_removed"
        case recoveryCodesCreated = "recovery_codes_created"
        case recoveryFailed = "recovery_failed"
        case recoverySignIn = "recovery_sign_in"
        case adminRecoveryLink = "admin_recovery_link"
        case adminAccountDisabled = "admin_account_disabled"
        case adminAccountEnabled = "admin_account_enabled"
        case adminPasskeyRevoked = "admin_passkey_revoked"
        case adminSessionsRevoked = "admin_sessions_revoked"
        case importRun = "import"
        case accountCreated = "account_created"
        case adminPasskeyRenamed = "admin_passkey_renamed"
        case adminRegistrationToken = "admin_registration_token"
        case apiKeyCreated = "api_key_created"
        case apiKeyRevoked = "api_key_revoked"
        /// A server used an API key (introspection, the server API). Delivered to webhooks only
        /// when an endpoint names it.
        case apiKeyUsed = "api_key_used"
        /// OpenID Connect: a code issued to a client (detail: the client id).
        case oidcAuthorized = "oidc_authorized"
        case oidcTokenIssued = "oidc_token_issued"
        /// A code or refresh token used twice: its grant was revoked.
        case oidcGrantReused = "oidc_grant_reused"
        case oauthClientAdded = "oauth_client_added"
        case oauthClientRemoved = "oauth_client_removed"
        /// A passkey's PRF input was replaced: secrets derived with it change.
        case passkeyPRFSaltRotated = "passkey_prf_salt_rotated"
        /// The operator's console (issue 36): sign-in, refusal (a passkey without a role), sign
        /// out, step-up, the bootstrap link issued (no token in the line) and used, roles, and
        /// the changes only it makes.
        case adminConsoleSignIn = "admin_console_sign_in"
        case adminConsoleRefused = "admin_console_refused"
        case adminConsoleSignOut = "admin_console_sign_out"
        case adminConsoleStepUp = "admin_console_step_up"
        case adminBootstrapIssued = "admin_bootstrap_issued"
        case adminBootstrapUsed = "admin_bootstrap_used"
        case adminRoleGranted = "admin_role_granted"
        case adminRoleRevoked = "admin_role_revoked"
        case accountDeleted = "account_deleted"
        case webhookAdded = "webhook_added"
        case webhookRemoved = "webhook_removed"
        case webhookPaused = "webhook_paused"
        case webhookResumed = "webhook_resumed"
        case webhookSecretRotated = "webhook_secret_rotated"
        case webhookDeliveryRetried = "webhook_delivery_retried"
        case oauthClientSecretRotated = "oauth_client_secret_rotated"
        case signingKeyRotated = "signing_key_rotated"
        /// An account imported with a password hash (`passkeyd import`), one line per account.
        case accountImported = "account_imported"
        /// Mail (issue 43): a verification mail queued (detail: the address), an address proven,
        /// removed, a recovery mail asked for (no detail: the answer is the same for unknown
        /// addresses), "this wasn't me" used (detail: what it undid), recovery by mail closed
        /// and opened again.
        case emailVerificationSent = "email_verification_sent"
        case emailVerified = "email_verified"
        case emailRemoved = "email_removed"
        case emailRecoveryRequested = "email_recovery_requested"
        case emailUndo = "email_undo"
        case emailRecoveryClosed = "email_recovery_closed"
        case emailRecoveryOpened = "email_recovery_opened"
        /// Tenants (issue 44), in the default tenant's log: added, changed, removed (detail: the
        /// name and hosts; the actor: `cli`, an API key or a console operator).
        case tenantAdded = "tenant_added"
        case tenantChanged = "tenant_changed"
        case tenantRemoved = "tenant_removed"
    }

    /// The line's number (ascending in the order lines were written); nil before it is stored.
    public var id: Int64?
    public var time: Date
    public var kind: String
    public var accountID: UUID?
    public var credentialID: [UInt8]?
    public var ipAddress: String?
    public var userAgent: String?
    /// An error code for failures, or a short detail.
    public var detail: String?
    /// The adoption metric this line counts for (`sign_in_passkey`, `upgrade_conditional`, …; at
    /// most one per line), rolled up per UTC day into ``DailyMetric``s; nil for lines that count
    /// for none.
    public var metric: String?
    /// The W3C `traceparent` of the request that wrote the line (propagated to webhook
    /// deliveries); nil when tracing is off.
    public var traceParent: String?

    public init(
        time: Date, kind: Kind, accountID: UUID? = nil, credentialID: [UInt8]? = nil, ipAddress: String? = nil,
        userAgent: String? = nil, detail: String? = nil, metric: String? = nil, traceParent: String? = nil
    ) {
        self.init(
            time: time, kind: kind.rawValue, accountID: accountID, credentialID: credentialID, ipAddress: ipAddress,
            userAgent: userAgent, detail: detail, metric: metric, traceParent: traceParent)
    }

    /// A line as stored (a kind this version may not know, read back from the database).
    public init(
        time: Date, kind: String, accountID: UUID? = nil, credentialID: [UInt8]? = nil, ipAddress: String? = nil,
        userAgent: String? = nil, detail: String? = nil, metric: String? = nil, traceParent: String? = nil
    ) {
        self.time = time
        self.kind = kind
        self.accountID = accountID
        self.credentialID = credentialID
        self.ipAddress = ipAddress
        self.userAgent = userAgent
        self.detail = detail
        self.metric = metric
        self.traceParent = traceParent
    }
}

/// A key passkeyd signs access tokens with. Published in the JWKS from creation until
/// `retiresAt`; used for signing from `activatesAt` until a newer key activates.
public struct SigningKey: Sendable, Hashable {
    public var kid: String
    /// `ES256`, `EdDSA` or `RS256`.
    public var algorithm: String
    /// The private key (PKCS#8 DER for ES256 and RS256, the 32-byte seed for EdDSA). Never
    /// logged, never in an API answer.
    public var privateKey: [UInt8]
    public var createdAt: Date
    public var activatesAt: Date
    public var retiresAt: Date?

    public init(kid: String, algorithm: String, privateKey: [UInt8], createdAt: Date, activatesAt: Date, retiresAt: Date? = nil) {
        self.kid = kid
        self.algorithm = algorithm
        self.privateKey = privateKey
        self.createdAt = createdAt
        self.activatesAt = activatesAt
        self.retiresAt = retiresAt
    }
}

/// A key a server uses to call passkeyd (introspection, the server API), stored only as a hash.
public struct APIKey: Sendable, Hashable {
    public var id: UUID
    public var name: String
    public var keyHash: [UInt8]
    public var scopes: [String]
    public var createdAt: Date
    public var lastUsedAt: Date?
    public var revokedAt: Date?

    public init(
        id: UUID = .random(), name: String, keyHash: [UInt8], scopes: [String], createdAt: Date, lastUsedAt: Date? = nil,
        revokedAt: Date? = nil
    ) {
        self.id = id
        self.name = name
        self.keyHash = keyHash
        self.scopes = scopes
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.revokedAt = revokedAt
    }
}

/// Where events are delivered.
public struct WebhookEndpoint: Sendable, Hashable {
    public var id: UUID
    public var url: String
    /// The HMAC key of the signature header (shown once, when the endpoint is added).
    public var secret: [UInt8]
    /// Audit kinds delivered (`sign_in`, `passkey_added`, …); `["*"]` for all.
    public var events: [String]
    public var createdAt: Date
    public var disabled: Bool

    public init(id: UUID = .random(), url: String, secret: [UInt8], events: [String], createdAt: Date, disabled: Bool = false) {
        self.id = id
        self.url = url
        self.secret = secret
        self.events = events
        self.createdAt = createdAt
        self.disabled = disabled
    }
}

/// One event's delivery to one endpoint (the outbox row).
public struct WebhookDelivery: Sendable, Hashable {
    public var eventID: Int64
    public var endpointID: UUID
    public var accountID: UUID?
    public var attempts: Int
    public var nextAttemptAt: Date
    public var deliveredAt: Date?
    public var lastStatus: Int?
    public var lastError: String?
    /// How long the last attempt took, in milliseconds (nil before the first, or when not measured).
    public var latencyMs: Int?
    /// The audit kind of the event delivered (`sign_in`…), when the listing read it.
    public var kind: String?

    public init(
        eventID: Int64, endpointID: UUID, accountID: UUID?, attempts: Int, nextAttemptAt: Date, deliveredAt: Date? = nil,
        lastStatus: Int? = nil, lastError: String? = nil, latencyMs: Int? = nil
    ) {
        self.latencyMs = latencyMs
        self.eventID = eventID
        self.endpointID = endpointID
        self.accountID = accountID
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.deliveredAt = deliveredAt
        self.lastStatus = lastStatus
        self.lastError = lastError
    }
}

/// An OpenID Connect client (relying party) registered with passkeyd.
public struct OAuthClient: Sendable, Hashable {
    /// `client_id`.
    public var id: String
    public var name: String
    /// SHA-256 of the client secret; nil for a public client (PKCE instead of a secret).
    public var secretHash: [UInt8]?
    /// Redirect URIs, matched exactly (RFC 9700 §4.1.3).
    public var redirectURIs: [String]
    public var postLogoutURIs: [String]
    /// Trusted by the operator: no consent screen.
    public var firstParty: Bool
    /// People without an account may sign up from this client's sign-in page.
    public var allowSignUp: Bool
    /// `RS256` (the OIDC default) or `ES256`.
    public var idTokenAlgorithm: String
    public var createdAt: Date

    public var isPublic: Bool { secretHash == nil }

    public init(
        id: String, name: String, secretHash: [UInt8]?, redirectURIs: [String], postLogoutURIs: [String] = [], firstParty: Bool = false,
        allowSignUp: Bool = false, idTokenAlgorithm: String = "RS256", createdAt: Date
    ) {
        self.id = id
        self.name = name
        self.secretHash = secretHash
        self.redirectURIs = redirectURIs
        self.postLogoutURIs = postLogoutURIs
        self.firstParty = firstParty
        self.allowSignUp = allowSignUp
        self.idTokenAlgorithm = idTokenAlgorithm
        self.createdAt = createdAt
    }
}

/// An authorization code or refresh token as stored: its grant (opaque JSON the OpenID
/// provider wrote), who it is for, and its state.
public struct OAuthGrant: Sendable, Hashable {
    public var clientID: String
    public var accountID: UUID
    public var grant: [UInt8]
    /// The refresh-token family (a code: the family its exchange created).
    public var family: String?
    public var expiresAt: Date
    public var usedAt: Date?
    public var revokedAt: Date?

    public init(
        clientID: String, accountID: UUID, grant: [UInt8], family: String?, expiresAt: Date, usedAt: Date? = nil, revokedAt: Date? = nil
    ) {
        self.clientID = clientID
        self.accountID = accountID
        self.grant = grant
        self.family = family
        self.expiresAt = expiresAt
        self.usedAt = usedAt
        self.revokedAt = revokedAt
    }
}

/// How an attempt to take a single-use OAuth code or refresh token for one client ended. Only
/// the statement that marks the row used decides: of takers racing for one row, one alone gets
/// ``taken(_:)``.
public enum OAuthTake: Sendable, Hashable {
    /// Taken now, by this caller alone (the row as the taking statement left it).
    case taken(OAuthGrant)
    /// Taken before, or by a caller that raced this one: the row as it is now. Its `family`
    /// is the grant the first taker made (a code) or belongs to (a refresh token): a second use
    /// means someone else holds it, so the caller revokes that grant.
    case reused(OAuthGrant)
    /// Its grant was revoked.
    case revoked
    /// Not used yet, but expired.
    case expired
    /// No such code or token issued to this client: nothing was changed.
    case unknown
}
