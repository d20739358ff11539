import Foundation
import PasskeyStore

/// What the server API and `passkeyd admin` read: accounts, their passkeys and sessions, OAuth
/// clients, webhook endpoints and deliveries. The edge reads through these, never the store.
extension AdminService {
    /// An account by ID, or nil.
    public func account(id: UUID) async throws -> Account? { try await store.account(id: id) }

    /// An account by username (any spelling that compares equal), or nil.
    public func account(username: String) async throws -> Account? { try await store.account(username: username) }

    /// An account by the app's own ID for it, or nil.
    public func account(externalID: String) async throws -> Account? { try await store.account(externalID: externalID) }

    /// The account's passkeys.
    public func passkeys(of account: Account) async throws -> [Passkey] { try await store.passkeys(accountID: account.id) }

    /// The account's live sessions.
    public func sessions(of account: Account) async throws -> [SessionRecord] {
        try await store.sessions(accountID: account.id, now: now())
    }

    /// Every OpenID Connect client.
    public func clients() async throws -> [OAuthClient] { try await store.oauthClients() }

    /// Every webhook endpoint.
    public func webhookEndpoints() async throws -> [WebhookEndpoint] { try await store.webhookEndpoints() }

    /// The latest deliveries, of every endpoint or of one, newest first.
    public func webhookDeliveries(endpointID: UUID? = nil, limit: Int = 100) async throws -> [WebhookDelivery] {
        try await store.webhookDeliveries(endpointID: endpointID, limit: limit)
    }
}

extension PasskeyService {
    /// The operator's verbs over this service's store, clock and webhook rule.
    public var admin: AdminService {
        AdminService(store: store, now: now, webhookPolicy: configuration.webhookPolicy)
    }
}
