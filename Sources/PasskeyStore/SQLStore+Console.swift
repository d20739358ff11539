import Foundation

/// The console's overview counts and its changes that are not roles: deleting an account, and
/// the integrations (pausing and re-keying webhooks, retrying a delivery, a client's new secret).
extension SQLStore {
    // MARK: Overview

    public func liveSessionCount(now: Date) async throws -> Int {
        try await reader.count("SELECT COUNT(*) AS n FROM sessions WHERE tenant_id = \(tenant) AND expires_at > \(now)")
    }

    public func webhookBacklog(now: Date) async throws -> Int {
        // webhook_deliveries_due (delivered_at, next_attempt_at): the undelivered rows only.
        try await reader.count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE tenant_id = \(tenant) AND delivered_at IS NULL")
    }

    public func passkeyCountsByAAGUID() async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        // passkeys_aaguid: read from the index alone.
        for row in try await reader.rows("SELECT aaguid, COUNT(*) AS n FROM passkeys WHERE tenant_id = \(tenant) GROUP BY aaguid") {
            counts[try row.text("aaguid")] = Int(try row.integer("n"))
        }
        return counts
    }

    // MARK: Accounts

    public func deleteAccount(accountID: UUID, audit: [AuditEvent]) async throws -> AccountDeletion {
        let forUpdate = dialect.forUpdate
        return try await transaction { [self] db in
            // The last-admin guard, as in setAdminRole and in its order (every admin row locked
            // first, then the account): of two admins deleting each other at once, the second
            // waits, then counts one admin left and is refused.
            let admins = try await lockedAdmins(db, forUpdate: forUpdate)
            guard try await db.run("SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID)\(sql: forUpdate)") == 1 else {
                return .notFound
            }
            if admins.contains(accountID) && admins.count <= 1 { return .lastAdmin }
            // Everything of the account, by name (not left to ON DELETE CASCADE alone: SQLite
            // applies it only on connections with foreign keys on). The audit log stays: it is
            // the history, and the deliveries of its lines with it.
            for table in [
                "sessions", "passkeys", "challenges", "recovery_codes", "recovery_tokens", "registration_tokens", "oauth_codes",
                "oauth_refresh_tokens", "oauth_consents", "admin_roles", "admin_sessions",
            ] {
                try await db.execute(
                    "DELETE FROM \(sql: SQLFragment(text: table)) WHERE tenant_id = \(tenant) AND account_id = \(accountID)")
            }
            try await db.execute("DELETE FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID)")
            for event in audit { try await db.execute(insert(event)) }
            return .deleted
        }
    }

    // MARK: Integrations

    public func setWebhookPaused(id: UUID, paused: Bool) async throws -> Bool {
        try await writer.run("UPDATE webhook_endpoints SET disabled = \(paused) WHERE tenant_id = \(tenant) AND id = \(id) RETURNING 1")
            == 1
    }

    public func setWebhookSecret(id: UUID, secret: [UInt8]) async throws -> Bool {
        try await writer.run("UPDATE webhook_endpoints SET secret = \(secret) WHERE tenant_id = \(tenant) AND id = \(id) RETURNING 1") == 1
    }

    public func retryWebhookDelivery(endpointID: UUID, eventID: Int64, now: Date) async throws -> Bool {
        try await writer.run(
            """
            UPDATE webhook_deliveries SET next_attempt_at = \(now), lease_until = NULL, lease_token = NULL
            WHERE tenant_id = \(tenant) AND endpoint_id = \(endpointID) AND event_id = \(eventID) AND delivered_at IS NULL
            RETURNING 1
            """) == 1
    }

    public func setOAuthClientSecret(id: String, secretHash: [UInt8]) async throws -> Bool {
        try await writer.run("UPDATE oauth_clients SET secret_hash = \(secretHash) WHERE tenant_id = \(tenant) AND id = \(id) RETURNING 1")
            == 1
    }
}

extension SQLStore {
    /// Brings the console's search keys (display name, external id) of every account to
    /// ``AccountSearch/key(_:)`` (migration 13's backfill folded with the database's `lower()`).
    static func rekeySearchKeys(_ db: any SQLConnection) async throws {
        // Upkeep of every tenant's accounts, each row updated in its own tenant.
        let rows = try await db.rows("SELECT tenant_id, id, display_name, display_name_key, external_id, external_id_key FROM accounts")
        for row in rows {
            let display = AccountSearch.key(try row.text("display_name"))
            let external = try row.optionalText("external_id").map(AccountSearch.key)
            guard try row.optionalText("display_name_key") != display || row.optionalText("external_id_key") != external else { continue }
            try await db.execute(
                "UPDATE accounts SET display_name_key = \(display), external_id_key = \(external) WHERE tenant_id = \(try row.text("tenant_id")) AND id = \(try row.id("id"))"
            )
        }
    }
}
