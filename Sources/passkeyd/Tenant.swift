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

        /// `object` with these options written into it (a list option given replaces the list).
        func apply(to object: inout [String: Any]) throws {
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
        }
    }

    static func set(_ object: inout [String: Any], path: [String], value: Any) {
        guard let first = path.first else { return }
        if path.count == 1 {
            object[first] = value is NSNull ? nil : value
            return
        }
        var nested = object[first] as? [String: Any] ?? [:]
        set(&nested, path: Array(path.dropFirst()), value: value)
        object[first] = nested
    }

    /// Checks a tenant before it is written: its name, its hosts (normalized; never the server's
    /// own), its settings read as the server will read them. Returns the record to write.
    static func validated(
        name: String, hosts given: [String], settings object: [String: Any], loaded: ServerSettings, now: Date, createdAt: Date?
    ) throws -> TenantRecord {
        guard TenantID.isValid(name), name != TenantID.defaultTenant else {
            throw ValidationError(
                "\"\(name)\" cannot name a tenant: use 1 to 63 of a-z, 0-9 and -, not first or last (and not \"default\", the server's own)"
            )
        }
        let json = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        let domain: ServerConfiguration
        do {
            (domain, _) = try TenantSettings.read(tenant: name, json: json, server: loaded)
        } catch {
            throw ValidationError(error.description)
        }
        var hosts: [String] = []
        for host in given.isEmpty ? TenantHost.hosts(ofOrigins: domain.webOrigins) : given {
            guard let normalized = TenantHost.normalize(host) else {
                throw ValidationError("\"\(host)\" is not a host name (an IDN is given as its A-label, xn--…)")
            }
            if !hosts.contains(normalized) { hosts.append(normalized) }
        }
        guard !hosts.isEmpty else { throw ValidationError("give a --host (its origins name none)") }
        let own = Swift.Set(TenantHost.hosts(ofOrigins: loaded.domain.webOrigins))
        if let taken = hosts.first(where: own.contains) {
            throw ValidationError("\(taken) is the server's own host (the default tenant's origins)")
        }
        return TenantRecord(
            id: name, hosts: hosts, settings: String(decoding: json, as: UTF8.self), createdAt: createdAt ?? now, updatedAt: now)
    }

    static func withStore<T>(_ options: ServerOptions, _ body: (any PasskeyStore, ServerSettings) async throws -> T) async throws -> T {
        try options.refuseTenant("tenant")
        let loaded = try options.load()
        let (store, _) = try await Database.openMigrated(loaded.databaseURL, logger: Logger(label: "passkeyd.tenant"))
        defer { (store as? PostgresStore)?.close() }
        return try await body(store, loaded)
    }

    /// `store` scoped to the tenant `name` (an existing one; nil or `default`: the server's own).
    static func store(_ store: any PasskeyStore, for name: String?) async throws -> any PasskeyStore {
        guard let name, name != TenantID.defaultTenant else { return store }
        _ = try await record(name, in: store)
        return store.scoped(to: name)
    }

    static func record(_ name: String, in store: any PasskeyStore) async throws -> TenantRecord {
        guard let record = try await store.tenantRecords().first(where: { $0.id == name }) else {
            throw ValidationError("no tenant \(name) (passkeyd tenant list)")
        }
        return record
    }

    static func settingsObject(_ record: TenantRecord) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(record.settings.utf8))) as? [String: Any] ?? [:]
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a tenant: its name, hosts, RP ID and origins (and any other setting).",
            discussion:
                "Example: passkeyd tenant add shop --host shop.example.com --rp-id shop.example.com --origin https://shop.example.com")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Its name: 1 to 63 of a-z, 0-9 and -.") var name: String
        @OptionGroup var settings: SettingOptions

        func run() async throws {
            guard settings.rpID != nil, !settings.origins.isEmpty else { throw ValidationError("a tenant needs --rp-id and --origin") }
            try await withStore(options) { store, loaded in
                var object: [String: Any] = [:]
                try settings.apply(to: &object)
                let record = try validated(
                    name: name, hosts: settings.hosts, settings: object, loaded: loaded, now: Date(), createdAt: nil)
                do {
                    try await store.addTenant(record)
                } catch let error as StoreError where error.code == .conflict {
                    throw ValidationError(
                        error.reason.contains("host") ? error.reason : "the name \(name) or one of its hosts is taken: \(error.reason)")
                }
                print("added tenant \(name), served on \(record.hosts.joined(separator: ", "))")
                FileHandle.standardError.write(
                    Data(
                        "every instance serves it within a few seconds; its first console administrator: passkeyd admin bootstrap-link --tenant \(name)\n"
                            .utf8))
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the tenants: name, RP ID, hosts, accounts.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            try await withStore(options) { store, loaded in
                let own = TenantHost.hosts(ofOrigins: loaded.domain.webOrigins)
                let accounts = try await store.statistics(now: Date(), activeSince: Date()).accounts
                print("\(TenantID.defaultTenant)\t\(loaded.domain.rpID)\t\(own.joined(separator: ","))\t\(accounts) accounts")
                for record in try await store.tenantRecords() {
                    let rpID = settingsObject(record)["rpID"] as? String ?? "?"
                    let count = try await store.scoped(to: record.id).statistics(now: Date(), activeSince: Date()).accounts
                    print("\(record.id)\t\(rpID)\t\(record.hosts.joined(separator: ","))\t\(count) accounts")
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a tenant's hosts and settings as JSON.")
        @OptionGroup var options: ServerOptions
        @Argument var name: String

        func run() async throws {
            try await withStore(options) { store, _ in
                let record = try await record(name, in: store)
                let accounts = try await store.scoped(to: name).statistics(now: Date(), activeSince: Date()).accounts
                let shown: [String: Any] = [
                    "name": record.id, "hosts": record.hosts, "settings": settingsObject(record), "accounts": accounts,
                    "createdAt": ISO8601DateFormatter().string(from: record.createdAt),
                    "updatedAt": ISO8601DateFormatter().string(from: record.updatedAt),
                ]
                let data = try JSONSerialization.data(
                    withJSONObject: shown, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
            }
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a tenant's hosts or settings (the options given replace those values; --setting key=null removes one).")
        @OptionGroup var options: ServerOptions
        @Argument var name: String
        @OptionGroup var settings: SettingOptions

        func run() async throws {
            try await withStore(options) { store, loaded in
                let current = try await record(name, in: store)
                var object = settingsObject(current)
                try settings.apply(to: &object)
                let record = try validated(
                    name: name, hosts: settings.hosts.isEmpty ? current.hosts : settings.hosts, settings: object, loaded: loaded,
                    now: Date(), createdAt: current.createdAt)
                do {
                    guard try await store.updateTenant(record) else { throw ValidationError("no tenant \(name)") }
                } catch let error as StoreError where error.code == .conflict {
                    throw ValidationError(error.reason)
                }
                print("changed tenant \(name), served on \(record.hosts.joined(separator: ", "))")
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a tenant (refused while it has accounts, unless --delete-data, which deletes all it owns).")
        @OptionGroup var options: ServerOptions
        @Argument var name: String
        @Option(help: "The tenant's name again, to confirm.") var confirm: String
        @Flag(help: "Delete its accounts, passkeys, sessions, keys and everything else it owns.") var deleteData = false

        func run() async throws {
            guard confirm == name else { throw ValidationError("--confirm must repeat the tenant's name (\(name))") }
            try await withStore(options) { store, _ in
                switch try await store.removeTenant(id: name, deleteData: deleteData) {
                case .removed: print("removed tenant \(name)")
                case .notFound: throw ValidationError("no tenant \(name)")
                case .hasAccounts(let count):
                    throw ValidationError("tenant \(name) has \(count) accounts: remove it with --delete-data to delete them with it")
                }
            }
        }
    }
}
