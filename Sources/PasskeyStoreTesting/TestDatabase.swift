import Foundation
import Logging
import PasskeyStore
import PostgresNIO

/// Fresh, empty databases for tests: a SQLite file in a temporary folder, or a new database on
/// the PostgreSQL server `PASSKEYD_TEST_POSTGRES_URL` names (scripts/test starts one).
public enum TestDatabase {
    public enum Kind: String, Sendable, CaseIterable, CustomStringConvertible {
        case sqlite, postgres
        public var description: String { rawValue }
    }

    /// The PostgreSQL server for tests, when there is one.
    public static var postgresURL: String? {
        ProcessInfo.processInfo.environment["PASSKEYD_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The kinds to run store tests on: SQLite always, PostgreSQL when a server is configured.
    public static var kinds: [Kind] { postgresURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// Which store the HTTP suites run on (`PASSKEYD_TEST_STORE=postgres`; default SQLite).
    public static var httpSuiteKind: Kind {
        ProcessInfo.processInfo.environment["PASSKEYD_TEST_STORE"].flatMap(Kind.init(rawValue:)) ?? .sqlite
    }

    /// PostgreSQL creates databases one at a time anyway; queueing here keeps dozens of parallel
    /// tests from piling connections and template copies onto a busy machine at once.
    private actor Creation {
        func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T { try await body() }
    }
    private static let creation = Creation()

    /// A database URL for a new, empty database of `kind`.
    public static func makeURL(_ kind: Kind) async throws -> String {
        switch kind {
        case .sqlite:
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-test-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            return "sqlite://" + directory.appendingPathComponent("test.sqlite").path
        case .postgres:
            guard let admin = postgresURL, var components = URLComponents(string: admin) else {
                throw StoreError(.invalidDatabase, "PASSKEYD_TEST_POSTGRES_URL is not set (./scripts/test starts a PostgreSQL server)")
            }
            let name = "passkeyd_t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let configuration = PostgresConnection.Configuration(
                host: components.host ?? "127.0.0.1", port: components.port ?? 5432, username: components.user ?? "postgres",
                password: components.password, database: "postgres", tls: .disable)
            try await creation.run {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: Logger(label: "test"))
                do {
                    try await connection.query(PostgresQuery(unsafeSQL: createRole), logger: Logger(label: "test"))
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) OWNER \(applicationRole)"), logger: Logger(label: "test"))
                } catch {
                    try? await connection.close()
                    throw error
                }
                try await connection.close()
            }
            components.path = "/" + name
            components.user = applicationRole
            components.password = nil
            return components.string!
        }
    }

    /// The role the tests' stores connect as: it owns their databases and is no superuser, so
    /// PostgreSQL's row-level security (migration 17) holds for every test as it does for a
    /// deployment (a superuser is above it).
    public static let applicationRole = "passkeyd_app"

    /// Creates ``applicationRole`` unless it exists (another test process may create it at the
    /// same moment: that one's duplicate is not an error).
    static let createRole = """
        DO $$ BEGIN
            CREATE ROLE \(applicationRole) LOGIN NOSUPERUSER NOBYPASSRLS;
        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
        END $$
        """

    /// The options of every PostgreSQL store a test opens (a test of its own options starts
    /// from these). Tests run many suites in parallel on two cores; the 5 s production deadline
    /// and the outage breaker are tested against real outages (PostgresClusterTests,
    /// PostgresOutageTests), not against this machine's load: fresh-clone runs starved
    /// PostgreSQL past a 10 s probe while a hundred suites ran, and the breaker then answered
    /// suites' queries as an outage (twice: once through a store opened with the defaults).
    public static func postgresOptions(maxConnections: Int = 8) -> PostgresStore.Options {
        var options = PostgresStore.Options()
        options.maxConnections = maxConnections
        options.operationTimeout = .seconds(30)
        options.suspectAfter = .seconds(10)
        options.probeTimeout = .seconds(30)
        return options
    }

    /// A migrated store on a new database of `kind`.
    public static func makeStore(_ kind: Kind) async throws -> any PasskeyStore {
        let store = try await makeUnmigratedStore(kind)
        try await store.migrate()
        return store
    }

    /// A store on a new database of `kind` with no migration applied: a migration test takes it
    /// as far as it needs (`migrate(through:)`), writes what an older version held, and goes on.
    public static func makeUnmigratedStore(_ kind: Kind) async throws -> SQLStore {
        try openUnmigrated(url: try await makeURL(kind))
    }

    /// The store a test database's URL names (``makeURL(_:)``), migrated: what a server opens
    /// for a tenant's own database.
    public static func open(url: String) async throws -> any PasskeyStore {
        let store = try openUnmigrated(url: url)
        try await store.migrate()
        return store
    }

    static func openUnmigrated(url: String) throws -> SQLStore {
        if url.hasPrefix("sqlite://") { return try SQLiteStore(path: String(url.dropFirst("sqlite://".count))) }
        return try PostgresStore(url: url, options: postgresOptions())
    }
}
