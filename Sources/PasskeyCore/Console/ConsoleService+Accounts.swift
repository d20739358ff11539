import Foundation
import PasskeyStore
import WebAuthn

/// Finding accounts and what the console shows and does to one; the audit log's search.
extension ConsoleService {
    /// One page of a search: the accounts (with their console role), and the cursor of the next.
    public struct AccountPage: Sendable {
        public var accounts: [(account: Account, role: AdminRole?)]
        public var next: String?
    }

    /// Accounts whose `field` starts with `prefix` (case-insensitive), by keyset pages.
    public func searchAccounts(field: AccountSearchField, prefix: String, after cursor: String?, limit: Int) async throws -> AccountPage {
        let text = prefix.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, text.utf8.count <= 128, !text.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
            throw PasskeyServiceError(.invalidQuery, "Search for 1 to 128 characters.")
        }
        guard (1...100).contains(limit) else { throw PasskeyServiceError(.invalidQuery, "limit must be 1 to 100.") }
        if let cursor, cursor.utf8.count > 1024 { throw PasskeyServiceError(.invalidQuery, "That page cursor is not one of ours.") }
        let page = try await store.searchAccounts(field: field, prefix: text, after: cursor, limit: limit)
        let roles = Dictionary(try await store.adminGrants().map { ($0.account.id, $0.role) }, uniquingKeysWith: { first, _ in first })
        return AccountPage(accounts: page.accounts.map { ($0, roles[$0.id]) }, next: page.next)
    }

    /// What the account page shows.
    public struct AccountDetail: Sendable {
        public var account: Account
        public var role: AdminRole?
        public var recoveryCodesLeft: Int
        public var passkeys: [Passkey]
        public var sessions: [SessionRecord]
        public var audit: [AuditEvent]
    }

    public func account(id: UUID) async throws -> AccountDetail {
        guard let account = try await store.account(id: id) else { throw PasskeyServiceError.accountNotFound }
        return AccountDetail(
            account: account, role: try await store.adminRole(accountID: id),
            recoveryCodesLeft: try await store.recoveryCodesLeft(accountID: id), passkeys: try await store.passkeys(accountID: id),
            sessions: try await store.sessions(accountID: id, now: service.now()),
            audit: try await store.searchAudit(AuditQuery(accountID: id, limit: 50)))
    }

    /// Whether the authenticator policy in force would accept this passkey if it registered
    /// today, and if not, why (a model since denied, a format no longer allowed, …).
    public func policyVerdict(_ passkey: Passkey) -> (allowed: Bool, reason: String?) {
        let policy = service.configuration.attestationPolicy
        let model = AAGUID(passkey.aaguid)
        if policy.requireTrustedAttestation && !passkey.attestationTrusted { return (false, "attestation not trusted") }
        if let formats = policy.allowedFormats, !formats.contains(passkey.attestationFormat) {
            return (false, "attestation format \(passkey.attestationFormat) not allowed")
        }
        if let allowed = policy.allowedAAGUIDs, !(model.map(allowed.contains) ?? false) { return (false, "model not in the allowed list") }
        if let model, policy.deniedAAGUIDs.contains(model) { return (false, "model denied") }
        if policy.requireDeviceBound && passkey.backupEligible { return (false, "synced passkey; device-bound required") }
        return (true, nil)
    }

    // MARK: Actions (admin role, step-up, CSRF: checked by the caller with authorizeChange)

    /// The account a change acts on. An operator's account is changed only by an operator: an
    /// admin who could disable it, end its sessions, take its passkeys, delete it or hand
    /// itself a recovery link to it would lock the operators out or become one.
    func target(_ id: UUID, by session: Session) async throws -> Account {
        guard let account = try await store.account(id: id) else { throw PasskeyServiceError.accountNotFound }
        if session.role != .serverOperator, try await store.adminRole(accountID: id) == .serverOperator {
            throw PasskeyServiceError.operatorRoleRequired
        }
        return account
    }

    public func disable(_ id: UUID, by session: Session) async throws -> Int {
        try await admin.disable(try await target(id, by: session), by: session.actor)
    }

    public func enable(_ id: UUID, by session: Session) async throws {
        try await admin.enable(try await target(id, by: session), by: session.actor)
    }

    public func revokeSessions(_ id: UUID, by session: Session) async throws -> Int {
        try await admin.revokeSessions(of: try await target(id, by: session), by: session.actor)
    }

    /// Removes one of the account's passkeys unless it is its last way in (`last_passkey`: the
    /// console keeps the account guard that people get; the CLI can force it).
    public func removePasskey(_ credentialID: [UInt8], of id: UUID, by session: Session) async throws {
        let account = try await target(id, by: session)
        let passkeys = try await store.passkeys(accountID: id)
        guard passkeys.contains(where: { $0.credentialID == credentialID }) else { throw PasskeyServiceError.passkeyNotFound }
        guard passkeys.count > 1 || account.passwordHash != nil else { throw PasskeyServiceError.lastPasskey }
        _ = try await admin.revokePasskey(credentialID, of: account, by: session.actor)
    }

    /// A single-use recovery link for the account (shown once), with why it was issued.
    public func recoveryLink(for id: UUID, reason: String?, by session: Session) async throws -> (link: String, expiresAt: Date) {
        let why = try AdminService.validReason(reason)
        let account = try await target(id, by: session)
        guard !account.disabled else { throw PasskeyServiceError.accountDisabled }
        let lifetime: TimeInterval = 24 * 3600
        let token = try await service.issueRecoveryLink(for: account, lifetime: lifetime, issuer: "\(session.actor): \(why)")
        let base = service.configuration.webOrigins.first ?? service.configuration.issuer
        return ("\(base)/#recover=\(token)", service.now().addingTimeInterval(lifetime))
    }

    public func deleteAccount(_ id: UUID, confirmation: String?, by session: Session) async throws {
        let account = try await target(id, by: session)
        guard account.id != session.account.id else {
            throw PasskeyServiceError(.invalidValue, "The console cannot delete the account signed in to it.")
        }
        try await admin.deleteAccount(account, confirmation: confirmation ?? "", by: session.actor)
    }

    // MARK: Roles

    /// Only an operator grants `operator`, or changes or takes an operator's role (an admin
    /// cannot lift itself to managing tenants, nor lock the operators out).
    public func grantRole(_ role: AdminRole, to user: String, by session: Session) async throws -> Account {
        let account = try await admin.account(user)
        try await operatorGuard(granting: role, to: account, by: session)
        try await admin.grantRole(role, to: account, by: session.actor)
        return account
    }

    public func revokeRole(of id: UUID, by session: Session) async throws {
        let account = try await target(id, by: session)
        try await operatorGuard(granting: nil, to: account, by: session)
        try await admin.revokeRole(of: account, by: session.actor)
    }

    private func operatorGuard(granting role: AdminRole?, to account: Account, by session: Session) async throws {
        guard session.role != .serverOperator else { return }
        if role == .serverOperator { throw PasskeyServiceError.operatorRoleRequired }
        if try await store.adminRole(accountID: account.id) == .serverOperator { throw PasskeyServiceError.operatorRoleRequired }
    }

    // MARK: Audit

    /// The audit log's lines matching `query`, newest first (at most 200 a page).
    /// The usernames of the accounts a page of audit lines names (deleted accounts: none), in
    /// one query.
    public func usernames(_ events: [AuditEvent]) async throws -> [UUID: String] {
        try await store.usernames(accountIDs: Set(events.compactMap(\.accountID)))
    }

    public func audit(_ query: AuditQuery) async throws -> [AuditEvent] {
        guard (1...10_000).contains(query.limit) else { throw PasskeyServiceError(.invalidQuery, "limit must be 1 to 10000.") }
        if let kind = query.kind, kind.utf8.count > 64 || AuditEvent.Kind(rawValue: kind) == nil {
            throw PasskeyServiceError(.invalidQuery, "Unknown event kind.")
        }
        if let address = query.addressPrefix,
            address.isEmpty || address.utf8.count > 64
                || !address.unicodeScalars.allSatisfy({ $0.properties.isASCIIHexDigit || $0 == "." || $0 == ":" })
        {
            throw PasskeyServiceError(.invalidQuery, "An address is digits, dots and colons (an IPv4 or IPv6 prefix).")
        }
        if let from = query.from, let to = query.to, from > to { throw PasskeyServiceError(.invalidQuery, "from is after to.") }
        return try await store.searchAudit(query)
    }
}
