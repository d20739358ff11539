import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// The connections one pool lends the store for good: each is leased once from postgres-nio's
/// pool and kept, so an operation takes one from a list and gives it back, and the pool does
/// nothing per query.
///
/// Why: postgres-nio 1.33's pool, with no minimum of connections (a minimum made it trap after
/// an outage, `PoolStateMachine+ConnectionGroup.swift:163`), arms an idle timer every time a
/// connection comes back to it: `Task.sleep`, Dispatch's timer thread and the pool's timer task
/// group were 6-7% of the server's CPU on PostgreSQL sign-ins, and each lease and return hopped
/// between the pool's executor and the caller's.
///
/// How: a kept connection is leased by a task of its own (`withConnection`) that parks until
/// the connection is let go, which hands it back to the pool. Up to ``limit`` are kept, one
/// less than the pool's share, so the pool always has room for the moments when every kept
/// connection is busy (the store then leases from the pool as before). A new one is leased in
/// the background when an operation finds none idle, and the caller goes through the pool
/// meanwhile. A connection is let go when it is found closed (the database or the network
/// ended it; an operation's deadline closes the connection it runs on), when it has been idle
/// for ``idleTimeout`` (checked every half of it, as the pool did), and all of them when the
/// pools are replaced or closed.
final class KeptConnections: Sendable {
    fileprivate struct State {
        var idle: [(connection: PostgresConnection, since: ContinuousClock.Instant)] = []
        /// Kept connections (idle, in use or being leased).
        var kept = 0
        /// The parked lease of each kept connection.
        var leases: [PostgresConnection.ID: Lease] = [:]
        /// The tenant each kept connection names (`passkeyd.tenant`), once it has named one.
        var tenants: [PostgresConnection.ID: String] = [:]
        var closed = false
    }

    private let state = Mutex(State())
    let client: PostgresClient
    let executor: EventLoopTaskExecutor?
    let limit: Int
    let idleTimeout: Duration

    init(client: PostgresClient, executor: EventLoopTaskExecutor?, share: Int, idleTimeout: Duration) {
        self.client = client
        self.executor = executor
        self.limit = max(0, share - 1)
        self.idleTimeout = idleTimeout
    }

    /// An idle kept connection (the most recently used: the others age and are let go), or nil.
    /// With none idle and room to keep another, one is leased in the background.
    func take() -> PostgresConnection? {
        let (connection, lease, closedOnes) = state.withLock { state -> (PostgresConnection?, Bool, [Lease]) in
            var closedOnes: [Lease] = []
            while let connection = state.idle.popLast()?.connection {
                if !connection.isClosed { return (connection, false, closedOnes) }
                if let lease = state.release(connection) { closedOnes.append(lease) }
            }
            guard !state.closed, state.kept < limit else { return (nil, false, closedOnes) }
            state.kept += 1
            return (nil, true, closedOnes)
        }
        for lease in closedOnes { lease.end() }
        if lease { keepAnother() }
        return connection
    }

    /// Gives a connection `take` returned back: kept when it is still open, else let go.
    func giveBack(_ connection: PostgresConnection) {
        let now = ContinuousClock.now
        let lease = state.withLock { state -> Lease? in
            guard !state.closed, !connection.isClosed else { return state.release(connection) }
            state.idle.append((connection, now))
            return nil
        }
        lease?.end()
    }

    /// Closes a connection `take` returned and lets it go (it must not serve another operation).
    func discard(_ connection: PostgresConnection) {
        let _: EventLoopFuture<Void> = connection.close()
        state.withLock { $0.release(connection) }?.end(closing: true)
    }

    /// Leases one more connection and parks its lease until the connection is let go.
    private func keepAnother() {
        let client = self.client
        Task(executorPreference: executor) {
            do {
                try await client.withConnection { connection in
                    await withCheckedContinuation { (lease: CheckedContinuation<Void, Never>) in
                        let now = ContinuousClock.now
                        let kept = self.state.withLock { state -> Bool in
                            guard !state.closed else { return false }
                            state.leases[connection.id] = Lease(connection: connection, continuation: lease)
                            state.idle.append((connection, now))
                            return true
                        }
                        if !kept {
                            self.state.withLock { $0.kept -= 1 }
                            lease.resume()
                        }
                    }
                }
            } catch {
                // The pool could not lend one (the database is away): the room is free again.
                self.state.withLock { $0.kept -= 1 }
            }
        }
    }

    /// Lets go of the connections idle for longer than ``idleTimeout``; returns how many.
    @discardableResult
    func trim(now: ContinuousClock.Instant = .now) -> Int {
        let leases = state.withLock { state -> [Lease] in
            let stale = state.idle.filter { now - $0.since >= idleTimeout || $0.connection.isClosed }
            guard !stale.isEmpty else { return [] }
            state.idle.removeAll { now - $0.since >= idleTimeout || $0.connection.isClosed }
            return stale.compactMap { state.release($0.connection) }
        }
        for lease in leases { lease.end() }
        return leases.count
    }

    /// Trims every half ``idleTimeout`` until cancelled (a task of the pools' generation).
    func trimmer() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: idleTimeout / 2)
            trim()
        }
    }

    /// Lets go of the idle connections and keeps no more; one in use is let go when given back.
    func close() {
        let leases = state.withLock { state -> [Lease] in
            state.closed = true
            let idle = state.idle
            state.idle.removeAll()
            return idle.compactMap { state.release($0.connection) }
        }
        for lease in leases { lease.end() }
    }

    /// The tenant `connection` (a kept one) names, if it named one since it was kept.
    func tenant(of connection: PostgresConnection) -> String? { state.withLock { $0.tenants[connection.id] } }

    /// `connection` (a kept one) names no known tenant (it is about to be told another).
    func forgetTenant(of connection: PostgresConnection) { state.withLock { _ = $0.tenants.removeValue(forKey: connection.id) } }

    /// `connection` (a kept one) now names `tenant`.
    func remember(tenant: String, of connection: PostgresConnection) {
        state.withLock { state in
            if state.leases[connection.id] != nil { state.tenants[connection.id] = tenant }
        }
    }

    /// Kept connections: idle, and in all.
    var counts: (idle: Int, kept: Int) { state.withLock { ($0.idle.count, $0.kept) } }
}

extension KeptConnections {
    /// A kept connection's parked lease: ended, it hands the connection back to the pool.
    fileprivate struct Lease {
        let connection: PostgresConnection
        let continuation: CheckedContinuation<Void, Never>

        /// Hands the connection back: at once when it is open (the pool keeps it), else (or when
        /// `closing`) once it has closed, so the pool knows it closed before it could lend it.
        func end(closing: Bool = false) {
            if closing || connection.isClosed {
                connection.closeFuture.whenComplete { _ in continuation.resume() }
            } else {
                continuation.resume()
            }
        }
    }
}

extension KeptConnections.State {
    /// Stops keeping `connection`: its parked lease, to end outside the lock.
    fileprivate mutating func release(_ connection: PostgresConnection) -> KeptConnections.Lease? {
        tenants[connection.id] = nil
        guard let lease = leases.removeValue(forKey: connection.id) else { return nil }
        kept -= 1
        return lease
    }
}
