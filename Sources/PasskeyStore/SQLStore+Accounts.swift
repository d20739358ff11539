import Foundation

/// Accounts: found by ID, username, user handle or external ID; created (with their first passkey
/// and session, or by an app that trusts passkeyd, or imported with a password hash), listed,
/// disabled, re-keyed; their passwords.
extension SQLStore {
    public func account(id: UUID) async throws -> Account? {
        try await reader.first("SELECT * FROM accounts WHERE tenant_id = \(tenant) AND id = \(id)").map { try Account(row: $0) }
    }

    public func usernames(accountIDs: Set<UUID>) async throws -> [UUID: String] {
        var names: [UUID: String] = [:]
        let ids = Array(accountIDs)
        // One statement per 500 IDs (a page of audit lines names at most a few hundred accounts;
        // SQLite takes up to 32766 values a statement, PostgreSQL 65535).
        for start in stride(from: 0, to: ids.count, by: 500) {
            var sql: SQL = "SELECT id, username FROM accounts WHERE tenant_id = \(tenant) AND id IN (\(ids[start])"
            for id in ids[(start + 1)..<min(start + 500, ids.count)] { sql = sql.appending(", \(id)") }
            for row in try await reader.rows(sql.appending(")")) { names[try row.id("id")] = try row.text("username") }
        }
        return names
    }

    public func account(username: String) async throws -> Account? {
        try await reader.first(
            .prepared(
                as: AccountByUsername.self,
                "SELECT \(sql: Self.accountColumns) FROM accounts WHERE tenant_id = \(tenant) AND username_key = \(Account.key(for: username))"
            )
        ).map { try Account(row: $0) }
    }

    public func account(userHandle: [UInt8]) async throws -> Account? {
        try await reader.first("SELECT * FROM accounts WHERE tenant_id = \(tenant) AND user_handle = \(userHandle)").map {
            try Account(row: $0)
        }
    }

    func insert(_ account: Account) -> SQL {
        """
        INSERT INTO accounts (tenant_id, id, username, username_key, display_name, user_handle, created_at, disabled, last_sign_in_at, password_hash,
                              display_name_key)
        VALUES (\(tenant), \(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                \(account.userHandle), \(account.createdAt), \(account.disabled), \(account.lastSignInAt), \(account.passwordHash),
                \(AccountSearch.key(account.displayName)))
        """
    }

    public func createAccount(_ account: Account, passkey: Passkey, session: SessionRecord?, audit: [AuditEvent]) async throws {
        let inserts = [insert(account), insert(passkey)] + (session.map { [insert($0)] } ?? []) + audit.map(insert)
        if dialect == .postgres {
            // One statement of data-modifying CTEs: atomic on its own, one round trip instead of
            // a transaction of six (PostgreSQL checks the passkey's and the session's foreign
            // keys at the end of the statement, when the account row is there).
            var sql: SQL = "WITH "
            for (index, insert) in inserts.enumerated() {
                sql = sql.appending("\(sql: SQLFragment(text: index == 0 ? "" : ", "))w\(sql: SQLFragment(text: "\(index)")) AS (")
                    .appending(insert).appending(")")
            }
            // One shape is prepared: the sign-up's (a session and one audit line).
            let statement = sql.appending(" SELECT 1")
            try await writer.run(session != nil && audit.count == 1 ? statement.prepared(as: CreateAccount.self) : statement)
            return
        }
        try await transaction { [self] db in
            for insert in inserts { try await db.execute(insert) }
        }
    }

    public func accounts(after afterUsername: String?, limit: Int) async throws -> [Account] {
        try await reader.rows(
            "SELECT * FROM accounts WHERE tenant_id = \(tenant) AND username_key > \(afterUsername.map(Account.key(for:)) ?? "") ORDER BY username_key LIMIT \(limit)"
        ).map { try Account(row: $0) }
    }

    public func setDisabled(accountID: UUID, disabled: Bool, audit: [AuditEvent]) async throws -> Int? {
        try await transaction { [self] db in
            guard
                try await db.run("UPDATE accounts SET disabled = \(disabled) WHERE tenant_id = \(tenant) AND id = \(accountID) RETURNING 1")
                    == 1
            else {
                return nil
            }
            // Disabling ends every session at once.
            let revoked =
                disabled
                ? try await db.run("DELETE FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) RETURNING 1") : 0
            for event in audit { try await db.execute(insert(event)) }
            return revoked
        }
    }

    public func rekeyUsernames() async throws -> [UsernameCollision] {
        let dialect = self.dialect
        return try await upkeepTransaction { [self] db in
            // No sign-up may slip in between the read and the updates.
            if dialect == .postgres { try await db.execute("LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE") }
            // Upkeep of every tenant's accounts (run once per release that changes the key);
            // usernames collide only within a tenant.
            let accounts = try await db.rows(
                "SELECT tenant_id, id, username, username_key FROM accounts ORDER BY tenant_id, created_at, id"
            )
            .map { row in
                (
                    tenant: try row.text("tenant_id"), id: try row.id("id"), username: try row.text("username"),
                    key: try row.text("username_key")
                )
            }
            var collisions: [UsernameCollision] = []
            for (tenant, group) in Dictionary(grouping: accounts, by: \.tenant).sorted(by: { $0.key < $1.key }) {
                let plan = UsernameRekeying.plan(group.map { (id: $0.id, username: $0.username, key: $0.key) })
                for change in plan.changes {
                    try await db.execute(
                        "UPDATE accounts SET username_key = \(change.key) WHERE tenant_id = \(tenant) AND id = \(change.id)")
                }
                collisions += plan.collisions
            }
            try await Self.rekeySearchKeys(db)
            return collisions
        }
    }

    // MARK: Passwords

    /// Each inserted account gets its audit line (`account_imported`, metric `import_password`,
    /// at the account's `createdAt`) in the same transaction.
    public func importAccounts(_ rows: [(Account, String)]) async throws -> [Bool] {
        try await transaction { [self] db in
            var inserted: [Bool] = []
            for (account, hash) in rows {
                let added = try await db.run(
                    """
                    INSERT INTO accounts (tenant_id, id, username, username_key, display_name, user_handle, created_at, disabled, password_hash,
                                          display_name_key)
                    VALUES (\(tenant), \(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                            \(account.userHandle), \(account.createdAt), \(false), \(hash), \(AccountSearch.key(account.displayName)))
                    ON CONFLICT (tenant_id, username_key) DO NOTHING RETURNING 1
                    """)
                inserted.append(added == 1)
                if added == 1 {
                    try await db.execute(
                        insert(
                            AuditEvent(
                                time: account.createdAt, kind: .accountImported, accountID: account.id, userAgent: "passkeyd import",
                                metric: "import_password")))
                }
            }
            return inserted
        }
    }

    public func removePassword(accountID: UUID) async throws -> Bool {
        let forUpdate = dialect.forUpdate
        return try await transaction { [self] db in
            // The same account lock as deletePasskey: the EXISTS below then sees committed passkeys only.
            try await db.execute("SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID)\(sql: forUpdate)")
            return try await db.run(
                """
                UPDATE accounts SET password_hash = NULL
                WHERE tenant_id = \(tenant) AND id = \(accountID) AND password_hash IS NOT NULL AND EXISTS (SELECT 1 FROM passkeys WHERE tenant_id = \(tenant) AND account_id = \(accountID))
                RETURNING 1
                """) == 1
        }
    }

    public func changePassword(accountID: UUID, hash: String, keepSession tokenHash: [UInt8]?) async throws -> Bool {
        try await transaction { [self] db in
            let changed = try await db.run(
                "UPDATE accounts SET password_hash = \(hash) WHERE tenant_id = \(tenant) AND id = \(accountID) AND password_hash IS NOT NULL RETURNING 1"
            )
            guard changed == 1 else { return false }
            try await db.execute(
                "DELETE FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND token_hash <> \(tokenHash ?? [])")
            return true
        }
    }

    // MARK: Apps that trust passkeyd

    public func account(externalID: String) async throws -> Account? {
        try await reader.first("SELECT * FROM accounts WHERE tenant_id = \(tenant) AND external_id = \(externalID)").map {
            try Account(row: $0)
        }
    }

    public func createAccount(_ account: Account, audit: [AuditEvent]) async throws {
        try await transaction { [self] db in
            try await db.execute(
                """
                INSERT INTO accounts (tenant_id, id, username, username_key, display_name, user_handle, created_at, disabled, password_hash, external_id,
                                      display_name_key, external_id_key)
                VALUES (\(tenant), \(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                        \(account.userHandle), \(account.createdAt), \(account.disabled), \(account.passwordHash), \(account.externalID),
                        \(AccountSearch.key(account.displayName)), \(account.externalID.map(AccountSearch.key)))
                """)
            for event in audit { try await db.execute(insert(event)) }
        }
    }

    public func setExternalID(accountID: UUID, externalID: String?) async throws -> Bool {
        try await writer.run(
            """
            UPDATE accounts SET external_id = \(externalID), external_id_key = \(externalID.map(AccountSearch.key))
            WHERE tenant_id = \(tenant) AND id = \(accountID) RETURNING 1
            """) == 1
    }
}
