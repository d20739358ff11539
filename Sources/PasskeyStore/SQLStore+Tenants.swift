import Foundation

/// The tenants beside the default one (upkeep: the registry is the server's, not a tenant's).
/// Every change moves the `tenants` settings row's counter, which every instance polls
/// (``tenantsVersion()``), so a change made on one instance is served by all within a poll.
extension SQLStore {
    /// The default tenant and every tenant of this database, by name: those of its registry,
    /// and those another server's registry keeps here (a tenant's own database, marked).
    static func allTenants(_ db: any SQLConnection) async throws -> [String] {
        let registry = try await db.rows("SELECT id FROM tenants ORDER BY id").map { try $0.text("id") }
        var seen: Set<String> = [TenantID.defaultTenant]
        return [TenantID.defaultTenant] + (registry + (try await marks(db))).filter { seen.insert($0).inserted }
    }

    /// The names marked in this database (`tenant_mark/NAME`; compared by prefix, since `_` is a
    /// wildcard of LIKE).
    static func marks(_ db: any SQLConnection) async throws -> [String] {
        try await db.rows("SELECT name FROM settings WHERE substr(name, 1, 12) = 'tenant_mark/' ORDER BY name").map {
            String(try $0.text("name").dropFirst("tenant_mark/".count))
        }
    }

    public func markedTenants() async throws -> [String] { try await Self.marks(upkeepReader) }

    public func tenantMark(id: String) async throws -> [UInt8]? {
        try await upkeepReader.first("SELECT value FROM settings WHERE name = \("tenant_mark/" + id)").map { try $0.bytes("value") }
    }

    public func setTenantMark(id: String, mark: [UInt8]) async throws {
        try await upkeepWriter.run(
            """
            INSERT INTO settings (name, value) VALUES (\("tenant_mark/" + id), \(mark))
            ON CONFLICT (name) DO UPDATE SET value = excluded.value
            """)
    }

    /// The counter every change to the registry moves (0 before the first).
    public func tenantsVersion() async throws -> Int64 {
        guard let value = try await upkeepReader.first("SELECT value FROM settings WHERE name = 'tenants'").map({ try $0.bytes("value") })
        else { return 0 }
        return Int64(String(decoding: value, as: UTF8.self)) ?? 0
    }

    /// Moves the registry's counter (in the caller's transaction). The row is made if missing,
    /// then locked before it is read: two changes committed at once each move it (read without
    /// the lock, both read N and wrote N + 1, and an instance that polled between them never
    /// saw the second).
    private static func bumpTenantsVersion(_ db: any SQLConnection, dialect: SQLDialect) async throws {
        try await db.execute("INSERT INTO settings (name, value) VALUES ('tenants', \(Array("0".utf8))) ON CONFLICT (name) DO NOTHING")
        let current = try await db.first("SELECT value FROM settings WHERE name = 'tenants'\(sql: dialect.forUpdate)").map {
            try $0.bytes("value")
        }
        let next = (current.flatMap { Int64(String(decoding: $0, as: UTF8.self)) } ?? 0) + 1
        try await db.execute("UPDATE settings SET value = \(Array(String(next).utf8)) WHERE name = 'tenants'")
    }

    public func tenantRecords() async throws -> [TenantRecord] {
        let hosts = try await upkeepReader.rows("SELECT host, tenant_id FROM tenant_hosts ORDER BY host").reduce(into: [String: [String]]())
        {
            $0[try $1.text("tenant_id"), default: []].append(try $1.text("host"))
        }
        return try await upkeepReader.rows("SELECT * FROM tenants ORDER BY id").map { row in
            let id = try row.text("id")
            return TenantRecord(
                id: id, hosts: hosts[id] ?? [], settings: try row.text("settings"), createdAt: try row.date("created_at"),
                updatedAt: try row.date("updated_at"), database: try row.optionalText("database_url"))
        }
    }

    /// `conflict` when the name or one of the hosts is taken (nothing is written then).
    ///
    /// A new tenant starts with no rows: any left under its name are deleted first. A removed
    /// tenant's service, still built on an instance until its next poll, may have written some
    /// after the removal (a session, an audit line); a tenant added later under the same name
    /// must not inherit them.
    public func addTenant(_ tenant: TenantRecord) async throws {
        guard tenant.id != TenantID.defaultTenant else { throw StoreError(.conflict, "the name default is the server's own tenant") }
        let dialect = self.dialect
        try await upkeepTransaction { db in
            try await db.execute(
                """
                INSERT INTO tenants (id, settings, created_at, updated_at, version, database_url)
                VALUES (\(tenant.id), \(tenant.settings), \(tenant.createdAt), \(tenant.updatedAt), 1, \(tenant.database))
                """)
            try await Self.deleteRows(db, of: tenant.id, dialect: dialect)
            try await Self.insertHosts(db, tenant: tenant.id, hosts: tenant.hosts)
            try await Self.bumpTenantsVersion(db, dialect: dialect)
        }
    }

    /// Replaces a tenant's settings and hosts (never its database); false when there is no such
    /// tenant. `conflict` when a host is another tenant's.
    public func updateTenant(_ tenant: TenantRecord, unchangedSince: Date?) async throws -> Bool {
        let dialect = self.dialect
        return try await upkeepTransaction { db in
            let updated =
                if let unchangedSince {
                    try await db.run(
                        """
                        UPDATE tenants SET settings = \(tenant.settings), updated_at = \(tenant.updatedAt), version = version + 1
                        WHERE id = \(tenant.id) AND updated_at = \(unchangedSince) RETURNING 1
                        """)
                } else {
                    try await db.run(
                        """
                        UPDATE tenants SET settings = \(tenant.settings), updated_at = \(tenant.updatedAt), version = version + 1
                        WHERE id = \(tenant.id) RETURNING 1
                        """)
                }
            guard updated == 1 else {
                guard unchangedSince != nil, try await db.run("SELECT 1 FROM tenants WHERE id = \(tenant.id)") == 1 else { return false }
                throw StoreError(.conflict, "tenant \(tenant.id) was changed meanwhile: read it again and make the change on that")
            }
            try await db.execute("DELETE FROM tenant_hosts WHERE tenant_id = \(tenant.id)")
            try await Self.insertHosts(db, tenant: tenant.id, hosts: tenant.hosts)
            try await Self.bumpTenantsVersion(db, dialect: dialect)
            return true
        }
    }

    public func deleteTenantData(id: String) async throws {
        guard id != TenantID.defaultTenant else { return }
        let dialect = self.dialect
        try await upkeepTransaction { db in try await Self.deleteRows(db, of: id, dialect: dialect) }
    }

    /// Every row tenant `id` owns, children first, and its signing keys' version.
    private static func deleteRows(_ db: any SQLConnection, of id: String, dialect: SQLDialect) async throws {
        for table in dialect.tenantTables.reversed() {
            try await db.execute("DELETE FROM \(sql: SQLFragment(text: table)) WHERE tenant_id = \(id)")
        }
        try await db.execute("DELETE FROM settings WHERE name = \("signing_keys/" + id)")
    }

    private static func insertHosts(_ db: any SQLConnection, tenant: String, hosts: [String]) async throws {
        for host in hosts {
            guard
                try await db.run(
                    "INSERT INTO tenant_hosts (host, tenant_id) VALUES (\(host), \(tenant)) ON CONFLICT (host) DO NOTHING RETURNING 1") == 1
            else { throw StoreError(.conflict, "the host \(host) is another tenant's") }
        }
    }

    /// Removes a tenant: refused while it has accounts, unless `deleteData`, which deletes every
    /// row it owns in the same transaction (children first).
    public func removeTenant(id: String, deleteData: Bool) async throws -> TenantRemoval {
        guard id != TenantID.defaultTenant else { return .notFound }
        let dialect = self.dialect
        return try await upkeepTransaction { db in
            guard try await db.run("SELECT 1 FROM tenants WHERE id = \(id)\(sql: dialect.forUpdate)") == 1 else { return .notFound }
            let accounts = try await db.count("SELECT COUNT(*) AS n FROM accounts WHERE tenant_id = \(id)")
            if accounts > 0 && !deleteData { return .hasAccounts(accounts) }
            try await Self.deleteRows(db, of: id, dialect: dialect)
            try await db.execute("DELETE FROM tenants WHERE id = \(id)")
            try await Self.bumpTenantsVersion(db, dialect: dialect)
            return .removed
        }
    }
}
