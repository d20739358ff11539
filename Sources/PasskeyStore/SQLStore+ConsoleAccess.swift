import Foundation

/// Who may enter the operator's console: roles (never leaving it without an `admin`), the first
/// admin's bootstrap token (single use), and console sessions (idle and absolute expiry, the
/// last passkey verification, the CSRF token's hash).
extension SQLStore {
    // MARK: Roles

    public func adminRole(accountID: UUID) async throws -> AdminRole? {
        try await reader.first("SELECT role FROM admin_roles WHERE tenant_id = \(tenant) AND account_id = \(accountID)").flatMap {
            AdminRole(rawValue: try $0.text("role"))
        }
    }

    public func adminGrants() async throws -> [AdminGrant] {
        // Driven by the few roles: the IN names accounts' primary keys. Without it SQLite (no
        // statistics on a new admin_roles) reads every account in username order to skip the
        // sort: 0.4 to 6 s on 1M accounts, on every account search (scripts/bench_console.py).
        try await reader.rows(
            """
            SELECT r.role AS r_role, r.granted_at AS r_granted_at, r.granted_by AS r_granted_by, \(sql: Self.sessionAccountColumns)
            FROM admin_roles r JOIN accounts a ON a.tenant_id = r.tenant_id AND a.id = r.account_id
                AND a.id IN (SELECT account_id FROM admin_roles WHERE tenant_id = \(tenant))
            WHERE r.tenant_id = \(tenant)
            ORDER BY a.username_key
            """
        ).compactMap { row in
            // A role this version does not know is no role (never read as another one).
            guard let role = AdminRole(rawValue: try row.text("r_role")) else { return nil }
            return AdminGrant(
                account: try Account(row: row), role: role, grantedAt: try row.date("r_granted_at"), grantedBy: try row.text("r_granted_by")
            )
        }
    }

    public func adminCount() async throws -> Int {
        try await reader.count(
            "SELECT COUNT(*) AS n FROM admin_roles WHERE tenant_id = \(tenant) AND role IN (\(AdminRole.admin.rawValue), \(AdminRole.serverOperator.rawValue))"
        )
    }

    public func setAdminRole(accountID: UUID, role: AdminRole?, by grantedBy: String, at time: Date, audit: [AuditEvent]) async throws
        -> AdminRoleChange
    {
        let forUpdate = dialect.forUpdate
        return try await transaction { [self] db in
            // The last-admin guard: every admin row is locked first (PostgreSQL; SQLite has one
            // writer), so of two demotions racing for the last two admins the second waits, then
            // finds the row the first changed no longer an admin's, and counts one.
            let admins = try await lockedAdmins(db, forUpdate: forUpdate)
            guard try await db.run("SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID)") == 1 else {
                return .accountNotFound
            }
            let current = try await db.first(
                "SELECT role FROM admin_roles WHERE tenant_id = \(tenant) AND account_id = \(accountID)\(sql: forUpdate)"
            ).map {
                try $0.text("role")
            }
            if current == role?.rawValue { return .changed }
            if admins.contains(accountID) && role?.changes != true && admins.count <= 1 { return .lastAdmin }
            if let role {
                try await db.execute(
                    """
                    INSERT INTO admin_roles (tenant_id, account_id, role, granted_at, granted_by)
                    VALUES (\(tenant), \(accountID), \(role.rawValue), \(time), \(grantedBy))
                    ON CONFLICT (tenant_id, account_id) DO UPDATE SET role = excluded.role, granted_at = excluded.granted_at, granted_by = excluded.granted_by
                    """)
            } else {
                try await db.execute("DELETE FROM admin_roles WHERE tenant_id = \(tenant) AND account_id = \(accountID)")
            }
            // What a console session may do changed with the role: it ends.
            if current != nil {
                try await db.execute("DELETE FROM admin_sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID)")
            }
            for event in audit { try await db.execute(insert(event)) }
            return .changed
        }
    }

    /// The accounts holding `admin`, their rows locked (PostgreSQL; SQLite has one writer) in
    /// one order: the first step of every change the last-admin guard covers.
    func lockedAdmins(_ db: any SQLConnection, forUpdate: SQLFragment) async throws -> [UUID] {
        try await db.rows(
            "SELECT account_id FROM admin_roles WHERE tenant_id = \(tenant) AND role IN (\(AdminRole.admin.rawValue), \(AdminRole.serverOperator.rawValue)) ORDER BY account_id\(sql: forUpdate)"
        ).map { try $0.id("account_id") }
    }

    // MARK: Bootstrap

    public func saveAdminBootstrapToken(hash: [UInt8], createdAt: Date, expiresAt: Date, audit: [AuditEvent]) async throws {
        try await transaction { [self] db in
            try await db.execute(
                "INSERT INTO admin_bootstrap (tenant_id, token_hash, created_at, expires_at) VALUES (\(tenant), \(hash), \(createdAt), \(expiresAt))"
            )
            for event in audit { try await db.execute(insert(event)) }
        }
    }

    /// A token is live while it is unused and unexpired and no account holds `admin` (a
    /// bootstrap link opens a console that has no admin; once one exists, roles are granted by
    /// admins).
    public func adminBootstrapTokenIsLive(hash: [UInt8], now: Date) async throws -> Bool {
        try await reader.run(
            """
            SELECT 1 FROM admin_bootstrap WHERE tenant_id = \(tenant) AND token_hash = \(hash) AND used_at IS NULL AND expires_at > \(now)
            AND NOT EXISTS (SELECT 1 FROM admin_roles WHERE tenant_id = \(tenant) AND role IN (\(AdminRole.admin.rawValue), \(AdminRole.serverOperator.rawValue)))
            """) == 1
    }

    /// Also `false` once an account holds `admin` (see ``adminBootstrapTokenIsLive(hash:now:)``).
    public func redeemAdminBootstrapToken(hash: [UInt8], accountID: UUID, now: Date, audit: [AuditEvent]) async throws -> Bool {
        let dialect = self.dialect
        return try await transaction { [self] db in
            // Redemptions take turns (PostgreSQL; SQLite has one writer), so of two tokens
            // redeemed at once (two instances each printed one) only the first makes an admin:
            // the second's statement runs after the first commits and sees its admin.
            if dialect == .postgres { try await db.execute("SELECT pg_advisory_xact_lock(7270436)") }
            // Single use: the UPDATE whose row count is 1 took the token.
            let taken = try await db.run(
                """
                UPDATE admin_bootstrap SET used_at = \(now), used_by = \(accountID.uuidString.lowercased())
                WHERE tenant_id = \(tenant) AND token_hash = \(hash) AND used_at IS NULL AND expires_at > \(now)
                AND NOT EXISTS (SELECT 1 FROM admin_roles WHERE tenant_id = \(tenant) AND role IN (\(AdminRole.admin.rawValue), \(AdminRole.serverOperator.rawValue)))
                RETURNING 1
                """)
            guard taken == 1 else { return false }
            try await db.execute(
                """
                INSERT INTO admin_roles (tenant_id, account_id, role, granted_at, granted_by)
                VALUES (\(tenant), \(accountID), \(AdminRole.admin.rawValue), \(now), \("bootstrap"))
                ON CONFLICT (tenant_id, account_id) DO UPDATE SET role = excluded.role, granted_at = excluded.granted_at, granted_by = excluded.granted_by
                """)
            for event in audit { try await db.execute(insert(event)) }
            return true
        }
    }

    // MARK: Console sessions

    public func createAdminSession(_ session: AdminSessionRecord) async throws {
        try await writer.run(
            """
            INSERT INTO admin_sessions (tenant_id, token_hash, account_id, created_at, expires_at, idle_expires_at, verified_at, csrf_hash,
                                        ip_address, user_agent)
            VALUES (\(tenant), \(session.tokenHash), \(session.accountID), \(session.createdAt), \(session.expiresAt), \(session.idleExpiresAt),
                    \(session.verifiedAt), \(session.csrfHash), \(session.ipAddress), \(session.userAgent))
            """)
    }

    public func adminSession(tokenHash: [UInt8], now: Date, idleUntil: Date) async throws -> (AdminSessionRecord, Account, AdminRole)? {
        try await transaction { [self] db in
            // Live, of an enabled account that holds a role: its idle expiry moves on.
            let touched = try await db.run(
                """
                UPDATE admin_sessions SET idle_expires_at = CASE WHEN expires_at < \(idleUntil) THEN expires_at ELSE \(idleUntil) END
                WHERE tenant_id = \(tenant) AND token_hash = \(tokenHash) AND expires_at > \(now) AND idle_expires_at > \(now)
                AND EXISTS (SELECT 1 FROM accounts a WHERE a.tenant_id = \(tenant) AND a.id = admin_sessions.account_id AND a.disabled = \(false))
                AND EXISTS (SELECT 1 FROM admin_roles r WHERE r.tenant_id = \(tenant) AND r.account_id = admin_sessions.account_id)
                RETURNING 1
                """)
            guard touched == 1,
                let row = try await db.first(
                    """
                    SELECT s.token_hash AS s_token_hash, s.account_id AS s_account_id, s.created_at AS s_created_at,
                           s.expires_at AS s_expires_at, s.idle_expires_at AS s_idle_expires_at, s.verified_at AS s_verified_at,
                           s.csrf_hash AS s_csrf_hash, s.ip_address AS s_ip_address, s.user_agent AS s_user_agent, r.role AS r_role,
                           \(sql: Self.sessionAccountColumns)
                    FROM admin_sessions s JOIN accounts a ON a.tenant_id = s.tenant_id AND a.id = s.account_id
                    JOIN admin_roles r ON r.tenant_id = s.tenant_id AND r.account_id = s.account_id
                    WHERE s.tenant_id = \(tenant) AND s.token_hash = \(tokenHash) AND a.disabled = \(false)
                    """),
                let role = AdminRole(rawValue: try row.text("r_role"))
            else { return nil }
            return (try AdminSessionRecord(row: PrefixedRow(row: row, prefix: "s_")), try Account(row: row), role)
        }
    }

    public func verifyAdminSession(tokenHash: [UInt8], at time: Date, csrfHash: [UInt8]) async throws -> Bool {
        try await writer.run(
            """
            UPDATE admin_sessions SET verified_at = \(time), csrf_hash = \(csrfHash)
            WHERE tenant_id = \(tenant) AND token_hash = \(tokenHash) AND expires_at > \(time) AND idle_expires_at > \(time)
            RETURNING 1
            """) == 1
    }

    public func revokeAdminSession(tokenHash: [UInt8]) async throws {
        try await writer.run("DELETE FROM admin_sessions WHERE tenant_id = \(tenant) AND token_hash = \(tokenHash)")
    }

    public func revokeAdminSessions(accountID: UUID) async throws -> Int {
        try await writer.run("DELETE FROM admin_sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) RETURNING 1")
    }

    /// `sweepExpired`'s share (upkeep: every tenant's): console sessions past either expiry, and bootstrap tokens used or
    /// expired more than a day ago (kept a day so a second use reads as "used", not "unknown").
    static func sweepConsole(_ db: any SQLConnection, now: Date) async throws -> Int {
        let dayAgo = now.addingTimeInterval(-86_400)
        var removed = try await db.run("DELETE FROM admin_sessions WHERE expires_at <= \(now) OR idle_expires_at <= \(now) RETURNING 1")
        removed += try await db.run("DELETE FROM admin_bootstrap WHERE expires_at <= \(dayAgo) OR used_at <= \(dayAgo) RETURNING 1")
        return removed
    }
}

extension AdminSessionRecord {
    init(row: some StoreRow) throws {
        self.init(
            tokenHash: try row.bytes("token_hash"), accountID: try row.id("account_id"), createdAt: try row.date("created_at"),
            expiresAt: try row.date("expires_at"), idleExpiresAt: try row.date("idle_expires_at"), verifiedAt: try row.date("verified_at"),
            csrfHash: try row.bytes("csrf_hash"), ipAddress: try row.optionalText("ip_address"),
            userAgent: try row.optionalText("user_agent"))
    }
}
