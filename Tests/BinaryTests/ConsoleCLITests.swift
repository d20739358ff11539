import Foundation
import Testing
import WebAuthn
import WebAuthnTesting

/// The console's verbs of `passkeyd admin` (roles, the bootstrap link, account deletion, the
/// adoption table) on the real binary, beside a real `passkeyd serve` on the same database.
@Suite("passkeyd admin: console roles and the bootstrap link")
struct ConsoleCLITests {
    static let linkMarker = "/admin/#bootstrap=pkb_"

    struct Workspace {
        let directory: URL
        let database: String

        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-console-cli-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            database = "sqlite://" + directory.appendingPathComponent("console.sqlite").path
        }

        func admin(_ arguments: [String], origin: String = "http://localhost:8080") throws -> PasskeyCLITests.Result {
            try PasskeyCLITests.run(
                AdminCommandTests.passkeyd, ["admin"] + arguments + ["--database", database],
                environment: ["PASSKEYD_CONFIG": "", "PASSKEYD_ORIGINS": origin])
        }

        /// `passkeyd serve` on this database, its standard error in `name`.log (read after ready:
        /// the bootstrap link is written before the server listens).
        func serve(_ name: String) async throws -> (ServeBinaryTests.Server, URL) {
            let log = directory.appendingPathComponent("\(name).log")
            let server = try ServeBinaryTests.Server(database: database, log: log)
            try await server.waitUntilReady()
            return (server, log)
        }

        func remove() { try? FileManager.default.removeItem(at: directory) }
    }

    @Test func rolesAreGrantedListedAndRevokedButNeverTheLastAdmin() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (server, log) = try await workspace.serve("first")
        defer { if server.process.isRunning { server.stop() } }
        let origin = server.origin

        // No administrator yet: the start printed a one-time link on the configured origin.
        let announced = try String(contentsOf: log, encoding: .utf8)
        #expect(announced.contains("no administrator yet") && announced.contains(origin + Self.linkMarker), "\(announced)")

        var authenticator = SoftwareAuthenticator(seed: Array("console-cli".utf8))
        _ = try await AdminCommandTests.signUp(server, "ada", origin: origin, authenticator: &authenticator)
        _ = try await AdminCommandTests.signUp(server, "bob", origin: origin, authenticator: &authenticator)
        func admin(_ arguments: [String]) throws -> PasskeyCLITests.Result { try workspace.admin(arguments, origin: origin) }

        // The verb prints a fresh link while nobody holds `admin`.
        let link = try admin(["bootstrap-link"])
        #expect(link.status == 0 && link.stdout.hasPrefix(origin + Self.linkMarker), "\(link.stdout)\(link.stderr)")
        let token = link.stdout.split(separator: "=").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        #expect(token.hasPrefix("pkb_") && !announced.contains(token), "each link holds a fresh token")
        #expect(link.stderr.contains("works once"))
        // Both links were audited (who issued each; never a token).
        let issued = try admin(["audit", "--kind", "admin_bootstrap_issued"])
        let issuers = issued.stdout.split(separator: "\n").compactMap { $0.split(separator: "\t").last.map(String.init) }
        #expect(issued.status == 0 && issuers.count == 2, "\(issued.stdout)\(issued.stderr)")
        #expect(issuers.contains("passkeyd serve") && issuers.contains { $0.hasPrefix("passkeyd admin (") }, "\(issuers)")
        #expect(!issued.stdout.contains(token.dropFirst(4)) && !issued.stdout.contains("pkb_"))

        let granted = try admin(["grant", "ada", "--role", "admin"])
        #expect(granted.status == 0 && granted.stdout.contains("ada (") && granted.stdout.contains("is now admin"), "\(granted.stderr)")
        #expect(try admin(["grant", "bob", "--role", "viewer"]).status == 0)

        let roles = try admin(["roles"])
        let lines = roles.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        try #require(roles.status == 0 && lines.count == 2 && lines.allSatisfy { $0.count == 5 }, "\(roles.stdout)\(roles.stderr)")
        #expect(lines[0][0] == "ada" && lines[0][2] == "admin" && lines[0][4].hasPrefix("by passkeyd admin"))
        #expect(lines[1][0] == "bob" && lines[1][2] == "viewer" && lines[1][3].hasPrefix("granted 20"))
        let json = try JSONReader.parse(Array(try admin(["roles", "--json"]).stdout.utf8))
        guard case .array(let grants) = json, grants.count == 2 else {
            Issue.record("roles --json: \(json)")
            return
        }
        #expect(grants[0]["username"] == .string("ada") && grants[0]["role"] == .string("admin") && grants[1]["role"] == .string("viewer"))

        // The last admin keeps its role, whether revoked or demoted: exit status 1, a clear reason.
        let lastRevoke = try admin(["revoke-role", "ada"])
        #expect(lastRevoke.status == 1 && lastRevoke.stderr.contains("last admin"), "\(lastRevoke.stdout)\(lastRevoke.stderr)")
        let lastDemote = try admin(["grant", "ada", "--role", "viewer"])
        #expect(lastDemote.status == 1 && lastDemote.stderr.contains("last admin"))
        let lastDelete = try admin(["delete-account", "ada", "--confirm", "ada"])
        #expect(lastDelete.status == 1 && lastDelete.stderr.contains("last admin"))
        #expect(try admin(["roles"]).stdout.contains("ada\t") == true)

        // Bad usage: status 2.
        #expect(try admin(["grant", "ada", "--role", "owner"]).status == 2)
        let nobody = try admin(["grant", "nobody", "--role", "viewer"])
        #expect(nobody.status == 2 && nobody.stderr.contains("no account"))

        // An administrator exists: no link, the admins named, status 1.
        let refused = try admin(["bootstrap-link"])
        #expect(refused.status == 1 && refused.stdout.isEmpty && refused.stderr.contains("ada ("), "\(refused.stderr)")

        // Two admins: either may go.
        #expect(try admin(["grant", "bob", "--role", "admin"]).status == 0)
        #expect(try admin(["revoke-role", "ada"]).status == 0)
        #expect(try admin(["grant", "ada", "--role", "admin"]).status == 0)
        let revoked = try admin(["revoke-role", "bob"])
        #expect(revoked.status == 0 && revoked.stdout.contains("bob has no console role"))
        #expect(try admin(["roles"]).stdout.contains("bob") == false)

        // Deletion needs the username typed again.
        let mismatch = try admin(["delete-account", "bob", "--confirm", "bobby"])
        #expect(mismatch.status == 1 && mismatch.stderr.contains("nothing was deleted"))
        #expect(try admin(["show", "bob"]).status == 0)
        let deleted = try admin(["delete-account", "bob", "--confirm", "bob"])
        #expect(deleted.status == 0 && deleted.stdout.hasPrefix("deleted bob"), "\(deleted.stderr)")
        #expect(try admin(["show", "bob"]).status == 2)

        let audit = try admin(["audit", "--json", "--limit", "100"])
        let kinds =
            (try? JSONDecoder().decode([[String: String?]].self, from: Data(audit.stdout.utf8)).compactMap { $0["kind"] ?? nil }) ?? []
        #expect(
            kinds.filter { $0 == "admin_role_granted" }.count == 4 && kinds.filter { $0 == "admin_role_revoked" }.count == 2, "\(kinds)")
        #expect(kinds.first == "account_deleted")

        // The adoption chart as a table: a header and seven days, today (UTC) last; its CSV.
        // (The day read before and after the call: a run across midnight UTC is either.)
        let dayBefore = Date().formatted(.iso8601.year().month().day())
        let table = try admin(["adoption", "--daily", "--days", "7"])
        let dayAfter = Date().formatted(.iso8601.year().month().day())
        let rows = table.stdout.split(separator: "\n")
        #expect(table.status == 0 && rows.count == 8 && rows[0].hasPrefix("date"), "\(table.stdout)\(table.stderr)")
        #expect([dayBefore, dayAfter].contains { rows.last?.hasPrefix($0) == true }, "\(table.stdout)")
        let csv = try admin(["adoption", "--csv", "--days", "30"])
        #expect(csv.status == 0 && csv.stdout.hasPrefix("date,accounts_with_passkey,") && csv.stdout.split(separator: "\r\n").count == 31)
        #expect(try admin(["adoption", "--daily", "--days", "12"]).status == 2)
        server.stop()

        // A restart with an administrator: no link.
        let (again, quiet) = try await workspace.serve("second")
        defer { again.stop() }
        let second = try String(contentsOf: quiet, encoding: .utf8)
        #expect(!second.contains(Self.linkMarker) && !second.contains("no administrator yet"), "\(second)")
    }

    @Test func aFreshDatabaseGetsABootstrapLinkFromTheCLI() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let link = try workspace.admin(["bootstrap-link"], origin: "https://id.example.com")
        #expect(link.status == 0, "\(link.stderr)")
        let printed = link.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(printed.hasPrefix("https://id.example.com" + Self.linkMarker))
        // pkb_ and 32 bytes of base64url.
        #expect(printed.split(separator: "=").last?.count == 4 + 43)
        #expect(try workspace.admin(["roles"]).stdout.isEmpty)
    }
}
