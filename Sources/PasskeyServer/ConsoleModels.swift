import Foundation
import PasskeyCore
import PasskeyModels
import WebAuthn

// The console API's response shapes (docs/admin.md; its request bodies are in
// ConsoleRequests.swift). Every value is data: the console writes it as text, never as markup.

// MARK: Sessions

struct ConsoleSessionJSON: Encodable {
    struct Admin: Encodable {
        let id: String
        let username: String
        let displayName: String
        let role: String
    }
    let admin: Admin
    let csrfToken: String?
    let idleTimeout: Int
    let stepUpUntil: Date
    let expiresAt: Date

    /// `now`: the service's clock (the idle deadline was moved by it).
    init(_ session: ConsoleService.Session, csrfToken: String?, now: Date) {
        admin = Admin(
            id: session.account.id.uuidString.lowercased(), username: session.account.username,
            displayName: session.account.displayName, role: session.role.rawValue)
        self.csrfToken = csrfToken
        idleTimeout = Int(session.record.idleExpiresAt.timeIntervalSince(now).rounded())
        stepUpUntil = session.stepUpUntil
        expiresAt = session.record.expiresAt
    }
}

struct StepUpJSON: Encodable {
    let stepUpUntil: Date
    let csrfToken: String
}

// MARK: Overview and adoption

struct SignInsJSON: Encodable {
    let autofill: Int
    let passkey: Int
    let password: Int
    let recovery: Int
    let oidc: Int
    init(_ signIns: ConsoleService.SignIns) {
        autofill = signIns.autofill
        passkey = signIns.passkey
        password = signIns.password
        recovery = signIns.recovery
        oidc = signIns.oidc
    }
}

struct OverviewJSON: Encodable {
    let accounts: Int
    let accountsWithPasskey: Int
    let passwordOnly: Int
    let noWayIn: Int
    let activeSessions: Int
    let webhookBacklog: Int
    let signInsToday: SignInsJSON
    /// The mail outbox (queued, failing, sentLastDay, failedLastDay, oldestQueuedSeconds).
    let mail: MailStatistics
    /// Recovery by mail in the last 7 days (requested, completed, undone).
    let emailRecovery: EmailRecoveryFigures
    let generatedAt: Date
    init(_ overview: ConsoleService.Overview) {
        mail = overview.mail
        emailRecovery = overview.recovery
        accounts = overview.accounts
        accountsWithPasskey = overview.today.accountsWithPasskey
        passwordOnly = overview.today.passwordOnly
        noWayIn = overview.today.noWayIn
        activeSessions = overview.activeSessions
        webhookBacklog = overview.webhookBacklog
        signInsToday = SignInsJSON(overview.today.signIns)
        generatedAt = overview.generatedAt
    }
}

struct AdoptionDayJSON: Encodable {
    struct Upgrades: Encodable {
        let conditional: Int
        let button: Int
        let recovery: Int
    }
    let date: String
    let accountsWithPasskey: Int
    let passwordOnly: Int
    let noWayIn: Int
    let newPasskeys: Int
    let upgrades: Upgrades
    let passwordsOff: Int
    let signIns: SignInsJSON
    init(_ day: ConsoleService.AdoptionDay) {
        date = ConsoleService.dayText(day.date)
        accountsWithPasskey = day.accountsWithPasskey
        passwordOnly = day.passwordOnly
        noWayIn = day.noWayIn
        newPasskeys = day.newPasskeys
        upgrades = Upgrades(conditional: day.upgrades.conditional, button: day.upgrades.button, recovery: day.upgrades.recovery)
        passwordsOff = day.passwordsOff
        signIns = SignInsJSON(day.signIns)
    }
}

struct AdoptionJSON: Encodable { let days: [AdoptionDayJSON] }

// MARK: Accounts

struct AccountSummaryJSON: Encodable {
    let id: String
    let username: String
    let displayName: String
    let externalId: String?
    let createdAt: Date
    let lastSignInAt: Date?
    let disabled: Bool
    let hasPassword: Bool
    let role: String?
    init(_ account: Account, role: AdminRole?) {
        id = account.id.uuidString.lowercased()
        username = account.username
        displayName = account.displayName
        externalId = account.externalID
        createdAt = account.createdAt
        lastSignInAt = account.lastSignInAt
        disabled = account.disabled
        hasPassword = account.passwordHash != nil
        self.role = role?.rawValue
    }
}

struct AccountSearchJSON: Encodable {
    let accounts: [AccountSummaryJSON]
    let next: String?
}

struct ConsolePasskeyJSON: Encodable {
    struct Provider: Encodable {
        let name: String?
        let icon: String?
    }
    struct Attestation: Encodable {
        let format: String
        let trusted: Bool
    }
    struct Verdict: Encodable {
        let allowed: Bool
        let reason: String?
    }
    let id: String
    let name: String
    let aaguid: String
    let provider: Provider
    let createdAt: Date
    let lastUsedAt: Date?
    let backupEligible: Bool
    let backedUp: Bool
    let attestation: Attestation
    let policy: Verdict
    let userVerified: Bool
    let counterAnomalies: Int
    let discoverable: Bool?
    let prf: Bool?
    init(_ passkey: Passkey, metadata: FIDOMetadata?, verdict: (allowed: Bool, reason: String?)) {
        let shown = PasskeyJSON(passkey, metadata: metadata)
        id = shown.id
        name = passkey.name
        aaguid = passkey.aaguid
        provider = Provider(name: shown.provider, icon: shown.providerIcon)
        createdAt = passkey.createdAt
        lastUsedAt = passkey.lastUsedAt
        backupEligible = passkey.backupEligible
        backedUp = passkey.backedUp
        attestation = Attestation(format: passkey.attestationFormat, trusted: passkey.attestationTrusted)
        policy = Verdict(allowed: verdict.allowed, reason: verdict.reason)
        userVerified = passkey.userVerified
        counterAnomalies = passkey.counterAnomalies
        discoverable = passkey.extensions.discoverable
        prf = passkey.extensions.prfEnabled
    }
}

struct ConsoleSessionItemJSON: Encodable {
    let id: String
    let device: String
    let method: String
    let createdAt: Date
    let lastSeenAt: Date?
    let expiresAt: Date
    let ipAddress: String?
    init(_ session: SessionRecord) {
        id = Base64URLBytes(session.tokenHash).base64URL
        device = DeviceName.describe(userAgent: session.userAgent)
        method = session.method
        createdAt = session.createdAt
        lastSeenAt = session.lastSeenAt
        expiresAt = session.expiresAt
        ipAddress = session.ipAddress
    }
}

struct AuditEventJSON: Encodable {
    let id: String?
    let time: Date
    let kind: String
    let accountId: String?
    let username: String?
    let credentialId: String?
    let ipAddress: String?
    let userAgent: String?
    let detail: String?
    init(_ event: AuditEvent, username: String?) {
        id = event.id.map(String.init)
        time = event.time
        kind = event.kind
        accountId = event.accountID?.uuidString.lowercased()
        self.username = username
        credentialId = event.credentialID.map { Base64URLBytes($0).base64URL }
        ipAddress = event.ipAddress
        userAgent = event.userAgent
        detail = event.detail
    }
}

struct AuditPageJSON: Encodable {
    let events: [AuditEventJSON]
    let next: String?
}

struct AccountDetailJSON: Encodable {
    struct Detail: Encodable {
        let id: String
        let username: String
        let displayName: String
        let externalId: String?
        let createdAt: Date
        let lastSignInAt: Date?
        let disabled: Bool
        let hasPassword: Bool
        let recoveryCodesLeft: Int
        let role: String?
    }
    let account: Detail
    let passkeys: [ConsolePasskeyJSON]
    let sessions: [ConsoleSessionItemJSON]
    let audit: [AuditEventJSON]

    init(
        _ detail: ConsoleService.AccountDetail, metadata: FIDOMetadata?, verdict: (Passkey) -> (allowed: Bool, reason: String?)
    ) {
        let account = detail.account
        self.account = Detail(
            id: account.id.uuidString.lowercased(), username: account.username, displayName: account.displayName,
            externalId: account.externalID, createdAt: account.createdAt, lastSignInAt: account.lastSignInAt,
            disabled: account.disabled, hasPassword: account.passwordHash != nil, recoveryCodesLeft: detail.recoveryCodesLeft,
            role: detail.role?.rawValue)
        passkeys = detail.passkeys.map { ConsolePasskeyJSON($0, metadata: metadata, verdict: verdict($0)) }
        sessions = detail.sessions.map(ConsoleSessionItemJSON.init)
        audit = detail.audit.map { AuditEventJSON($0, username: $0.accountID == account.id ? account.username : nil) }
    }
}

struct RecoveryLinkIssuedJSON: Encodable {
    let link: String
    let expiresAt: Date
}

// MARK: Integrations

struct APIKeyItemJSON: Encodable {
    let id: String
    let name: String
    let scopes: [String]
    let createdAt: Date
    let lastUsedAt: Date?
    let revokedAt: Date?
    init(_ key: APIKey) {
        id = key.id.uuidString.lowercased()
        name = key.name
        scopes = key.scopes
        createdAt = key.createdAt
        lastUsedAt = key.lastUsedAt
        revokedAt = key.revokedAt
    }
}

struct ConsoleDeliveryJSON: Encodable {
    let eventId: String
    let kind: String?
    let status: Int?
    let latencyMs: Int?
    let attempts: Int
    let deliveredAt: Date?
    let lastError: String?
    let nextAttemptAt: Date
    init(_ delivery: WebhookDelivery) {
        eventId = "evt_\(delivery.eventID)"
        kind = delivery.kind
        status = delivery.lastStatus
        latencyMs = delivery.latencyMs
        attempts = delivery.attempts
        deliveredAt = delivery.deliveredAt
        lastError = delivery.lastError
        nextAttemptAt = delivery.nextAttemptAt
    }
}

struct ConsoleWebhookJSON: Encodable {
    let id: String
    let url: String
    let events: [String]
    let createdAt: Date
    let paused: Bool
    let deliveries: [ConsoleDeliveryJSON]
    init(_ endpoint: WebhookEndpoint, deliveries: [WebhookDelivery]) {
        id = endpoint.id.uuidString.lowercased()
        url = endpoint.url
        events = endpoint.events
        createdAt = endpoint.createdAt
        paused = endpoint.disabled
        self.deliveries = deliveries.map(ConsoleDeliveryJSON.init)
    }
}

struct SigningKeyJSON: Encodable {
    let kid: String
    let alg: String
    let createdAt: Date
    let activatesAt: Date
    let retiresAt: Date?
    init(_ key: SigningKey) {
        kid = key.kid
        alg = key.algorithm
        createdAt = key.createdAt
        activatesAt = key.activatesAt
        retiresAt = key.retiresAt
    }
}

struct IntegrationsJSON: Encodable {
    struct Keys: Encodable {
        let jwks: JSONValue
        let keys: [SigningKeyJSON]
    }
    let clients: [ClientJSON]
    let apiKeys: [APIKeyItemJSON]
    let webhooks: [ConsoleWebhookJSON]
    let signingKeys: Keys
    init(_ integrations: ConsoleService.Integrations) {
        clients = integrations.clients.map { ClientJSON($0) }
        apiKeys = integrations.apiKeys.map(APIKeyItemJSON.init)
        webhooks = integrations.webhooks.map { ConsoleWebhookJSON($0.endpoint, deliveries: $0.deliveries) }
        signingKeys = Keys(
            jwks: (try? JSONDecoder().decode(JSONValue.self, from: Data(integrations.jwks))) ?? .null,
            keys: integrations.signingKeys.map(SigningKeyJSON.init))
    }
}

struct ClientCreatedJSON: Encodable {
    let client: ClientJSON
    let secret: String?
}

struct APIKeyCreatedJSON: Encodable {
    let key: String
    let apiKey: APIKeyItemJSON
}

struct WebhookCreatedJSON: Encodable {
    let webhook: ConsoleWebhookJSON
    let secret: String
}

// MARK: Policy and administrators

struct PolicyJSON: Encodable {
    struct Attestation: Encodable {
        let conveyance: String
        let requireTrustedAttestation: Bool
        let allowedFormats: [String]?
        let allowedAAGUIDs: [String]?
        let deniedAAGUIDs: [String]
        let requireDeviceBound: Bool
        let trustAnchors: Int
        let registrationUserVerification: String
        let authenticationUserVerification: String
    }
    /// The BLOB in force: its `no`, its `nextUpdate` (`YYYY-MM-DD`), its entries (those naming an
    /// AAGUID), when it was imported and when this instance loaded it. (An MDS3 payload has no
    /// issue date of its own.)
    struct Metadata: Encodable {
        let number: Int
        let nextUpdate: String
        let entries: Int
        let importedAt: Date
        let loadedAt: Date
        let warning: String?
    }
    struct Provider: Encodable {
        let aaguid: String
        let name: String?
        let icon: String?
        let passkeys: Int
    }
    let attestation: Attestation
    let metadata: Metadata?
    let providers: [Provider]

    init(_ page: ConsoleService.PolicyPage) {
        let configuration = page.configuration
        let policy = configuration.attestationPolicy
        attestation = Attestation(
            conveyance: configuration.attestation.rawValue, requireTrustedAttestation: policy.requireTrustedAttestation,
            allowedFormats: policy.allowedFormats.map { $0.sorted() },
            allowedAAGUIDs: policy.allowedAAGUIDs.map { $0.map(\.description).sorted() },
            deniedAAGUIDs: policy.deniedAAGUIDs.map(\.description).sorted(), requireDeviceBound: policy.requireDeviceBound,
            trustAnchors: policy.trustAnchors.count,
            registrationUserVerification: (configuration.registrationUserVerification ?? configuration.userVerification).rawValue,
            authenticationUserVerification: (configuration.authenticationUserVerification ?? configuration.userVerification).rawValue)
        metadata = page.metadata.map {
            Metadata(
                number: $0.metadata.number, nextUpdate: $0.metadata.nextUpdateDay, entries: $0.metadata.entries.count,
                importedAt: $0.importedAt, loadedAt: $0.loadedAt, warning: page.metadataWarning)
        }
        providers = page.providers.map { item in
            let model = AAGUID(item.aaguid)
            let entry = model.flatMap { page.metadata?.metadata.entry(for: $0) }
            return Provider(
                aaguid: item.aaguid, name: entry?.description ?? model?.providerName, icon: entry?.icon, passkeys: item.passkeys)
        }
    }
}

struct AdminJSON: Encodable {
    let id: String
    let username: String
    let displayName: String
    let role: String
    let grantedAt: Date
    let grantedBy: String
    init(_ grant: AdminGrant) {
        id = grant.account.id.uuidString.lowercased()
        username = grant.account.username
        displayName = grant.account.displayName
        role = grant.role.rawValue
        grantedAt = grant.grantedAt
        grantedBy = grant.grantedBy
    }
}

struct AdminListJSON: Encodable { let admins: [AdminJSON] }
