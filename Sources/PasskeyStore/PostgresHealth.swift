import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The outage breaker of ``PostgresStore``: whether the database is known to be down, found
/// out on a connection of its own rather than through the pools.
///
/// - Closed (the database is up): operations run. One that fails for want of the database, or
///   is still waiting after ``suspectAfter``, calls ``suspect()``: the database is checked
///   (connect and `SELECT 1` within the probe timeout, one check at a time).
/// - A failed check opens the breaker: ``isDown`` turns true, ``onDown`` answers every waiting
///   operation `unavailable` at once, and new operations fail at once (503 with `Retry-After`,
///   and `/readyz` says not ready) instead of queueing in a pool that backs off.
/// - While open, the database is checked every probe interval; the first check that passes
///   closes it, after ``onBack`` has replaced the pools (whose back-off after a long outage
///   reaches a minute between connection attempts).
final class DatabaseHealth: @unchecked Sendable {
    private struct State {
        var checking = false
        var down = false
        var downSince: ContinuousClock.Instant?
        /// When the last check that passed ended: suspicions within `probeInterval` of it are
        /// not checked again (a database under load is slow, not gone).
        var lastPassed: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
    private let down = Atomic<Bool>(false)
    /// The store was closed: nothing asks it any more, so an open breaker stops probing (a
    /// tenant's database that cannot be opened is tried again with a new store every few
    /// seconds: each dropped store's probes would otherwise go on until the database is back).
    private let closed = Atomic<Bool>(false)
    /// Whether an open breaker's probe loop runs (tests).
    private let probingNow = Atomic<Bool>(false)
    let probe: PostgresConnection.Configuration
    let suspectAfter: Duration
    let probeTimeout: Duration
    let probeInterval: Duration
    let logger: Logger
    /// Set once by the engine, before any operation.
    var onDown: (@Sendable () -> Void)?
    var onBack: (@Sendable () -> Void)?
    private let probeIDs = Atomic<Int>(0)

    init(probe: PostgresConnection.Configuration, options: PostgresStore.Options, logger: Logger) {
        self.probe = probe
        self.suspectAfter = options.suspectAfter
        self.probeTimeout = options.probeTimeout
        self.probeInterval = options.probeInterval
        self.logger = logger
    }

    /// Whether the database is known to be down (one atomic load per operation).
    var isDown: Bool { down.load(ordering: .relaxed) }

    /// Whether the database is being probed while known down.
    var probing: Bool { probingNow.load(ordering: .relaxed) }

    /// The store closed: no more checks, and a probe loop ends at its next turn.
    func close() { closed.store(true, ordering: .relaxed) }

    /// Something looked wrong: check the database unless a check runs, or one passed just now.
    func suspect() {
        if closed.load(ordering: .relaxed) { return }
        let start = state.withLock { state -> Bool in
            if state.checking || state.down { return false }
            if let passed = state.lastPassed, passed + probeInterval > .now { return false }
            state.checking = true
            return true
        }
        guard start else { return }
        Task { await self.check() }
    }

    private func check() async {
        if await reachable() {
            state.withLock {
                $0.checking = false
                $0.lastPassed = .now
            }
            return
        }
        probingNow.store(true, ordering: .relaxed)
        state.withLock {
            $0.down = true
            $0.downSince = .now
        }
        down.store(true, ordering: .relaxed)
        logger.error("database unreachable: answering 503 database_unavailable until it is back")
        onDown?()
        while true {
            try? await Task.sleep(for: probeInterval)
            if closed.load(ordering: .relaxed) {
                probingNow.store(false, ordering: .relaxed)
                return
            }
            if await reachable() { break }
        }
        probingNow.store(false, ordering: .relaxed)
        onBack?()
        let since = state.withLock { state -> ContinuousClock.Instant? in
            defer {
                state.down = false
                state.downSince = nil
                state.checking = false
                state.lastPassed = .now
            }
            return state.downSince
        }
        down.store(false, ordering: .relaxed)
        let outage = since.map { ContinuousClock.now - $0 } ?? .zero
        logger.notice("database reachable again", metadata: ["outage": "\(outage)"])
    }

    /// Connects on a connection of its own and runs `SELECT 1`, within the probe timeout.
    func reachable() async -> Bool {
        let configuration = probe
        let logger = Logger(label: "passkeyd.postgres.probe", factory: { _ in SwiftLogNoOpLogHandler() })
        let id = probeIDs.add(1, ordering: .relaxed).oldValue
        let outcome = Outcome<Bool>()
        let attempt = Task {
            do {
                let connection = try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
                defer { Task { try? await connection.close() } }
                _ = try await connection.query("SELECT 1", logger: logger).collect()
                outcome.finish(.success(true))
            } catch {
                outcome.finish(.success(false))
            }
        }
        let timer = Task {
            try? await Task.sleep(for: probeTimeout)
            attempt.cancel()
            outcome.finish(.success(false))
        }
        let result = await outcome.value
        timer.cancel()
        return (try? result.get()) ?? false
    }
}

/// The connection pools in force, one per event loop; replaced as a whole by ``replace()``.
/// The pools run on a task of their own; replacing or closing lets go of the connections the
/// store keeps (``KeptConnections``) and cancels it, which closes their connections (operations
/// still on the old pools fail and are answered `unavailable`).
final class PostgresPools: Sendable {
    /// One event loop's pool: its executor and the connections the store keeps from it.
    struct Pool: Sendable {
        let loop: any EventLoop
        let client: PostgresClient
        /// The pool's most connections (its share of the store's).
        let share: Int
    }

    /// Where an operation runs: a pool, the connections kept from it, and the executor of its
    /// loop when the caller runs on that loop (else nil: the caller's own).
    struct Placement: Sendable {
        let client: PostgresClient
        let kept: KeptConnections
        let executor: EventLoopTaskExecutor?
    }

    /// One set of pools, with the task that runs them.
    final class Generation: Sendable {
        let placements: [Placement]
        /// Each loop's placement.
        let byLoop: [ObjectIdentifier: Placement]
        let turn = Atomic<Int>(0)
        let runner: Task<Void, Never>

        init(_ pools: [Pool], idleTimeout: Duration) {
            // Each pool runs on its own event loop's executor (SE-0417), as the queries it serves
            // do (on the global executor the pool's timers woke another thread each time).
            let placements = pools.map { pool in
                let executor = EventLoopTaskExecutor.of(pool.loop)
                return Placement(
                    client: pool.client,
                    kept: KeptConnections(client: pool.client, executor: executor, share: pool.share, idleTimeout: idleTimeout),
                    executor: executor)
            }
            self.placements = placements
            byLoop = Dictionary(zip(pools.map { ObjectIdentifier($0.loop) }, placements), uniquingKeysWith: { $1 })
            runner = Task {
                await withDiscardingTaskGroup { group in
                    for placement in placements {
                        group.addTask(executorPreference: placement.executor) { await placement.client.run() }
                        group.addTask(executorPreference: placement.executor) { await placement.kept.trimmer() }
                    }
                }
            }
        }

        /// The pool of the loop this runs on, with its executor; else the next pool in turn.
        func place() -> Placement {
            if let loop = MultiThreadedEventLoopGroup.currentEventLoop, let local = byLoop[ObjectIdentifier(loop)] {
                return local
            }
            let next = turn.add(1, ordering: .relaxed).oldValue
            let placement = placements[Int(UInt(bitPattern: next) % UInt(placements.count))]
            return Placement(client: placement.client, kept: placement.kept, executor: nil)
        }

        /// Lets go of the kept connections and stops the pools.
        func end() {
            for placement in placements { placement.kept.close() }
            runner.cancel()
        }
    }

    private let make: @Sendable () -> [Pool]
    private let idleTimeout: Duration
    private let state: Mutex<(generation: Generation, closed: Bool)>

    init(idleTimeout: Duration, make: @escaping @Sendable () -> [Pool]) {
        self.make = make
        self.idleTimeout = idleTimeout
        state = Mutex((Generation(make(), idleTimeout: idleTimeout), false))
    }

    /// The pools in force.
    var current: Generation { state.withLock { $0.generation } }

    /// Fresh pools for new operations; the old ones close.
    func replace() {
        let fresh = Generation(make(), idleTimeout: idleTimeout)
        let old = state.withLock { state -> Generation? in
            if state.closed { return nil }
            defer { state.generation = fresh }
            return state.generation
        }
        (old ?? fresh).end()
    }

    /// Closes the pools (shutdown).
    func close() {
        state.withLock { state in
            state.closed = true
            return state.generation
        }.end()
    }
}

/// The one result of an operation that either its own task or its deadline delivers, whichever
/// comes first; the caller waits for it.
final class Outcome<T: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<Result<T, any Error>, Never>?)
        case done(Result<T, any Error>)
    }
    private let state = Mutex<State>(.waiting(nil))

    /// Delivers the result, unless one was delivered before.
    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<Result<T, any Error>, Never>? in
            guard case .waiting(let waiter) = state else { return nil }
            state = .done(result)
            return waiter
        }
        waiter?.resume(returning: result)
    }

    /// The result, once delivered.
    var value: Result<T, any Error> {
        get async {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state -> Result<T, any Error>? in
                    switch state {
                    case .done(let result): return result
                    case .waiting:
                        state = .waiting(continuation)
                        return nil
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }
}
