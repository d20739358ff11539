import Crypto
import Foundation

/// The store's logic, written once for both databases: every statement below runs on SQLite
/// and on PostgreSQL (`SQLiteStore` and `PostgresStore` only supply an ``SQLEngine``). Each
/// method is one statement or one transaction; counters move by compare-and-set and challenges
/// are taken with `DELETE … RETURNING`, so racing requests (and racing instances) stay correct.
/// Where the dialects differ the statement says so (`dialect.forUpdate`); the schemas are the
/// one place written twice (`SQLiteSchema`, `PostgresSchema`).
public class SQLStore: PasskeyStore, @unchecked Sendable {
    let engine: any SQLEngine
    /// Most time a migration may take (several instances starting together wait for the one
    /// that migrates); nil: the engine's ordinary deadline.
    let migrationTimeout: Duration?

    init(engine: any SQLEngine, migrationTimeout: Duration? = nil) {
        self.engine = engine
        self.migrationTimeout = migrationTimeout
    }

    var reader: any SQLConnection { engine.reader }
    var writer: any SQLConnection { engine.writer }
    var dialect: SQLDialect { engine.dialect }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await engine.transaction(timeout: nil, body)
    }

    // MARK: Schema

    public func migrate() async throws -> [Int] { try await migrate(through: nil) }

    /// The migrations not yet applied, up to `last` (all when nil): tests build a database as an
    /// older version left it.
    func migrate(through last: Int?) async throws -> [Int] {
        let dialect = self.dialect
        let done = try await engine.transaction(timeout: migrationTimeout) { db in
            // Several instances may start at once: one migrates, the others wait and find it done.
            if dialect == .postgres { try await db.execute("SELECT pg_advisory_xact_lock(7270417)") }
            try await db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)")
            let applied = Set(try await db.rows("SELECT version FROM schema_migrations").map { Int(try $0.integer("version")) })
            var done: [Int] = []
            for migration in dialect.migrations where !applied.contains(migration.version) && migration.version <= last ?? Int.max {
                for statement in migration.statements { try await db.execute(SQL(unsafeText: statement)) }
                try await db.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (\(migration.version), \(Date()))")
                done.append(migration.version)
            }
            return done
        }
        if !done.isEmpty { engine.schemaChanged() }
        return done
    }

    public func schemaVersion() async throws -> Int {
        guard try await reader.count(dialect.migrationsTableExists) > 0 else { return 0 }
        return try await reader.count("SELECT COALESCE(MAX(version), 0) AS n FROM schema_migrations")
    }

    public func ping() async throws {
        try await reader.run("SELECT 1")
    }

    // MARK: Accounts

    public func account(id: UUID) async throws -> Account? {
        try await reader.first("SELECT * FROM accounts WHERE id = \(id)").map { try Account(row: $0) }
    }

    public func account(username: String) async throws -> Account? {
        try await reader.first(
            .prepared("SELECT \(sql: Self.accountColumns) FROM accounts WHERE username_key = \(Account.key(for: username))")
        ).map { try Account(row: $0) }
    }

    public func account(userHandle: [UInt8]) async throws -> Account? {
        try await reader.first("SELECT * FROM accounts WHERE user_handle = \(userHandle)").map { try Account(row: $0) }
    }

    private static func insert(_ account: Account) -> SQL {
        """
        INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, last_sign_in_at, password_hash)
        VALUES (\(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                \(account.userHandle), \(account.createdAt), \(account.disabled), \(account.lastSignInAt), \(account.passwordHash))
        """
    }

    public func createAccount(_ account: Account, passkey: Passkey, session: SessionRecord?, audit: [AuditEvent]) async throws {
        let inserts = [Self.insert(account), Self.insert(passkey)] + (session.map { [Self.insert($0)] } ?? []) + audit.map(Self.insert)
        if dialect == .postgres {
            // One statement of data-modifying CTEs: atomic on its own, one round trip instead of
            // a transaction of six (PostgreSQL checks the passkey's and the session's foreign
            // keys at the end of the statement, when the account row is there).
            var sql: SQL = "WITH "
            for (index, insert) in inserts.enumerated() {
                sql = sql.appending("\(sql: SQLFragment(text: index == 0 ? "" : ", "))w\(sql: SQLFragment(text: "\(index)")) AS (")
                    .appending(insert).appending(")")
            }
            try await writer.run(sql.appending(" SELECT 1").prepared())
            return
        }
        try await transaction { db in
            for insert in inserts { try await db.execute(insert) }
        }
    }

    public func accounts(after afterUsername: String?, limit: Int) async throws -> [Account] {
        try await reader.rows(
            "SELECT * FROM accounts WHERE username_key > \(afterUsername.map(Account.key(for:)) ?? "") ORDER BY username_key LIMIT \(limit)"
        ).map { try Account(row: $0) }
    }

    public func setDisabled(accountID: UUID, disabled: Bool, audit: [AuditEvent]) async throws -> Int? {
        try await transaction { db in
            guard try await db.run("UPDATE accounts SET disabled = \(disabled) WHERE id = \(accountID) RETURNING 1") == 1 else {
                return nil
            }
            // Disabling ends every session at once.
            let revoked = disabled ? try await db.run("DELETE FROM sessions WHERE account_id = \(accountID) RETURNING 1") : 0
            for event in audit { try await db.execute(Self.insert(event)) }
            return revoked
        }
    }

    public func rekeyUsernames() async throws -> [UsernameCollision] {
        let dialect = self.dialect
        return try await transaction { db in
            // No sign-up may slip in between the read and the updates.
            if dialect == .postgres { try await db.execute("LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE") }
            let accounts = try await db.rows("SELECT id, username, username_key FROM accounts ORDER BY created_at, id").map { row in
                (id: try row.id("id"), username: try row.text("username"), key: try row.text("username_key"))
            }
            let plan = UsernameRekeying.plan(accounts)
            for change in plan.changes { try await db.execute("UPDATE accounts SET username_key = \(change.key) WHERE id = \(change.id)") }
            return plan.collisions
        }
    }

    public func statistics(now: Date, activeSince: Date) async throws -> StoreStatistics {
        var stats = StoreStatistics()
        if let row = try await reader.first(
            """
            SELECT (SELECT COUNT(*) FROM accounts) AS accounts,
                   (SELECT COUNT(*) FROM accounts WHERE disabled = \(true)) AS disabled,
                   (SELECT COUNT(*) FROM sessions WHERE expires_at > \(now)) AS sessions,
                   (SELECT COUNT(*) FROM challenges WHERE expires_at > \(now)) AS challenges,
                   (SELECT COUNT(DISTINCT account_id) FROM passkeys) AS with_passkey,
                   (SELECT COUNT(*) FROM accounts WHERE last_sign_in_at >= \(activeSince)) AS active,
                   (SELECT COUNT(*) FROM accounts a WHERE a.last_sign_in_at >= \(activeSince)
                        AND EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id)) AS active_with_passkey
            """)
        {
            stats.accounts = Int(try row.integer("accounts"))
            stats.disabledAccounts = Int(try row.integer("disabled"))
            stats.liveSessions = Int(try row.integer("sessions"))
            stats.openChallenges = Int(try row.integer("challenges"))
            stats.accountsWithPasskey = Int(try row.integer("with_passkey"))
            stats.activeAccounts = Int(try row.integer("active"))
            stats.activeAccountsWithPasskey = Int(try row.integer("active_with_passkey"))
        }
        for row in try await reader.rows("SELECT aaguid, COUNT(*) AS n FROM passkeys GROUP BY aaguid") {
            let count = Int(try row.integer("n"))
            stats.passkeysByAAGUID[try row.text("aaguid")] = count
            stats.passkeys += count
        }
        return stats
    }

    // MARK: Passkeys

    private static func insert(_ passkey: Passkey) -> SQL {
        """
        INSERT INTO passkeys (credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                              user_verified, attestation_format, attestation_trusted, name, created_at, last_used_at, counter_anomalies)
        VALUES (\(passkey.credentialID), \(passkey.accountID), \(passkey.publicKey), \(Int64(passkey.signCount)), \(passkey.aaguid),
                \(StoreValues.encodeList(passkey.transports)), \(passkey.backupEligible), \(passkey.backedUp), \(passkey.userVerified),
                \(passkey.attestationFormat), \(passkey.attestationTrusted), \(passkey.name), \(passkey.createdAt), \(passkey.lastUsedAt),
                \(passkey.counterAnomalies))
        """
    }

    public func addPasskey(_ passkey: Passkey) async throws {
        try await writer.run(Self.insert(passkey))
    }

    public func passkey(credentialID: [UInt8]) async throws -> Passkey? {
        try await reader.first("SELECT * FROM passkeys WHERE credential_id = \(credentialID)").map { try Passkey(row: $0) }
    }

    public func passkeys(accountID: UUID) async throws -> [Passkey] {
        try await reader.rows(
            .prepared("SELECT \(sql: Self.passkeyColumns) FROM passkeys WHERE account_id = \(accountID) ORDER BY created_at, credential_id")
        ).map { try Passkey(row: $0) }
    }

    // Column lists written once. Reads that PostgreSQL prepares name their columns: a prepared
    // statement's result shape is fixed, so `*` would break once a migration adds a column.
    private static let accountColumns = SQLFragment(text: Account.columns.joined(separator: ", "))
    private static let passkeyColumns = SQLFragment(text: Passkey.columns.joined(separator: ", "))
    /// A passkey's columns in a join, as `p.<name>`.
    private static let joinedPasskeyColumns = SQLFragment(text: Passkey.columns.map { "p.\($0)" }.joined(separator: ", "))
    /// An account's columns beside a passkey's in one row: its `created_at` renamed.
    private static let joinedAccountColumns = SQLFragment(
        text: Account.columns.map { $0 == "created_at" ? "a.created_at AS account_created_at" : "a.\($0)" }.joined(separator: ", "))
    /// An account's columns beside a session's (whose own clashing columns are renamed).
    private static let sessionAccountColumns = SQLFragment(text: Account.columns.map { "a.\($0)" }.joined(separator: ", "))

    public func passkeyAndAccount(credentialID: [UInt8]) async throws -> (Passkey, Account)? {
        guard
            let row = try await reader.first(
                """
                SELECT \(sql: Self.joinedPasskeyColumns), \(sql: Self.joinedAccountColumns)
                FROM passkeys p JOIN accounts a ON a.id = p.account_id WHERE p.credential_id = \(credentialID)
                """)
        else { return nil }
        return (try Passkey(row: row), try Account(row: row, createdAt: "account_created_at"))
    }

    public func completeSignIn(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> SignInCompletion {
        if dialect == .postgres {
            return try await completeSignInInOneStatement(
                challenge: challenge, credentialID: credentialID, previousSignCount: previousSignCount, signCount: signCount,
                backedUp: backedUp, counterAnomaly: counterAnomaly, at: time, session: session, audit: audit)
        }
        return try await transaction { db in
            // Single use: of two answers to one challenge, the first to delete it goes on.
            if let challenge,
                try await db.run("DELETE FROM challenges WHERE challenge_hash = \(ChallengeHash.of(challenge)) RETURNING 1") != 1
            {
                return .challengeTaken
            }
            // Compare-and-set: of two sign-ins racing with one counter value, one moves it.
            let moved = try await db.run(
                """
                UPDATE passkeys SET sign_count = \(Int64(signCount)), backed_up = \(backedUp), last_used_at = \(time),
                       counter_anomalies = counter_anomalies + \(counterAnomaly ? 1 : 0)
                WHERE credential_id = \(credentialID) AND sign_count = \(Int64(previousSignCount))
                RETURNING 1
                """)
            guard moved == 1 else { return .counterRaced }
            try await db.execute("UPDATE accounts SET last_sign_in_at = \(time) WHERE id = \(session.accountID)")
            try await db.execute(Self.insert(session))
            for event in audit { try await db.execute(Self.insert(event)) }
            return .signedIn
        }
    }

    /// PostgreSQL: the whole of ``completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)``
    /// as one statement of data-modifying CTEs (atomic on its own, one round trip instead of a
    /// transaction of seven). Each step runs only if the one before it changed a row: the
    /// challenge is deleted first (a concurrent answer waits on its row lock, then finds it
    /// gone), the counter moves only from `previousSignCount` (re-checked on the newest row
    /// version under READ COMMITTED), and the session and audit lines are written only if it
    /// moved. Values in SELECT lists carry casts, since a NULL bind has no type of its own.
    private func completeSignInInOneStatement(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> SignInCompletion {
        var sql: SQL =
            if let challenge {
                "WITH taken AS (DELETE FROM challenges WHERE challenge_hash = \(ChallengeHash.of(challenge)) RETURNING 1), "
            } else {
                "WITH taken AS (SELECT 1), "
            }
        sql = sql.appending(
            """
            moved AS (
                UPDATE passkeys SET sign_count = \(Int64(signCount)), backed_up = \(backedUp), last_used_at = \(time),
                       counter_anomalies = counter_anomalies + \(counterAnomaly ? 1 : 0)
                WHERE credential_id = \(credentialID) AND sign_count = \(Int64(previousSignCount)) AND EXISTS (SELECT 1 FROM taken)
                RETURNING 1),
            signed AS (UPDATE accounts SET last_sign_in_at = \(time) WHERE id = \(session.accountID) AND EXISTS (SELECT 1 FROM moved)),
            started AS (
                INSERT INTO sessions (token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
                SELECT \(session.tokenHash)::bytea, \(session.accountID)::uuid, \(session.createdAt)::bigint, \(session.expiresAt)::bigint,
                       \(session.userAgent)::text, \(session.ipAddress)::text, \(session.method)::text, \(session.credentialID)::bytea
                WHERE EXISTS (SELECT 1 FROM moved))
            """)
        for (index, event) in audit.enumerated() {
            sql = sql.appending(
                """
                , \(sql: SQLFragment(text: "audit\(index)")) AS (
                    INSERT INTO audit_events (time, kind, account_id, credential_id, ip_address, user_agent, detail)
                    SELECT \(event.time)::bigint, \(event.kind)::text, \(event.accountID)::uuid, \(event.credentialID)::bytea,
                           \(event.ipAddress)::text, \(event.userAgent)::text, \(event.detail)::text
                    WHERE EXISTS (SELECT 1 FROM moved))
                """)
        }
        sql = sql.appending(" SELECT (SELECT COUNT(*) FROM taken) AS taken, (SELECT COUNT(*) FROM moved) AS moved")
        guard let row = try await writer.first(sql.prepared()) else { throw StoreError(.unavailable, "no result") }
        if try row.optionalInteger("taken") != 1 { return .challengeTaken }
        if try row.optionalInteger("moved") != 1 { return .counterRaced }
        return .signedIn
    }

    public func renamePasskey(accountID: UUID, credentialID: [UInt8], name: String) async throws -> Bool {
        try await writer.run(
            "UPDATE passkeys SET name = \(name) WHERE account_id = \(accountID) AND credential_id = \(credentialID) RETURNING 1") == 1
    }

    public func deletePasskey(accountID: UUID, credentialID: [UInt8], keepSession: [UInt8]?) async throws -> PasskeyDeletion {
        let forUpdate = dialect.forUpdate
        return try await transaction { db in
            // Hold the account row (PostgreSQL; SQLite has one writer): a concurrent password
            // removal takes the same lock, so the two cannot both remove a way in.
            try await db.execute("SELECT 1 FROM accounts WHERE id = \(accountID)\(sql: forUpdate)")
            let ids = try await db.rows("SELECT credential_id FROM passkeys WHERE account_id = \(accountID)\(sql: forUpdate)").map {
                try $0.bytes("credential_id")
            }
            guard ids.contains(credentialID) else { return .notFound }
            let hasPassword = try await db.run("SELECT 1 FROM accounts WHERE id = \(accountID) AND password_hash IS NOT NULL") == 1
            guard ids.count > 1 || hasPassword else { return .lastPasskey }
            try await db.execute("DELETE FROM passkeys WHERE account_id = \(accountID) AND credential_id = \(credentialID)")
            // The sessions this passkey made end with it (but the one deleting it). They are the
            // account's: found through its sessions (no index on the credential to keep up).
            try await db.execute(
                """
                DELETE FROM sessions WHERE account_id = \(accountID) AND credential_id = \(credentialID)
                AND token_hash <> \(keepSession ?? [])
                """)
            try await db.execute(
                "UPDATE sessions SET credential_id = NULL WHERE account_id = \(accountID) AND credential_id = \(credentialID)")
            return .deleted
        }
    }

    public func revokePasskey(credentialID: [UInt8], audit: [AuditEvent]) async throws -> Bool {
        try await transaction { db in
            guard let owner = try await db.first("DELETE FROM passkeys WHERE credential_id = \(credentialID) RETURNING account_id") else {
                return false
            }
            let accountID = try owner.id("account_id")
            try await db.execute("DELETE FROM sessions WHERE account_id = \(accountID) AND credential_id = \(credentialID)")
            for event in audit { try await db.execute(Self.insert(event)) }
            return true
        }
    }

    // MARK: Passwords and recovery

    public func importAccounts(_ rows: [(Account, String)]) async throws -> [Bool] {
        try await transaction { db in
            var inserted: [Bool] = []
            for (account, hash) in rows {
                let added = try await db.run(
                    """
                    INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, password_hash)
                    VALUES (\(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                            \(account.userHandle), \(account.createdAt), \(false), \(hash))
                    ON CONFLICT (username_key) DO NOTHING RETURNING 1
                    """)
                inserted.append(added == 1)
            }
            return inserted
        }
    }

    public func removePassword(accountID: UUID) async throws -> Bool {
        let forUpdate = dialect.forUpdate
        return try await transaction { db in
            // The same account lock as deletePasskey: the EXISTS below then sees committed passkeys only.
            try await db.execute("SELECT 1 FROM accounts WHERE id = \(accountID)\(sql: forUpdate)")
            return try await db.run(
                """
                UPDATE accounts SET password_hash = NULL
                WHERE id = \(accountID) AND password_hash IS NOT NULL AND EXISTS (SELECT 1 FROM passkeys WHERE account_id = \(accountID))
                RETURNING 1
                """) == 1
        }
    }

    public func changePassword(accountID: UUID, hash: String, keepSession tokenHash: [UInt8]?) async throws -> Bool {
        try await transaction { db in
            let changed = try await db.run(
                "UPDATE accounts SET password_hash = \(hash) WHERE id = \(accountID) AND password_hash IS NOT NULL RETURNING 1")
            guard changed == 1 else { return false }
            try await db.execute("DELETE FROM sessions WHERE account_id = \(accountID) AND token_hash <> \(tokenHash ?? [])")
            return true
        }
    }

    public func recordSignIn(accountID: UUID, session: SessionRecord, audit: [AuditEvent], revokeOtherSessions: Bool) async throws {
        try await transaction { db in
            if revokeOtherSessions { try await db.execute("DELETE FROM sessions WHERE account_id = \(accountID)") }
            try await db.execute("UPDATE accounts SET last_sign_in_at = \(session.createdAt) WHERE id = \(accountID)")
            try await db.execute(Self.insert(session))
            for event in audit { try await db.execute(Self.insert(event)) }
        }
    }

    public func replaceRecoveryCodes(accountID: UUID, hashes: [[UInt8]], at time: Date) async throws {
        try await transaction { db in
            try await db.execute("DELETE FROM recovery_codes WHERE account_id = \(accountID)")
            for hash in hashes {
                try await db.execute(
                    "INSERT INTO recovery_codes (account_id, code_hash, created_at) VALUES (\(accountID), \(hash), \(time))")
            }
        }
    }

    public func useRecoveryCode(accountID: UUID, hash: [UInt8], at time: Date) async throws -> Bool {
        try await writer.run(
            """
            UPDATE recovery_codes SET used_at = \(time)
            WHERE account_id = \(accountID) AND code_hash = \(hash) AND used_at IS NULL RETURNING 1
            """) == 1
    }

    public func recoveryCodesLeft(accountID: UUID) async throws -> Int {
        try await reader.count("SELECT COUNT(*) AS n FROM recovery_codes WHERE account_id = \(accountID) AND used_at IS NULL")
    }

    public func saveRecoveryToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws {
        try await writer.run(
            "INSERT INTO recovery_tokens (token_hash, account_id, created_at, expires_at) VALUES (\(hash), \(accountID), \(createdAt), \(expiresAt))"
        )
    }

    public func takeRecoveryToken(hash: [UInt8], now: Date) async throws -> UUID? {
        guard let row = try await writer.first("DELETE FROM recovery_tokens WHERE token_hash = \(hash) RETURNING account_id, expires_at")
        else { return nil }
        guard try row.date("expires_at") > now else { return nil }
        return try row.id("account_id")
    }

    // MARK: Ceremonies

    public func saveChallenge(_ record: ChallengeRecord) async throws {
        try await writer.run(
            .prepared(
                """
                INSERT INTO challenges (challenge_hash, challenge, ceremony, account_id, pending_username, pending_display_name,
                                        pending_user_handle, pending_account_id, unknown_user, api, user_verification, conditional, state,
                                        created_at, expires_at)
                VALUES (\(ChallengeHash.of(record.challenge)), \(record.challenge), \(record.ceremony.rawValue), \(record.accountID),
                        \(record.pendingUsername), \(record.pendingDisplayName), \(record.pendingUserHandle), \(record.pendingAccountID),
                        \(record.unknownUser), \(record.api), \(record.userVerification), \(record.conditional), \(record.state),
                        \(record.createdAt), \(record.expiresAt))
                """))
    }

    public func takeChallenge(_ challenge: [UInt8]) async throws -> ChallengeRecord? {
        try await writer.first("DELETE FROM challenges WHERE challenge_hash = \(ChallengeHash.of(challenge)) RETURNING *").map {
            try ChallengeRecord(row: $0)
        }
    }

    public func challenge(_ challenge: [UInt8]) async throws -> ChallengeRecord? {
        try await reader.first("SELECT * FROM challenges WHERE challenge_hash = \(ChallengeHash.of(challenge))").map {
            try ChallengeRecord(row: $0)
        }
    }

    /// The ceremony's columns, each as `c_<name>`, written once (a sign-in's hot path).
    private static let prefixedChallengeColumns = SQLFragment(
        text: ChallengeRecord.columns.map { "c.\($0) AS c_\($0)" }.joined(separator: ", "))

    public func challengeAndPasskey(_ challenge: [UInt8], credentialID: [UInt8]) async throws -> (ChallengeRecord?, (Passkey, Account)?) {
        // The challenge's columns come back under a `c_` prefix (`PrefixedRow`), apart from
        // the passkey's and the account's; a side that is absent is all NULL.
        guard
            let row = try await reader.first(
                .prepared(
                    """
                    SELECT \(sql: Self.prefixedChallengeColumns), \(sql: Self.joinedPasskeyColumns), \(sql: Self.joinedAccountColumns)
                    FROM (SELECT 1 AS one) AS one
                    LEFT JOIN challenges c ON c.challenge_hash = \(ChallengeHash.of(challenge))
                    LEFT JOIN passkeys p ON p.credential_id = \(credentialID)
                    LEFT JOIN accounts a ON a.id = p.account_id
                    """))
        else { return (nil, nil) }
        let prefixed = PrefixedRow(row: row, prefix: "c_")
        let record = try prefixed.optionalBytes("challenge_hash") == nil ? nil : try ChallengeRecord(row: prefixed)
        let passkey =
            try row.optionalBytes("credential_id") == nil || row.optionalID("id") == nil
            ? nil : (try Passkey(row: row), try Account(row: row, createdAt: "account_created_at"))
        return (record, passkey)
    }

    public func openChallengeCount(now: Date) async throws -> Int {
        try await reader.count("SELECT COUNT(*) AS n FROM challenges WHERE expires_at > \(now)")
    }

    public func discardOldestChallenges(count: Int) async throws -> Int {
        guard count > 0 else { return 0 }
        return try await writer.run(
            """
            DELETE FROM challenges WHERE challenge_hash IN (SELECT challenge_hash FROM challenges ORDER BY expires_at LIMIT \(count))
            RETURNING 1
            """)
    }

    // MARK: Sessions

    private static func insert(_ session: SessionRecord) -> SQL {
        """
        INSERT INTO sessions (token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
        VALUES (\(session.tokenHash), \(session.accountID), \(session.createdAt), \(session.expiresAt), \(session.userAgent),
                \(session.ipAddress), \(session.method), \(session.credentialID))
        """
    }

    public func createSession(_ session: SessionRecord) async throws {
        try await writer.run(Self.insert(session))
    }

    public func session(tokenHash: [UInt8], now: Date) async throws -> (SessionRecord, Account)? {
        guard
            let row = try await reader.first(
                .prepared(
                    """
                    SELECT s.token_hash, s.account_id AS session_account, s.created_at AS session_created, s.expires_at, s.user_agent, s.ip_address,
                           s.method, s.credential_id AS session_credential, s.last_seen_at, \(sql: Self.sessionAccountColumns)
                    FROM sessions s JOIN accounts a ON a.id = s.account_id
                    WHERE s.token_hash = \(tokenHash) AND s.expires_at > \(now) AND a.disabled = \(false)
                    """))
        else { return nil }
        let session = try SessionRecord(
            row: row, accountIDColumn: "session_account", createdAtColumn: "session_created", credentialColumn: "session_credential")
        return (session, try Account(row: row))
    }

    public func sessions(accountID: UUID, now: Date) async throws -> [SessionRecord] {
        try await reader.rows(
            "SELECT * FROM sessions WHERE account_id = \(accountID) AND expires_at > \(now) ORDER BY created_at DESC, token_hash"
        ).map { try SessionRecord(row: $0) }
    }

    public func revokeSession(tokenHash: [UInt8]) async throws {
        try await writer.run("DELETE FROM sessions WHERE token_hash = \(tokenHash)")
    }

    public func rebindSession(tokenHash: [UInt8], credentialID: [UInt8]) async throws {
        try await writer.run("UPDATE sessions SET credential_id = \(credentialID) WHERE token_hash = \(tokenHash)")
    }

    public func revokeSessions(accountID: UUID, except tokenHash: [UInt8]?, audit: [AuditEvent]) async throws -> Int {
        try await transaction { db in
            let revoked = try await db.run(
                "DELETE FROM sessions WHERE account_id = \(accountID) AND token_hash <> \(tokenHash ?? []) RETURNING 1")
            for event in audit { try await db.execute(Self.insert(event)) }
            return revoked
        }
    }

    public func serverSecret() async throws -> [UInt8] {
        let fresh = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        // The first instance to get here writes it; everyone reads the one that won.
        try await writer.run("INSERT INTO settings (name, value) VALUES ('server_secret', \(fresh)) ON CONFLICT (name) DO NOTHING")
        return try await writer.first("SELECT value FROM settings WHERE name = 'server_secret'").map { try $0.bytes("value") } ?? fresh
    }

    // MARK: Abuse limits

    public func countHit(key: String, windowStart: Date, expiresAt: Date) async throws -> Int {
        Int(
            try await writer.first(
                """
                INSERT INTO rate_limits (key, window_start, hits, expires_at) VALUES (\(key), \(windowStart), 1, \(expiresAt))
                ON CONFLICT (key, window_start) DO UPDATE SET hits = rate_limits.hits + 1 RETURNING hits
                """)?.integer("hits") ?? 1)
    }

    public func refundHit(key: String, windowStart: Date) async throws {
        try await writer.run("UPDATE rate_limits SET hits = hits - 1 WHERE key = \(key) AND window_start = \(windowStart) AND hits > 0")
    }

    public func rateLimitHits(key: String, windowStart: Date) async throws -> Int {
        Int(
            try await reader.first("SELECT hits FROM rate_limits WHERE key = \(key) AND window_start = \(windowStart)")?.integer("hits")
                ?? 0)
    }

    // MARK: Audit and upkeep

    private static func insert(_ event: AuditEvent) -> SQL {
        """
        INSERT INTO audit_events (time, kind, account_id, credential_id, ip_address, user_agent, detail)
        VALUES (\(event.time), \(event.kind), \(event.accountID), \(event.credentialID), \(event.ipAddress), \(event.userAgent), \(event.detail))
        """
    }

    public func appendAudit(_ event: AuditEvent) async throws {
        try await writer.run(Self.insert(event))
    }

    public func auditEvents(accountID: UUID?, limit: Int) async throws -> [AuditEvent] {
        let sql: SQL =
            if let accountID {
                "SELECT * FROM audit_events WHERE account_id = \(accountID) ORDER BY id DESC LIMIT \(limit)"
            } else {
                "SELECT * FROM audit_events ORDER BY id DESC LIMIT \(limit)"
            }
        return try await reader.rows(sql).map { try AuditEvent(row: $0) }
    }

    public func sweepExpired(now: Date) async throws -> Int {
        try await transaction { db in
            var removed = 0
            for table in [
                "challenges", "sessions", "rate_limits", "recovery_tokens", "registration_tokens", "oauth_requests", "oauth_codes",
                "oauth_refresh_tokens",
            ] {
                removed += try await db.run("DELETE FROM \(sql: SQLFragment(text: table)) WHERE expires_at <= \(now) RETURNING 1")
            }
            removed += try await db.run("DELETE FROM signing_keys WHERE retires_at <= \(now) RETURNING 1")
            return removed
        }
    }

    // MARK: Apps that trust passkeyd

    public func account(externalID: String) async throws -> Account? {
        try await reader.first("SELECT * FROM accounts WHERE external_id = \(externalID)").map { try Account(row: $0) }
    }

    public func createAccount(_ account: Account, audit: [AuditEvent]) async throws {
        try await transaction { db in
            try await db.execute(
                """
                INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, password_hash, external_id)
                VALUES (\(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                        \(account.userHandle), \(account.createdAt), \(account.disabled), \(account.passwordHash), \(account.externalID))
                """)
            for event in audit { try await db.execute(Self.insert(event)) }
        }
    }

    public func setExternalID(accountID: UUID, externalID: String?) async throws -> Bool {
        try await writer.run("UPDATE accounts SET external_id = \(externalID) WHERE id = \(accountID) RETURNING 1") == 1
    }

    public func touchSession(tokenHash: [UInt8], at time: Date) async throws {
        try await writer.run(
            .prepared(
                """
                UPDATE sessions SET last_seen_at = \(time)
                WHERE token_hash = \(tokenHash) AND (last_seen_at IS NULL OR last_seen_at < \(time.addingTimeInterval(-60)))
                """))
    }

    public func saveRegistrationToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO registration_tokens (token_hash, account_id, created_at, expires_at)
            VALUES (\(hash), \(accountID), \(createdAt), \(expiresAt))
            """)
    }

    public func takeRegistrationToken(hash: [UInt8], now: Date) async throws -> UUID? {
        guard
            let row = try await writer.first("DELETE FROM registration_tokens WHERE token_hash = \(hash) RETURNING account_id, expires_at")
        else { return nil }
        guard try row.date("expires_at") > now else { return nil }
        return try row.id("account_id")
    }

    public func signingKeys(now: Date) async throws -> [SigningKey] {
        try await reader.rows(
            "SELECT * FROM signing_keys WHERE retires_at IS NULL OR retires_at > \(now) ORDER BY activates_at, created_at, kid"
        ).map { try SigningKey(row: $0) }
    }

    private static func insert(_ key: SigningKey) -> SQL {
        """
        INSERT INTO signing_keys (kid, algorithm, private_key, created_at, activates_at, retires_at)
        VALUES (\(key.kid), \(key.algorithm), \(key.privateKey), \(key.createdAt), \(key.activatesAt), \(key.retiresAt))
        """
    }

    public func addSigningKey(_ key: SigningKey, retiringOthersAt retirement: Date?) async throws {
        try await transaction { db in
            if let retirement {
                try await db.execute(
                    "UPDATE signing_keys SET retires_at = \(retirement) WHERE retires_at IS NULL AND algorithm = \(key.algorithm)")
            }
            try await db.execute(Self.insert(key))
        }
    }

    public func addFirstSigningKey(_ key: SigningKey, now: Date) async throws -> Bool {
        let forUpdate = dialect.forUpdate
        return try await transaction { db in
            // PostgreSQL: instances starting together queue on the settings row (SQLite has one
            // writer), so exactly one adds the first key.
            try await db.execute("INSERT INTO settings (name, value) VALUES ('signing_keys', \([UInt8]())) ON CONFLICT (name) DO NOTHING")
            try await db.execute("SELECT 1 FROM settings WHERE name = 'signing_keys'\(sql: forUpdate)")
            let live = try await db.count(
                "SELECT COUNT(*) AS n FROM signing_keys WHERE algorithm = \(key.algorithm) AND (retires_at IS NULL OR retires_at > \(now))")
            guard live == 0 else { return false }
            try await db.execute(Self.insert(key))
            return true
        }
    }

    public func createAPIKey(_ key: APIKey, audit: [AuditEvent]) async throws {
        try await transaction { db in
            try await db.execute(
                """
                INSERT INTO api_keys (id, name, key_hash, scopes, created_at)
                VALUES (\(key.id), \(key.name), \(key.keyHash), \(StoreValues.encodeList(key.scopes)), \(key.createdAt))
                """)
            for event in audit { try await db.execute(Self.insert(event)) }
        }
    }

    public func apiKey(hash: [UInt8]) async throws -> APIKey? {
        try await reader.first("SELECT * FROM api_keys WHERE key_hash = \(hash)").map { try APIKey(row: $0) }
    }

    public func apiKeys() async throws -> [APIKey] {
        try await reader.rows("SELECT * FROM api_keys ORDER BY created_at, id").map { try APIKey(row: $0) }
    }

    public func revokeAPIKey(id: UUID, at time: Date, audit: [AuditEvent]) async throws -> Bool {
        try await transaction { db in
            guard try await db.run("UPDATE api_keys SET revoked_at = \(time) WHERE id = \(id) AND revoked_at IS NULL RETURNING 1") == 1
            else { return false }
            for event in audit { try await db.execute(Self.insert(event)) }
            return true
        }
    }

    public func touchAPIKey(id: UUID, at time: Date) async throws {
        try await writer.run(
            """
            UPDATE api_keys SET last_used_at = \(time)
            WHERE id = \(id) AND (last_used_at IS NULL OR last_used_at < \(time.addingTimeInterval(-60)))
            """)
    }

    public func addWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws {
        try await writer.run(
            """
            INSERT INTO webhook_endpoints (id, url, secret, events, created_at, disabled)
            VALUES (\(endpoint.id), \(endpoint.url), \(endpoint.secret), \(endpoint.events.joined(separator: ",")), \(endpoint.createdAt),
                    \(endpoint.disabled))
            """)
    }

    public func webhookEndpoints() async throws -> [WebhookEndpoint] {
        try await reader.rows("SELECT * FROM webhook_endpoints ORDER BY created_at, id").map { try WebhookEndpoint(row: $0) }
    }

    public func removeWebhookEndpoint(id: UUID) async throws -> Bool {
        try await writer.run("DELETE FROM webhook_endpoints WHERE id = \(id) RETURNING 1") == 1
    }

    public func claimWebhookDeliveries(endpointID: UUID?, now: Date, leaseUntil: Date, limit: Int) async throws -> [(
        WebhookDelivery, AuditEvent
    )] {
        // The candidates, read off the writer: per (endpoint, account) the oldest undelivered
        // event (events of one account reach an endpoint in order), when it is due and not
        // leased. One pass over the undelivered rows (of one endpoint, or all), however many wait.
        let endpointFilter: SQL = endpointID.map { id -> SQL in " AND endpoint_id = \(id)" } ?? ""
        let select: SQL = """
            SELECT d.event_id, d.endpoint_id FROM webhook_deliveries d
            JOIN (SELECT endpoint_id, account_id, MIN(event_id) AS first FROM webhook_deliveries
                  WHERE delivered_at IS NULL
            """
        let rest: SQL = """
             GROUP BY endpoint_id, account_id) f
              ON f.endpoint_id = d.endpoint_id AND f.first = d.event_id
            WHERE d.next_attempt_at <= \(now) AND (d.lease_until IS NULL OR d.lease_until <= \(now))
            ORDER BY d.event_id LIMIT \(limit)
            """
        let candidates = try await reader.rows(select.appending(endpointFilter).appending(rest))
        guard !candidates.isEmpty else { return [] }
        // One short write takes the leases, marked with this claim's token. The row conditions
        // are checked again by the UPDATE itself: of several instances claiming the same row at
        // once, PostgreSQL lets one update it and re-evaluates the others' WHERE on the row it
        // left (leased: not taken), and SQLite has one writer; a row settled since the read
        // (delivered, or failed and waiting its back-off) is not taken either.
        let token = UUID.random().uuidString.lowercased()
        var update: SQL =
            "UPDATE webhook_deliveries SET lease_until = \(leaseUntil), lease_token = \(token) WHERE delivered_at IS NULL AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until <= \(now)) AND ("
        for (index, row) in candidates.enumerated() {
            let eventID = try row.integer("event_id"), endpointID = try row.id("endpoint_id")
            update = update.appending(index == 0 ? "" : " OR ").appending("(event_id = \(eventID) AND endpoint_id = \(endpointID))")
        }
        guard try await writer.run(update.appending(") RETURNING 1")) > 0 else { return [] }
        return try await reader.rows(
            """
            SELECT d.*, a.id AS audit_id, a.time, a.kind, a.credential_id, a.ip_address, a.user_agent, a.detail
            FROM webhook_deliveries d JOIN audit_events a ON a.id = d.event_id
            WHERE d.lease_token = \(token) AND d.delivered_at IS NULL
            ORDER BY d.event_id
            """
        ).map { (try WebhookDelivery(row: $0), try AuditEvent(row: $0, idColumn: "audit_id")) }
    }

    public func settleWebhookDelivery(
        eventID: Int64, endpointID: UUID, deliveredAt: Date?, status: Int?, error: String?, retryAt: Date
    ) async throws {
        try await writer.run(
            """
            UPDATE webhook_deliveries
            SET attempts = attempts + 1, delivered_at = \(deliveredAt), last_status = \(status), last_error = \(error),
                next_attempt_at = \(retryAt), lease_until = NULL
            WHERE event_id = \(eventID) AND endpoint_id = \(endpointID)
            """)
    }

    public func webhookDeliveries(endpointID: UUID?, limit: Int) async throws -> [WebhookDelivery] {
        let sql: SQL =
            if let endpointID {
                "SELECT * FROM webhook_deliveries WHERE endpoint_id = \(endpointID) ORDER BY event_id DESC LIMIT \(limit)"
            } else {
                "SELECT * FROM webhook_deliveries ORDER BY event_id DESC LIMIT \(limit)"
            }
        return try await reader.rows(sql).map { try WebhookDelivery(row: $0) }
    }

    // MARK: OpenID Connect

    public func addOAuthClient(_ client: OAuthClient) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_clients (id, name, secret_hash, redirect_uris, post_logout_uris, first_party, allow_sign_up,
                                       id_token_algorithm, created_at)
            VALUES (\(client.id), \(client.name), \(client.secretHash), \(StoreValues.encodeList(client.redirectURIs)),
                    \(StoreValues.encodeList(client.postLogoutURIs)), \(client.firstParty), \(client.allowSignUp), \(client.idTokenAlgorithm),
                    \(client.createdAt))
            """)
    }

    public func oauthClient(id: String) async throws -> OAuthClient? {
        try await reader.first("SELECT * FROM oauth_clients WHERE id = \(id)").map { try OAuthClient(row: $0) }
    }

    public func oauthClients() async throws -> [OAuthClient] {
        try await reader.rows("SELECT * FROM oauth_clients ORDER BY created_at, id").map { try OAuthClient(row: $0) }
    }

    public func removeOAuthClient(id: String) async throws -> Bool {
        try await writer.run("DELETE FROM oauth_clients WHERE id = \(id) RETURNING 1") == 1
    }

    public func saveOAuthRequest(hash: [UInt8], clientID: String, request: [UInt8], createdAt: Date, expiresAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_requests (id_hash, client_id, request, created_at, expires_at)
            VALUES (\(hash), \(clientID), \(request), \(createdAt), \(expiresAt))
            """)
    }

    public func oauthRequest(hash: [UInt8], now: Date) async throws -> (clientID: String, request: [UInt8])? {
        guard
            let row = try await reader.first(
                "SELECT client_id, request FROM oauth_requests WHERE id_hash = \(hash) AND expires_at > \(now)")
        else { return nil }
        return (try row.text("client_id"), try row.bytes("request"))
    }

    public func deleteOAuthRequest(hash: [UInt8]) async throws {
        try await writer.run("DELETE FROM oauth_requests WHERE id_hash = \(hash)")
    }

    public func saveOAuthCode(hash: [UInt8], grant: OAuthGrant, createdAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_codes (code_hash, client_id, account_id, grant_data, created_at, expires_at)
            VALUES (\(hash), \(grant.clientID), \(grant.accountID), \(grant.grant), \(createdAt), \(grant.expiresAt))
            """)
    }

    // Single use (issue 33): each code and refresh token is taken by the one UPDATE below whose
    // RETURNING says who won. On PostgreSQL a racing UPDATE waits for the row's lock and then
    // re-checks `used_at IS NULL` on the committed row, so it takes nothing; on SQLite writes
    // are serial. Only then is the row read again, to tell a reuse from an unknown token. The
    // client is in the WHERE: another client's code or token is never touched.

    public func useOAuthCode(hash: [UInt8], clientID: String, family: String, at time: Date) async throws -> OAuthTake {
        try await transaction { db in
            if let row = try await db.first(
                """
                UPDATE oauth_codes SET used_at = \(time), family = \(family)
                WHERE code_hash = \(hash) AND client_id = \(clientID) AND used_at IS NULL AND expires_at > \(time)
                RETURNING *
                """)
            {
                return .taken(try OAuthGrant(row: row))
            }
            guard let row = try await db.first("SELECT * FROM oauth_codes WHERE code_hash = \(hash) AND client_id = \(clientID)") else {
                return .unknown
            }
            let code = try OAuthGrant(row: row)
            return code.usedAt != nil ? .reused(code) : .expired
        }
    }

    public func oauthCode(hash: [UInt8], clientID: String) async throws -> OAuthGrant? {
        try await reader.first("SELECT * FROM oauth_codes WHERE code_hash = \(hash) AND client_id = \(clientID)").map {
            try OAuthGrant(row: $0)
        }
    }

    public func saveRefreshToken(hash: [UInt8], grant: OAuthGrant, createdAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_refresh_tokens (token_hash, family, client_id, account_id, grant_data, created_at, expires_at)
            VALUES (\(hash), \(grant.family ?? ""), \(grant.clientID), \(grant.accountID), \(grant.grant), \(createdAt), \(grant.expiresAt))
            """)
    }

    public func useRefreshToken(hash: [UInt8], clientID: String, at time: Date) async throws -> OAuthTake {
        try await transaction { db in
            if let row = try await db.first(
                """
                UPDATE oauth_refresh_tokens SET used_at = \(time)
                WHERE token_hash = \(hash) AND client_id = \(clientID) AND used_at IS NULL AND revoked_at IS NULL
                  AND expires_at > \(time)
                  AND NOT EXISTS (SELECT 1 FROM oauth_refresh_tokens AS revoked
                                  WHERE revoked.family = oauth_refresh_tokens.family AND revoked.revoked_at IS NOT NULL)
                RETURNING *
                """)
            {
                return .taken(try OAuthGrant(row: row))
            }
            guard
                let row = try await db.first(
                    "SELECT * FROM oauth_refresh_tokens WHERE token_hash = \(hash) AND client_id = \(clientID)")
            else { return .unknown }
            let token = try OAuthGrant(row: row)
            if try await Self.grantRevoked(token.family ?? "", on: db) { return .revoked }
            if token.usedAt != nil { return .reused(token) }
            return .expired
        }
    }

    /// The row that marks a family revoked though it may hold no refresh token (a grant without
    /// `offline_access`, or one whose first token is still being written when a reused code
    /// revokes it): keyed by a hash no token can have (tokens are hashed from 32 random bytes,
    /// this from text), used and revoked from the start, kept until `until`.
    static func revocationMarker(_ family: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(("passkeyd revoked grant " + family).utf8)))
    }

    static func revokeGrant(
        _ family: String, clientID: String, accountID: UUID, at time: Date, until: Date, on db: any SQLConnection
    ) async throws -> Int {
        let revoked = try await db.run(
            "UPDATE oauth_refresh_tokens SET revoked_at = \(time) WHERE family = \(family) AND revoked_at IS NULL RETURNING 1")
        try await db.execute(
            """
            INSERT INTO oauth_refresh_tokens (token_hash, family, client_id, account_id, grant_data, created_at, expires_at, used_at, revoked_at)
            VALUES (\(revocationMarker(family)), \(family), \(clientID), \(accountID), \([UInt8]()), \(time), \(until), \(time), \(time))
            ON CONFLICT (token_hash) DO NOTHING
            """)
        return revoked
    }

    static func grantRevoked(_ family: String, on db: any SQLConnection) async throws -> Bool {
        try await db.first("SELECT 1 AS n FROM oauth_refresh_tokens WHERE family = \(family) AND revoked_at IS NOT NULL LIMIT 1") != nil
    }

    public func revokeOAuthGrant(family: String, clientID: String, accountID: UUID, at time: Date, until: Date) async throws -> Int {
        try await transaction { db in
            try await Self.revokeGrant(family, clientID: clientID, accountID: accountID, at: time, until: until, on: db)
        }
    }

    public func revokeRefreshToken(hash: [UInt8], clientID: String, at time: Date, until: Date) async throws -> Bool {
        try await transaction { db in
            guard
                let row = try await db.first(
                    "SELECT family, account_id FROM oauth_refresh_tokens WHERE token_hash = \(hash) AND client_id = \(clientID)")
            else { return false }
            _ = try await Self.revokeGrant(
                try row.text("family"), clientID: clientID, accountID: try row.id("account_id"), at: time, until: until, on: db)
            return true
        }
    }

    public func oauthGrantRevoked(family: String) async throws -> Bool {
        try await Self.grantRevoked(family, on: reader)
    }

    public func revokeRefreshFamily(_ family: String, at time: Date) async throws -> Int {
        try await writer.run(
            "UPDATE oauth_refresh_tokens SET revoked_at = \(time) WHERE family = \(family) AND revoked_at IS NULL RETURNING 1")
    }

    public func refreshFamily(hash: [UInt8]) async throws -> String? {
        try await reader.first("SELECT family FROM oauth_refresh_tokens WHERE token_hash = \(hash)").map { try $0.text("family") }
    }

    public func consent(accountID: UUID, clientID: String) async throws -> String? {
        try await reader.first("SELECT scope FROM oauth_consents WHERE account_id = \(accountID) AND client_id = \(clientID)").map {
            try $0.text("scope")
        }
    }

    public func saveConsent(accountID: UUID, clientID: String, scope: String, at time: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_consents (account_id, client_id, scope, created_at) VALUES (\(accountID), \(clientID), \(scope), \(time))
            ON CONFLICT (account_id, client_id) DO UPDATE SET scope = \(scope), created_at = \(time)
            """)
    }
}
