import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// The connections the PostgreSQL store keeps from its pools (``KeptConnections``): operations
/// run on them once they are kept, a deadline closes the one it cuts short (and its pool slot
/// comes back), idle ones are let go
/// after the idle timeout, and closing the store lets go of all. Many operations at once, more
/// than are kept, all finish (the pool lends the rest).
@Suite("PostgreSQL kept connections", .enabled(if: PostgresPreparedTests.enabled))
struct PostgresKeptConnectionsTests {
    static func store(_ configure: (inout PostgresStore.Options) -> Void = { _ in }) async throws -> PostgresStore {
        var options = TestDatabase.postgresOptions(maxConnections: 6)
        configure(&options)
        let store = try PostgresStore(url: try await TestDatabase.makeURL(.postgres), options: options)
        _ = try await store.migrate()
        return store
    }

    static func counts(_ store: PostgresStore) -> [(idle: Int, kept: Int)] {
        store.postgres.pools.current.placements.map { $0.kept.counts }
    }

    /// Reads, several at once, until every pool keeps as many connections as it may, all idle
    /// (bounded).
    static func warm(_ store: PostgresStore) async throws {
        let placements = store.postgres.pools.current.placements
        for _ in 0..<500 {
            if placements.allSatisfy({ $0.kept.counts == ($0.kept.limit, $0.kept.limit) }) { return }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 { group.addTask { _ = try await store.reader.rows("SELECT pg_sleep(0.005)") } }
                try await group.waitForAll()
            }
        }
        Issue.record("the kept connections never filled: \(counts(store))")
    }

    /// The backend each pool's kept connection is (one kept per pool here).
    static func backends(_ store: PostgresStore) async throws -> Set<Int64> {
        var pids: Set<Int64> = []
        for _ in 0..<8 { pids.insert(try await store.reader.rows("SELECT pg_backend_pid()::bigint AS pid")[0].integer("pid")) }
        return pids
    }

    @Test func operationsRunOnTheKeptConnections() async throws {
        let store = try await Self.store { $0.maxConnections = 4 }  // two pools of two: one kept each
        defer { store.close() }
        try await Self.warm(store)
        #expect(Self.counts(store).map(\.kept) == [1, 1])
        // Every read now runs on one of the two kept connections, in turn.
        let first = try await Self.backends(store)
        #expect(first.count == 2)
        #expect(try await Self.backends(store) == first)
        // A transaction too, and it gives its connection back.
        let pid = try await store.engine.transaction(timeout: nil) { connection in
            try await connection.rows("SELECT pg_backend_pid()::bigint AS pid")[0].integer("pid")
        }
        #expect(first.contains(pid))
        #expect(Self.counts(store).allSatisfy { $0 == (1, 1) })
    }

    @Test func aDeadlineClosesTheConnectionItCutsShort() async throws {
        let store = try await Self.store { $0.maxConnections = 4 }
        defer { store.close() }
        try await Self.warm(store)
        let before = try await Self.backends(store)
        let started = ContinuousClock.now
        // A deadline of its own (the store's is long: tests share this machine's two cores).
        let engine = store.postgres
        await #expect(throws: StoreError.self) {
            _ = try await engine.onConnection(timeout: .seconds(1)) { try await engine.rows("SELECT pg_sleep(60)", on: $0) }
        }
        // Answered long before the statement would end (the deadline closed its connection).
        #expect(ContinuousClock.now - started < .seconds(30))
        // That connection is let go; the store goes on, and keeps a fresh one in its place.
        try await Self.warm(store)
        let after = try await Self.backends(store)
        #expect(after.count == 2 && after.intersection(before).count == 1, "\(before) then \(after)")
    }

    /// A kept connection its deadline closed (with its statement still running on the server)
    /// gives its pool slot back: after four such closes, each pool (two connections: one kept,
    /// one free) still keeps one and lends the other.
    @Test func aConnectionClosedByItsDeadlineGivesItsPoolSlotBack() async throws {
        let store = try await Self.store { $0.maxConnections = 4 }
        defer { store.close() }
        let engine = store.postgres
        let placements = engine.pools.current.placements
        try await Self.warm(store)
        for round in 0..<4 {
            // All kept connections idle: the statement takes one, and is cut short.
            await #expect(throws: StoreError.self) {
                _ = try await engine.onConnection(timeout: .milliseconds(300)) { try await engine.rows("SELECT pg_sleep(60)", on: $0) }
            }
            try await Self.warm(store)
            #expect(Self.counts(store).allSatisfy { $0 == (1, 1) }, "round \(round): \(Self.counts(store))")
        }
        for placement in placements {
            let lent = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await placement.client.withConnection { connection in
                        _ = try await engine.rows("SELECT 1 AS one", on: connection)
                    }
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(30))  // a lost slot would wait for good
                    return false
                }
                defer { group.cancelAll() }
                return try await group.next() ?? false
            }
            #expect(lent, "the pool did not lend its free connection")
        }
    }

    @Test func idleConnectionsAreLetGoAfterTheIdleTimeout() async throws {
        let store = try await Self.store { $0.idleTimeout = .seconds(60) }
        defer { store.close() }
        try await Self.warm(store)
        let placements = store.postgres.pools.current.placements
        #expect(placements.map { $0.kept.trim(now: .now) } == placements.map { _ in 0 })  // none idle a minute yet
        #expect(placements.map { $0.kept.trim(now: .now + .seconds(61)) } == placements.map(\.kept.limit))
        #expect(Self.counts(store).allSatisfy { $0 == (0, 0) })
        // Used again, the store keeps connections again.
        try await Self.warm(store)
        #expect(Self.counts(store).allSatisfy { $0.kept > 0 })
    }

    @Test func moreOperationsAtOnceThanAreKeptAllFinish() async throws {
        let store = try await Self.store { $0.maxConnections = 4 }
        defer { store.close() }
        let answers = try await withThrowingTaskGroup(of: Int64.self) { group in
            for i in 0..<64 {
                group.addTask {
                    if i % 4 == 0 {
                        return try await store.engine.transaction(timeout: nil) { connection in
                            try await connection.execute("SELECT pg_sleep(0.01)")
                            return try await connection.rows("SELECT \(Int64(i))::bigint AS n")[0].integer("n")
                        }
                    }
                    return try await store.reader.rows("SELECT \(Int64(i))::bigint AS n")[0].integer("n")
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(answers) == Set((0..<64).map(Int64.init)))
        // Never more kept than the limit; once a lease still under way lands, all are idle again.
        #expect(Self.counts(store).allSatisfy { $0.kept <= 1 })
        for _ in 0..<500 where !Self.counts(store).allSatisfy({ $0.idle == $0.kept }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(Self.counts(store).allSatisfy { $0.kept <= 1 && $0.idle == $0.kept }, "\(Self.counts(store))")
    }

    @Test func closingTheStoreLetsGoOfEveryKeptConnection() async throws {
        let store = try await Self.store()
        try await Self.warm(store)
        store.close()
        #expect(Self.counts(store).allSatisfy { $0 == (0, 0) })
    }
}
