import Foundation
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore

/// Opens the store a database URL names: `sqlite://path` (relative or absolute),
/// `sqlite:///abs/path`, or `postgres://user:password@host:port/database[?sslmode=…]`.
enum Database {
    static func open(_ url: String, logger: Logger = Logger(label: "passkeyd.database")) throws -> any PasskeyStore {
        if url.hasPrefix("sqlite://") {
            let path = String(url.dropFirst("sqlite://".count))
            guard !path.isEmpty else { throw ConfigurationError(setting: "databaseURL", problem: "sqlite:// needs a file path") }
            return try SQLiteStore(path: path)
        }
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            do {
                return try PostgresStore(url: url, logger: logger)
            } catch let error as StoreError {
                throw ConfigurationError(setting: "databaseURL", problem: error.reason)
            }
        }
        throw ConfigurationError(setting: "databaseURL", problem: "\"\(PostgresStore.redacted(url))\" is not sqlite://FILE or postgres://…")
    }

    /// A tenant's own database (`tenant add --database`) as the registry keeps it: a relative
    /// SQLite path made absolute from the working directory of `tenant add`, so that every
    /// process (the server under its supervisor, an admin verb run elsewhere) opens that file.
    static func absolute(_ url: String) -> String {
        guard url.hasPrefix("sqlite://") else { return url }
        let path = String(url.dropFirst("sqlite://".count))
        guard !path.isEmpty, !path.hasPrefix("/") else { return url }
        return "sqlite://" + URL(fileURLWithPath: path).standardizedFileURL.path
    }

    /// Opens and migrates a tenant's own database, which `tenant add` made: a SQLite file that
    /// is not there is refused, never made empty (a wrong working directory or a lost volume
    /// would otherwise serve the tenant with no accounts).
    static func openTenantDatabase(
        _ url: String, logger: Logger, migrations: ServerSettings.Migrations = .apply
    ) async throws -> any PasskeyStore {
        try requireTenantFile(url)
        let store = try open(url, logger: logger)
        do {
            _ = try await prepare(store, url: url, logger: logger, migrations: migrations)
        } catch {
            // Tried again with a new store every few seconds while it cannot be used: this one's
            // pools and outage probes end now.
            (store as? PostgresStore)?.close()
            throw error
        }
        return store
    }

    /// Refuses a tenant's SQLite database that is not there (never made again empty).
    static func requireTenantFile(_ url: String) throws {
        if url.hasPrefix("sqlite://"), !FileManager.default.fileExists(atPath: String(url.dropFirst("sqlite://".count))) {
            throw ConfigurationError(setting: "tenant database", problem: "\(url) does not exist (passkeyd tenant add makes it)")
        }
    }

    /// Several instances share a PostgreSQL database; their rate-limit counts live there too.
    static func isShared(_ url: String) -> Bool { url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") }

    /// Opens and migrates, with a clear message when the database cannot be reached.
    static func openMigrated(_ url: String, logger: Logger) async throws -> (any PasskeyStore, [Int]) {
        let store = try open(url, logger: logger)
        return (store, try await prepare(store, url: url, logger: logger))
    }

    /// Checks the database answers (5 s), migrates it (minutes allowed) and re-keys usernames
    /// after migration 5; a clear message when the database cannot be used.
    /// With `migrations` `check` nothing is applied: pending migrations stop the start (a job
    /// runs `passkeyd migrate` first). A schema newer than this release knows (a newer release's
    /// job ran) is served, with a warning: migrations only add (docs/deploy.md).
    static func prepare(
        _ store: any PasskeyStore, url: String, logger: Logger, migrations: ServerSettings.Migrations = .apply
    ) async throws -> [Int] {
        do {
            // Reachability first, with the ordinary deadline: migrations get minutes, an
            // unreachable database should not.
            try await store.ping()
            let version = try await store.schemaVersion()
            if version > store.knownSchemaVersion {
                logger.warning(
                    "the database schema is newer than this release knows: a newer release migrated it; serving on (its migrations only add)",
                    metadata: ["schema": "\(version)", "known": "\(store.knownSchemaVersion)"])
            }
            if migrations == .check {
                let pending = try await store.pendingMigrations()
                guard pending.isEmpty else {
                    (store as? PostgresStore)?.close()
                    throw MigrationsPending(versions: pending)
                }
                return []
            }
            let applied = try await store.migrate()
            // Migration 5 brought the PRECIS username keys: bring stored keys to them, and report
            // accounts whose names now collide (never merged; an operator decides).
            // Migration 13 added the display name and external id search keys, backfilled by
            // SQL's lower() (ASCII only on SQLite): the same pass folds them in full.
            if applied.contains(5) || applied.contains(13) {
                for collision in try await store.rekeyUsernames() {
                    let line =
                        "username collision: \"\(collision.username)\" (\(collision.accountID)) and \"\(collision.otherUsername)\" "
                        + "(\(collision.otherAccountID)) share the key \"\(collision.key)\"; the first keeps its old key until an operator renames or merges it"
                    logger.warning("\(line)")
                    FileHandle.standardError.write(Data((line + "\n").utf8))
                }
            }
            return applied
        } catch let error as StoreError {
            (store as? PostgresStore)?.close()
            throw DatabaseUnavailable(url: PostgresStore.redacted(url), reason: error.reason)
        }
    }
}

struct MigrationsPending: Error, CustomStringConvertible {
    let versions: [Int]
    var description: String {
        "the database needs migrations \(versions.map(String.init).joined(separator: ", ")) (migrations: check): run `passkeyd migrate` first"
    }
}

struct DatabaseUnavailable: Error, CustomStringConvertible {
    let url: String
    let reason: String
    var description: String { "cannot use the database at \(url): \(reason)" }
}
