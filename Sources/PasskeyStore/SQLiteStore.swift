import Foundation
import GRDB

/// The embedded store: one SQLite file in WAL mode (concurrent readers, one writer), every
/// operation a transaction.
public final class SQLiteStore: PasskeyStore {
    private let pool: DatabasePool

    /// Opens (creating if needed) the SQLite database at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
        } catch {
            throw StoreError(.invalidDatabase, "cannot open SQLite database at \(path): \(error)")
        }
    }

    // MARK: Plumbing

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.write(body)
        } catch let error as StoreError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StoreError(.conflict, error.message ?? "constraint violated")
        } catch {
            throw StoreError(.unavailable, "\(error)")
        }
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do {
            return try await pool.read(body)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.unavailable, "\(error)")
        }
    }

    // MARK: Schema

    public func migrate() async throws -> [Int] {
        try await write { db in
            try db.execute(sql: "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)")
            let applied = Set(try Int.fetchAll(db, sql: "SELECT version FROM schema_migrations"))
            var done: [Int] = []
            for migration in SQLiteSchema.migrations where !applied.contains(migration.version) {
                for statement in migration.statements { try db.execute(sql: statement) }
                try db.execute(
                    sql: "INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                    arguments: [migration.version, StoreValues.millis(Date())])
                done.append(migration.version)
            }
            return done
        }
    }

    public func schemaVersion() async throws -> Int {
        try await read { db in
            guard try db.tableExists("schema_migrations") else { return 0 }
            return try Int.fetchOne(db, sql: "SELECT MAX(version) FROM schema_migrations") ?? 0
        }
    }

    public func ping() async throws {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    // MARK: Accounts

    public func account(id: UUID) async throws -> Account? {
        try await read { db in
            try db.cachedRow(sql: "SELECT * FROM accounts WHERE id = ?", arguments: [id.uuidString]).map { try Account(row: $0) }
        }
    }

    public func account(username: String) async throws -> Account? {
        try await read { db in
            try db.cachedRow(sql: "SELECT * FROM accounts WHERE username_key = ?", arguments: [Account.key(for: username)]).map {
                try Account(row: $0)
            }
        }
    }

    public func account(userHandle: [UInt8]) async throws -> Account? {
        try await read { db in
            try db.cachedRow(sql: "SELECT * FROM accounts WHERE user_handle = ?", arguments: [Data(userHandle)]).map {
                try Account(row: $0)
            }
        }
    }

    public func createAccount(_ account: Account, passkey: Passkey, session: SessionRecord?, audit: [AuditEvent]) async throws {
        try await write { db in
            try db.cached(
                sql: """
                    INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, last_sign_in_at, password_hash)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    account.id.uuidString, account.username, Account.key(for: account.username), account.displayName,
                    Data(account.userHandle), StoreValues.millis(account.createdAt), account.disabled ? 1 : 0,
                    account.lastSignInAt.map(StoreValues.millis), account.passwordHash,
                ])
            try Self.insert(passkey, db)
            if let session { try Self.insert(session, db) }
            for event in audit { try Self.insert(event, db) }
        }
    }

    // MARK: Passkeys

    private static func insert(_ passkey: Passkey, _ db: Database) throws {
        try db.cached(
            sql: """
                INSERT INTO passkeys (credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                                      user_verified, attestation_format, attestation_trusted, name, created_at, last_used_at, counter_anomalies)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                Data(passkey.credentialID), passkey.accountID.uuidString, Data(passkey.publicKey), Int64(passkey.signCount), passkey.aaguid,
                StoreValues.encodeList(passkey.transports), passkey.backupEligible, passkey.backedUp, passkey.userVerified,
                passkey.attestationFormat, passkey.attestationTrusted, passkey.name, StoreValues.millis(passkey.createdAt),
                passkey.lastUsedAt.map(StoreValues.millis), passkey.counterAnomalies,
            ])
    }

    public func addPasskey(_ passkey: Passkey) async throws {
        try await write { db in try Self.insert(passkey, db) }
    }

    public func passkey(credentialID: [UInt8]) async throws -> Passkey? {
        try await read { db in
            try db.cachedRow(sql: "SELECT * FROM passkeys WHERE credential_id = ?", arguments: [Data(credentialID)]).map {
                try Passkey(row: $0)
            }
        }
    }

    public func passkeyAndAccount(credentialID: [UInt8]) async throws -> (Passkey, Account)? {
        try await read { db in
            guard
                let row = try db.cachedRow(
                    sql: """
                        SELECT p.*, a.id, a.username, a.display_name, a.user_handle, a.created_at AS account_created_at, a.disabled, a.last_sign_in_at,
                               a.password_hash
                        FROM passkeys p JOIN accounts a ON a.id = p.account_id WHERE p.credential_id = ?
                        """, arguments: [Data(credentialID)])
            else { return nil }
            return (try Passkey(row: row), try Account(row: row, createdAt: "account_created_at"))
        }
    }

    public func passkeys(accountID: UUID) async throws -> [Passkey] {
        try await read { db in
            try db.cachedRows(
                sql: "SELECT * FROM passkeys WHERE account_id = ? ORDER BY created_at, credential_id",
                arguments: [accountID.uuidString]
            ).map { try Passkey(row: $0) }
        }
    }

    public func completeSignIn(
        credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> Bool {
        try await write { db in
            try db.cached(
                sql: """
                    UPDATE passkeys SET sign_count = ?, backed_up = ?, last_used_at = ?, counter_anomalies = counter_anomalies + ?
                    WHERE credential_id = ? AND sign_count = ?
                    """,
                arguments: [
                    Int64(signCount), backedUp, StoreValues.millis(time), counterAnomaly ? 1 : 0,
                    Data(credentialID), Int64(previousSignCount),
                ])
            guard db.changesCount == 1 else { return false }
            try db.cached(
                sql: "UPDATE accounts SET last_sign_in_at = ? WHERE id = ?",
                arguments: [StoreValues.millis(time), session.accountID.uuidString])
            try Self.insert(session, db)
            for event in audit { try Self.insert(event, db) }
            return true
        }
    }

    public func revokePasskey(credentialID: [UInt8], audit: [AuditEvent]) async throws -> Bool {
        try await write { db in
            try db.cached(sql: "DELETE FROM passkeys WHERE credential_id = ?", arguments: [Data(credentialID)])
            guard db.changesCount == 1 else { return false }
            try db.cached(sql: "DELETE FROM sessions WHERE credential_id = ?", arguments: [Data(credentialID)])
            for event in audit { try Self.insert(event, db) }
            return true
        }
    }

    // MARK: Passwords and recovery

    public func importAccounts(_ rows: [(Account, String)]) async throws -> [Bool] {
        try await write { db in
            var inserted: [Bool] = []
            for (account, hash) in rows {
                try db.cached(
                    sql: """
                        INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, password_hash)
                        VALUES (?, ?, ?, ?, ?, ?, 0, ?) ON CONFLICT (username_key) DO NOTHING
                        """,
                    arguments: [
                        account.id.uuidString, account.username, Account.key(for: account.username), account.displayName,
                        Data(account.userHandle), StoreValues.millis(account.createdAt), hash,
                    ])
                inserted.append(db.changesCount == 1)
            }
            return inserted
        }
    }

    public func removePassword(accountID: UUID) async throws -> Bool {
        try await write { db in
            try db.cached(
                sql: """
                    UPDATE accounts SET password_hash = NULL
                    WHERE id = ? AND password_hash IS NOT NULL AND EXISTS (SELECT 1 FROM passkeys WHERE account_id = ?)
                    """, arguments: [accountID.uuidString, accountID.uuidString])
            return db.changesCount == 1
        }
    }

    public func recordSignIn(accountID: UUID, session: SessionRecord, audit: [AuditEvent], revokeOtherSessions: Bool) async throws {
        try await write { db in
            if revokeOtherSessions {
                try db.cached(sql: "DELETE FROM sessions WHERE account_id = ?", arguments: [accountID.uuidString])
            }
            try db.cached(
                sql: "UPDATE accounts SET last_sign_in_at = ? WHERE id = ?",
                arguments: [StoreValues.millis(session.createdAt), accountID.uuidString])
            try Self.insert(session, db)
            for event in audit { try Self.insert(event, db) }
        }
    }

    public func replaceRecoveryCodes(accountID: UUID, hashes: [[UInt8]], at time: Date) async throws {
        try await write { db in
            try db.cached(sql: "DELETE FROM recovery_codes WHERE account_id = ?", arguments: [accountID.uuidString])
            for hash in hashes {
                try db.cached(
                    sql: "INSERT INTO recovery_codes (account_id, code_hash, created_at) VALUES (?, ?, ?)",
                    arguments: [accountID.uuidString, Data(hash), StoreValues.millis(time)])
            }
        }
    }

    public func useRecoveryCode(accountID: UUID, hash: [UInt8], at time: Date) async throws -> Bool {
        try await write { db in
            try db.cached(
                sql: "UPDATE recovery_codes SET used_at = ? WHERE account_id = ? AND code_hash = ? AND used_at IS NULL",
                arguments: [StoreValues.millis(time), accountID.uuidString, Data(hash)])
            return db.changesCount == 1
        }
    }

    public func recoveryCodesLeft(accountID: UUID) async throws -> Int {
        try await read { db in
            try db.cachedInt(
                sql: "SELECT COUNT(*) FROM recovery_codes WHERE account_id = ? AND used_at IS NULL",
                arguments: [accountID.uuidString]) ?? 0
        }
    }

    public func saveRecoveryToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws {
        try await write { db in
            try db.cached(
                sql: "INSERT INTO recovery_tokens (token_hash, account_id, created_at, expires_at) VALUES (?, ?, ?, ?)",
                arguments: [Data(hash), accountID.uuidString, StoreValues.millis(createdAt), StoreValues.millis(expiresAt)])
        }
    }

    public func takeRecoveryToken(hash: [UInt8], now: Date) async throws -> UUID? {
        try await write { db in
            guard
                let row = try db.cachedRow(
                    sql: "DELETE FROM recovery_tokens WHERE token_hash = ? RETURNING account_id, expires_at",
                    arguments: [Data(hash)])
            else { return nil }
            guard StoreValues.date(row["expires_at"]) > now else { return nil }
            return (row["account_id"] as String?).flatMap(UUID.init(uuidString:))
        }
    }

    // MARK: Administration

    public func accounts(after afterUsername: String?, limit: Int) async throws -> [Account] {
        try await read { db in
            try db.cachedRows(
                sql: "SELECT * FROM accounts WHERE username_key > ? ORDER BY username_key LIMIT ?",
                arguments: [afterUsername.map(Account.key(for:)) ?? "", limit]
            ).map { try Account(row: $0) }
        }
    }

    public func setDisabled(accountID: UUID, disabled: Bool, audit: [AuditEvent]) async throws -> Int? {
        try await write { db in
            try db.cached(sql: "UPDATE accounts SET disabled = ? WHERE id = ?", arguments: [disabled ? 1 : 0, accountID.uuidString])
            guard db.changesCount == 1 else { return nil }
            var revoked = 0
            if disabled {
                try db.cached(sql: "DELETE FROM sessions WHERE account_id = ?", arguments: [accountID.uuidString])
                revoked = db.changesCount
            }
            for event in audit { try Self.insert(event, db) }
            return revoked
        }
    }

    public func sessions(accountID: UUID, now: Date) async throws -> [SessionRecord] {
        try await read { db in
            try db.cachedRows(
                sql: "SELECT * FROM sessions WHERE account_id = ? AND expires_at > ? ORDER BY created_at DESC, token_hash",
                arguments: [accountID.uuidString, StoreValues.millis(now)]
            ).map { try SessionRecord(row: $0) }
        }
    }

    public func statistics(now: Date, activeSince: Date) async throws -> StoreStatistics {
        try await read { db in
            let nowMillis = StoreValues.millis(now), since = StoreValues.millis(activeSince)
            var stats = StoreStatistics()
            stats.accounts = try db.cachedInt(sql: "SELECT COUNT(*) FROM accounts") ?? 0
            stats.disabledAccounts = try db.cachedInt(sql: "SELECT COUNT(*) FROM accounts WHERE disabled <> 0") ?? 0
            for row in try db.cachedRows(sql: "SELECT aaguid, COUNT(*) AS n FROM passkeys GROUP BY aaguid") {
                let count: Int = row["n"]
                stats.passkeysByAAGUID[row["aaguid"]] = count
                stats.passkeys += count
            }
            stats.liveSessions = try db.cachedInt(sql: "SELECT COUNT(*) FROM sessions WHERE expires_at > ?", arguments: [nowMillis]) ?? 0
            stats.openChallenges =
                try db.cachedInt(sql: "SELECT COUNT(*) FROM challenges WHERE expires_at > ?", arguments: [nowMillis]) ?? 0
            stats.accountsWithPasskey = try db.cachedInt(sql: "SELECT COUNT(DISTINCT account_id) FROM passkeys") ?? 0
            stats.activeAccounts =
                try db.cachedInt(sql: "SELECT COUNT(*) FROM accounts WHERE last_sign_in_at >= ?", arguments: [since]) ?? 0
            stats.activeAccountsWithPasskey =
                try db.cachedInt(
                    sql: """
                        SELECT COUNT(*) FROM accounts a WHERE a.last_sign_in_at >= ? AND EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id)
                        """, arguments: [since]) ?? 0
            return stats
        }
    }

    public func renamePasskey(accountID: UUID, credentialID: [UInt8], name: String) async throws -> Bool {
        try await write { db in
            try db.cached(
                sql: "UPDATE passkeys SET name = ? WHERE account_id = ? AND credential_id = ?",
                arguments: [name, accountID.uuidString, Data(credentialID)])
            return db.changesCount == 1
        }
    }

    public func deletePasskey(accountID: UUID, credentialID: [UInt8], keepSession: [UInt8]?) async throws -> PasskeyDeletion {
        try await write { db in
            let count = try db.cachedInt(sql: "SELECT COUNT(*) FROM passkeys WHERE account_id = ?", arguments: [accountID.uuidString]) ?? 0
            let exists =
                try db.cachedInt(
                    sql: "SELECT COUNT(*) FROM passkeys WHERE account_id = ? AND credential_id = ?",
                    arguments: [accountID.uuidString, Data(credentialID)]) ?? 0
            guard exists == 1 else { return .notFound }
            let hasPassword =
                try db.cachedInt(
                    sql: "SELECT COUNT(*) FROM accounts WHERE id = ? AND password_hash IS NOT NULL",
                    arguments: [accountID.uuidString]) ?? 0
            guard count > 1 || hasPassword == 1 else { return .lastPasskey }
            try db.cached(
                sql: "DELETE FROM passkeys WHERE account_id = ? AND credential_id = ?",
                arguments: [accountID.uuidString, Data(credentialID)])
            // The sessions this passkey made end with it (but the one deleting it).
            try db.cached(
                sql: "DELETE FROM sessions WHERE credential_id = ? AND token_hash <> ?",
                arguments: [Data(credentialID), Data(keepSession ?? [])])
            try db.cached(sql: "UPDATE sessions SET credential_id = NULL WHERE credential_id = ?", arguments: [Data(credentialID)])
            return .deleted
        }
    }

    // MARK: Ceremonies

    public func saveChallenge(_ record: ChallengeRecord) async throws {
        try await write { db in
            try db.cached(
                sql: """
                    INSERT INTO challenges (challenge_hash, challenge, ceremony, account_id, pending_username, pending_display_name,
                                            pending_user_handle, pending_account_id, unknown_user, api, user_verification, conditional,
                                            state, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    Data(ChallengeHash.of(record.challenge)), Data(record.challenge), record.ceremony.rawValue,
                    record.accountID?.uuidString,
                    record.pendingUsername, record.pendingDisplayName, record.pendingUserHandle.map { Data($0) },
                    record.pendingAccountID?.uuidString, record.unknownUser,
                    record.api, record.userVerification, record.conditional, record.state.map { Data($0) },
                    StoreValues.millis(record.createdAt),
                    StoreValues.millis(record.expiresAt),
                ])
        }
    }

    public func takeChallenge(_ challenge: [UInt8]) async throws -> ChallengeRecord? {
        try await write { db in
            guard
                let row = try db.cachedRow(
                    sql: "DELETE FROM challenges WHERE challenge_hash = ? RETURNING *",
                    arguments: [Data(ChallengeHash.of(challenge))])
            else { return nil }
            return try ChallengeRecord(row: row)
        }
    }

    public func openChallengeCount(now: Date) async throws -> Int {
        try await read { db in
            try db.cachedInt(sql: "SELECT COUNT(*) FROM challenges WHERE expires_at > ?", arguments: [StoreValues.millis(now)]) ?? 0
        }
    }

    public func discardOldestChallenges(count: Int) async throws -> Int {
        guard count > 0 else { return 0 }
        return try await write { db in
            try db.cached(
                sql: "DELETE FROM challenges WHERE challenge_hash IN (SELECT challenge_hash FROM challenges ORDER BY expires_at LIMIT ?)",
                arguments: [count])
            return db.changesCount
        }
    }

    // MARK: Sessions

    public func createSession(_ session: SessionRecord) async throws {
        try await write { db in try Self.insert(session, db) }
    }

    private static func insert(_ session: SessionRecord, _ db: Database) throws {
        try db.cached(
            sql: """
                INSERT INTO sessions (token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                Data(session.tokenHash), session.accountID.uuidString, StoreValues.millis(session.createdAt),
                StoreValues.millis(session.expiresAt), session.userAgent, session.ipAddress, session.method,
                session.credentialID.map { Data($0) },
            ])
    }

    public func session(tokenHash: [UInt8], now: Date) async throws -> (SessionRecord, Account)? {
        try await read { db in
            guard
                let row = try db.cachedRow(
                    sql: """
                        SELECT s.token_hash, s.account_id AS session_account, s.created_at AS session_created, s.expires_at, s.user_agent, s.ip_address,
                               s.method, s.credential_id AS session_credential, a.*
                        FROM sessions s JOIN accounts a ON a.id = s.account_id
                        WHERE s.token_hash = ? AND s.expires_at > ? AND a.disabled = 0
                        """, arguments: [Data(tokenHash), StoreValues.millis(now)])
            else { return nil }
            let session = try SessionRecord(
                row: row, accountIDColumn: "session_account", createdAtColumn: "session_created", credentialColumn: "session_credential")
            return (session, try Account(row: row))
        }
    }

    public func revokeSession(tokenHash: [UInt8]) async throws {
        try await write { db in try db.cached(sql: "DELETE FROM sessions WHERE token_hash = ?", arguments: [Data(tokenHash)]) }
    }

    public func rebindSession(tokenHash: [UInt8], credentialID: [UInt8]) async throws {
        try await write { db in
            try db.cached(
                sql: "UPDATE sessions SET credential_id = ? WHERE token_hash = ?", arguments: [Data(credentialID), Data(tokenHash)])
        }
    }

    public func revokeSessions(accountID: UUID, except tokenHash: [UInt8]?, audit: [AuditEvent]) async throws -> Int {
        try await write { db in
            try db.cached(
                sql: "DELETE FROM sessions WHERE account_id = ? AND token_hash <> ?",
                arguments: [accountID.uuidString, Data(tokenHash ?? [])])
            let revoked = db.changesCount
            for event in audit { try Self.insert(event, db) }
            return revoked
        }
    }

    public func changePassword(accountID: UUID, hash: String, keepSession tokenHash: [UInt8]?) async throws -> Bool {
        try await write { db in
            try db.cached(
                sql: "UPDATE accounts SET password_hash = ? WHERE id = ? AND password_hash IS NOT NULL",
                arguments: [hash, accountID.uuidString])
            guard db.changesCount == 1 else { return false }
            try db.cached(
                sql: "DELETE FROM sessions WHERE account_id = ? AND token_hash <> ?",
                arguments: [accountID.uuidString, Data(tokenHash ?? [])])
            return true
        }
    }

    public func rekeyUsernames() async throws -> [UsernameCollision] {
        try await write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, username, username_key FROM accounts ORDER BY created_at, id")
            let accounts = try rows.map { row in
                (id: try row.id("id"), username: try row.text("username"), key: try row.text("username_key"))
            }
            let plan = UsernameRekeying.plan(accounts)
            for change in plan.changes {
                try db.execute(sql: "UPDATE accounts SET username_key = ? WHERE id = ?", arguments: [change.key, change.id.uuidString])
            }
            return plan.collisions
        }
    }

    public func serverSecret() async throws -> [UInt8] {
        try await write { db in
            let fresh = Data((0..<32).map { _ in UInt8.random(in: .min ... .max) })
            try db.cached(sql: "INSERT OR IGNORE INTO settings (name, value) VALUES ('server_secret', ?)", arguments: [fresh])
            return [UInt8]((try db.cachedData(sql: "SELECT value FROM settings WHERE name = 'server_secret'")) ?? fresh)
        }
    }

    // MARK: Audit and upkeep

    public func appendAudit(_ event: AuditEvent) async throws {
        try await write { db in try Self.insert(event, db) }
    }

    private static func insert(_ event: AuditEvent, _ db: Database) throws {
        try db.cached(
            sql: """
                INSERT INTO audit_events (time, kind, account_id, credential_id, ip_address, user_agent, detail)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                StoreValues.millis(event.time), event.kind, event.accountID?.uuidString, event.credentialID.map { Data($0) },
                event.ipAddress, event.userAgent, event.detail,
            ])
    }

    public func countHit(key: String, windowStart: Date, expiresAt: Date) async throws -> Int {
        try await write { db in
            try db.cachedInt(
                sql: """
                    INSERT INTO rate_limits (key, window_start, hits, expires_at) VALUES (?, ?, 1, ?)
                    ON CONFLICT (key, window_start) DO UPDATE SET hits = hits + 1 RETURNING hits
                    """, arguments: [key, StoreValues.millis(windowStart), StoreValues.millis(expiresAt)]) ?? 1
        }
    }

    public func refundHit(key: String, windowStart: Date) async throws {
        try await write { db in
            try db.cached(
                sql: "UPDATE rate_limits SET hits = hits - 1 WHERE key = ? AND window_start = ? AND hits > 0",
                arguments: [key, StoreValues.millis(windowStart)])
        }
    }

    public func rateLimitHits(key: String, windowStart: Date) async throws -> Int {
        try await read { db in
            try db.cachedInt(
                sql: "SELECT hits FROM rate_limits WHERE key = ? AND window_start = ?",
                arguments: [key, StoreValues.millis(windowStart)]) ?? 0
        }
    }

    public func auditEvents(accountID: UUID?, limit: Int) async throws -> [AuditEvent] {
        try await read { db in
            let rows: [Row]
            if let accountID {
                rows = try db.cachedRows(
                    sql: "SELECT * FROM audit_events WHERE account_id = ? ORDER BY id DESC LIMIT ?",
                    arguments: [accountID.uuidString, limit])
            } else {
                rows = try db.cachedRows(sql: "SELECT * FROM audit_events ORDER BY id DESC LIMIT ?", arguments: [limit])
            }
            return try rows.map { try AuditEvent(row: $0) }
        }
    }

    public func sweepExpired(now: Date) async throws -> Int {
        try await write { db in
            let cutoff = StoreValues.millis(now)
            try db.cached(sql: "DELETE FROM challenges WHERE expires_at <= ?", arguments: [cutoff])
            var removed = db.changesCount
            try db.cached(sql: "DELETE FROM sessions WHERE expires_at <= ?", arguments: [cutoff])
            removed += db.changesCount
            try db.cached(sql: "DELETE FROM rate_limits WHERE expires_at <= ?", arguments: [cutoff])
            removed += db.changesCount
            try db.cached(sql: "DELETE FROM recovery_tokens WHERE expires_at <= ?", arguments: [cutoff])
            removed += db.changesCount
            return removed
        }
    }
}

/// Statements are prepared once per connection and reused (GRDB's statement cache): preparing
/// anew on every call showed up as ~7% of the server's CPU under load.
private extension Database {
    func cached(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    func cachedRow(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try Row.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    func cachedRows(sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try Row.fetchAll(cachedStatement(sql: sql), arguments: arguments)
    }

    func cachedInt(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Int? {
        try Int.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }

    func cachedData(sql: String, arguments: StatementArguments = StatementArguments()) throws -> Data? {
        try Data.fetchOne(cachedStatement(sql: sql), arguments: arguments)
    }
}

/// GRDB's rows as ``StoreRow``: a value of the wrong type reads as malformed, never as a crash.
extension Row: StoreRow {
    func optionalText(_ column: String) throws -> String? { try value(column, String.self) }
    func optionalInteger(_ column: String) throws -> Int64? { try value(column, Int64.self) }
    func optionalBytes(_ column: String) throws -> [UInt8]? { try value(column, Data.self).map { [UInt8]($0) } }
    func optionalFlag(_ column: String) throws -> Bool? { try value(column, Int64.self).map { $0 != 0 } }
    func optionalID(_ column: String) throws -> UUID? {
        guard let text = try value(column, String.self) else { return nil }
        guard let id = UUID(uuidString: text) else { throw StoreError(.corruptRow, "\(column) is not a UUID") }
        return id
    }

    /// nil for NULL; `corrupt_row` for a value that is not a `T`.
    private func value<T: DatabaseValueConvertible>(_ column: String, _ type: T.Type) throws -> T? {
        let stored: DatabaseValue = self[column] ?? .null
        if stored.isNull { return nil }
        guard let value = T.fromDatabaseValue(stored) else { throw StoreError(.corruptRow, "\(column) holds a value of the wrong type") }
        return value
    }
}
