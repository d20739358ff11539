import Crypto
import Foundation
import PasskeyStore
import WebAuthn

/// What an operator or an app's server does to accounts, keys and webhooks: look an account up,
/// create one, disable or re-enable it, rename or revoke a passkey, revoke sessions, issue a
/// registration token; API keys, signing keys and webhook endpoints. Each change and its audit
/// line are one store transaction: either both happen or neither. `passkeyd admin` and the
/// server API (`/api/admin`) both use it.
public struct AdminService: Sendable {
    public let store: any PasskeyStore
    package let now: @Sendable () -> Date
    /// The address rule webhook URLs are held to (the configuration's `webhookPolicy`).
    package let webhookPolicy: OutboundURLPolicy

    public init(
        store: any PasskeyStore, now: @escaping @Sendable () -> Date = { Date() }, webhookPolicy: OutboundURLPolicy = OutboundURLPolicy()
    ) {
        self.store = store
        self.now = now
        self.webhookPolicy = webhookPolicy
    }

    /// An account by username (its comparison key) or by ID.
    public func account(_ user: String) async throws -> Account {
        if let id = UUID(uuidString: user), let account = try await store.account(id: id) { return account }
        if let account = try await store.account(username: user) { return account }
        throw PasskeyServiceError(.accountNotFound, "no account \"\(user)\" (give a username or an account ID)")
    }

    private func event(
        _ kind: AuditEvent.Kind, _ account: Account, by operatorName: String, credentialID: [UInt8]? = nil, detail: String? = nil
    )
        -> AuditEvent
    {
        AuditEvent(time: now(), kind: kind, accountID: account.id, credentialID: credentialID, userAgent: operatorName, detail: detail)
    }

    /// Disables an account: it cannot sign in, and every session of it ends. Returns how many.
    public func disable(_ account: Account, by operatorName: String) async throws -> Int {
        guard
            let revoked = try await store.setDisabled(
                accountID: account.id, disabled: true, audit: [event(.adminAccountDisabled, account, by: operatorName)])
        else { throw PasskeyServiceError(.accountNotFound, "no account \(account.id)") }
        return revoked
    }

    /// Lets a disabled account sign in again (its old sessions stay ended).
    public func enable(_ account: Account, by operatorName: String) async throws {
        guard
            try await store.setDisabled(
                accountID: account.id, disabled: false, audit: [event(.adminAccountEnabled, account, by: operatorName)])
                != nil
        else { throw PasskeyServiceError(.accountNotFound, "no account \(account.id)") }
    }

    /// Removes one of the account's passkeys, even its last (then only a recovery link lets the
    /// person back in), and the sessions it made.
    public func revokePasskey(_ credentialID: [UInt8], of account: Account, by operatorName: String) async throws -> Passkey {
        guard let passkey = try await store.passkey(credentialID: credentialID), passkey.accountID == account.id else {
            throw PasskeyServiceError(.passkeyNotFound, "\(account.username) has no passkey \(Base64URLBytes(credentialID).base64URL)")
        }
        let existing = try await store.passkeys(accountID: account.id).count
        let audit = [
            event(.adminPasskeyRevoked, account, by: operatorName, credentialID: credentialID, detail: passkey.name)
                .counted(AdoptionMetric.removedPasskey(existing: existing, hasPassword: account.passwordHash != nil))
        ]
        guard try await store.revokePasskey(credentialID: credentialID, audit: audit) else {
            throw PasskeyServiceError(.passkeyNotFound, "the passkey was removed meanwhile")
        }
        return passkey
    }

    /// Signs the account out everywhere; returns how many sessions ended.
    public func revokeSessions(of account: Account, by operatorName: String) async throws -> Int {
        try await store.revokeSessions(accountID: account.id, except: nil, audit: [event(.adminSessionsRevoked, account, by: operatorName)])
    }

    // MARK: Accounts for apps that already have users

    /// The account with the app's `externalID`, or a new one (no way in yet: hand its person a
    /// registration token). `created` is false when it existed; a username held by another
    /// account is `username_taken`.
    public func findOrCreate(
        username rawUsername: String, displayName: String?, externalID: String?, by operatorName: String
    ) async throws -> (account: Account, created: Bool) {
        if let externalID {
            guard !externalID.isEmpty, externalID.utf8.count <= 256, !externalID.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
                throw PasskeyServiceError.invalid(.invalidExternalID, "externalId must have 1 to 256 bytes and no control characters.")
            }
            if let existing = try await store.account(externalID: externalID) { return (existing, false) }
        }
        let username = try PasskeyService.validUsername(rawUsername)
        let display = try PasskeyService.validDisplayName(displayName, default: username)
        let account = Account(
            username: username, displayName: display, userHandle: RelyingParty.makeUserHandle(), createdAt: now(), externalID: externalID)
        do {
            try await store.createAccount(account, audit: [event(.accountCreated, account, by: operatorName).counted(.accountCreatedEmpty)])
        } catch let error as StoreError where error.code == .conflict {
            // Created meanwhile by the same external id (a retried call), or the username is taken.
            if let externalID, let existing = try await store.account(externalID: externalID) { return (existing, false) }
            throw PasskeyServiceError.usernameTaken
        }
        return (account, true)
    }

    /// Renames one of the account's passkeys.
    public func renamePasskey(_ credentialID: [UInt8], of account: Account, to rawName: String, by operatorName: String) async throws
        -> Passkey
    {
        let name = try PasskeyService.validPasskeyName(rawName)
        guard try await store.renamePasskey(accountID: account.id, credentialID: credentialID, name: name),
            let passkey = try await store.passkey(credentialID: credentialID)
        else { throw PasskeyServiceError.passkeyNotFound }
        try await store.appendAudit(event(.adminPasskeyRenamed, account, by: operatorName, credentialID: credentialID, detail: name))
        return passkey
    }

    /// Ends one session of the account (by its id, the base64url token hash).
    public func revokeSession(_ tokenHash: [UInt8], of account: Account, by operatorName: String) async throws {
        guard try await store.sessions(accountID: account.id, now: now()).contains(where: { $0.tokenHash == tokenHash }) else {
            throw PasskeyServiceError.sessionNotFound
        }
        try await store.revokeSession(tokenHash: tokenHash)
        try await store.appendAudit(event(.adminSessionsRevoked, account, by: operatorName, detail: "one"))
    }

    /// A single-use token that lets the account's person register a passkey without being
    /// signed in (`registrationToken` in `POST /api/auth/register/options`), valid `lifetime`.
    public func registrationToken(for account: Account, lifetime: TimeInterval, by operatorName: String) async throws -> (
        token: String, expiresAt: Date
    ) {
        guard !account.disabled else { throw PasskeyServiceError.accountDisabled }
        let token = RelyingParty.randomBytes(32)
        let time = now()
        let expires = time.addingTimeInterval(lifetime)
        try await store.saveRegistrationToken(hash: Self.hash(token), accountID: account.id, createdAt: time, expiresAt: expires)
        try await store.appendAudit(event(.adminRegistrationToken, account, by: operatorName, detail: "expires in \(Int(lifetime))s"))
        return ("prt_" + Base64URLBytes(token).base64URL, expires)
    }

    package static func hash(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    // MARK: API keys

    /// `tenants` (issue 44) manages the server's tenants: only the default tenant's keys hold it.
    public static let scopes = ["introspect", "users:read", "users:write", "webhooks", "clients", "tenants"]

    /// A new API key: the key itself (shown once) and its record (only its hash is stored).
    public func createAPIKey(name: String, scopes: [String], by operatorName: String) async throws -> (key: String, record: APIKey) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 128 else {
            throw PasskeyServiceError(.invalidName, "an API key needs a name of 1 to 128 bytes")
        }
        guard !scopes.isEmpty, scopes.allSatisfy(Self.scopes.contains) else {
            throw PasskeyServiceError(.invalidValue, "scopes must be among \(Self.scopes.joined(separator: ", "))")
        }
        guard !scopes.contains("tenants") || store.tenant == TenantID.defaultTenant else {
            throw PasskeyServiceError(.invalidValue, "the tenants scope is the server's own: only the default tenant's keys hold it")
        }
        let key = "pkd_" + Base64URLBytes(RelyingParty.randomBytes(32)).base64URL
        let record = APIKey(name: trimmed, keyHash: Self.hash(Array(key.utf8)), scopes: Array(Set(scopes)).sorted(), createdAt: now())
        try await store.createAPIKey(
            record,
            audit: [AuditEvent(time: now(), kind: .apiKeyCreated, userAgent: operatorName, detail: "\(record.id) \(trimmed)")])
        return (key, record)
    }

    public func revokeAPIKey(_ id: UUID, by operatorName: String) async throws {
        guard
            try await store.revokeAPIKey(
                id: id, at: now(), audit: [AuditEvent(time: now(), kind: .apiKeyRevoked, userAgent: operatorName, detail: "\(id)")])
        else { throw PasskeyServiceError(.notFound, "no live API key \(id)") }
    }

    // MARK: Webhooks

    /// Adds an endpoint; returns it and its signing secret (`whsec_…`, shown once). A URL that
    /// breaks ``webhookPolicy`` (by its text, or a name that resolves to an inside address now)
    /// is `invalid_webhook_url`; deliveries check the address again each time they connect.
    public func addWebhook(url: String, events: [String], secret: String? = nil) async throws -> (endpoint: WebhookEndpoint, secret: String)
    {
        do {
            let destination = try webhookPolicy.check(url: url)
            if destination.address == nil, !webhookPolicy.allowsPrivateAddresses,
                let addresses = await NameResolver.resolve(destination.host, within: .seconds(2))
            {
                for address in addresses {
                    do throws(OutboundURLPolicy.Refusal) {
                        try webhookPolicy.check(address: address)
                    } catch {
                        throw OutboundURLPolicy.Refusal(description: "\(destination.host) resolves to \(error.description)")
                    }
                }
            }
        } catch let refusal as OutboundURLPolicy.Refusal {
            throw PasskeyServiceError(.invalidWebhookURL, "This webhook URL is refused: \(refusal.description).")
        }
        let known = Set(AuditEvent.Kind.allCases.map(\.rawValue))
        let kinds = events.isEmpty ? ["*"] : events
        guard kinds == ["*"] || kinds.allSatisfy(known.contains) else {
            throw PasskeyServiceError(.invalidValue, "events must be * or among \(known.sorted().joined(separator: ", "))")
        }
        let secretText = secret ?? "whsec_" + Data(RelyingParty.randomBytes(32)).base64EncodedString()
        let endpoint = WebhookEndpoint(url: url, secret: WebhookSigner.key(secretText), events: kinds, createdAt: now())
        try await store.addWebhookEndpoint(endpoint)
        return (endpoint, secretText)
    }

    public func removeWebhook(_ id: UUID) async throws {
        guard try await store.removeWebhookEndpoint(id: id) else { throw PasskeyServiceError(.notFound, "no webhook endpoint \(id)") }
    }

    // MARK: OpenID Connect clients

    /// Registers a client; returns it and its secret (shown once; nil for a public client).
    public func addClient(
        name: String, redirectURIs: [String], postLogoutURIs: [String] = [], isPublic: Bool, firstParty: Bool = false,
        allowSignUp: Bool = false, idTokenAlgorithm: String = "RS256", by operatorName: String
    ) async throws -> (client: OAuthClient, secret: String?) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 128 else {
            throw PasskeyServiceError(.invalidName, "a client needs a name of 1 to 128 bytes")
        }
        guard !redirectURIs.isEmpty else { throw PasskeyServiceError(.invalidValue, "a client needs at least one redirect URI") }
        for uri in redirectURIs + postLogoutURIs {
            if let refusal = RedirectURI.refusal(uri) {
                throw PasskeyServiceError(
                    .invalidValue,
                    "\"\(uri)\" is not a usable redirect URI: \(refusal) (https://host, http on loopback, or an app's reverse-domain scheme; no fragment)"
                )
            }
        }
        guard ["RS256", "ES256"].contains(idTokenAlgorithm) else {
            throw PasskeyServiceError(.invalidValue, "ID tokens are signed RS256 or ES256")
        }
        let secret = isPublic ? nil : "pcs_" + Base64URLBytes(RelyingParty.randomBytes(32)).base64URL
        let client = OAuthClient(
            id: "pkc_" + Base64URLBytes(RelyingParty.randomBytes(12)).base64URL, name: trimmed,
            secretHash: secret.map { Self.hash(Array($0.utf8)) }, redirectURIs: redirectURIs, postLogoutURIs: postLogoutURIs,
            firstParty: firstParty, allowSignUp: allowSignUp, idTokenAlgorithm: idTokenAlgorithm, createdAt: now())
        try await store.addOAuthClient(client)
        try await store.appendAudit(
            AuditEvent(time: now(), kind: .oauthClientAdded, userAgent: operatorName, detail: "\(client.id) \(trimmed)"))
        return (client, secret)
    }

    public func removeClient(_ id: String, by operatorName: String) async throws {
        guard try await store.removeOAuthClient(id: id) else { throw PasskeyServiceError(.notFound, "no client \(id)") }
        try await store.appendAudit(AuditEvent(time: now(), kind: .oauthClientRemoved, userAgent: operatorName, detail: id))
    }
}
