import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

@Suite("SQLite store")
struct SQLiteStoreTests {
    /// Commits only append to the WAL (a commit checkpoints only past 10,000 pages); the store's
    /// own checkpointer copies them into the database file within a fraction of a second.
    @Test func theWALIsCheckpointedInTheBackground() async throws {
        let url = try await TestDatabase.makeURL(.sqlite)
        let path = String(url.dropFirst("sqlite://".count))
        let store = try SQLiteStore(path: path)
        _ = try await store.migrate()
        func size() throws -> Int { (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        try await Task.sleep(for: .milliseconds(500))
        let before = try size()
        for index in 0..<300 {
            let account = StoreConformanceTests.account("checkpoint-\(index)")
            try await store.createAccount(account, passkey: StoreConformanceTests.passkey(for: account), session: nil, audit: [])
        }
        var after = try size()
        for _ in 0..<50 where after <= before {
            try await Task.sleep(for: .milliseconds(100))
            after = try size()
        }
        #expect(after > before)
        #expect(try await store.accounts(after: nil, limit: 1000).count == 300)
    }
}
