import Foundation
import Testing
import WebAuthnTesting

/// A tenant's own database (issue 44, `tenant add --database`) taken away under concurrent load:
/// its PostgreSQL is stopped with `-m immediate` for 3 s while 6 users sign up on the tenant's host
/// and 6 on the default tenant's (whose database, SQLite, stays up). The default tenant never
/// notices; the tenant's people are answered 503 `database_unavailable` while it is down and
/// sign up again once it is back, without a restart; the process never dies; every sign-up that
/// was acknowledged is in its tenant's database.
@Suite("A tenant's own database stopped under load", .serialized)
struct TenantDatabaseOutageTests {
    static let shopOrigin = "http://shop.localhost:8080"

    /// Runs `body` on a thread of its own (a load of many seconds must not hold one of the
    /// cooperative pool's two threads while the test stops and starts the database).
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
        }
    }

    /// `passkey load --mode sign-up` against `host` on the server's port; its JSON report.
    static func signUps(_ server: ServeBinaryTests.Server, host: String, origin: String, seconds: Int, prefix: String) throws -> (
        report: [String: JSONValueLite], output: String
    ) {
        let result = try PasskeyCLITests.passkey(
            [
                "load", "--server", "http://\(host):\(server.port)", "--origin", origin, "--users", "6", "--duration", "\(seconds)",
                "--mode", "sign-up", "--prefix", prefix, "--json",
            ], timeout: .seconds(Int64(seconds) + 60))
        let report = (try? JSONDecoder().decode([String: JSONValueLite].self, from: Data(result.stdout.utf8))) ?? [:]
        return (report, "status \(result.status): \(result.stdout) \(result.stderr)")
    }

    static func errors(_ report: [String: JSONValueLite]) -> [String: Int] {
        guard case .object(let errors)? = report["errors"] else { return ["(no report)": 1] }
        return errors
    }

    @Test(.enabled(if: PostgresClusterTests.postgresInstalled || PostgresClusterTests.required), .timeLimit(.minutes(4)))
    func aTenantsDatabaseStoppedUnderLoadTouchesNoOtherTenant() async throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        let cluster = try StoppablePostgres(directory: directory.appendingPathComponent("pg"))
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let tenantDatabase = cluster.url

        // The server's database (SQLite) holds the registry; the tenant's rows go to PostgreSQL.
        #expect(try TenantCommandTests.run(["migrate"], in: directory).status == 0)
        let added = try TenantCommandTests.run(
            [
                "tenant", "add", "shop", "--host", "shop.localhost", "--rp-id", "shop.localhost", "--origin", Self.shopOrigin,
                "--database", tenantDatabase,
            ], in: directory)
        try #require(added.status == 0, "\(added.stdout) \(added.stderr)")
        let server = try ServeBinaryTests.Server(
            database: directory.appendingPathComponent("db.sqlite").path,
            environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_RATE_LIMIT_PER_IP": "1000000"])
        defer { server.stop() }
        try await server.waitUntilReady()

        // 16 s of sign-ups on both hosts; the tenant's database is down from 4 s to 7 s.
        async let defaultLoad = Self.onThread {
            try Self.signUps(server, host: "localhost", origin: server.origin, seconds: 16, prefix: "d")
        }
        async let shopLoad = Self.onThread {
            try Self.signUps(server, host: "shop.localhost", origin: Self.shopOrigin, seconds: 16, prefix: "s")
        }
        try await Task.sleep(for: .seconds(4))
        let stopped = try await Self.onThread { try cluster.run(["stop", cluster.directory.path, "immediate"]) }
        #expect(stopped.status == 0, "\(stopped.stderr)")
        try await Task.sleep(for: .seconds(3))
        let restarted = try await Self.onThread { try cluster.run(["start", cluster.directory.path, "\(cluster.port)"]) }
        #expect(restarted.status == 0, "\(restarted.stderr)")
        let (home, shop) = try await (defaultLoad, shopLoad)
        #expect(server.process.isRunning, "passkeyd died:\n\(server.logTail())")

        // The default tenant never noticed: every sign-up of its load succeeded.
        let homeSignUps = home.report["ceremonies"]?.number ?? 0
        #expect(homeSignUps > 0 && Self.errors(home.report).isEmpty, "default tenant: \(home.output)")
        // The tenant's people were told the database is unavailable, nothing else, and signed
        // up before and after the outage.
        let shopErrors = Self.errors(shop.report)
        #expect(Set(shopErrors.keys).isSubset(of: ["database_unavailable"]), "tenant: \(shop.output)\n\(server.logTail())")
        #expect(!shopErrors.isEmpty, "the outage went unnoticed: \(shop.output)")
        let shopSignUps = shop.report["ceremonies"]?.number ?? 0
        #expect(shopSignUps > 0, "tenant: \(shop.output)")
        // Back without a restart: a new load signs up on the tenant's host with no refusal.
        let after = try await Self.onThread {
            try Self.signUps(server, host: "shop.localhost", origin: Self.shopOrigin, seconds: 2, prefix: "a")
        }
        let afterSignUps = after.report["ceremonies"]?.number ?? 0
        #expect(afterSignUps > 0 && Self.errors(after.report).isEmpty, "after the outage: \(after.output)\n\(server.logTail())")

        // Every acknowledged sign-up is in its own tenant's database (a sign-up answered as the
        // load ended may be there uncounted: at least, not exactly).
        let listed = try TenantCommandTests.run(["tenant", "list"], in: directory).stdout
        func accounts(_ tenant: String) -> Double {
            guard let line = listed.split(separator: "\n").first(where: { $0.hasPrefix("\(tenant)\t") }),
                let field = line.split(separator: "\t").first(where: { $0.hasSuffix(" accounts") }),
                let count = Double(field.dropLast(" accounts".count))
            else { return -1 }
            return count
        }
        #expect(accounts("default") >= homeSignUps, "\(listed)")
        #expect(accounts("shop") >= shopSignUps + afterSignUps, "\(listed)")
        print(
            "A tenant's database stopped 3 s under load: default tenant \(Int(homeSignUps)) sign-ups, 0 refused; tenant \(Int(shopSignUps)) sign-ups, refused \(shopErrors); \(Int(afterSignUps)) in 2 s after; accounts default \(Int(accounts("default"))), shop \(Int(accounts("shop")))"
        )
    }
}
