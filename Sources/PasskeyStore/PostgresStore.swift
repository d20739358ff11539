import Foundation
import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// The store for several instances: PostgreSQL through postgres-nio's pooled client. Every
/// method is one transaction (or one statement); counters move by compare-and-set and
/// challenges are taken with `DELETE … RETURNING`, so racing instances stay correct.
///
/// Every operation has a deadline (``Options/operationTimeout``): when the database cannot be
/// reached the caller gets ``StoreError/Code/unavailable`` promptly instead of waiting, and the
/// pool reconnects by itself when the database is back.
public final class PostgresStore: PasskeyStore {
    public struct Options: Sendable {
        public var maxConnections: Int = 20
        public var connectTimeout: Duration = .seconds(3)
        public var operationTimeout: Duration = .seconds(5)
        /// Migrations may rewrite large tables, and instances starting together wait for the one
        /// that migrates: they get far longer than an ordinary operation.
        public var migrationTimeout: Duration = .seconds(600)
        public init() {}
    }

    /// The connection pool. A `Service`: `passkeyd serve` runs it in the application's service
    /// group (started before the server, stopped after it).
    public let client: PostgresClient
    private let runner: Task<Void, Never>?
    private let options: Options
    private let logger: Logger

    /// Connects lazily to the database a `postgres://user:password@host:port/database` URL names
    /// (`?sslmode=disable|allow|prefer|require|verify-ca|verify-full`, default prefer, with libpq's
    /// meanings, see ``tlsMode(sslmode:rootCertificate:)``; `&sslrootcert=/ca.pem`; `?host=/socket/dir`
    /// for a Unix socket).
    /// - Parameter runsClient: run the pool on a task of its own (commands, tests); false when the
    ///   caller runs ``client`` as a service.
    public init(url: String, options: Options = Options(), logger: Logger = Logger(label: "passkeyd.postgres"), runsClient: Bool = true)
        throws
    {
        var configuration = try Self.configuration(url: url)
        configuration.options.maximumConnections = options.maxConnections
        configuration.options.connectTimeout = options.connectTimeout
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(15))
        self.options = options
        self.logger = logger
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        runner = runsClient ? Task { await client.run() } : nil
    }

    deinit { runner?.cancel() }

    /// Closes the pool's connections (on shutdown) when it runs on its own task.
    public func close() { runner?.cancel() }

    static func configuration(url: String) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw StoreError(.invalidDatabase, "\"\(Self.redacted(url))\" is not postgres://user:password@host:port/database")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let username = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        let password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let database = path.isEmpty ? nil : path.removingPercentEncoding
        let tls = try tlsMode(sslmode: query["sslmode"], rootCertificate: query["sslrootcert"])
        if let socketDirectory = query["host"], socketDirectory.hasPrefix("/") {
            let port = components.port ?? 5432
            return .init(unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: username, password: password, database: database)
        }
        guard let host = components.host, !host.isEmpty else {
            throw StoreError(.invalidDatabase, "\"\(Self.redacted(url))\" names no host")
        }
        return .init(host: host, port: components.port ?? 5432, username: username, password: password, database: database, tls: tls)
    }

    /// How TLS is used, with libpq's meanings of `sslmode`:
    /// - `disable`: never; `allow`/`prefer` (default): when the server offers it, unverified;
    /// - `require`: always, certificate unverified (encryption against passive listeners only),
    ///   unless `sslrootcert` names a CA file: then it is verified as in `verify-ca` (as libpq does);
    /// - `verify-ca`: always, the certificate must chain to `sslrootcert` (or the system roots),
    ///   any host name;
    /// - `verify-full`: always, chain and host name verified. Use this in production.
    static func tlsMode(sslmode: String?, rootCertificate: String?) throws -> PostgresClient.Configuration.TLS {
        switch try tlsUse(sslmode: sslmode, rootCertificate: rootCertificate) {
        case .disable: .disable
        case .prefer(let configuration): .prefer(configuration)
        case .require(let configuration): .require(configuration)
        }
    }

    enum TLSUse {
        case disable
        case prefer(TLSConfiguration)
        case require(TLSConfiguration)
    }

    static func tlsUse(sslmode: String?, rootCertificate: String?) throws -> TLSUse {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificate, !rootCertificate.isEmpty { configuration.trustRoots = .file(rootCertificate) }
        switch sslmode ?? "prefer" {
        case "disable":
            return .disable
        case "allow", "prefer":
            configuration.certificateVerification = .none
            return .prefer(configuration)
        case "require":
            configuration.certificateVerification = rootCertificate == nil ? .none : .noHostnameVerification
            return .require(configuration)
        case "verify-ca":
            configuration.certificateVerification = .noHostnameVerification
            return .require(configuration)
        case "verify-full":
            configuration.certificateVerification = .fullVerification
            return .require(configuration)
        case let other:
            throw StoreError(.invalidDatabase, "sslmode \"\(other)\" is not disable, allow, prefer, require, verify-ca or verify-full")
        }
    }

    /// The URL without its password, for messages and logs.
    public static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? "postgres://***"
    }

    // MARK: Plumbing

    /// Runs `body` with the operation deadline, mapping failures to ``StoreError``.
    private func run<T: Sendable>(timeout: Duration? = nil, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = timeout ?? options.operationTimeout
        do {
            return try await withThrowingTaskGroup(of: T.self) { group in
                group.addTask { try await body() }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    throw StoreError(.unavailable, "PostgreSQL did not answer within \(timeout)")
                }
                defer { group.cancelAll() }
                guard let result = try await group.next() else { throw StoreError(.unavailable, "no result") }
                return result
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    /// A ``StoreError`` for what postgres-nio threw: unique and foreign-key violations are
    /// conflicts; everything else means the database is unavailable. Only the server's message
    /// is kept (never the query, whose binds may hold keys or tokens).
    static func storeError(_ error: any Error) -> StoreError {
        switch error {
        case let error as StoreError:
            return error
        case let error as PostgresTransactionError:
            if let inner = error.closureError ?? error.beginError ?? error.commitError { return storeError(inner) }
            return StoreError(.unavailable, "transaction failed")
        case let error as PSQLError:
            if let state = error.serverInfo?[.sqlState], state.hasPrefix("23") {
                return StoreError(.conflict, error.serverInfo?[.message] ?? "constraint violated")
            }
            return StoreError(.unavailable, error.serverInfo?[.message] ?? "PostgreSQL \(error.code)")
        case is PostgresDecodingError:
            return StoreError(.corruptRow, "a stored row does not hold what its columns must")
        default:
            return StoreError(.unavailable, "PostgreSQL: \(type(of: error))")
        }
    }

    private func transaction<T: Sendable>(timeout: Duration? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T)
        async throws -> T
    {
        let logger = self.logger, client = self.client
        return try await run(timeout: timeout) {
            try await client.withTransaction(logger: logger) { connection in try await body(connection) }
        }
    }

    private func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        let logger = self.logger, client = self.client
        return try await run {
            try await client.query(query, logger: logger).collect().map { $0.makeRandomAccess() }
        }
    }

    private func count(_ query: PostgresQuery) async throws -> Int {
        try await rows(query).first.map { try $0[0].decode(Int.self) } ?? 0
    }

    // MARK: Schema

    public func migrate() async throws -> [Int] {
        try await transaction(timeout: options.migrationTimeout) { connection in
            let logger = Logger(label: "passkeyd.migrate")
            // Several instances may start at once: one migrates, the others wait and find it done.
            try await connection.query("SELECT pg_advisory_xact_lock(7270417)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)",
                logger: logger)
            var applied = Set<Int>()
            for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: logger).decode(Int.self) {
                applied.insert(version)
            }
            var done: [Int] = []
            for migration in PostgresSchema.migrations where !applied.contains(migration.version) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                let version = migration.version, time = StoreValues.millis(Date())
                try await connection.query(
                    "INSERT INTO schema_migrations (version, applied_at) VALUES (\(version), \(time))", logger: logger)
                done.append(migration.version)
            }
            return done
        }
    }

    public func schemaVersion() async throws -> Int {
        let exists = try await count(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'")
        guard exists > 0 else { return 0 }
        return try await rows("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").first.map { try $0[0].decode(Int.self) } ?? 0
    }

    public func ping() async throws {
        _ = try await rows("SELECT 1")
    }

    // MARK: Rows

    private static func bytes(_ cell: PostgresCell) throws -> [UInt8] {
        Array(try cell.decode(ByteBuffer.self).readableBytesView)
    }

    private static func buffer(_ bytes: [UInt8]) -> ByteBuffer { ByteBuffer(bytes: bytes) }

    // MARK: Accounts

    public func account(id: UUID) async throws -> Account? {
        try await rows("SELECT * FROM accounts WHERE id = \(id)").first.map { try Account(row: $0) }
    }

    public func account(username: String) async throws -> Account? {
        try await rows("SELECT * FROM accounts WHERE username_key = \(Account.key(for: username))").first.map { try Account(row: $0) }
    }

    public func account(userHandle: [UInt8]) async throws -> Account? {
        try await rows("SELECT * FROM accounts WHERE user_handle = \(Self.buffer(userHandle))").first.map { try Account(row: $0) }
    }

    public func createAccount(_ account: Account, passkey: Passkey, session: SessionRecord?, audit: [AuditEvent]) async throws {
        let logger = self.logger
        try await transaction { connection in
            try await connection.query(
                """
                INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, last_sign_in_at, password_hash)
                VALUES (\(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                        \(Self.buffer(account.userHandle)), \(StoreValues.millis(account.createdAt)), \(account.disabled),
                        \(account.lastSignInAt.map(StoreValues.millis)), \(account.passwordHash))
                """, logger: logger)
            try await Self.insert(passkey, connection, logger)
            if let session { try await Self.insert(session, connection, logger) }
            for event in audit { try await Self.insert(event, connection, logger) }
        }
    }

    // MARK: Passkeys

    private static func insert(_ passkey: Passkey, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO passkeys (credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                                  user_verified, attestation_format, attestation_trusted, name, created_at, last_used_at, counter_anomalies)
            VALUES (\(buffer(passkey.credentialID)), \(passkey.accountID), \(buffer(passkey.publicKey)), \(Int64(passkey.signCount)),
                    \(passkey.aaguid), \(StoreValues.encodeList(passkey.transports)), \(passkey.backupEligible), \(passkey.backedUp),
                    \(passkey.userVerified), \(passkey.attestationFormat), \(passkey.attestationTrusted), \(passkey.name),
                    \(StoreValues.millis(passkey.createdAt)), \(passkey.lastUsedAt.map(StoreValues.millis)), \(Int64(passkey.counterAnomalies)))
            """, logger: logger)
    }

    public func addPasskey(_ passkey: Passkey) async throws {
        let logger = self.logger
        try await transaction { connection in try await Self.insert(passkey, connection, logger) }
    }

    public func passkey(credentialID: [UInt8]) async throws -> Passkey? {
        try await rows("SELECT * FROM passkeys WHERE credential_id = \(Self.buffer(credentialID))").first.map { try Passkey(row: $0) }
    }

    public func passkeyAndAccount(credentialID: [UInt8]) async throws -> (Passkey, Account)? {
        guard
            let row = try await rows(
                """
                SELECT p.*, a.id, a.username, a.display_name, a.user_handle, a.created_at AS account_created_at, a.disabled, a.last_sign_in_at,
                       a.password_hash
                FROM passkeys p JOIN accounts a ON a.id = p.account_id WHERE p.credential_id = \(Self.buffer(credentialID))
                """
            ).first
        else { return nil }
        return (try Passkey(row: row), try Account(row: row, createdAt: "account_created_at"))
    }

    public func passkeys(accountID: UUID) async throws -> [Passkey] {
        try await rows("SELECT * FROM passkeys WHERE account_id = \(accountID) ORDER BY created_at, credential_id").map {
            try Passkey(row: $0)
        }
    }

    public func completeSignIn(
        credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            let updated = try await connection.query(
                """
                UPDATE passkeys SET sign_count = \(Int64(signCount)), backed_up = \(backedUp), last_used_at = \(StoreValues.millis(time)),
                       counter_anomalies = counter_anomalies + \(Int64(counterAnomaly ? 1 : 0))
                WHERE credential_id = \(Self.buffer(credentialID)) AND sign_count = \(Int64(previousSignCount))
                RETURNING 1
                """, logger: logger
            ).collect()
            guard updated.count == 1 else { return false }
            try await connection.query(
                "UPDATE accounts SET last_sign_in_at = \(StoreValues.millis(time)) WHERE id = \(session.accountID)",
                logger: logger)
            try await Self.insert(session, connection, logger)
            for event in audit { try await Self.insert(event, connection, logger) }
            return true
        }
    }

    public func renamePasskey(accountID: UUID, credentialID: [UInt8], name: String) async throws -> Bool {
        try await rows(
            """
            UPDATE passkeys SET name = \(name) WHERE account_id = \(accountID) AND credential_id = \(Self.buffer(credentialID)) RETURNING 1
            """
        ).count == 1
    }

    public func deletePasskey(accountID: UUID, credentialID: [UInt8], keepSession: [UInt8]?) async throws -> PasskeyDeletion {
        let logger = self.logger
        return try await transaction { connection in
            // Hold the account row: a concurrent password removal (which takes the same lock)
            // waits, so the two cannot both remove a way in.
            try await connection.query("SELECT 1 FROM accounts WHERE id = \(accountID) FOR UPDATE", logger: logger)
            // Lock the account's passkeys so two deletions cannot both leave it with none.
            let ids = try await connection.query(
                "SELECT credential_id FROM passkeys WHERE account_id = \(accountID) FOR UPDATE",
                logger: logger
            ).collect().map { try Self.bytes($0.makeRandomAccess()[0]) }
            guard ids.contains(credentialID) else { return .notFound }
            let password = try await connection.query(
                "SELECT 1 FROM accounts WHERE id = \(accountID) AND password_hash IS NOT NULL",
                logger: logger
            ).collect()
            guard ids.count > 1 || !password.isEmpty else { return .lastPasskey }
            try await connection.query(
                "DELETE FROM passkeys WHERE account_id = \(accountID) AND credential_id = \(Self.buffer(credentialID))",
                logger: logger)
            // The sessions this passkey made end with it (but the one deleting it).
            try await connection.query(
                """
                DELETE FROM sessions WHERE credential_id = \(Self.buffer(credentialID)) AND token_hash <> \(Self.buffer(keepSession ?? []))
                """, logger: logger)
            try await connection.query(
                "UPDATE sessions SET credential_id = NULL WHERE credential_id = \(Self.buffer(credentialID))",
                logger: logger)
            return .deleted
        }
    }

    public func revokePasskey(credentialID: [UInt8], audit: [AuditEvent]) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            let deleted = try await connection.query(
                "DELETE FROM passkeys WHERE credential_id = \(Self.buffer(credentialID)) RETURNING 1",
                logger: logger
            ).collect()
            guard deleted.count == 1 else { return false }
            try await connection.query("DELETE FROM sessions WHERE credential_id = \(Self.buffer(credentialID))", logger: logger)
            for event in audit { try await Self.insert(event, connection, logger) }
            return true
        }
    }

    // MARK: Passwords and recovery

    public func importAccounts(_ rows: [(Account, String)]) async throws -> [Bool] {
        let logger = self.logger
        return try await transaction { connection in
            var inserted: [Bool] = []
            for (account, hash) in rows {
                let result = try await connection.query(
                    """
                    INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, password_hash)
                    VALUES (\(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                            \(Self.buffer(account.userHandle)), \(StoreValues.millis(account.createdAt)), false, \(hash))
                    ON CONFLICT (username_key) DO NOTHING RETURNING 1
                    """, logger: logger
                ).collect()
                inserted.append(result.count == 1)
            }
            return inserted
        }
    }

    public func removePassword(accountID: UUID) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            // The same account lock as deletePasskey: the EXISTS below then sees committed passkeys only.
            try await connection.query("SELECT 1 FROM accounts WHERE id = \(accountID) FOR UPDATE", logger: logger)
            return try await connection.query(
                """
                UPDATE accounts SET password_hash = NULL
                WHERE id = \(accountID) AND password_hash IS NOT NULL AND EXISTS (SELECT 1 FROM passkeys WHERE account_id = \(accountID))
                RETURNING 1
                """, logger: logger
            ).collect().count == 1
        }
    }

    public func changePassword(accountID: UUID, hash: String, keepSession tokenHash: [UInt8]?) async throws -> Bool {
        let logger = self.logger
        return try await transaction { connection in
            let updated = try await connection.query(
                """
                UPDATE accounts SET password_hash = \(hash) WHERE id = \(accountID) AND password_hash IS NOT NULL RETURNING 1
                """, logger: logger
            ).collect()
            guard updated.count == 1 else { return false }
            try await connection.query(
                "DELETE FROM sessions WHERE account_id = \(accountID) AND token_hash <> \(Self.buffer(tokenHash ?? []))",
                logger: logger)
            return true
        }
    }

    public func recordSignIn(accountID: UUID, session: SessionRecord, audit: [AuditEvent], revokeOtherSessions: Bool) async throws {
        let logger = self.logger
        try await transaction { connection in
            if revokeOtherSessions {
                try await connection.query("DELETE FROM sessions WHERE account_id = \(accountID)", logger: logger)
            }
            try await connection.query(
                "UPDATE accounts SET last_sign_in_at = \(StoreValues.millis(session.createdAt)) WHERE id = \(accountID)",
                logger: logger)
            try await Self.insert(session, connection, logger)
            for event in audit { try await Self.insert(event, connection, logger) }
        }
    }

    public func replaceRecoveryCodes(accountID: UUID, hashes: [[UInt8]], at time: Date) async throws {
        let logger = self.logger
        try await transaction { connection in
            try await connection.query("DELETE FROM recovery_codes WHERE account_id = \(accountID)", logger: logger)
            for hash in hashes {
                try await connection.query(
                    """
                    INSERT INTO recovery_codes (account_id, code_hash, created_at) VALUES (\(accountID), \(Self.buffer(hash)), \(StoreValues.millis(time)))
                    """, logger: logger)
            }
        }
    }

    public func useRecoveryCode(accountID: UUID, hash: [UInt8], at time: Date) async throws -> Bool {
        try await rows(
            """
            UPDATE recovery_codes SET used_at = \(StoreValues.millis(time))
            WHERE account_id = \(accountID) AND code_hash = \(Self.buffer(hash)) AND used_at IS NULL RETURNING 1
            """
        ).count == 1
    }

    public func recoveryCodesLeft(accountID: UUID) async throws -> Int {
        try await count("SELECT COUNT(*) FROM recovery_codes WHERE account_id = \(accountID) AND used_at IS NULL")
    }

    public func saveRecoveryToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws {
        _ = try await rows(
            """
            INSERT INTO recovery_tokens (token_hash, account_id, created_at, expires_at)
            VALUES (\(Self.buffer(hash)), \(accountID), \(StoreValues.millis(createdAt)), \(StoreValues.millis(expiresAt)))
            """)
    }

    public func takeRecoveryToken(hash: [UInt8], now: Date) async throws -> UUID? {
        guard
            let row = try await rows("DELETE FROM recovery_tokens WHERE token_hash = \(Self.buffer(hash)) RETURNING account_id, expires_at")
                .first
        else { return nil }
        guard StoreValues.date(try row["expires_at"].decode(Int64.self)) > now else { return nil }
        return try row["account_id"].decode(UUID.self)
    }

    // MARK: Administration

    public func accounts(after afterUsername: String?, limit: Int) async throws -> [Account] {
        try await rows(
            """
            SELECT * FROM accounts WHERE username_key > \(afterUsername.map(Account.key(for:)) ?? "") ORDER BY username_key LIMIT \(limit)
            """
        ).map { try Account(row: $0) }
    }

    public func setDisabled(accountID: UUID, disabled: Bool, audit: [AuditEvent]) async throws -> Int? {
        let logger = self.logger
        return try await transaction { connection in
            let updated = try await connection.query(
                "UPDATE accounts SET disabled = \(disabled) WHERE id = \(accountID) RETURNING 1",
                logger: logger
            ).collect()
            guard updated.count == 1 else { return nil }
            var revoked = 0
            if disabled {
                revoked = try await connection.query("DELETE FROM sessions WHERE account_id = \(accountID) RETURNING 1", logger: logger)
                    .collect().count
            }
            for event in audit { try await Self.insert(event, connection, logger) }
            return revoked
        }
    }

    public func sessions(accountID: UUID, now: Date) async throws -> [SessionRecord] {
        try await rows(
            """
            SELECT * FROM sessions WHERE account_id = \(accountID) AND expires_at > \(StoreValues.millis(now)) ORDER BY created_at DESC, token_hash
            """
        ).map { try SessionRecord(row: $0) }
    }

    public func statistics(now: Date, activeSince: Date) async throws -> StoreStatistics {
        let nowMillis = StoreValues.millis(now), since = StoreValues.millis(activeSince)
        var stats = StoreStatistics()
        let totals = try await rows(
            """
            SELECT (SELECT COUNT(*) FROM accounts),
                   (SELECT COUNT(*) FROM accounts WHERE disabled),
                   (SELECT COUNT(*) FROM sessions WHERE expires_at > \(nowMillis)),
                   (SELECT COUNT(*) FROM challenges WHERE expires_at > \(nowMillis)),
                   (SELECT COUNT(DISTINCT account_id) FROM passkeys),
                   (SELECT COUNT(*) FROM accounts WHERE last_sign_in_at >= \(since)),
                   (SELECT COUNT(*) FROM accounts a WHERE a.last_sign_in_at >= \(since)
                        AND EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id))
            """)
        if let row = totals.first {
            stats.accounts = try row[0].decode(Int.self)
            stats.disabledAccounts = try row[1].decode(Int.self)
            stats.liveSessions = try row[2].decode(Int.self)
            stats.openChallenges = try row[3].decode(Int.self)
            stats.accountsWithPasskey = try row[4].decode(Int.self)
            stats.activeAccounts = try row[5].decode(Int.self)
            stats.activeAccountsWithPasskey = try row[6].decode(Int.self)
        }
        for row in try await rows("SELECT aaguid, COUNT(*) FROM passkeys GROUP BY aaguid") {
            let count = try row[1].decode(Int.self)
            stats.passkeysByAAGUID[try row[0].decode(String.self)] = count
            stats.passkeys += count
        }
        return stats
    }

    // MARK: Ceremonies

    public func saveChallenge(_ record: ChallengeRecord) async throws {
        _ = try await rows(
            """
            INSERT INTO challenges (challenge_hash, challenge, ceremony, account_id, pending_username, pending_display_name,
                                    pending_user_handle, pending_account_id, unknown_user, api, user_verification, conditional, state,
                                    created_at, expires_at)
            VALUES (\(Self.buffer(ChallengeHash.of(record.challenge))), \(Self.buffer(record.challenge)), \(record.ceremony.rawValue),
                    \(record.accountID), \(record.pendingUsername), \(record.pendingDisplayName), \(record.pendingUserHandle.map(Self.buffer)),
                    \(record.pendingAccountID), \(record.unknownUser), \(record.api), \(record.userVerification), \(record.conditional),
                    \(record.state.map(Self.buffer)),
                    \(StoreValues.millis(record.createdAt)), \(StoreValues.millis(record.expiresAt)))
            """)
    }

    public func takeChallenge(_ challenge: [UInt8]) async throws -> ChallengeRecord? {
        guard
            let row = try await rows(
                "DELETE FROM challenges WHERE challenge_hash = \(Self.buffer(ChallengeHash.of(challenge))) RETURNING *"
            ).first
        else { return nil }
        return try ChallengeRecord(row: row)
    }

    public func openChallengeCount(now: Date) async throws -> Int {
        try await count("SELECT COUNT(*) FROM challenges WHERE expires_at > \(StoreValues.millis(now))")
    }

    public func discardOldestChallenges(count: Int) async throws -> Int {
        guard count > 0 else { return 0 }
        return try await self.count(
            """
            WITH d AS (
                DELETE FROM challenges WHERE challenge_hash IN (SELECT challenge_hash FROM challenges ORDER BY expires_at LIMIT \(count))
                RETURNING 1)
            SELECT COUNT(*) FROM d
            """)
    }

    // MARK: Sessions

    private static func insert(_ session: SessionRecord, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO sessions (token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
            VALUES (\(buffer(session.tokenHash)), \(session.accountID), \(StoreValues.millis(session.createdAt)),
                    \(StoreValues.millis(session.expiresAt)), \(session.userAgent), \(session.ipAddress), \(session.method),
                    \(session.credentialID.map(buffer)))
            """, logger: logger)
    }

    public func createSession(_ session: SessionRecord) async throws {
        let logger = self.logger
        try await transaction { connection in try await Self.insert(session, connection, logger) }
    }

    public func session(tokenHash: [UInt8], now: Date) async throws -> (SessionRecord, Account)? {
        guard
            let row = try await rows(
                """
                SELECT s.token_hash, s.account_id AS session_account, s.created_at AS session_created, s.expires_at, s.user_agent, s.ip_address,
                       s.method, s.credential_id AS session_credential, a.*
                FROM sessions s JOIN accounts a ON a.id = s.account_id
                WHERE s.token_hash = \(Self.buffer(tokenHash)) AND s.expires_at > \(StoreValues.millis(now)) AND NOT a.disabled
                """
            ).first
        else { return nil }
        let session = try SessionRecord(
            row: row, accountIDColumn: "session_account", createdAtColumn: "session_created", credentialColumn: "session_credential")
        return (session, try Account(row: row))
    }

    public func revokeSession(tokenHash: [UInt8]) async throws {
        _ = try await rows("DELETE FROM sessions WHERE token_hash = \(Self.buffer(tokenHash))")
    }

    public func rebindSession(tokenHash: [UInt8], credentialID: [UInt8]) async throws {
        _ = try await rows("UPDATE sessions SET credential_id = \(Self.buffer(credentialID)) WHERE token_hash = \(Self.buffer(tokenHash))")
    }

    public func revokeSessions(accountID: UUID, except tokenHash: [UInt8]?, audit: [AuditEvent]) async throws -> Int {
        let logger = self.logger
        return try await transaction { connection in
            let revoked = try await connection.query(
                """
                DELETE FROM sessions WHERE account_id = \(accountID) AND token_hash <> \(Self.buffer(tokenHash ?? [])) RETURNING 1
                """, logger: logger
            ).collect().count
            for event in audit { try await Self.insert(event, connection, logger) }
            return revoked
        }
    }

    public func rekeyUsernames() async throws -> [UsernameCollision] {
        let logger = self.logger
        return try await transaction { connection in
            try await connection.query("LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE", logger: logger)
            var accounts: [UsernameRekeying.Row] = []
            for try await (id, username, key) in try await connection.query(
                "SELECT id, username, username_key FROM accounts ORDER BY created_at, id", logger: logger
            ).decode((UUID, String, String).self) {
                accounts.append((id, username, key))
            }
            let plan = UsernameRekeying.plan(accounts)
            for change in plan.changes {
                try await connection.query("UPDATE accounts SET username_key = \(change.key) WHERE id = \(change.id)", logger: logger)
            }
            return plan.collisions
        }
    }

    public func serverSecret() async throws -> [UInt8] {
        let fresh = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        _ = try await rows(
            "INSERT INTO settings (name, value) VALUES ('server_secret', \(Self.buffer(fresh))) ON CONFLICT (name) DO NOTHING")
        guard let row = try await rows("SELECT value FROM settings WHERE name = 'server_secret'").first else { return fresh }
        return try Self.bytes(row[0])
    }

    // MARK: Abuse limits

    public func refundHit(key: String, windowStart: Date) async throws {
        _ = try await rows(
            "UPDATE rate_limits SET hits = hits - 1 WHERE key = \(key) AND window_start = \(StoreValues.millis(windowStart)) AND hits > 0")
    }

    public func rateLimitHits(key: String, windowStart: Date) async throws -> Int {
        try await rows("SELECT hits FROM rate_limits WHERE key = \(key) AND window_start = \(StoreValues.millis(windowStart))")
            .first.map { try $0[0].decode(Int.self) } ?? 0
    }

    public func countHit(key: String, windowStart: Date, expiresAt: Date) async throws -> Int {
        try await rows(
            """
            INSERT INTO rate_limits (key, window_start, hits, expires_at) VALUES (\(key), \(StoreValues.millis(windowStart)), 1, \(StoreValues.millis(expiresAt)))
            ON CONFLICT (key, window_start) DO UPDATE SET hits = rate_limits.hits + 1 RETURNING hits
            """
        ).first.map { try $0[0].decode(Int.self) } ?? 1
    }

    // MARK: Audit and upkeep

    private static func insert(_ event: AuditEvent, _ connection: PostgresConnection, _ logger: Logger) async throws {
        try await connection.query(
            """
            INSERT INTO audit_events (time, kind, account_id, credential_id, ip_address, user_agent, detail)
            VALUES (\(StoreValues.millis(event.time)), \(event.kind), \(event.accountID), \(event.credentialID.map(buffer)),
                    \(event.ipAddress), \(event.userAgent), \(event.detail))
            """, logger: logger)
    }

    public func appendAudit(_ event: AuditEvent) async throws {
        let logger = self.logger
        try await transaction { connection in try await Self.insert(event, connection, logger) }
    }

    public func auditEvents(accountID: UUID?, limit: Int) async throws -> [AuditEvent] {
        let query: PostgresQuery =
            if let accountID {
                "SELECT * FROM audit_events WHERE account_id = \(accountID) ORDER BY id DESC LIMIT \(limit)"
            } else {
                "SELECT * FROM audit_events ORDER BY id DESC LIMIT \(limit)"
            }
        return try await rows(query).map { try AuditEvent(row: $0) }
    }

    public func sweepExpired(now: Date) async throws -> Int {
        let cutoff = StoreValues.millis(now)
        return try await rows(
            """
            WITH c AS (DELETE FROM challenges WHERE expires_at <= \(cutoff) RETURNING 1),
                 s AS (DELETE FROM sessions WHERE expires_at <= \(cutoff) RETURNING 1),
                 r AS (DELETE FROM rate_limits WHERE expires_at <= \(cutoff) RETURNING 1),
                 t AS (DELETE FROM recovery_tokens WHERE expires_at <= \(cutoff) RETURNING 1)
            SELECT (SELECT COUNT(*) FROM c) + (SELECT COUNT(*) FROM s) + (SELECT COUNT(*) FROM r) + (SELECT COUNT(*) FROM t)
            """
        ).first.map { try $0[0].decode(Int.self) } ?? 0
    }
}

/// postgres-nio's rows as ``StoreRow``.
extension PostgresRandomAccessRow: StoreRow {
    func optionalText(_ column: String) throws -> String? { try decoded(column, String?.self) }
    func optionalInteger(_ column: String) throws -> Int64? { try decoded(column, Int64?.self) }
    func optionalBytes(_ column: String) throws -> [UInt8]? { try decoded(column, ByteBuffer?.self).map { Array($0.readableBytesView) } }
    func optionalFlag(_ column: String) throws -> Bool? { try decoded(column, Bool?.self) }
    func optionalID(_ column: String) throws -> UUID? { try decoded(column, UUID?.self) }

    private func decoded<T: PostgresDecodable>(_ column: String, _ type: T.Type) throws -> T {
        do {
            return try self[column].decode(T.self)
        } catch {
            throw StoreError(.corruptRow, "\(column) does not hold a \(T.self)")
        }
    }
}
