import Foundation
import PasskeyStore
import WebAuthn

/// The integrations page (OpenID clients, API keys, webhooks, signing keys), the policy page
/// and the administrators page.
extension ConsoleService {
    public struct Integrations: Sendable {
        public var clients: [OAuthClient]
        public var apiKeys: [APIKey]
        public var webhooks: [(endpoint: WebhookEndpoint, deliveries: [WebhookDelivery])]
        public var signingKeys: [SigningKey]
        public var jwks: [UInt8]
    }

    public func integrations() async throws -> Integrations {
        let deliveries = try await store.webhookDeliveries(endpointID: nil, limit: 200)
        let endpoints = try await store.webhookEndpoints()
        return Integrations(
            clients: try await store.oauthClients(), apiKeys: try await store.apiKeys(),
            webhooks: endpoints.map { endpoint in (endpoint, Array(deliveries.filter { $0.endpointID == endpoint.id }.prefix(20))) },
            signingKeys: try await store.signingKeys(now: service.now()), jwks: try await service.tokens.jwks())
    }

    public func addClient(
        name: String, redirectURIs: [String], isPublic: Bool, firstParty: Bool, allowSignUp: Bool, by session: Session
    ) async throws -> (client: OAuthClient, secret: String?) {
        try await admin.addClient(
            name: name, redirectURIs: redirectURIs, isPublic: isPublic, firstParty: firstParty, allowSignUp: allowSignUp, by: session.actor)
    }

    public func rotateClientSecret(_ id: String, by session: Session) async throws -> String {
        try await admin.rotateClientSecret(id, by: session.actor)
    }

    public func removeClient(_ id: String, by session: Session) async throws { try await admin.removeClient(id, by: session.actor) }

    /// A key with `tenants` manages tenants: only a server operator makes one (an admin would
    /// lift itself to the operator's power through it).
    public func createAPIKey(name: String, scopes: [String], by session: Session) async throws -> (key: String, record: APIKey) {
        guard !scopes.contains("tenants") || session.role == .serverOperator else { throw PasskeyServiceError.operatorRoleRequired }
        return try await admin.createAPIKey(name: name, scopes: scopes, by: session.actor)
    }

    public func revokeAPIKey(_ id: UUID, by session: Session) async throws { try await admin.revokeAPIKey(id, by: session.actor) }

    public func addWebhook(url: String, events: [String], by session: Session) async throws -> (endpoint: WebhookEndpoint, secret: String) {
        let added = try await admin.addWebhook(url: url, events: events)
        try await store.appendAudit(
            AuditEvent(time: service.now(), kind: .webhookAdded, userAgent: session.actor, detail: "\(added.endpoint.id) \(url)"))
        return added
    }

    public func removeWebhook(_ id: UUID, by session: Session) async throws {
        try await admin.removeWebhook(id)
        try await store.appendAudit(AuditEvent(time: service.now(), kind: .webhookRemoved, userAgent: session.actor, detail: "\(id)"))
    }

    public func setWebhookPaused(_ id: UUID, paused: Bool, by session: Session) async throws {
        try await admin.setWebhookPaused(id, paused: paused, by: session.actor)
    }

    public func rotateWebhookSecret(_ id: UUID, by session: Session) async throws -> String {
        try await admin.rotateWebhookSecret(id, by: session.actor)
    }

    public func retryWebhookDelivery(endpoint id: UUID, eventID: Int64, by session: Session) async throws {
        try await admin.retryWebhookDelivery(endpoint: id, eventID: eventID, by: session.actor)
    }

    /// A new access-token signing key: published now, signing once verifiers have had time to
    /// fetch it (``ServerConfiguration/Tokens/publishSeconds``), the old one retired after.
    public func rotateSigningKey(by session: Session) async throws -> SigningKey {
        let key = try await AccessTokens.rotate(store: store, configuration: service.configuration.tokens, now: service.now())
        try await store.appendAudit(AuditEvent(time: service.now(), kind: .signingKeyRotated, userAgent: session.actor, detail: key.kid))
        return key
    }

    // MARK: Policy and metadata

    public struct PolicyPage: Sendable {
        public var configuration: ServerConfiguration
        /// The FIDO metadata BLOB in force on this instance, when it was imported and loaded.
        public var metadata: MetadataInForce?
        public var metadataWarning: String?
        /// Passkeys by AAGUID, most used first.
        public var providers: [(aaguid: String, passkeys: Int)]
    }

    public func policy() async throws -> PolicyPage {
        let counts = try await store.passkeyCountsByAAGUID()
        return PolicyPage(
            configuration: service.configuration, metadata: service.fidoMetadataInForce, metadataWarning: service.metadataWarning,
            providers: counts.map { ($0.key, $0.value) }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 })
    }

    // MARK: Administrators

    public func admins() async throws -> [AdminGrant] { try await store.adminGrants() }
}
