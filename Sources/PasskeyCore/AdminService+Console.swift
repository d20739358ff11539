import Foundation
import PasskeyStore
import WebAuthn

/// The verbs the console added to the administrator's set (the CLI runs them too): roles,
/// account deletion, recovery links with a reason, and the integrations' upkeep.
extension AdminService {
    // MARK: Roles

    /// Gives `account` a console role (or changes it). Demoting the last `admin` is refused;
    /// `operator` is held only in the default tenant (it manages the others).
    public func grantRole(_ role: AdminRole, to account: Account, by operatorName: String) async throws {
        guard role != .serverOperator || store.tenant == TenantID.defaultTenant else {
            throw PasskeyServiceError(
                .invalidValue, "The operator role is the server's own: it is granted in the default tenant, not in a tenant.")
        }
        let line = AuditEvent(time: now(), kind: .adminRoleGranted, accountID: account.id, userAgent: operatorName, detail: role.rawValue)
        try await roleChange(try await store.setAdminRole(accountID: account.id, role: role, by: operatorName, at: now(), audit: [line]))
    }

    /// Takes the account's console role away (its console sessions end). The last `admin`'s
    /// role is kept (`last_admin`): grant another first.
    public func revokeRole(of account: Account, by operatorName: String) async throws {
        let line = AuditEvent(time: now(), kind: .adminRoleRevoked, accountID: account.id, userAgent: operatorName)
        try await roleChange(try await store.setAdminRole(accountID: account.id, role: nil, by: operatorName, at: now(), audit: [line]))
    }

    private func roleChange(_ change: AdminRoleChange) async throws {
        switch change {
        case .changed: return
        case .accountNotFound: throw PasskeyServiceError.accountNotFound
        case .lastAdmin: throw PasskeyServiceError.lastAdmin
        }
    }

    // MARK: Accounts

    /// Deletes an account and everything of it but its audit lines. `confirmation` must be its
    /// username, typed (compared by its comparison key). The last `admin`'s account is kept
    /// (`last_admin`), by the store in the deletion's transaction.
    public func deleteAccount(_ account: Account, confirmation: String, by operatorName: String) async throws {
        guard Account.key(for: confirmation) == Account.key(for: account.username) else {
            throw PasskeyServiceError(.confirmationMismatch, "Type the account's username to confirm its deletion.")
        }
        let passkeys = try await store.passkeys(accountID: account.id).count
        let line = AuditEvent(
            time: now(), kind: .accountDeleted, accountID: account.id, userAgent: operatorName, detail: account.username
        ).counted(AdoptionMetric.deleted(passkeys: passkeys, hasPassword: account.passwordHash != nil))
        switch try await store.deleteAccount(accountID: account.id, audit: [line]) {
        case .deleted: return
        case .notFound: throw PasskeyServiceError.accountNotFound
        case .lastAdmin: throw PasskeyServiceError.lastAdmin
        }
    }

    /// Why an operator issues a recovery link: 1 to 500 bytes of text, kept in the audit line.
    public static func validReason(_ reason: String?) throws -> String {
        let text = (reason ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty, text.utf8.count <= 500, !text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\n" }) else {
            throw PasskeyServiceError(.reasonRequired, "Say why this recovery link is issued (1 to 500 characters).")
        }
        return text
    }

    // MARK: Webhooks

    /// Pauses (no deliveries; they wait) or resumes an endpoint.
    public func setWebhookPaused(_ id: UUID, paused: Bool, by operatorName: String) async throws {
        guard try await store.setWebhookPaused(id: id, paused: paused) else {
            throw PasskeyServiceError(.notFound, "no webhook endpoint \(id)")
        }
        try await store.appendAudit(
            AuditEvent(time: now(), kind: paused ? .webhookPaused : .webhookResumed, userAgent: operatorName, detail: "\(id)"))
    }

    /// A new signing secret for an endpoint (shown once); deliveries sign with it from now on.
    public func rotateWebhookSecret(_ id: UUID, by operatorName: String) async throws -> String {
        let secret = "whsec_" + Data(RelyingParty.randomBytes(32)).base64EncodedString()
        guard try await store.setWebhookSecret(id: id, secret: WebhookSigner.key(secret)) else {
            throw PasskeyServiceError(.notFound, "no webhook endpoint \(id)")
        }
        try await store.appendAudit(AuditEvent(time: now(), kind: .webhookSecretRotated, userAgent: operatorName, detail: "\(id)"))
        return secret
    }

    /// Makes an undelivered delivery due now.
    public func retryWebhookDelivery(endpoint id: UUID, eventID: Int64, by operatorName: String) async throws {
        guard try await store.retryWebhookDelivery(endpointID: id, eventID: eventID, now: now()) else {
            throw PasskeyServiceError(.notFound, "no undelivered delivery \(eventID) to \(id)")
        }
        try await store.appendAudit(
            AuditEvent(time: now(), kind: .webhookDeliveryRetried, userAgent: operatorName, detail: "\(id) \(eventID)"))
    }

    // MARK: OpenID Connect clients

    /// A new secret for a confidential client (shown once); the old one stops working.
    public func rotateClientSecret(_ id: String, by operatorName: String) async throws -> String {
        guard let client = try await store.oauthClient(id: id) else { throw PasskeyServiceError(.notFound, "no client \(id)") }
        guard client.secretHash != nil else {
            throw PasskeyServiceError(.invalidValue, "\(id) is a public client: it has no secret (it uses PKCE)")
        }
        let secret = "pcs_" + Base64URLBytes(RelyingParty.randomBytes(32)).base64URL
        guard try await store.setOAuthClientSecret(id: id, secretHash: Self.hash(Array(secret.utf8))) else {
            throw PasskeyServiceError(.notFound, "no client \(id)")
        }
        try await store.appendAudit(AuditEvent(time: now(), kind: .oauthClientSecretRotated, userAgent: operatorName, detail: id))
        return secret
    }
}
