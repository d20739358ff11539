import Crypto
import Foundation
import PasskeyCore
import PasskeyModels
import PasskeyStore
import WebAuthn

/// Adding, changing and removing tenants (issue 44): the one place `passkeyd tenant`, the server
/// API's `/api/admin/tenants` (an API key with the `tenants` scope) and the console's server
/// operators go through. Each write is checked as the server will read it (its name, its hosts,
/// its settings over the server's), then written to the registry every instance polls, and
/// audited in the default tenant's log.
public struct TenantAdmin: Sendable {
    /// The default tenant's store: the registry and its audit log.
    public let store: any PasskeyStore
    /// The server's settings, which a tenant's are read over.
    public let server: ServerSettings
    /// Whether a tenant's settings may name files on the server (`attestationTrustAnchors`):
    /// the CLI's, run with the server's own access; not the API's or the console's.
    public let namesFiles: Bool
    /// The tenants' own databases (`--database`): opened to count, clear and remove a tenant's
    /// rows there.
    public let databases: TenantDatabases
    let now: @Sendable () -> Date

    public init(
        store: any PasskeyStore, server: ServerSettings, namesFiles: Bool, databases: TenantDatabases? = nil,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store.tenant == TenantID.defaultTenant ? store : store.scoped(to: TenantID.defaultTenant)
        self.server = server
        self.namesFiles = namesFiles
        self.databases = databases ?? TenantDatabases(main: self.store, opener: nil, now: now)
        self.now = now
    }

    /// The settings that name files on the server.
    static let fileKeys: Set<String> = ["attestationTrustAnchors"]

    /// A tenant with its number of accounts (nil: its own database cannot be read now).
    public struct Summary: Sendable {
        public let record: TenantRecord
        public let accounts: Int?
        /// The settings as a JSON object (secrets included: see ``TenantAdmin/redacted(_:)``).
        public var settings: [String: JSONValue] {
            if case .object(let object)? = try? JSONReader.parse(Array(record.settings.utf8)) { object } else { [:] }
        }
    }

    // MARK: Reading

    public func list() async throws -> [Summary] {
        var out: [Summary] = []
        for record in try await store.tenantRecords() { out.append(try await summary(record)) }
        return out
    }

    public func show(_ name: String) async throws -> Summary { try await summary(try await record(name)) }

    public func record(_ name: String) async throws -> TenantRecord {
        guard TenantID.isValid(name), let record = try await store.tenantRecords().first(where: { $0.id == name }) else {
            throw PasskeyServiceError(.tenantNotFound, "No tenant \(Self.quoted(name)).")
        }
        return record
    }

    func summary(_ record: TenantRecord) async throws -> Summary {
        guard record.database != nil else { return Summary(record: record, accounts: try await accounts(of: record)) }
        // A tenant's own database being down does not hide the others from the list.
        return Summary(record: record, accounts: try? await accounts(of: record))
    }

    func accounts(of record: TenantRecord) async throws -> Int {
        try await databases.store(for: record.database).scoped(to: record.id).statistics(now: now(), activeSince: now()).accounts
    }

    // MARK: Writing

    /// Adds tenant `name`: `settings` is a JSON object of the server's setting names (`rpID` and
    /// `origins` at least); `hosts` empty means the hosts of its origins. `database`: the URL of a
    /// database of its own (the CLI's alone: it names a file or a server the process connects
    /// to), opened and migrated here, any rows left there under its name deleted.
    public func add(name: String, hosts: [String], settings: Data, database: String? = nil, by actor: String) async throws -> TenantRecord {
        try refuseFiles(in: settings, tenant: name)
        let object = try Self.merged(patch: settings, into: Data("{}".utf8))
        var record = try validated(name: name, hosts: hosts, settings: object, createdAt: nil)
        try await refuseAnotherIdentity(record)
        if let database {
            record.database = try await prepareDatabase(database, for: name)
        }
        do {
            try await store.addTenant(record)
        } catch let error as StoreError where error.code == .conflict {
            throw APIError(
                .conflict, "conflict",
                error.reason.contains("host") ? error.reason : "The name \(name) or one of its hosts is taken: \(error.reason)")
        }
        try await audit(.tenantAdded, record, by: actor)
        return record
    }

    /// Changes tenant `name`: `hosts` replaces its hosts when given; `patch` is a JSON merge
    /// patch (RFC 7396) of its settings: a member replaces that setting, `null` removes it, an
    /// object merges into the setting's object.
    public func change(name: String, hosts: [String]?, patch: Data?, by actor: String) async throws -> TenantRecord {
        let current = try await record(name)
        if let patch { try refuseFiles(in: patch, tenant: name) }
        let object = try patch.map { try Self.merged(patch: $0, into: Data(current.settings.utf8)) } ?? Data(current.settings.utf8)
        var record = try validated(name: name, hosts: hosts ?? current.hosts, settings: object, createdAt: current.createdAt)
        record.database = current.database
        try await refuseAnotherIdentity(record)
        // Strictly later than the record read: the next change's compare (below) tells them apart.
        record.updatedAt = max(record.updatedAt, current.updatedAt.addingTimeInterval(0.001))
        do {
            guard try await store.updateTenant(record, unchangedSince: current.updatedAt) else {
                throw PasskeyServiceError(.tenantNotFound, "No tenant \(Self.quoted(name)).")
            }
        } catch let error as StoreError where error.code == .conflict {
            throw APIError(.conflict, "conflict", error.reason)
        }
        try await audit(.tenantChanged, record, by: actor)
        return record
    }

    /// Removes tenant `name`: refused while it has accounts, unless `deleteData` (every row it
    /// owns goes with it).
    public func remove(name: String, deleteData: Bool, by actor: String) async throws {
        let current = try await record(name)
        // A tenant with a database of its own: its accounts are counted there, and its rows
        // deleted there once the registry no longer names it (a failure then leaves rows that
        // a tenant added later under the name does not inherit: `add` clears them).
        var own: (any PasskeyStore)?
        if let database = current.database {
            // Unreachable: 503, and the tenant stays (removed once its database can be read).
            let tenantStore = try await databases.store(for: database)
            let count = try await tenantStore.scoped(to: name).statistics(now: now(), activeSince: now()).accounts
            if count > 0 && !deleteData { throw Self.hasAccounts(name, count) }
            own = tenantStore
        }
        switch try await store.removeTenant(id: name, deleteData: deleteData) {
        case .removed:
            try await audit(.tenantRemoved, current, by: actor, detail: deleteData ? "with its data" : nil)
            guard let own else { return }
            do {
                try await own.deleteTenantData(id: name)
            } catch {
                // Removed, and audited; its rows there stay until a tenant of the name is added
                // to that database again (which clears them) or they are deleted by hand.
                throw StoreError(
                    .unavailable,
                    "tenant \(name) is removed, but its rows in its own database were not deleted (\(error)): adding a tenant of the name there again clears them"
                )
            }
        case .notFound: throw PasskeyServiceError(.tenantNotFound, "No tenant \(Self.quoted(name)).")
        case .hasAccounts(let count): throw Self.hasAccounts(name, count)
        }
    }

    static func hasAccounts(_ name: String, _ count: Int) -> PasskeyServiceError {
        PasskeyServiceError(
            .tenantHasAccounts, "Tenant \(name) has \(count) accounts: remove it with its data (deleteData) to delete them with it.")
    }

    /// Opens and migrates the database a tenant being added names, after checking the name is
    /// free. Never another server's database (its secret or registry tells), never rows this
    /// server did not put there: rows under the name are deleted only when this registry's mark
    /// is on them (an earlier tenant of the name, removed) or when they hold no account. Then
    /// marks the database as holding this tenant. Returns the URL to keep.
    func prepareDatabase(_ url: String, for name: String) async throws -> String {
        guard namesFiles else {
            throw PasskeyServiceError(
                .invalidTenant, "A tenant's own database is chosen when it is added with passkeyd tenant add --database, on the server.")
        }
        guard url != server.databaseURL else {
            throw PasskeyServiceError(.invalidTenant, "\(PostgresStore.redacted(url)) is the server's database: leave --database out.")
        }
        if try await store.tenantRecords().contains(where: { $0.id == name }) {
            throw APIError(.conflict, "conflict", "The name \(name) is taken.")
        }
        let tenantStore: any PasskeyStore
        do {
            tenantStore = try await databases.store(for: url)
        } catch {
            throw PasskeyServiceError(.invalidTenant, "The database \(PostgresStore.redacted(url)) cannot be used: \(error)")
        }
        let shown = PostgresStore.redacted(url)
        let secret = try await store.serverSecret()
        guard try await tenantStore.serverSecret() != secret else {
            throw PasskeyServiceError(.invalidTenant, "\(shown) is the server's database: leave --database out.")
        }
        let registry = try await tenantStore.tenantsVersion()
        let tenants = try await tenantStore.tenantRecords().count
        let ownAccounts = try await tenantStore.statistics(now: now(), activeSince: now()).accounts
        if registry > 0 || tenants > 0 || ownAccounts > 0 {
            throw PasskeyServiceError(
                .invalidTenant,
                "\(shown) is a passkeyd server's database (it has tenants or accounts of its own): give the tenant one of its own.")
        }
        let mark = Array(SHA256.hash(data: Array("passkeyd tenant registry".utf8) + secret))
        let tenantRows = tenantStore.scoped(to: name)
        switch try await tenantStore.tenantMark(id: name) {
        case mark?:
            break
        case _?:
            throw PasskeyServiceError(.invalidTenant, "\(shown) holds a tenant \(name) of another server: give this one another database.")
        case nil:
            let accounts = try await tenantRows.statistics(now: now(), activeSince: now()).accounts
            if accounts > 0 {
                throw PasskeyServiceError(
                    .invalidTenant, "\(shown) holds \(accounts) accounts of a tenant \(name) that this server did not put there.")
            }
        }
        try await tenantStore.deleteTenantData(id: name)
        try await tenantStore.setTenantMark(id: name, mark: mark)
        return url
    }

    func audit(_ kind: AuditEvent.Kind, _ record: TenantRecord, by actor: String, detail: String? = nil) async throws {
        let text = "\(record.id) on \(record.hosts.joined(separator: ","))" + (detail.map { " (\($0))" } ?? "")
        try await store.appendAudit(AuditEvent(time: now(), kind: kind, userAgent: actor, detail: text))
    }

    // MARK: Checks

    /// Checks a tenant before it is written: its name, its hosts (normalized; never the server's
    /// own), its settings read as the server will read them. Returns the record to write.
    func validated(name: String, hosts given: [String], settings json: Data, createdAt: Date?) throws -> TenantRecord {
        guard TenantID.isValid(name), name != TenantID.defaultTenant else {
            throw PasskeyServiceError(
                .invalidTenant,
                "\(Self.quoted(name)) cannot name a tenant: use 1 to 63 of a-z, 0-9 and -, not first or last (and not \"default\", the server's own)."
            )
        }
        let domain: ServerConfiguration
        do {
            (domain, _) = try TenantSettings.read(tenant: name, json: json, server: server)
        } catch {
            throw PasskeyServiceError(.invalidTenant, error.description)
        }
        guard given.count <= 64 else { throw PasskeyServiceError(.invalidTenant, "A tenant has at most 64 hosts.") }
        var hosts: [String] = []
        for host in given.isEmpty ? TenantHost.hosts(ofOrigins: domain.webOrigins) : given {
            guard let normalized = TenantHost.normalize(host) else {
                throw PasskeyServiceError(
                    .invalidTenant, "\(Self.quoted(host)) is not a host name (an IDN is given as its A-label, xn--…).")
            }
            if !hosts.contains(normalized) { hosts.append(normalized) }
        }
        guard !hosts.isEmpty else { throw PasskeyServiceError(.invalidTenant, "Give a host: its origins name none.") }
        let own = Set(TenantHost.hosts(ofOrigins: server.domain.webOrigins))
        if let taken = hosts.first(where: own.contains) {
            throw PasskeyServiceError(.invalidTenant, "\(taken) is the server's own host (the default tenant's origins).")
        }
        return TenantRecord(
            id: name, hosts: hosts, settings: String(decoding: json, as: UTF8.self), createdAt: createdAt ?? now(), updatedAt: now())
    }

    /// Refuses a tenant whose web origins or token issuer are the server's or another tenant's:
    /// its tokens would name another relying party's issuer (an app checking that issuer would
    /// take them), and its ceremonies would accept another's pages as its own.
    func refuseAnotherIdentity(_ record: TenantRecord) async throws {
        guard let (domain, _) = try? TenantSettings.read(tenant: record.id, json: Data(record.settings.utf8), server: server) else {
            return
        }
        var others: [(name: String, domain: ServerConfiguration)] = [("the server", server.domain)]
        for other in try await store.tenantRecords() where other.id != record.id {
            // A taken host is the conflict the registry would answer: said first, as it says it.
            if let taken = record.hosts.first(where: other.hosts.contains) {
                throw APIError(.conflict, "conflict", "the host \(taken) is another tenant's")
            }
            if let (theirs, _) = try? TenantSettings.read(tenant: other.id, json: Data(other.settings.utf8), server: server) {
                others.append(("tenant \(other.id)", theirs))
            }
        }
        let origins = Set(domain.webOrigins.map { $0.lowercased() })
        for (name, theirs) in others {
            if let shared = theirs.webOrigins.first(where: { origins.contains($0.lowercased()) }) {
                throw PasskeyServiceError(.invalidTenant, "The origin \(shared) is \(name)'s: a tenant's origins are its own.")
            }
            if Self.sameIssuer(theirs.issuer, domain.issuer) {
                throw PasskeyServiceError(
                    .invalidTenant, "The token issuer \(domain.issuer) is \(name)'s: set tokens.issuer (or origins) of the tenant's own.")
            }
        }
    }

    /// Whether two issuers name the same one: compared as URLs (scheme and host in any case, a
    /// default port, a trailing `/`, surrounding spaces), since `tokens.issuer` is free text.
    package static func sameIssuer(_ a: String, _ b: String) -> Bool {
        func key(_ text: String) -> String {
            var value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            while value.hasSuffix("/") { value.removeLast() }
            guard var parts = URLComponents(string: value), let scheme = parts.scheme?.lowercased() else { return value.lowercased() }
            parts.scheme = scheme
            parts.host = parts.host?.lowercased()
            if (scheme == "https" && parts.port == 443) || (scheme == "http" && parts.port == 80) { parts.port = nil }
            return parts.string ?? value.lowercased()
        }
        return key(a) == key(b)
    }

    /// Refuses a patch that sets a setting naming files on the server, unless ``namesFiles``
    /// (only what the patch sets counts: a tenant the CLI gave one can still be changed here).
    func refuseFiles(in patch: Data, tenant name: String) throws {
        guard !namesFiles else { return }
        guard case .object(let object)? = try? JSONReader.parse(Array(patch)) else {
            throw PasskeyServiceError(.invalidTenant, "A tenant's settings are a JSON object.")
        }
        if let key = object.keys.sorted().first(where: Self.fileKeys.contains), object[key] != .null {
            throw PasskeyServiceError(
                .invalidTenant, "tenant \(name): \(key) names files on the server: set it with passkeyd tenant set, on the server.")
        }
    }

    /// `patch` (a JSON object) merged into `target` (a JSON object) as RFC 7396 says, written
    /// with sorted keys.
    static func merged(patch: Data, into target: Data) throws -> Data {
        guard let patchObject = try? JSONSerialization.jsonObject(with: patch) as? [String: Any] else {
            throw PasskeyServiceError(.invalidTenant, "A tenant's settings are a JSON object.")
        }
        let targetObject = (try? JSONSerialization.jsonObject(with: target)) as? [String: Any] ?? [:]
        let result = merge(patchObject, into: targetObject)
        return try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    static func merge(_ patch: [String: Any], into target: [String: Any]) -> [String: Any] {
        var result = target
        for (key, value) in patch {
            if value is NSNull {
                result[key] = nil
            } else if let object = value as? [String: Any] {
                result[key] = merge(object, into: result[key] as? [String: Any] ?? [:])
            } else {
                result[key] = value
            }
        }
        return result
    }

    /// `settings` with every member that holds a secret (a name with `secret` or `password`
    /// in it, at any depth: a webhook's signing secret) shown as `[redacted]`: what the server API
    /// and the console answer. A change that sends `[redacted]` back for one keeps it (the
    /// console's merge patch leaves an unchanged member out).
    public static func redacted(_ settings: [String: JSONValue]) -> [String: JSONValue] {
        func walk(_ value: JSONValue, key: String?) -> JSONValue {
            if let key, key.lowercased().contains("secret") || key.lowercased().contains("password"), value != .null {
                return .string("[redacted]")
            }
            switch value {
            case .object(let members): return .object(members.reduce(into: [:]) { $0[$1.key] = walk($1.value, key: $1.key) })
            case .array(let items): return .array(items.map { walk($0, key: nil) })
            default: return value
            }
        }
        return settings.reduce(into: [:]) { $0[$1.key] = walk($1.value, key: $1.key) }
    }

    /// A name or host from a request, shown in an error: quoted, at most 64 bytes, no control
    /// characters.
    static func quoted(_ text: String) -> String {
        let clean = String(
            String.UnicodeScalarView(
                text.unicodeScalars.prefix(64).filter { !$0.properties.isDefaultIgnorableCodePoint && $0.value >= 0x20 && $0.value != 0x7F }
            ))
        return "\"\(clean)\""
    }
}
