import Foundation
import Testing
import WebAuthn
import WebAuthnTesting

/// `passkeyd tenant add|list|show|set|remove` (issue 44): what it writes is what the server
/// serves, and every mistake is refused with its reason before anything is written.
@Suite struct TenantCommandTests {
    static func run(_ arguments: [String], in directory: URL) throws -> CLI.Result {
        // `passkeyd tenant` names the server's database --server-database (`tenant add
        // --database` is a tenant's own).
        try ServeCommandTests.run(
            arguments + [arguments.first == "tenant" ? "--server-database" : "--database", "sqlite://db.sqlite"],
            environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080"], in: directory)
    }

    @Test func aTenantIsAddedShownChangedListedAndRemoved() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let added = try Self.run(
            [
                "tenant", "add", "shop", "--rp-id", "shop.example.com", "--origin", "https://shop.example.com", "--apple-app-id",
                "ABCDE12345.com.example.shop", "--setting", "rateLimits.perIP=120",
            ], in: directory)
        #expect(added.status == 0 && added.stdout.contains("added tenant shop, served on shop.example.com"), "\(added.stderr)")
        let shown = try Self.run(["tenant", "show", "shop"], in: directory)
        #expect(shown.status == 0, "\(shown.stderr)")
        let json = try JSONReader.parse(Array(shown.stdout.utf8))
        #expect(json["hosts"] == .array([.string("shop.example.com")]))
        #expect(json["settings"]?["rpID"] == .string("shop.example.com"))
        #expect(json["settings"]?["rateLimits"]?["perIP"] == .number(120))
        #expect(json["accounts"] == .number(0))

        let changed = try Self.run(
            ["tenant", "set", "shop", "--host", "SHOP.example.com.", "--host", "shop.example.net", "--setting", "rateLimits=null"],
            in: directory)
        #expect(changed.status == 0 && changed.stdout.contains("shop.example.com, shop.example.net"), "\(changed.stderr)")
        let reshown = try JSONReader.parse(Array(try Self.run(["tenant", "show", "shop"], in: directory).stdout.utf8))
        #expect(reshown["settings"]?["rateLimits"] == nil)
        #expect(reshown["settings"]?["appleAppIDs"] == .array([.string("ABCDE12345.com.example.shop")]))

        let listed = try Self.run(["tenant", "list"], in: directory)
        #expect(
            listed.stdout.contains("default\tlocalhost\tlocalhost") && listed.stdout.contains("shop\tshop.example.com"), "\(listed.stdout)")

        #expect(try Self.run(["tenant", "remove", "shop", "--confirm", "shopp"], in: directory).status == 2)
        let removed = try Self.run(["tenant", "remove", "shop", "--confirm", "shop"], in: directory)
        #expect(removed.status == 0 && removed.stdout.contains("removed tenant shop"), "\(removed.stderr)")
        #expect(try Self.run(["tenant", "show", "shop"], in: directory).status == 2)
    }

    /// Beside the server's mail relay, a tenant sends under its own sender, so it must name one.
    @Test func aTenantNamesItsOwnSenderWhenTheServerHasAMailRelay() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = [
            "PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080", "PASSKEYD_SMTP_URL": "smtp://127.0.0.1:2525",
            "PASSKEYD_SMTP_ALLOW_PLAINTEXT": "1", "PASSKEYD_EMAIL_FROM": "Example <auth@example.com>",
        ]
        let base = ["tenant", "add", "shop", "--rp-id", "shop.example.com", "--origin", "https://shop.example.com"]
        let refused = try ServeCommandTests.run(
            base + ["--server-database", "sqlite://db.sqlite"], environment: environment, in: directory)
        #expect(refused.status == 2 && refused.stderr.contains("tenant shop: email.from"), "\(refused.stderr)")
        let added = try ServeCommandTests.run(
            base + ["--setting", "email.from=Shop <auth@shop.example.com>", "--server-database", "sqlite://db.sqlite"],
            environment: environment,
            in: directory)
        #expect(added.status == 0, "\(added.stderr)")
    }

    /// `passkeyd import --tenant NAME` imports into that tenant; commands that act on the whole
    /// server refuse `--tenant` instead of ignoring it.
    @Test func importTakesItsTenantAndServerWideCommandsRefuseOne() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(
            try Self.run(["tenant", "add", "shop", "--rp-id", "shop.example.com", "--origin", "https://shop.example.com"], in: directory)
                .status == 0)
        let file = directory.appendingPathComponent("people.csv")
        try "username,displayName,passwordHash\ngrace,Grace,\(ImportCommandTests.hash)\n".write(to: file, atomically: true, encoding: .utf8)
        let imported = try Self.run(["import", file.path, "--tenant", "shop"], in: directory)
        #expect(imported.status == 0, "\(imported.stdout) \(imported.stderr)")
        let shown = try JSONReader.parse(Array(try Self.run(["tenant", "show", "shop"], in: directory).stdout.utf8))
        #expect(shown["accounts"] == .number(1))
        #expect(try Self.run(["tenant", "list"], in: directory).stdout.contains("default\tlocalhost\tlocalhost\t0 accounts"))
        #expect(try Self.run(["import", file.path, "--tenant", "nope"], in: directory).stderr.contains("no tenant nope"))
        for command in [["migrate"], ["tenant", "list"], ["healthcheck"]] {
            let refused = try Self.run(command + ["--tenant", "shop"], in: directory)
            #expect(refused.status == 2 && refused.stderr.contains("--tenant does not apply"), "\(command): \(refused.stderr)")
        }
    }

    /// `passkeyd tenant add NAME … --database URL`: a tenant whose rows live in a database of its
    /// own, created and migrated by the command; every verb that takes `--tenant` works on it
    /// there; `migrate` brings it up to date with the server's; removing it removes its rows.
    @Test func aTenantGetsADatabaseOfItsOwn() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = ["tenant", "add", "shop", "--rp-id", "shop.example.com", "--origin", "https://shop.example.com"]
        // The server's database must be there: named the old way (--database), it is taken for
        // the tenant's, and the registry (the default passkeyd.sqlite here) is not made empty.
        let unnamed = try ServeCommandTests.run(
            base + ["--database", "sqlite://db.sqlite"], environment: ["PASSKEYD_RP_ID": "localhost"], in: directory)
        #expect(unnamed.status == 2 && unnamed.stderr.contains("sqlite://passkeyd.sqlite does not exist"), "\(unnamed.stderr)")
        for file in ["passkeyd.sqlite", "db.sqlite"] {
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent(file).path), "\(file) made")
        }
        #expect(try Self.run(["migrate"], in: directory).status == 0)
        let server = try Self.run(base + ["--database", "sqlite://db.sqlite"], in: directory)
        #expect(server.status == 2 && server.stderr.contains("it is a server's own database"), "\(server.stderr)")
        // Another server's database (passkeyd's schema, no tenant marked) is refused before
        // anything is migrated or written in it.
        #expect(try ServeCommandTests.run(["migrate", "--database", "sqlite://other.sqlite"], environment: [:], in: directory).status == 0)
        let other = try Self.run(base + ["--database", "sqlite://other.sqlite"], in: directory)
        #expect(other.status == 2 && other.stderr.contains("it is a server's own database"), "\(other.stderr)")
        let odd = try Self.run(base + ["--database", "mysql://db/shop"], in: directory)
        #expect(odd.status == 2 && odd.stderr.contains("cannot be used"), "\(odd.stderr)")
        let added = try Self.run(base + ["--database", "sqlite://shop.sqlite"], in: directory)
        // Kept as an absolute path: every process, whatever its working directory, opens it.
        let path = directory.appendingPathComponent("shop.sqlite").standardizedFileURL.path
        #expect(added.status == 0 && added.stdout.contains("its rows in sqlite://\(path)"), "\(added.stdout) \(added.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("shop.sqlite").path))

        let file = directory.appendingPathComponent("people.csv")
        try "username,displayName,passwordHash\ngrace,Grace,\(ImportCommandTests.hash)\n".write(to: file, atomically: true, encoding: .utf8)
        #expect(try Self.run(["import", file.path, "--tenant", "shop"], in: directory).status == 0)
        let shown = try JSONReader.parse(Array(try Self.run(["tenant", "show", "shop"], in: directory).stdout.utf8))
        #expect(shown["accounts"] == .number(1))
        #expect(shown["database"] == .string("sqlite://\(path)"))
        let listed = try Self.run(["tenant", "list"], in: directory).stdout
        #expect(listed.contains("default\tlocalhost\tlocalhost\t0 accounts"), "the account is not in the server's database: \(listed)")
        #expect(listed.contains("shop\tshop.example.com\tshop.example.com\t1 accounts\tdatabase sqlite://\(path)"), "\(listed)")
        // Its own database shows only its own rows: the same import into the server's tenant
        // is a new account, not a duplicate.
        let again = try Self.run(["import", file.path], in: directory)
        #expect(again.status == 0 && again.stdout.contains("imported 1,"), "\(again.stdout)")

        let migrated = try Self.run(["migrate"], in: directory)
        #expect(migrated.status == 0 && migrated.stdout.contains("sqlite://\(path): schema is up to date"), "\(migrated.stdout)")
        // A tenant database that is gone is never made again empty: migrate and the admin verbs
        // refuse it (the others are still migrated).
        try FileManager.default.moveItem(atPath: path, toPath: path + ".moved")
        let missing = try Self.run(["migrate"], in: directory)
        #expect(missing.status == 1 && missing.stderr.contains("does not exist"), "\(missing.stderr)")
        #expect(try Self.run(["import", file.path, "--tenant", "shop"], in: directory).stderr.contains("does not exist"))
        // Looking into it (list) or removing it without its data never makes it again empty:
        // an empty file would count no account and let the tenant go.
        #expect(try Self.run(["tenant", "list"], in: directory).stdout.contains("? (its database cannot be read) accounts"))
        let blind = try Self.run(["tenant", "remove", "shop", "--confirm", "shop"], in: directory)
        #expect(blind.status != 0 && blind.stderr.contains("does not exist"), "\(blind.stdout) \(blind.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path))
        try FileManager.default.moveItem(atPath: path + ".moved", toPath: path)

        let kept = try Self.run(["tenant", "remove", "shop", "--confirm", "shop"], in: directory)
        #expect(kept.status == 2 && kept.stderr.contains("has 1 accounts"), "\(kept.stderr)")
        let removed = try Self.run(["tenant", "remove", "shop", "--confirm", "shop", "--delete-data"], in: directory)
        #expect(removed.status == 0, "\(removed.stderr)")
        // Added again under the name, in the same database: it starts with nothing.
        #expect(try Self.run(base + ["--database", "sqlite://shop.sqlite"], in: directory).status == 0)
        let fresh = try JSONReader.parse(Array(try Self.run(["tenant", "show", "shop"], in: directory).stdout.utf8))
        #expect(fresh["accounts"] == .number(0))
    }

    @Test func mistakesAreRefusedWithTheirReasonAndNothingIsWritten() throws {
        let directory = try ServeCommandTests.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = ["--rp-id", "a.example.com", "--origin", "https://a.example.com"]
        #expect(try Self.run(["tenant", "add", "a"] + base, in: directory).status == 0)
        let refusals: [([String], String)] = [
            (["tenant", "add", "Shop"] + base, "cannot name a tenant"),
            (["tenant", "add", "default"] + base, "cannot name a tenant"),
            (["tenant", "add", "x-"] + base, "cannot name a tenant"),
            (["tenant", "add", String(repeating: "x", count: 64)] + base, "cannot name a tenant"),
            (["tenant", "add", "b"] + base, "the host a.example.com is another tenant's"),
            (["tenant", "add", "a", "--host", "z.example.com"] + base, "is taken"),
            (["tenant", "add", "c", "--rp-id", "localhost", "--origin", "http://localhost:8080"], "the server's own host"),
            (["tenant", "add", "d", "--host", "bad host"] + base, "is not a host name"),
            (["tenant", "add", "e", "--host", "bücher.example"] + base, "is not a host name"),
            (["tenant", "add", "f", "--setting", "databaseURL=sqlite://x"] + base, "databaseURL is a setting of the server"),
            (["tenant", "add", "g", "--setting", "listen=0.0.0.0:1"] + base, "listen is a setting of the server"),
            (["tenant", "add", "h", "--setting", "rateLimit.perIP=1"] + base, "rateLimit.perIP is not a setting"),
            (["tenant", "add", "i", "--setting", "rateLimits.perIP=\"many\""] + base, "rateLimits.perIP"),
            (["tenant", "add", "j", "--rp-id", "j.example.com"], "needs --rp-id and --origin"),
            (["tenant", "add", "k", "--rp-id", "k.example.com", "--origin", "ftp://k.example.com"], "origins"),
            (["tenant", "add", "l", "--apple-app-id", "nope"] + base, "appleAppIDs"),
        ]
        for (arguments, reason) in refusals {
            let result = try Self.run(arguments, in: directory)
            #expect(result.status == 2 && result.stderr.contains(reason), "\(arguments): \(result.stderr)")
        }
        let listed = try Self.run(["tenant", "list"], in: directory)
        #expect(listed.stdout.split(separator: "\n").count == 2, "only the default tenant and a: \(listed.stdout)")
    }
}
