import Foundation
import NIOPosix
import PasskeyStoreTesting
import Synchronization
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

    /// SQLite's memory statistics are off for the whole process (each allocation SQLite made
    /// took one process-wide mutex to count it, and the event-loop threads waited on each other
    /// there): with open connections and statements run, nothing is counted.
    @Test func sqliteCountsNoMemory() async throws {
        let store = try await Self.fresh()
        let account = StoreConformanceTests.account("memory-statistics")
        try await store.createAccount(account, passkey: StoreConformanceTests.passkey(for: account), session: nil, audit: [])
        #expect(try await store.account(id: account.id) != nil)
        #expect(SQLiteConnection.memoryCounted() == 0)
    }

    // MARK: Write groups

    private static func fresh() async throws -> SQLiteStore {
        let url = try await TestDatabase.makeURL(.sqlite)
        let store = try SQLiteStore(path: String(url.dropFirst("sqlite://".count)))
        _ = try await store.migrate()
        return store
    }

    private static func commits(_ store: SQLiteStore) -> UInt64 {
        (store.engine as! SQLiteEngine).groups.commits.load(ordering: .relaxed)
    }

    /// Runs each operation as a task of its own on one event loop, all queued in one turn of
    /// it (as the requests one read of the sockets brings), and returns their results in order.
    private static func onOneLoop<T: Sendable>(_ operations: [@Sendable () async throws -> T]) async throws -> [Result<T, any Error>] {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let executor = EventLoopTaskExecutor.of(group.next())
        let tasks = try await executor.eventLoop.submit {
            operations.map { operation in
                Task(executorPreference: executor) { () -> Result<T, any Error> in
                    do { return .success(try await operation()) } catch { return .failure(error) }
                }
            }
        }.get()
        var results: [Result<T, any Error>] = []
        for task in tasks { results.append(await task.value) }
        try await group.shutdownGracefully()
        return results
    }

    /// Writes that reach the writer in one turn of an event loop commit together, and every one
    /// of them is there afterwards.
    @Test func writesInOneLoopTurnCommitAsOneGroup() async throws {
        let store = try await Self.fresh()
        let before = Self.commits(store)
        let accounts = (0..<24).map { StoreConformanceTests.account("group-\($0)") }
        let results = try await Self.onOneLoop(
            accounts.map { account -> @Sendable () async throws -> Void in
                { try await store.createAccount(account, passkey: StoreConformanceTests.passkey(for: account), session: nil, audit: []) }
            })
        for result in results { try result.get() }
        #expect(Self.commits(store) - before < 4)
        #expect(try await store.accounts(after: nil, limit: 100).count == 24)
        for account in accounts { #expect(try await store.passkeys(accountID: account.id).count == 1) }
    }

    /// A group's commit scheduled on one event loop that comes as the member holding the writer
    /// on another loop leaves it is never lost, whether that member succeeded or failed: the
    /// holder sees it due and commits. (It was lost when the holder read "not due", the commit
    /// then found the writer still busy and left itself to the holder, and the holder freed the
    /// writer: the members waited for a commit nobody ran until the next write came, 30 s in
    /// `passkey load`, with the transaction open.)
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func aCommitComingAsTheHolderLeavesIsNotLost(holderFails: Bool) async throws {
        let store = try await Self.fresh()
        let groups = (store.engine as! SQLiteEngine).groups
        try await store.writer.run("CREATE TABLE t (a TEXT PRIMARY KEY)")
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        let first = loops.next()
        let second = loops.next()
        let firstHasLeft = Flag()
        let firstHeld = DispatchSemaphore(value: 0)
        let commitTried = DispatchSemaphore(value: 0)
        // On `second`: the test's wait for it is registered on that loop, never behind the held `first`.
        let firstLeft = second.makePromise(of: Void.self)
        let holderLeft = second.makePromise(of: Void.self)
        let before = Self.commits(store)
        groups.leaving = {
            if first.inEventLoop {  // the first member leaves
                firstHasLeft.set()
                return
            }
            // The second member leaves: `first` runs the scheduled commit now (the writer still
            // busy), and `holderLeft` succeeds once the member has left.
            firstHeld.signal()
            first.execute { commitTried.signal() }
            commitTried.wait()
            second.execute { holderLeft.succeed() }
        }

        // The first member writes on `first`, then holds that loop once it has left the writer
        // (until then the job goes back in the queue), so the commit it scheduled there, queued
        // behind, waits. The wait is bounded only so that a member that never leaves cannot
        // keep the loop, and the test process, from ending once the time limit failed the test.
        @Sendable func holdFirst() {
            guard firstHasLeft.isSet else { return first.execute(holdFirst) }
            firstLeft.succeed()
            _ = firstHeld.wait(timeout: .now() + .seconds(120))
        }
        let firstMember = Task(executorPreference: EventLoopTaskExecutor.of(first)) {
            try await store.transaction { db in
                try await db.execute("INSERT INTO t (a) VALUES ('a')")
                first.execute(holdFirst)
            }
        }
        try await firstLeft.futureResult.get()
        // The second member, on `second`, joins the group and leaves as above.
        let holder = Task(executorPreference: EventLoopTaskExecutor.of(second)) {
            // Failing, it inserts the first member's key again.
            try await store.transaction { db in try await db.execute("INSERT INTO t (a) VALUES (\(holderFails ? "a" : "b"))") }
        }
        try await holderLeft.futureResult.get()
        #expect(Self.commits(store) - before == 1, "the group's commit was lost: its members wait for the next write")

        // Were it lost, the next write commits the group (off a loop it commits at once).
        try await store.writer.run("INSERT INTO t (a) VALUES ('c')")
        try await firstMember.value
        if holderFails {
            await #expect(throws: StoreError(.conflict, "")) { try await holder.value }
        } else {
            try await holder.value
        }
        let rows = try await store.reader.rows("SELECT a FROM t ORDER BY a")
        #expect(try rows.map { try $0.text("a") } == (holderFails ? ["a", "c"] : ["a", "b", "c"]))
        try await loops.shutdownGracefully()
    }

    /// Set once, then read on another thread.
    private final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }

    /// A member that fails on its own data is undone alone: the transaction of several
    /// statements to its savepoint, a single statement by SQLite; the rest of the group commits.
    @Test func aMemberThatFailsIsUndoneAlone() async throws {
        let store = try await Self.fresh()
        let ada = StoreConformanceTests.account("ada")
        let adasKey = StoreConformanceTests.passkey(for: ada)
        try await store.createAccount(ada, passkey: adasKey, session: nil, audit: [])
        let session = StoreConformanceTests.session(for: ada)
        try await store.createSession(session)
        let bob = StoreConformanceTests.account("bob")
        // Carol's sign-up brings Ada's passkey: her account is written, then the passkey is refused.
        let carol = StoreConformanceTests.account("carol")
        let dan = StoreConformanceTests.account("dan")
        let before = Self.commits(store)
        let operations: [@Sendable () async throws -> Void] = [
            { try await store.createAccount(bob, passkey: StoreConformanceTests.passkey(for: bob), session: nil, audit: []) },
            {
                try await store.createAccount(
                    carol, passkey: StoreConformanceTests.passkey(for: carol, id: adasKey.credentialID), session: nil, audit: [])
            },
            { try await store.createSession(session) },
            { try await store.createAccount(dan, passkey: StoreConformanceTests.passkey(for: dan), session: nil, audit: []) },
        ]
        let results = try await Self.onOneLoop(operations)
        #expect(Self.commits(store) - before == 1)
        #expect((try? results[0].get()) != nil)
        #expect(throws: StoreError(.conflict, "")) { try results[1].get() }
        #expect(throws: StoreError(.conflict, "")) { try results[2].get() }
        #expect((try? results[3].get()) != nil)
        #expect(try await store.account(id: bob.id) != nil)
        #expect(try await store.account(id: carol.id) == nil)
        #expect(try await store.account(id: dan.id) != nil)
        #expect(try await store.passkey(credentialID: adasKey.credentialID)?.accountID == ada.id)
    }

    /// When the transaction itself is in doubt (SQLite failed), no member of the group is
    /// committed and every one is told so; the next write starts afresh.
    @Test func aBrokenTransactionFailsTheWholeGroup() async throws {
        let store = try await Self.fresh()
        let bob = StoreConformanceTests.account("bob")
        let carol = StoreConformanceTests.account("carol")
        let operations: [@Sendable () async throws -> Void] = [
            { try await store.createAccount(bob, passkey: StoreConformanceTests.passkey(for: bob), session: nil, audit: []) },
            {
                try await store.transaction { db in
                    try await db.execute("UPDATE accounts SET display_name = 'x'")
                    throw StoreError(.unavailable, "disk I/O error")
                }
            },
        ]
        let results = try await Self.onOneLoop(operations)
        #expect(throws: StoreError(.unavailable, "")) { try results[0].get() }
        #expect(throws: StoreError(.unavailable, "")) { try results[1].get() }
        #expect(try await store.account(id: bob.id) == nil)
        try await store.createAccount(carol, passkey: StoreConformanceTests.passkey(for: carol), session: nil, audit: [])
        #expect(try await store.account(id: carol.id) != nil)
    }

    /// Off an event loop a write commits on its own before it returns.
    @Test func offALoopEachWriteCommitsAtOnce() async throws {
        let store = try await Self.fresh()
        let before = Self.commits(store)
        for index in 0..<3 {
            let account = StoreConformanceTests.account("alone-\(index)")
            try await store.createAccount(account, passkey: StoreConformanceTests.passkey(for: account), session: nil, audit: [])
        }
        #expect(Self.commits(store) - before == 3)
    }

    /// Statements are kept prepared per connection with their column names; after a migration
    /// the names are read again, so `SELECT *` finds each column under its own name even when a
    /// table was rebuilt with its columns in another order.
    @Test func statementsPreparedBeforeAMigrationReadTheNewColumns() async throws {
        let store = try await Self.fresh()
        let engine = store.engine as! SQLiteEngine
        try await store.writer.run("CREATE TABLE t (a TEXT, b TEXT)")
        try await store.writer.run("INSERT INTO t (a, b) VALUES ('x', 'y')")
        #expect(try await store.reader.first("SELECT * FROM t")?.text("a") == "x")
        #expect(try await store.writer.first("SELECT * FROM t")?.text("a") == "x")
        try await store.transaction { db in
            try await db.execute("DROP TABLE t")
            try await db.execute("CREATE TABLE t (b TEXT, a TEXT)")
            try await db.execute("INSERT INTO t (b, a) VALUES ('y', 'x')")
        }
        engine.schemaChanged()
        #expect(try await store.reader.first("SELECT * FROM t")?.text("a") == "x")
        #expect(try await store.writer.first("SELECT * FROM t")?.text("a") == "x")

        // A migration that applies something says so; one with nothing to apply does not.
        let url = try await TestDatabase.makeURL(.sqlite)
        let older = try SQLiteStore(path: String(url.dropFirst("sqlite://".count)))
        _ = try await older.migrate(through: 9)
        let generation = (older.engine as! SQLiteEngine).schemaGeneration
        _ = try await older.migrate()
        #expect((older.engine as! SQLiteEngine).schemaGeneration == generation + 1)
        _ = try await older.migrate()
        #expect((older.engine as! SQLiteEngine).schemaGeneration == generation + 1)
    }
}
