import Foundation

/// The store's logic, written once for both databases: every statement here and in its
/// extensions, one file per model (`SQLStore+Accounts.swift`, `+Passkeys`, `+Sessions`,
/// `+Ceremonies`, `+OAuth`, `+Webhooks`, `+APIKeys`, `+Metadata`), runs on SQLite and on
/// PostgreSQL (`SQLiteStore` and `PostgresStore` only supply an ``SQLEngine``). Each
/// method is one statement or one transaction; counters move by compare-and-set and challenges
/// are taken with `DELETE … RETURNING`, so racing requests (and racing instances) stay correct.
/// Where the dialects differ the statement says so (`dialect.forUpdate`); the schemas are the
/// one place written twice (`SQLiteSchema`, `PostgresSchema`).
public class SQLStore: PasskeyStore, @unchecked Sendable {
    let engine: any SQLEngine
    /// Most time a migration may take (several instances starting together wait for the one
    /// that migrates); nil: the engine's ordinary deadline.
    let migrationTimeout: Duration?
    /// The tenant whose rows this store reads and writes: every statement on a tenant-owned
    /// table names it (`tenant_id = …`), every insert writes it. Another tenant's rows are out
    /// of this store's reach; ``scoped(to:)`` gives a store of another tenant on the same
    /// connections.
    public let tenant: String

    init(engine: any SQLEngine, migrationTimeout: Duration? = nil, tenant: String = TenantID.defaultTenant) {
        self.engine = engine
        self.migrationTimeout = migrationTimeout
        self.tenant = tenant
    }

    public func scoped(to tenant: String) -> any PasskeyStore {
        tenant == self.tenant ? self : SQLStore(engine: engine, migrationTimeout: migrationTimeout, tenant: tenant)
    }

    var reader: any SQLConnection { engine.reader(tenant: tenant) }
    var writer: any SQLConnection { engine.writer(tenant: tenant) }
    /// Upkeep's reads and writes, across every tenant on purpose (sweeps, rollups, the outboxes,
    /// the registry, the schema): PostgreSQL's row-level policies show them every tenant's rows.
    var upkeepReader: any SQLConnection { engine.reader(tenant: TenantID.everyTenant) }
    var upkeepWriter: any SQLConnection { engine.writer(tenant: TenantID.everyTenant) }
    var dialect: SQLDialect { engine.dialect }

    func transaction<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await engine.transaction(tenant: tenant, timeout: nil, body)
    }

    /// A transaction of upkeep, across every tenant (see ``upkeepReader``).
    func upkeepTransaction<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await engine.transaction(tenant: TenantID.everyTenant, timeout: nil, body)
    }

    // MARK: Schema

    public func migrate() async throws -> [Int] { try await migrate(through: nil) }

    /// The migrations not yet applied, up to `last` (all when nil): tests build a database as an
    /// older version left it.
    func migrate(through last: Int?) async throws -> [Int] {
        let dialect = self.dialect
        let done = try await engine.transaction(tenant: TenantID.everyTenant, timeout: migrationTimeout) { db in
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
        guard try await upkeepReader.count(dialect.migrationsTableExists) > 0 else { return 0 }
        return try await upkeepReader.count("SELECT COALESCE(MAX(version), 0) AS n FROM schema_migrations")
    }

    public func pendingMigrations() async throws -> [Int] {
        guard try await upkeepReader.count(dialect.migrationsTableExists) > 0 else { return dialect.migrations.map(\.version) }
        let applied = Set(try await upkeepReader.rows("SELECT version FROM schema_migrations").map { Int(try $0.integer("version")) })
        return dialect.migrations.map(\.version).filter { !applied.contains($0) }
    }

    /// Whether several instances may share this database (PostgreSQL), and with it the rate
    /// limits' counts.
    public var isShared: Bool { dialect == .postgres }

    public var knownSchemaVersion: Int { dialect.migrations.map(\.version).max() ?? 0 }

    public func ping() async throws {
        try await upkeepReader.run("SELECT 1")
    }

    // Column lists written once. Reads that PostgreSQL prepares name their columns: a prepared
    // statement's result shape is fixed, so `*` would break once a migration adds a column.
    static let accountColumns = SQLFragment(text: Account.columns.joined(separator: ", "))
    static let passkeyColumns = SQLFragment(text: Passkey.columns.joined(separator: ", "))
    /// A passkey's columns in a join, as `p.<name>`.
    static let joinedPasskeyColumns = SQLFragment(text: Passkey.columns.map { "p.\($0)" }.joined(separator: ", "))
    /// What a sign-in reads of its passkey, as `p.<name>`: every column but the extension facts
    /// and the PRF salt (which read as unknown), six fewer to send and decode per sign-in.
    static let joinedSignInPasskeyColumns = SQLFragment(
        text: Passkey.columns.filter { !Passkey.extensionColumns.contains($0) }.map { "p.\($0)" }.joined(separator: ", "))
    /// An account's columns beside a passkey's in one row: its `created_at` renamed.
    static let joinedAccountColumns = SQLFragment(
        text: Account.columns.map { $0 == "created_at" ? "a.created_at AS account_created_at" : "a.\($0)" }.joined(separator: ", "))
    /// An account's columns beside a session's (whose own clashing columns are renamed).
    static let sessionAccountColumns = SQLFragment(text: Account.columns.map { "a.\($0)" }.joined(separator: ", "))

    // MARK: Upkeep

    public func statistics(now: Date, activeSince: Date) async throws -> StoreStatistics {
        var stats = StoreStatistics()
        if let row = try await reader.first(
            """
            SELECT (SELECT COUNT(*) FROM accounts WHERE tenant_id = \(tenant)) AS accounts,
                   (SELECT COUNT(*) FROM accounts WHERE tenant_id = \(tenant) AND disabled = \(true)) AS disabled,
                   (SELECT COUNT(*) FROM sessions WHERE tenant_id = \(tenant) AND expires_at > \(now)) AS sessions,
                   (SELECT COUNT(*) FROM challenges WHERE tenant_id = \(tenant) AND expires_at > \(now)) AS challenges,
                   (SELECT COUNT(DISTINCT account_id) FROM passkeys WHERE tenant_id = \(tenant)) AS with_passkey,
                   (SELECT COUNT(*) FROM accounts WHERE tenant_id = \(tenant) AND last_sign_in_at >= \(activeSince)) AS active,
                   (SELECT COUNT(*) FROM accounts a WHERE a.tenant_id = \(tenant) AND a.last_sign_in_at >= \(activeSince)
                        AND EXISTS (SELECT 1 FROM passkeys p WHERE p.tenant_id = a.tenant_id AND p.account_id = a.id)) AS active_with_passkey
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
        for row in try await reader.rows("SELECT aaguid, COUNT(*) AS n FROM passkeys WHERE tenant_id = \(tenant) GROUP BY aaguid") {
            let count = Int(try row.integer("n"))
            stats.passkeysByAAGUID[try row.text("aaguid")] = count
            stats.passkeys += count
        }
        return stats
    }

    public func serverSecret() async throws -> [UInt8] {
        let fresh = (0..<32).map { _ in UInt8.random(in: .min ... .max) }
        // The first instance to get here writes it; everyone reads the one that won.
        try await upkeepWriter.run("INSERT INTO settings (name, value) VALUES ('server_secret', \(fresh)) ON CONFLICT (name) DO NOTHING")
        return try await upkeepWriter.first("SELECT value FROM settings WHERE name = 'server_secret'").map { try $0.bytes("value") }
            ?? fresh
    }

    /// How long a delivered webhook delivery is kept (for the console's recent deliveries and
    /// their latency) before ``sweepExpired(now:)`` deletes it: 7 days. The event itself stays in
    /// the audit log.
    public static let deliveredWebhookRetention: TimeInterval = 7 * 86_400

    /// How many delivered webhook deliveries one statement of the sweep deletes, each statement
    /// its own transaction, so the first sweep after an upgrade (the whole delivered history of
    /// an old install) never holds the write lock long.
    static let deliveredWebhookSweepBatch = 5_000
    /// How many of those statements one sweep runs at most (100,000 rows); the rest go in the
    /// sweeps after it, a minute apart.
    static let deliveredWebhookSweepBatches = 20

    public func sweepExpired(now: Date) async throws -> Int {
        let removed = try await upkeepTransaction { [self] db in
            var removed = 0
            for table in [
                "challenges", "sessions", "rate_limits", "recovery_tokens", "registration_tokens", "oauth_requests", "oauth_codes",
                "oauth_refresh_tokens",
            ] {
                removed += try await db.run("DELETE FROM \(sql: SQLFragment(text: table)) WHERE expires_at <= \(now) RETURNING 1")
            }
            removed += try await db.run("DELETE FROM signing_keys WHERE retires_at <= \(now) RETURNING 1")
            removed += try await Self.sweepConsole(db, now: now)
            return removed
        }
        return removed + (try await sweepDeliveredWebhooks(now: now)) + (try await sweepMail(now: now))
    }

    /// Deletes webhook deliveries delivered more than ``deliveredWebhookRetention`` ago
    /// (webhook_deliveries_due serves the range), `batchSize` rows per statement and
    /// transaction, at most `batches` statements; returns how many went. The undelivered wait
    /// however long their endpoint is down.
    func sweepDeliveredWebhooks(
        now: Date, batchSize: Int = deliveredWebhookSweepBatch, batches: Int = deliveredWebhookSweepBatches
    ) async throws -> Int {
        let cutoff = now.addingTimeInterval(-Self.deliveredWebhookRetention)
        var removed = 0
        for _ in 0..<batches {
            let batch = try await upkeepWriter.run(
                """
                DELETE FROM webhook_deliveries WHERE (event_id, endpoint_id) IN (
                    SELECT event_id, endpoint_id FROM webhook_deliveries WHERE delivered_at <= \(cutoff) LIMIT \(batchSize))
                RETURNING 1
                """)
            removed += batch
            if batch < batchSize { break }
        }
        return removed
    }

    // MARK: Audit

    func insert(_ event: AuditEvent) -> SQL {
        """
        INSERT INTO audit_events (tenant_id, time, kind, account_id, credential_id, ip_address, user_agent, detail, metric, trace_parent)
        VALUES (\(tenant), \(event.time), \(event.kind), \(event.accountID), \(event.credentialID), \(event.ipAddress), \(event.userAgent), \(event.detail),
                \(event.metric), \(event.traceParent))
        """
    }

    public func appendAudit(_ event: AuditEvent) async throws {
        try await writer.run(insert(event))
    }

    public func auditEvents(accountID: UUID?, limit: Int) async throws -> [AuditEvent] {
        let sql: SQL =
            if let accountID {
                "SELECT * FROM audit_events WHERE tenant_id = \(tenant) AND account_id = \(accountID) ORDER BY id DESC LIMIT \(limit)"
            } else {
                "SELECT * FROM audit_events WHERE tenant_id = \(tenant) ORDER BY id DESC LIMIT \(limit)"
            }
        return try await reader.rows(sql).map { try AuditEvent(row: $0) }
    }

    // MARK: Abuse limits

    public func countHit(key: String, windowStart: Date, expiresAt: Date) async throws -> Int {
        Int(
            try await writer.first(
                """
                INSERT INTO rate_limits (tenant_id, key, window_start, hits, expires_at) VALUES (\(tenant), \(key), \(windowStart), 1, \(expiresAt))
                ON CONFLICT (tenant_id, key, window_start) DO UPDATE SET hits = rate_limits.hits + 1 RETURNING hits
                """)?.integer("hits") ?? 1)
    }

    public func refundHit(key: String, windowStart: Date) async throws {
        try await writer.run(
            "UPDATE rate_limits SET hits = hits - 1 WHERE tenant_id = \(tenant) AND key = \(key) AND window_start = \(windowStart) AND hits > 0"
        )
    }

    public func rateLimitHits(key: String, windowStart: Date) async throws -> Int {
        Int(
            try await reader.first(
                "SELECT hits FROM rate_limits WHERE tenant_id = \(tenant) AND key = \(key) AND window_start = \(windowStart)")?.integer(
                    "hits")
                ?? 0)
    }
}
