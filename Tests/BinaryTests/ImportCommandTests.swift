import Foundation
import PasskeyCore
import PasskeyServer
import Testing

/// `passkeyd import`: streaming, per-row errors, all or nothing for a bad file, idempotent.
@Suite("passkeyd import")
struct ImportCommandTests {
    static let hash = Bcrypt(hashing: "secret one", cost: 4).text

    @Test func importsCSVAndJSONLinesOnceAndRefusesBadFilesWhole() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-import-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = "sqlite://" + directory.appendingPathComponent("import.sqlite").path
        func passkeyd(_ arguments: [String]) throws -> PasskeyCLITests.Result {
            try PasskeyCLITests.run(ServeBinaryTests.binary, arguments + ["--database", database], environment: ["PASSKEYD_CONFIG": ""])
        }
        func write(_ name: String, _ text: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        // One bad row (and a duplicate): nothing is written, every problem has its line.
        let bad = try write(
            "bad.csv",
            """
            username,displayName,passwordHash
            grace,"Hopper, Grace",\(Self.hash)
            bad user,Bad,\(Self.hash)
            alan,Alan,not-a-hash
            GRACE,Again,\(Self.hash)
            "unterminated,x,\(Self.hash)
            ada,Ada,\(Self.hash.replacingOccurrences(of: "$04$", with: "$15$"))

            """)
        let refused = try passkeyd(["import", bad])
        #expect(refused.status == 1 && refused.stdout.contains("nothing imported"), "\(refused.stdout)\(refused.stderr)")
        for line in [
            "line 3:", "line 4: alan: passwordHash is not a bcrypt hash", "line 5: username GRACE appears twice", "line 6: malformed CSV",
            "line 7: ada: bcrypt cost 15 is above 14",
        ] {
            #expect(refused.stderr.contains(line), "missing \(line) in \(refused.stderr)")
        }
        #expect(try passkeyd(["admin", "accounts"]).stdout.isEmpty)

        // --dry-run writes nothing either; --skip-invalid imports the good rows.
        #expect(try passkeyd(["import", bad, "--dry-run"]).stdout.contains("1 row(s) to import"))
        let partial = try passkeyd(["import", bad, "--skip-invalid"])
        #expect(partial.status == 1 && partial.stdout.contains("imported 1, already present 0, skipped 5"), "\(partial.stdout)")

        let good = try write("users.csv", "username,passwordHash,displayName\r\ngrace,\(Self.hash),Grace\r\nalan,\(Self.hash),\r\n")
        let first = try passkeyd(["import", good])
        #expect(first.status == 0 && first.stdout.contains("imported 1, already present 1"), "\(first.stdout)\(first.stderr)")
        let again = try passkeyd(["import", good])
        #expect(again.status == 0 && again.stdout.contains("imported 0, already present 2"))

        let lines = try write(
            "more.jsonl",
            """
            {"username": "ada", "displayName": "Ada Lovelace", "passwordHash": "\(Self.hash)"}
            {"username": "kim", "passwordHash": "\(Self.hash)"}

            """)
        #expect(try passkeyd(["import", lines]).stdout.contains("imported 2"))
        let broken = try write("broken.jsonl", "{\"username\": \"zed\", \"passwordHash\": \"\(Self.hash)\"}\n{not json\n")
        let brokenResult = try passkeyd(["import", broken])
        #expect(brokenResult.status == 1 && brokenResult.stderr.contains("line 2: not a JSON object"))
        let noHeader = try write("noheader.csv", "name,hash\nx,y\n")
        #expect(try passkeyd(["import", noHeader]).status == 2)

        let list = try passkeyd(["admin", "accounts"]).stdout
        let usernames: [String] = list.split(separator: "\n").map { line in String(line.prefix { $0 != "\t" }) }
        #expect(usernames == ["ada", "alan", "grace", "kim"])
        let audit = try passkeyd(["admin", "audit", "--kind", "import"]).stdout
        #expect(audit.split(separator: "\n").count == 4)
    }
}
