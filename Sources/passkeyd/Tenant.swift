import ArgumentParser
import Foundation
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore

/// `passkeyd tenant …`: the relying parties one server serves beside its own (issue 44). A tenant
/// is written to the database; every instance serves the change within seconds (no restart).
struct Tenant: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, list, show, change and remove tenants: relying parties served beside the server's own, each on its hosts.",
        subcommands: [Add.self, List.self, Show.self, Set.self, Remove.self])

    /// The settings a tenant's options write (the rest through `--setting key=value`).
    struct SettingOptions: ParsableArguments {
        @Option(name: .customLong("host"), help: "A host name it is served on (repeat; default: the hosts of its origins).")
        var hosts: [String] = []
        @Option(name: .customLong("rp-id"), help: "Its RP ID (a registrable domain its origins are under).")
        var rpID: String?
        @Option(name: .customLong("origin"), help: "An allowed origin: https://… or android:apk-key-hash:… (repeat).")
        var origins: [String] = []
        @Option(name: .customLong("rp-name"), help: "The name people see (default: the RP ID).")
        var rpName: String?
        @Option(name: .customLong("related-origin"), help: "An origin served in /.well-known/webauthn (repeat).")
        var relatedOrigins: [String] = []
        @Option(name: .customLong("apple-app-id"), help: "TEAMID.bundle.id of an iOS app (repeat).")
        var appleAppIDs: [String] = []
        @Option(
            name: .customLong("setting"),
            help: "Any other setting, as in passkeyd.json: key=value with a dotted key; the value is JSON or text (repeat).")
        var settings: [String] = []

        /// These options as a JSON merge patch of a tenant's settings (a list option given
        /// replaces the list; `--setting key=null` removes a setting).
        func patch() throws -> Data {
            var object: [String: Any] = [:]
            if let rpID { object["rpID"] = rpID }
            if !origins.isEmpty { object["origins"] = origins }
            if let rpName { object["rpName"] = rpName }
            if !relatedOrigins.isEmpty { object["relatedOrigins"] = relatedOrigins }
            if !appleAppIDs.isEmpty { object["appleAppIDs"] = appleAppIDs }
            for setting in settings {
                guard let equals = setting.firstIndex(of: "="), equals != setting.startIndex else {
                    throw ValidationError("--setting \(setting): write key=value")
                }
                let key = String(setting[..<equals]), text = String(setting[setting.index(after: equals)...])
                let value =
                    (try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])) ?? text
                Tenant.set(&object, path: key.split(separator: ".").map(String.init), value: value)
            }
            return try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        }
    }

    /// The server's settings for `passkeyd tenant`: as every verb's, except that the server's
    /// database is `--server-database` (`tenant add --database` names the tenant's own).
    struct Options: ParsableArguments {
        @Option(name: .customLong("config"), help: "Settings file (default: passkeyd.json in the working directory, if present).")
        var config: String?

        @Option(
            name: .customLong("server-database"),
            help: "The server's database URL (overrides the settings), e.g. sqlite://passkeyd.sqlite; the registry of tenants is there.")
        var serverDatabase: String?

        @Option(help: .hidden) var tenant: String?

        var server: ServerOptions {
            get throws {
                if tenant != nil { throw ValidationError("--tenant does not apply to passkeyd tenant: it acts on the whole server") }
                return try ServerOptions.parse(
                    (config.map { ["--config", $0] } ?? []) + (serverDatabase.map { ["--database", $0] } ?? []))
            }
        }
    }

    static func set(_ object: inout [String: Any], path: [String], value: Any) {
        guard let first = path.first else { return }
        if path.count == 1 {
            object[first] = value
            return
        }
        var nested = object[first] as? [String: Any] ?? [:]
        set(&nested, path: Array(path.dropFirst()), value: value)
        object[first] = nested
    }

    /// Who the audit line names: the CLI and its user, as `passkeyd admin` does.
    static var actor: String { "passkeyd tenant (\(ProcessInfo.processInfo.environment["USER"] ?? "admin"))" }

    /// Runs `body` with the tenants' administration on the server's database (files may be named:
    /// this runs with the server's own access), its refusals as the command's.
    static func withAdmin<T>(
        _ options: Options, existingServerDatabase: Bool = false, _ body: (TenantAdmin, any PasskeyStore) async throws -> T
    ) async throws -> T {
        let loaded = try options.server.load()
        // With a tenant's own database, the registry must be the running server's, never a new
        // empty one made here: a script that named the server's database --database, as the
        // other verbs take it, would otherwise put the tenant in a registry no server reads.
        if existingServerDatabase, loaded.databaseURL.hasPrefix("sqlite://"),
            !FileManager.default.fileExists(atPath: String(loaded.databaseURL.dropFirst("sqlite://".count)))
        {
            throw ValidationError(
                "the server's database \(loaded.databaseURL) does not exist: run passkeyd tenant with the server's settings, or name its database with --server-database (in tenant add, --database names the tenant's own database)"
            )
        }
        let (store, _) = try await Database.openMigrated(loaded.databaseURL, logger: Logger(label: "passkeyd.tenant"))
        defer { (store as? PostgresStore)?.close() }
        let databases = TenantDatabases(main: store, opener: opener(creating: existingServerDatabase))
        let result: Result<T, any Error>
        do {
            result = .success(try await body(TenantAdmin(store: store, server: loaded, namesFiles: true, databases: databases), store))
        } catch {
            result = .failure(error)
        }
        await databases.close()
        do {
            return try result.get()
        } catch let error as PasskeyServiceError {
            throw ValidationError(error.message)
        } catch let error as APIError {
            throw ValidationError(error.message)
        }
    }

    /// A store of the tenant `name` (an existing one; nil or `default`: the server's own): the
    /// server's database scoped to it, or its own database's (`opened`, which the caller closes).
    struct Scoped {
        let store: any PasskeyStore
        let record: TenantRecord?
        let opened: (any PasskeyStore)?
        func close() { (opened as? PostgresStore)?.close() }
    }

    static func store(_ store: any PasskeyStore, for name: String?) async throws -> Scoped {
        guard let name, name != TenantID.defaultTenant else { return Scoped(store: store, record: nil, opened: nil) }
        guard let record = try await store.tenantRecords().first(where: { $0.id == name }) else {
            throw ValidationError("no tenant \(name) (passkeyd tenant list)")
        }
        guard let database = record.database else { return Scoped(store: store.scoped(to: name), record: record, opened: nil) }
        let own = try await Database.openTenantDatabase(database, logger: Logger(label: "passkeyd.tenant"))
        return Scoped(store: own.scoped(to: name), record: record, opened: own)
    }

    /// Opens and migrates a tenant's own database, as the server does: a SQLite file that is gone
    /// is refused (never made again empty), except by `tenant add`, which makes it.
    static func opener(creating: Bool) -> TenantDatabases.Opener {
        { url in
            let logger = Logger(label: "passkeyd.tenant")
            if creating { return try await Database.openMigrated(url, logger: logger).0 }
            return try await Database.openTenantDatabase(url, logger: logger)
        }
    }

    /// Before `tenant add` migrates the database `--database` names: a database that already has
    /// passkeyd's schema must already hold tenants of a registry (its marks), never be another
    /// server's own, whose schema this command would otherwise upgrade before finding out.
    static func refuseAnotherServersDatabase(_ url: String) async throws {
        // A SQLite file that is not there yet is new (made by the add, not here).
        if url.hasPrefix("sqlite://"), !FileManager.default.fileExists(atPath: String(url.dropFirst("sqlite://".count))) { return }
        let version: Int
        let marked: [String]
        do {
            let store = try Database.open(url, logger: Logger(label: "passkeyd.tenant"))
            defer { (store as? PostgresStore)?.close() }
            version = try await store.schemaVersion()
            marked = version > 0 ? try await store.markedTenants() : []
        } catch {
            throw ValidationError("the database \(PostgresStore.redacted(url)) cannot be used: \(error)")
        }
        if version > 0 && marked.isEmpty {
            throw ValidationError(
                "the database \(PostgresStore.redacted(url)) already has passkeyd's schema but holds no tenant: it is a server's own database; give the tenant a new, empty one"
            )
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a tenant: its name, hosts, RP ID and origins (and any other setting).",
            discussion:
                "Example: passkeyd tenant add shop --host shop.example.com --rp-id shop.example.com --origin https://shop.example.com")
        @OptionGroup var options: Tenant.Options
        @Argument(help: "Its name: 1 to 63 of a-z, 0-9 and -.") var name: String
        @OptionGroup var settings: SettingOptions
        @Option(
            name: .customLong("database"),
            help:
                "A database of its own for its accounts and everything else it owns (sqlite://FILE or postgres://…; default: the server's). Created or migrated now; chosen once."
        )
        var tenantDatabase: String?

        func run() async throws {
            guard settings.rpID != nil, !settings.origins.isEmpty else { throw ValidationError("a tenant needs --rp-id and --origin") }
            if let tenantDatabase { try await Tenant.refuseAnotherServersDatabase(Database.absolute(tenantDatabase)) }
            try await withAdmin(options, existingServerDatabase: tenantDatabase != nil) { admin, _ in
                let record = try await admin.add(
                    name: name, hosts: settings.hosts, settings: try settings.patch(), database: tenantDatabase.map(Database.absolute),
                    by: Tenant.actor)
                print(
                    "added tenant \(name), served on \(record.hosts.joined(separator: ", "))"
                        + (record.database.map { ", its rows in \(PostgresStore.redacted($0))" } ?? ""))
                FileHandle.standardError.write(
                    Data(
                        "every instance serves it within a few seconds; its first console administrator: passkeyd admin bootstrap-link --tenant \(name)\n"
                            .utf8))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tenants: name, RP ID, hosts, accounts.")
        @OptionGroup var options: Tenant.Options

        func run() async throws {
            try await withAdmin(options) { admin, store in
                let own = TenantHost.hosts(ofOrigins: admin.server.domain.webOrigins)
                let accounts = try await store.statistics(now: Date(), activeSince: Date()).accounts
                print("\(TenantID.defaultTenant)\t\(admin.server.domain.rpID)\t\(own.joined(separator: ","))\t\(accounts) accounts")
                for tenant in try await admin.list() {
                    let rpID = if case .string(let text)? = tenant.settings["rpID"] { text } else { "?" }
                    let accounts = tenant.accounts.map(String.init) ?? "? (its database cannot be read)"
                    let database = tenant.record.database.map { "\tdatabase \(PostgresStore.redacted($0))" } ?? ""
                    print("\(tenant.record.id)\t\(rpID)\t\(tenant.record.hosts.joined(separator: ","))\t\(accounts) accounts\(database)")
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a tenant's hosts and settings as JSON.")
        @OptionGroup var options: Tenant.Options
        @Argument var name: String

        func run() async throws {
            try await withAdmin(options) { admin, _ in
                let tenant = try await admin.show(name)
                let record = tenant.record
                let settings = (try? JSONSerialization.jsonObject(with: Data(record.settings.utf8))) as? [String: Any] ?? [:]
                var shown: [String: Any] = [
                    "name": record.id, "hosts": record.hosts, "settings": settings,
                    "createdAt": ISO8601DateFormatter().string(from: record.createdAt),
                    "updatedAt": ISO8601DateFormatter().string(from: record.updatedAt),
                ]
                shown["accounts"] = tenant.accounts
                shown["database"] = record.database.map(PostgresStore.redacted)
                let data = try JSONSerialization.data(
                    withJSONObject: shown, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a tenant's hosts or settings (the options given replace those values; --setting key=null removes one).")
        @OptionGroup var options: Tenant.Options
        @Argument var name: String
        @OptionGroup var settings: SettingOptions

        func run() async throws {
            try await withAdmin(options) { admin, _ in
                let record = try await admin.change(
                    name: name, hosts: settings.hosts.isEmpty ? nil : settings.hosts, patch: try settings.patch(), by: Tenant.actor)
                print("changed tenant \(name), served on \(record.hosts.joined(separator: ", "))")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a tenant (refused while it has accounts, unless --delete-data, which deletes all it owns).")
        @OptionGroup var options: Tenant.Options
        @Argument var name: String
        @Option(help: "The tenant's name again, to confirm.") var confirm: String
        @Flag(help: "Delete its accounts, passkeys, sessions, keys and everything else it owns.") var deleteData = false

        func run() async throws {
            guard confirm == name else { throw ValidationError("--confirm must repeat the tenant's name (\(name))") }
            try await withAdmin(options) { admin, _ in
                try await admin.remove(name: name, deleteData: deleteData, by: Tenant.actor)
                print("removed tenant \(name)")
            }
        }
    }
}
