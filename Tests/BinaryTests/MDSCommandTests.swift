import Foundation
import Testing
import WebAuthn
import WebAuthnTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `passkeyd mds import|status`: a BLOB is verified before it is stored, an older one is refused,
/// and a bad file leaves the store as it was.
@Suite("passkeyd mds")
struct MDSCommandTests {
    @Test func importVerifiesStoresAndRefusesReplaysAndBadFiles() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-mds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = "sqlite://" + directory.appendingPathComponent("mds.sqlite").path
        func write(_ name: String, _ text: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        func passkeyd(_ arguments: [String], environment: [String: String] = [:]) throws -> PasskeyCLITests.Result {
            try PasskeyCLITests.run(
                ServeBinaryTests.binary, arguments + ["--database", database],
                environment: ["PASSKEYD_CONFIG": "", "PASSKEYD_MDS_ROOT_CERTIFICATE": ""].merging(environment) { $1 })
        }
        let mds = try MetadataBLOBIssuer()
        let root = try write("root.pem", mds.rootPEM)
        let entries = [MetadataBLOBIssuer.Entry(aaguid: AAGUID("c0ffee00-0000-4000-8000-00000000cafe"), description: "Test Key")]
        let five = try write("five.jwt", try mds.blob(number: 5, nextUpdate: "2049-01-01", entries: entries) + "\n")

        // No root given or configured: a usage error that says how to give one.
        let rootless = try passkeyd(["mds", "import", five])
        #expect(rootless.status == 2 && rootless.stderr.contains("--root") && rootless.stderr.contains("PASSKEYD_MDS_ROOT_CERTIFICATE"))
        // Not a BLOB, or signed under another root: one line, exit 1, nothing stored.
        let garbage = try passkeyd(["mds", "import", try write("garbage.jwt", "not a blob"), "--root", root])
        #expect(garbage.status == 1 && garbage.stderr.split(separator: "\n").count == 1 && garbage.stderr.contains("refused"))
        let stranger = try MetadataBLOBIssuer(name: "Another Root")
        let foreign = try write("foreign.jwt", try stranger.blob(number: 9, entries: entries))
        let untrusted = try passkeyd(["mds", "import", foreign, "--root", root])
        #expect(untrusted.status == 1 && untrusted.stderr.contains("does not lead to a configured MDS root"), "\(untrusted.stderr)")
        #expect(try passkeyd(["mds", "status"]).stdout.contains("no FIDO metadata BLOB is stored"))

        let imported = try passkeyd(["mds", "import", five, "--root", root])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout == "imported FIDO metadata BLOB no. 5: 1 entries, next update 2049-01-01\n")

        // A replay of the same number, or an older BLOB: refused, the stored one stays.
        for number in [5, 4] {
            let old = try write("old\(number).jwt", try mds.blob(number: number, entries: []))
            let replay = try passkeyd(["mds", "import", old], environment: ["PASSKEYD_MDS_ROOT_CERTIFICATE": root])
            #expect(replay.status == 1 && replay.stderr.contains("is not newer"), "\(replay.stderr)")
        }
        let status = try passkeyd(["mds", "status"], environment: ["PASSKEYD_MDS_ROOT_CERTIFICATE": root])
        #expect(status.status == 0)
        #expect(status.stdout.contains("FIDO metadata BLOB no. 5, next update 2049-01-01"), "\(status.stdout)")
        #expect(status.stdout.contains("verifies with the MDS root now: 1 entries"), "\(status.stdout)")

        // The configured root (environment) and a newer number; --force rolls back on purpose.
        let six = try write("six.jwt", try mds.blob(number: 6, nextUpdate: "2049-02-01", entries: []))
        #expect(try passkeyd(["mds", "import", six], environment: ["PASSKEYD_MDS_ROOT_CERTIFICATE": root]).status == 0)
        let forced = try passkeyd(["mds", "import", five, "--root", root, "--force"])
        #expect(forced.status == 0 && forced.stdout.contains("no. 5"))
    }

    @Test func serveLoadsTheImportedBLOBAndSaysWhenItIsStale() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-mds-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("mds.sqlite").path
        let mds = try MetadataBLOBIssuer()
        let root = directory.appendingPathComponent("root.pem").path
        try mds.rootPEM.write(toFile: root, atomically: true, encoding: .utf8)
        let blob = directory.appendingPathComponent("blob.jwt").path
        try mds.blob(number: 3, nextUpdate: "2020-01-01", entries: []).write(toFile: blob, atomically: true, encoding: .utf8)
        let imported = try PasskeyCLITests.run(
            ServeBinaryTests.binary, ["mds", "import", blob, "--root", root, "--database", "sqlite://\(database)"],
            environment: ["PASSKEYD_CONFIG": ""])
        #expect(imported.status == 0 && imported.stderr.contains("has passed"), "\(imported.stderr)")

        let server = try ServeBinaryTests.Server(
            database: database, environment: ["PASSKEYD_MDS_ROOT_CERTIFICATE": root])
        defer { server.stop() }
        try await server.waitUntilReady()
        let port = server.port
        let (body, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/readyz")!)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(String(decoding: body, as: UTF8.self) == "ready\nwarning: FIDO metadata is stale (nextUpdate 2020-01-01)\n")
    }
}
