import Logging
import PostgresNIO
import Synchronization

/// PostgreSQL prepared statements for the statements every ceremony sends (``SQL/prepared()``).
///
/// An unnamed statement is parsed, analysed and planned by PostgreSQL on every call; a prepared
/// one once per connection, then only bound and run. postgres-nio prepares a statement on a
/// connection the first time it runs there, but names it by a Swift type (its SQL and name are
/// static). So each distinct statement (its text and the kinds of its values: a NULL binds with
/// no type, and the types a statement is prepared with are kept) gets one of a fixed number of
/// slots, each slot a type of its own, and its text is read from here.
///
/// A statement whose preparation or run the server refuses is given a new slot, and so a new
/// name, the next time (at most once a second): postgres-nio keeps a failed preparation as
/// failed for the connection's life, and a statement prepared before a schema change can fail
/// ("cached plan must not change result type") on every later run. Refusals about the data or
/// the moment keep the slot: constraint violations, serialization failures and deadlocks, and
/// lost connections or shutdowns (a connection's prepared statements go with it), so an outage
/// does not use slots up. When the slots run out, statements run unnamed, as unmarked ones do.
final class PreparedStatements: Sendable {
    static let shared = PreparedStatements()

    /// How many distinct statements can be prepared (a few per ceremony kind are marked, each
    /// in a few variants of NULLs).
    static let capacity = 128

    struct Key: Hashable {
        let text: String
        let kinds: [UInt8]
    }

    private struct State {
        var slots: [Key: Int] = [:]
        var texts: [String] = []
        var retired: [Key: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())
    /// The statement names, fixed per slot: `passkeyd_0`, `passkeyd_1`, …
    let names = (0..<capacity).map { "passkeyd_\($0)" }
    /// One type per slot (``PreparedSlot``), made once.
    let slotTypes: [any PreparedSlot.Type] = {
        var types: [any PreparedSlot.Type] = [SlotZero.self]
        while types.count < capacity { types.append(types[types.count - 1].next) }
        return types
    }()

    /// The slot for `key`, given one if there is room; nil when every slot is taken.
    func slot(for key: Key) -> Int? {
        state.withLock { state in
            if let slot = state.slots[key] { return slot }
            guard state.texts.count < Self.capacity else { return nil }
            state.texts.append(key.text)
            state.slots[key] = state.texts.count - 1
            return state.texts.count - 1
        }
    }

    /// The text of the statement in `slot` (postgres-nio reads it on every run).
    func text(_ slot: Int) -> String {
        state.withLock { state in slot < state.texts.count ? state.texts[slot] : "" }
    }

    /// Gives up `slot` for `key`: its next run takes a new slot and so a new name. A slot is
    /// never given to another statement.
    func retire(_ slot: Int, key: Key) {
        let now = ContinuousClock.now
        state.withLock { state in
            guard state.slots[key] == slot else { return }
            if let last = state.retired[key], now - last < .seconds(1) { return }
            state.slots[key] = nil
            state.retired[key] = now
        }
    }

    /// Whether a statement that failed with `error` must not run under its name again: the
    /// server refused it, for a reason other than the data (class 23: constraints; 40:
    /// serialization failure, deadlock) or the connection (08: connection exceptions; 57P:
    /// shutdowns). Errors on the client's side (a lost connection) take the connection's
    /// prepared statements with it.
    static func retires(after error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server else { return false }
        let state = error.serverInfo?[.sqlState] ?? ""
        return !["23", "40", "08", "57P"].contains { state.hasPrefix($0) }
    }

    static func key(_ sql: SQL) -> Key {
        Key(text: sql.text(.postgres), kinds: sql.values.map(\.kind))
    }

    /// Runs `sql`, prepared in `slot`, with `bindings`, on the pool or on one connection.
    func rows(slot: Int, bindings: PostgresBindings, on target: Target, logger: Logger) async throws -> [PostgresRandomAccessRow] {
        try await slotTypes[slot].rows(bindings: bindings, on: target, logger: logger)
    }

    enum Target {
        case pool(PostgresClient)
        case connection(PostgresConnection)
    }
}

/// A slot's number, as a type: ``SlotZero``, `NextSlot<SlotZero>`, `NextSlot<NextSlot<SlotZero>>`, ….
protocol PreparedSlot: Sendable {
    static var index: Int { get }
    /// The slot after this one.
    static var next: any PreparedSlot.Type { get }
    /// Runs the statement in this slot.
    static func rows(bindings: PostgresBindings, on target: PreparedStatements.Target, logger: Logger) async throws
        -> [PostgresRandomAccessRow]
}

extension PreparedSlot {
    static var next: any PreparedSlot.Type { NextSlot<Self>.self }

    static func rows(bindings: PostgresBindings, on target: PreparedStatements.Target, logger: Logger) async throws
        -> [PostgresRandomAccessRow]
    {
        let statement = PreparedSQL<Self>(bindings: bindings)
        var rows: [PostgresRandomAccessRow] = []
        switch target {
        case .pool(let client):
            for try await row in try await client.execute(statement, logger: logger) { rows.append(row) }
        case .connection(let connection):
            for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
        }
        return rows
    }
}

enum SlotZero: PreparedSlot {
    static var index: Int { 0 }
}

enum NextSlot<Previous: PreparedSlot>: PreparedSlot {
    static var index: Int { Previous.index + 1 }
}

/// The statement in slot `Slot`, as postgres-nio's prepared statement.
struct PreparedSQL<Slot: PreparedSlot>: PostgresPreparedStatement {
    typealias Row = PostgresRandomAccessRow
    static var name: String { PreparedStatements.shared.names[Slot.index] }
    static var sql: String { PreparedStatements.shared.text(Slot.index) }
    let bindings: PostgresBindings
    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRandomAccessRow { row.makeRandomAccess() }
}

extension SQLValue {
    /// What kind of value this is (part of a prepared statement's identity).
    var kind: UInt8 {
        switch self {
        case .null: 0
        case .integer: 1
        case .text: 2
        case .bytes: 3
        case .flag: 4
        case .id: 5
        }
    }
}
