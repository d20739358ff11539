import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization

/// The store for several instances: PostgreSQL through postgres-nio's pooled client. The
/// store's logic is ``SQLStore``'s (counters move by compare-and-set and challenges are taken
/// with `DELETE … RETURNING`, so racing instances stay correct); this supplies the connections.
///
/// Every operation has a deadline (``Options/operationTimeout``): when the database cannot be
/// reached the caller gets ``StoreError/Code/unavailable`` promptly instead of waiting, and the
/// pool reconnects by itself when the database is back.
public final class PostgresStore: SQLStore, @unchecked Sendable {
    let postgres: PostgresEngine

    /// Connects lazily to the database a `postgres://user:password@host:port/database` URL names
    /// (`?sslmode=disable|allow|prefer|require|verify-ca|verify-full`, default prefer, with libpq's
    /// meanings, see ``tlsMode(sslmode:rootCertificate:)``; `&sslrootcert=/ca.pem`;
    /// `&prepared_statements=off`; `?host=/socket/dir` for a Unix socket). The store runs its
    /// pools on a task of its own; ``close()`` ends them (after the server has stopped).
    public init(url: String, options: Options = Options(), logger: Logger = Logger(label: "passkeyd.postgres")) throws {
        let configuration = try Self.configuration(url: url, options: options)
        let probe = try Self.probeConfiguration(url: url, timeout: options.probeTimeout)
        let prepares = try options.preparesStatements && Self.preparesStatements(url: url)
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
        let shares = Self.connectionShares(options.maxConnections, loops: loops.count)
        let pools = PostgresPools(idleTimeout: options.idleTimeout) {
            zip(loops, shares).map { loop, share in
                var configuration = configuration
                configuration.options.maximumConnections = share
                return PostgresPools.Pool(
                    loop: loop, client: PostgresClient(configuration: configuration, eventLoopGroup: loop, backgroundLogger: logger),
                    share: share)
            }
        }
        let engine = PostgresEngine(
            pools: pools, health: DatabaseHealth(probe: probe, options: options, logger: logger),
            operationTimeout: options.operationTimeout, preparesStatements: prepares, logger: logger)
        self.postgres = engine
        super.init(engine: TracedSQLEngine.wrap(engine), migrationTimeout: options.migrationTimeout)
    }

    deinit { close() }

    /// Closes the pools' connections and ends the outage breaker's probing (on shutdown, once
    /// the server has stopped, or when a store is dropped).
    public func close() {
        postgres.health.close()
        postgres.pools.close()
    }

    /// Whether the store currently knows the database to be down (it answers at once then).
    public var databaseIsDown: Bool { postgres.health.isDown }
}

/// PostgreSQL through postgres-nio: each operation (a statement, or a transaction) on one
/// connection the store keeps from a pool (``KeptConnections``), or leased from the pool when
/// none is idle. Every operation has a deadline, mapped failures, and binds sent apart from the
/// text.
///
/// An operation called on an event loop (an HTTP handler runs on its connection's loop) runs
/// there, on that loop's own pool: the query is written, answered and resumed on one thread.
/// With one pool for all loops, each query woke the other loop's thread to write it and woke
/// the caller's again with the answer (scheduler and wake-up time were ~17% of the server's
/// CPU). Called elsewhere (sweeps, webhooks, commands), an operation takes the pools in turn.
final class PostgresEngine: SQLEngine {
    let dialect = SQLDialect.postgres
    /// The pools in force (replaced by a fresh set when the database comes back from an outage).
    let pools: PostgresPools
    /// The outage breaker: while the database is known down, operations fail at once.
    let health: DatabaseHealth
    let operationTimeout: Duration
    let preparesStatements: Bool
    let logger: Logger
    /// Statements that name no tenant: their connection names the empty tenant, so the
    /// row-level policies show them no tenant's row (fail closed). The store always names one
    /// (``reader(tenant:)``; upkeep names `*`).
    var reader: any SQLConnection { Pooled(engine: self, tenant: "") }
    var writer: any SQLConnection { Pooled(engine: self, tenant: "") }
    func reader(tenant: String) -> any SQLConnection { Pooled(engine: self, tenant: tenant) }
    func writer(tenant: String) -> any SQLConnection { Pooled(engine: self, tenant: tenant) }

    init(pools: PostgresPools, health: DatabaseHealth, operationTimeout: Duration, preparesStatements: Bool, logger: Logger) {
        self.pools = pools
        self.health = health
        self.operationTimeout = operationTimeout
        self.preparesStatements = preparesStatements
        self.logger = logger
        let deadlines = self.deadlines
        health.onDown = { deadlines.expireAll() }
        health.onBack = { pools.replace() }
        deadlines.onSlow = { [weak health] in health?.suspect() }
        deadlines.slowAfter = health.suspectAfter
    }

    func transaction<T: Sendable>(timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await transaction(tenant: "", timeout: timeout, body)
    }

    func transaction<T: Sendable>(
        tenant: String, timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T
    ) async throws -> T {
        try await transaction(tenant: Optional(tenant), timeout: timeout, body)
    }

    private func transaction<T: Sendable>(
        tenant: String?, timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T
    ) async throws -> T {
        let logger = self.logger
        return try await onConnection(tenant: tenant, timeout: timeout) { connection in
            try await connection.withTransaction(logger: logger) { connection in
                try await body(OnConnection(engine: self, connection: connection))
            }
        }
    }

    /// Runs `body` on a connection the store keeps (``KeptConnections``) of the caller's loop's
    /// pool, with the operation deadline: when it passes, the connection is closed, which ends
    /// the query on it at once (it fails there, whatever the network does) and the caller is
    /// answered `unavailable`. With no kept connection idle, `body` runs on one leased from
    /// the pool, through ``run(timeout:on:_:)``.
    ///
    /// `tenant`: the tenant the connection names first (`passkeyd.tenant`, which PostgreSQL's
    /// row-level policies read): a kept connection is told only when it named another one
    /// last; one leased from the pool is told every time. nil: left as it is.
    func onConnection<T: Sendable>(
        tenant: String? = nil, timeout: Duration? = nil, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    )
        async throws -> T
    {
        if health.isDown { throw StoreError.databaseDown }
        let placement = pools.current.place()
        let logger = self.logger
        guard let connection = placement.kept.take() else {
            let client = placement.client
            return try await run(timeout: timeout, on: placement.executor) {
                try await client.withConnection { connection in
                    if let tenant { try await Self.name(tenant: tenant, on: connection, logger: logger) }
                    return try await body(connection)
                }
            }
        }
        let deadline = deadlines.add(at: .now + (timeout ?? operationTimeout)) { let _: EventLoopFuture<Void> = connection.close() }
        let result: Result<T, any Error>
        do {
            if let tenant, placement.kept.tenant(of: connection) != tenant {
                // Forgotten first: a naming that fails after the server took it leaves the
                // connection naming an unknown tenant, which the next operation names again.
                placement.kept.forgetTenant(of: connection)
                try await Self.name(tenant: tenant, on: connection, logger: logger)
                placement.kept.remember(tenant: tenant, of: connection)
            }
            result = .success(try await body(connection))
        } catch {
            result = .failure(error)
        }
        let inTime = deadlines.remove(deadline)
        if case .failure(let error as PostgresTransactionError) = result, error.rollbackError != nil {
            // A transaction that could not be rolled back may still be open on the connection.
            placement.kept.discard(connection)
        } else if inTime {
            placement.kept.giveBack(connection)
        } else {
            placement.kept.discard(connection)  // closed by the deadline
        }
        return try settle(result, inTime: inTime)
    }

    /// Runs `body` with the operation deadline, mapping failures to ``StoreError``.
    ///
    /// While ``health`` knows the database to be down, it throws `unavailable` at once. An
    /// operation that fails for want of the database, or is still waiting after
    /// ``DatabaseHealth/suspectAfter``, makes ``health`` check the database on a connection of
    /// its own; when that check fails, every operation still waiting is answered `unavailable`
    /// at once (the breaker opens), and the pools are replaced by fresh ones when the database
    /// answers again (postgres-nio's pool backs off up to a minute between connection attempts).
    ///
    /// For an operation on a connection leased from the pool (none kept is idle, see
    /// ``onConnection(timeout:_:)``), or leasing one may wait on the pool. It runs as a task of
    /// its own (on `executor`: the caller's event loop) that
    /// ``deadlines`` cancels when its time is up (one task per operation; a timer per
    /// operation, as a racing sleep, cost ~6% of a sign-in). The caller is answered when the
    /// deadline passes even if the cancelled operation has not stopped yet (a query on a
    /// connection the network dropped silently may not see its cancellation for minutes).
    func run<T: Sendable>(
        timeout: Duration? = nil, on executor: EventLoopTaskExecutor?, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        if health.isDown { throw StoreError.databaseDown }
        let timeout = timeout ?? operationTimeout
        let outcome = Outcome<T>()
        let operation = Task(executorPreference: executor) {
            do {
                outcome.finish(.success(try await body()))
            } catch {
                outcome.finish(.failure(error))
            }
        }
        let deadline = deadlines.add(at: .now + timeout) {
            operation.cancel()
            outcome.finish(.failure(StoreError(.unavailable, "PostgreSQL did not answer in time")))
        }
        let result = await withTaskCancellationHandler {
            await outcome.value
        } onCancel: {
            operation.cancel()
        }
        return try settle(result, inTime: deadlines.remove(deadline))
    }

    /// An operation's value, or the ``StoreError`` for its failure (`unavailable` when its
    /// deadline passed first); a failure for want of the database makes ``health`` check it.
    private func settle<T>(_ result: Result<T, any Error>, inTime: Bool) throws -> T {
        switch result {
        case .success(let value) where inTime:
            return value
        case .success:
            throw StoreError(.unavailable, "PostgreSQL did not answer in time")
        case .failure(let error):
            let mapped = inTime ? Self.storeError(error) : StoreError(.unavailable, "PostgreSQL did not answer in time")
            if mapped.code == .unavailable { health.suspect() }
            throw mapped
        }
    }

    let deadlines = Deadlines()

    /// Sets the connection's `passkeyd.tenant` for the rest of its session (outside any
    /// transaction, so a rollback keeps it).
    static func name(tenant: String, on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query("SELECT set_config('passkeyd.tenant', \(tenant), false)", logger: logger).collect()
    }

    /// A ``StoreError`` for what postgres-nio threw: unique and foreign-key violations are
    /// conflicts; everything else means the database is unavailable. Only the server's message
    /// is kept (never the query, whose binds may hold keys or tokens).
    static func storeError(_ error: any Error) -> StoreError {
        switch error {
        case let error as StoreError:
            return error
        case let error as PostgresTransactionError:
            if let inner = error.closureError ?? error.beginError ?? error.commitError { return storeError(inner) }
            return StoreError(.unavailable, "transaction failed")
        case let error as PSQLError:
            if let state = error.serverInfo?[.sqlState], state.hasPrefix("23") {
                return StoreError(.conflict, error.serverInfo?[.message] ?? "constraint violated")
            }
            // Refused by a privilege or a row-level policy (a statement for a tenant its
            // connection does not name): a fault of the store, not of the database's health.
            if error.serverInfo?[.sqlState] == "42501" {
                return StoreError(.invalidDatabase, error.serverInfo?[.message] ?? "insufficient privilege")
            }
            return StoreError(.unavailable, error.serverInfo?[.message] ?? "PostgreSQL \(error.code)")
        case is PostgresDecodingError:
            return StoreError(.corruptRow, "a stored row does not hold what its columns must")
        default:
            return StoreError(.unavailable, "PostgreSQL: \(type(of: error))")
        }
    }

    static func bindings(_ sql: SQL) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: sql.values.count)
        for value in sql.values {
            switch value {
            case .null: bindings.appendNull()
            case .integer(let value): bindings.append(value)
            case .text(let value): bindings.append(value)
            case .bytes(let value): bindings.append(ByteBuffer(bytes: value))
            case .flag(let value): bindings.append(value)
            case .id(let value): bindings.append(value)
            }
        }
        return bindings
    }

    static func query(_ sql: SQL) -> PostgresQuery {
        PostgresQuery(unsafeSQL: sql.text(.postgres), binds: bindings(sql))
    }

    /// Runs `sql` on `connection`: prepared when it is marked so and ``preparesStatements`` (see
    /// ``PreparedStoreStatement``), else as an unnamed statement.
    func rows(_ sql: SQL, on connection: PostgresConnection) async throws -> [any StoreRow] {
        let logger = self.logger
        if let type = sql.preparedAs, preparesStatements, PreparedStatements.shared.claims(sql, as: type) {
            return try await PreparedStatements.shared.rows(sql, as: type, on: connection, logger: logger)
        }
        return try await connection.query(Self.query(sql), logger: logger).collect().map { $0.makeRandomAccess() }
    }

    /// A statement on any connection of a pool (the caller's loop's, when it runs on one).
    struct Pooled: SQLConnection {
        let engine: PostgresEngine
        let tenant: String?
        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            let engine = self.engine
            return try await engine.onConnection(tenant: tenant) { try await engine.rows(sql, on: $0) }
        }
    }

    /// A statement of an open transaction (the engine's deadline covers the whole transaction).
    struct OnConnection: SQLConnection {
        let engine: PostgresEngine
        let connection: PostgresConnection
        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            try await engine.rows(sql, on: connection)
        }
    }
}

/// postgres-nio's rows as ``StoreRow``. A column the row does not have reads as NULL, as in
/// SQLite (postgres-nio's subscript would stop the process).
extension PostgresRandomAccessRow: StoreRow {
    func optionalText(_ column: String) throws -> String? { try decoded(column, String?.self) ?? nil }
    func optionalInteger(_ column: String) throws -> Int64? { try decoded(column, Int64?.self) ?? nil }
    func optionalBytes(_ column: String) throws -> [UInt8]? {
        (try decoded(column, ByteBuffer?.self) ?? nil).map { Array($0.readableBytesView) }
    }
    func optionalFlag(_ column: String) throws -> Bool? { try decoded(column, Bool?.self) ?? nil }
    func optionalID(_ column: String) throws -> UUID? { try decoded(column, UUID?.self) ?? nil }

    private func decoded<T: PostgresDecodable>(_ column: String, _ type: T.Type) throws -> T? {
        guard contains(column) else { return nil }
        do {
            return try self[column].decode(T.self)
        } catch {
            throw StoreError(.corruptRow, "\(column) does not hold a \(T.self)")
        }
    }
}

/// Deadlines for store operations, checked by one task that runs only while some are pending
/// (every 50 ms): an operation registers a cancel action and removes it when it ends. Removal
/// and expiry take the same lock, so an action never runs after its operation removed it.
/// The same check calls ``onSlow`` when an operation has waited longer than ``slowAfter``.
final class Deadlines: @unchecked Sendable {
    private struct Pending {
        let started: ContinuousClock.Instant
        let at: ContinuousClock.Instant
        let cancel: @Sendable () -> Void
    }
    private struct State {
        var next: UInt64 = 0
        var pending: [UInt64: Pending] = [:]
        var expired: Set<UInt64> = []
        var checking = false
    }
    private let state = Mutex(State())
    /// Set once, before the first operation (by the engine's initialiser).
    var onSlow: (@Sendable () -> Void)?
    var slowAfter: Duration = .seconds(1)

    /// Registers `cancel` to run at `at` unless removed first; returns its key.
    func add(at: ContinuousClock.Instant, cancel: @escaping @Sendable () -> Void) -> UInt64 {
        let now = ContinuousClock.now
        let (key, start) = state.withLock { state in
            state.next += 1
            state.pending[state.next] = Pending(started: now, at: at, cancel: cancel)
            defer { state.checking = true }
            return (state.next, !state.checking)
        }
        if start { Task { await self.check() } }
        return key
    }

    /// Removes the deadline; false when it had expired (its cancel action ran).
    func remove(_ key: UInt64) -> Bool {
        state.withLock { state in
            if state.expired.remove(key) != nil { return false }
            state.pending[key] = nil
            return true
        }
    }

    /// Expires every pending deadline now (the database is known to be down).
    func expireAll() {
        let cancels = state.withLock { state in
            let cancels = state.pending.values.map(\.cancel)
            state.expired.formUnion(state.pending.keys)
            state.pending.removeAll()
            return cancels
        }
        for cancel in cancels { cancel() }
    }

    private func check() async {
        while true {
            try? await Task.sleep(for: .milliseconds(50))
            let (done, slow, cancels) = state.withLock { state -> (Bool, Bool, [@Sendable () -> Void]) in
                let now = ContinuousClock.now
                var cancels: [@Sendable () -> Void] = []
                var slow = false
                for (key, pending) in state.pending {
                    if pending.at <= now {
                        state.pending[key] = nil
                        state.expired.insert(key)
                        cancels.append(pending.cancel)
                    } else if pending.started + slowAfter <= now {
                        slow = true
                    }
                }
                if state.pending.isEmpty {
                    state.checking = false
                    return (true, slow, cancels)
                }
                return (false, slow, cancels)
            }
            for cancel in cancels { cancel() }
            if slow || !cancels.isEmpty { onSlow?() }
            if done { return }
        }
    }
}
