import Foundation

/// Sessions: stored under the hash of their token, read with their account, touched, rebound to
/// another passkey and revoked (one, or all of an account's but one).
extension SQLStore {
    func insert(_ session: SessionRecord) -> SQL {
        """
        INSERT INTO sessions (tenant_id, token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
        VALUES (\(tenant), \(session.tokenHash), \(session.accountID), \(session.createdAt), \(session.expiresAt), \(session.userAgent),
                \(session.ipAddress), \(session.method), \(session.credentialID))
        """
    }

    public func createSession(_ session: SessionRecord) async throws {
        try await writer.run(insert(session))
    }

    public func session(tokenHash: [UInt8], now: Date) async throws -> (SessionRecord, Account)? {
        guard
            let row = try await reader.first(
                .prepared(
                    as: SessionByToken.self,
                    """
                    SELECT s.token_hash, s.account_id AS session_account, s.created_at AS session_created, s.expires_at, s.user_agent, s.ip_address,
                           s.method, s.credential_id AS session_credential, s.last_seen_at, \(sql: Self.sessionAccountColumns)
                    FROM sessions s JOIN accounts a ON a.tenant_id = s.tenant_id AND a.id = s.account_id
                    WHERE s.tenant_id = \(tenant) AND s.token_hash = \(tokenHash) AND s.expires_at > \(now) AND a.disabled = \(false)
                    """))
        else { return nil }
        let session = try SessionRecord(
            row: row, accountIDColumn: "session_account", createdAtColumn: "session_created", credentialColumn: "session_credential")
        return (session, try Account(row: row))
    }

    public func sessions(accountID: UUID, now: Date) async throws -> [SessionRecord] {
        try await reader.rows(
            "SELECT * FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND expires_at > \(now) ORDER BY created_at DESC, token_hash"
        ).map { try SessionRecord(row: $0) }
    }

    public func revokeSession(tokenHash: [UInt8]) async throws {
        try await writer.run("DELETE FROM sessions WHERE tenant_id = \(tenant) AND token_hash = \(tokenHash)")
    }

    public func rebindSession(tokenHash: [UInt8], credentialID: [UInt8]) async throws {
        try await writer.run(
            "UPDATE sessions SET credential_id = \(credentialID) WHERE tenant_id = \(tenant) AND token_hash = \(tokenHash)")
    }

    public func revokeSessions(accountID: UUID, except tokenHash: [UInt8]?, audit: [AuditEvent]) async throws -> Int {
        try await transaction { [self] db in
            let revoked = try await db.run(
                "DELETE FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND token_hash <> \(tokenHash ?? []) RETURNING 1"
            )
            for event in audit { try await db.execute(insert(event)) }
            return revoked
        }
    }

    public func recordSignIn(accountID: UUID, session: SessionRecord, audit: [AuditEvent], revokeOtherSessions: Bool) async throws {
        try await transaction { [self] db in
            // The account row first, as every sign-in and an account's deletion lock it (a
            // deletion then deletes the sessions): the other order could deadlock on PostgreSQL.
            try await db.execute(
                "UPDATE accounts SET last_sign_in_at = \(session.createdAt) WHERE tenant_id = \(tenant) AND id = \(accountID)")
            if revokeOtherSessions {
                try await db.execute("DELETE FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID)")
            }
            try await db.execute(insert(session))
            for event in audit { try await db.execute(insert(event)) }
        }
    }

    public func touchSession(tokenHash: [UInt8], at time: Date) async throws {
        try await writer.run(
            .prepared(
                as: TouchSession.self,
                """
                UPDATE sessions SET last_seen_at = \(time)
                WHERE tenant_id = \(tenant) AND token_hash = \(tokenHash) AND (last_seen_at IS NULL OR last_seen_at < \(time.addingTimeInterval(-60)))
                """))
    }
}
