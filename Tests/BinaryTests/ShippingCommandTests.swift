import Foundation
import Testing
import WebAuthnTesting

/// What the ways of shipping passkeyd rely on (issue 45): `serve` with `migrations` `check`
/// (a migration Job runs `passkeyd migrate` first), a previous release serving a newer schema
/// during a rolling upgrade, and `passkeyd healthcheck`, the image's HEALTHCHECK.
@Suite("Shipping: migrations as a step, health check")
struct ShippingCommandTests {
    static func run(_ arguments: [String], environment: [String: String] = [:], in directory: URL) throws -> CLI.Result {
        try ServeCommandTests.run(arguments, environment: environment, in: directory)
    }

    @Test func serveWithMigrationsCheckRefusesAPendingMigrationAndAppliesNothing() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let refused = try Self.run(
            ["serve", "--database", "sqlite://db.sqlite"], environment: ["PASSKEYD_MIGRATIONS": "check", "PASSKEYD_LISTEN": "127.0.0.1:0"],
            in: directory)
        #expect(refused.status != 0)
        #expect(
            refused.stderr.contains("the database needs migrations 1, 2, 3") && refused.stderr.contains("run `passkeyd migrate` first"),
            "\(refused.stderr)")
        // Nothing was applied: migrate still finds every migration to do.
        let migrated = try Self.run(["migrate", "--database", "sqlite://db.sqlite"], in: directory)
        #expect(migrated.status == 0 && migrated.stdout.contains("applied migrations 1, 2, 3"), "\(migrated.stdout) \(migrated.stderr)")
    }

    @Test func serveWithMigrationsCheckServesAMigratedDatabase() async throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("db.sqlite").path
        let migrated = try Self.run(["migrate", "--database", "sqlite://\(database)"], in: directory)
        #expect(migrated.status == 0)
        let server = try ServeBinaryTests.Server(database: database, environment: ["PASSKEYD_MIGRATIONS": "check"])
        defer { server.stop() }
        try await server.waitUntilReady()
        let (status, _, _) = try await server.send("GET", "/readyz")
        #expect(status == 200)
    }

    @Test func aBadMigrationsValueIsNamed() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Self.run(
            ["serve", "--database", "sqlite://db.sqlite"], environment: ["PASSKEYD_MIGRATIONS": "later"], in: directory)
        #expect(result.status == 2 && result.stderr.contains("migrations (PASSKEYD_MIGRATIONS)"), "\(result.stderr)")
    }

    /// A rolling upgrade: the new release's `migrate` ran, an instance of the previous release
    /// starts (or restarts) on the newer schema, says so and serves.
    @Test func aPreviousReleaseServesASchemaNewerThanItKnows() async throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("db.sqlite").path
        #expect(try Self.run(["migrate", "--database", "sqlite://\(database)"], in: directory).status == 0)
        // What a newer release's migration leaves: a version this binary does not know.
        let python = ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"] ?? "/usr/bin/python3"
        let insert = try Subprocess.run(
            URL(fileURLWithPath: python),
            [
                "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('INSERT INTO schema_migrations VALUES (999, 0)'); c.commit()",
                database,
            ])
        #expect(insert.status == 0, "\(insert.stderr)")
        for mode in ["apply", "check"] {
            let server = try ServeBinaryTests.Server(database: database, environment: ["PASSKEYD_MIGRATIONS": mode])
            defer { server.stop() }
            try await server.waitUntilReady()
            #expect(try await server.send("GET", "/readyz").0 == 200)
            #expect(server.logTail(200).contains("the database schema is newer than this release knows"), "\(server.logTail())")
        }
    }

    @Test func healthcheckExitsZeroWhileTheServerIsReadyAndOneWhenItIsGone() async throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServeBinaryTests.Server(database: directory.appendingPathComponent("db.sqlite").path)
        try await server.waitUntilReady()
        let port = server.port
        // As the image runs it: the listen address from the settings; a wildcard is asked on loopback.
        for listen in ["127.0.0.1:\(port)", "0.0.0.0:\(port)"] {
            let healthy = try Self.run(["healthcheck"], environment: ["PASSKEYD_LISTEN": listen], in: directory)
            #expect(
                healthy.status == 0 && healthy.stdout.contains("healthy: http://127.0.0.1:\(port)/readyz"),
                "\(healthy.stdout) \(healthy.stderr)")
        }
        let byURL = try Self.run(["healthcheck", "--url", "http://127.0.0.1:\(port)/readyz"], in: directory)
        #expect(byURL.status == 0)
        // A path that is not 200 is unhealthy.
        let notFound = try Self.run(["healthcheck", "--url", "http://127.0.0.1:\(port)/no-such-path"], in: directory)
        #expect(notFound.status == 1 && notFound.stdout.contains("answered 404"), "\(notFound.stdout)")
        server.stop()
        // Nothing listening (a port held bound and closed, so no parallel test's server takes it).
        let closed = try ServeBinaryTests.ClosedPort()
        let gone = try Self.run(["healthcheck"], environment: ["PASSKEYD_LISTEN": "127.0.0.1:\(closed.port)"], in: directory)
        #expect(gone.status == 1 && gone.stdout.contains("unhealthy"), "\(gone.stdout) \(gone.stderr)")
    }

    @Test func healthcheckRefusesAURLThatIsNotHTTP() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for url in ["ftp://127.0.0.1/readyz", "not a url", "http://"] {
            let result = try Self.run(["healthcheck", "--url", url], in: directory)
            #expect(result.status == 2 && result.stderr.contains("is not an http(s) URL"), "\(url): \(result.stderr)")
        }
    }
}
