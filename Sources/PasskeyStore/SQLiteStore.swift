import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// The embedded store: one SQLite file in WAL mode (concurrent readers, one writer). The store's
/// logic is ``SQLStore``'s; this supplies SQLite connections through GRDB.
public final class SQLiteStore: SQLStore, @unchecked Sendable {
    /// Opens (creating if needed) the SQLite database at `path`.
    public init(path: String) throws {
        super.init(engine: try SQLiteEngine(path: path))
    }
}

/// SQLite through GRDB: reads on the pool's readers, writes on its one writer connection.
///
/// A transaction spans several statements with awaits between them, so it is begun and committed
/// on the writer by hand (GRDB's `allowsUnsafeTransactions`). Writes share the writer in groups
/// (``WriteGroups``): one member at a time, each transaction in a savepoint of the group's
/// transaction, one commit for the group; a member's end (release, rollback, commit) always runs,
/// even when its task is cancelled.
final class SQLiteEngine: SQLEngine {
    let dialect = SQLDialect.sqlite
    let reader: any SQLConnection
    let writer: any SQLConnection
    private let pool: DatabasePool
    let groups: WriteGroups
    /// A connection of its own that copies the WAL into the database file (see "Checkpoints"
    /// below).
    private let checkpointer: DatabaseQueue
    private let checkpointing = Mutex<Task<Void, Never>?>(nil)
    /// Commits so far (of write groups), for the checkpointer.
    private let writes = WriteCount()

    init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // More readers than threads that can ask at once (statements run on the calling thread).
        configuration.maximumReaderCount = max(5, ProcessInfo.processInfo.activeProcessorCount + 1)
        configuration.allowsUnsafeTransactions = true
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // A write group's savepoints keep their undo pages in memory: past 64 KiB SQLite
            // would move them to a temporary file, created and deleted once per group.
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            // The checkpointer below keeps the WAL short; a commit checkpoints only if it has
            // fallen far behind (SQLite's default is 1,000 pages).
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(Self.fallbackCheckpointPages)")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            var checkpointConfiguration = Configuration()
            checkpointConfiguration.busyMode = .timeout(1)
            checkpointer = try DatabaseQueue(path: path, configuration: checkpointConfiguration)
        } catch {
            throw StoreError(.invalidDatabase, "cannot open SQLite database at \(path): \(error)")
        }
        groups = WriteGroups(pool: pool, writes: writes)
        reader = Reader(pool: pool)
        writer = Writer(groups: groups)
        let writes = self.writes
        let task = Task.detached(priority: .utility) { [weak self] in
            var checkpointed: UInt64 = 0
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.checkpointInterval)
                // Nothing written since the last checkpoint (an idle server): nothing to copy.
                let written = writes.value
                if written == checkpointed { continue }
                guard let self else { return }
                await self.checkpoint()
                checkpointed = written
            }
        }
        checkpointing.withLock { $0 = task }
    }

    deinit { checkpointing.withLock { $0?.cancel() } }

    // Checkpoints: SQLite copies committed pages from the WAL into the database file and syncs
    // both, by default in the commit that takes the WAL past 1,000 pages. That commit then
    // holds the one writer for the copy and two fsyncs while every other write waits (a
    // sign-in writes ~13 pages, so every ~75th sign-in paid for one), and a page
    // written many times between checkpoints is copied as often. Here a connection of its own
    // checkpoints every `checkpointInterval`, beside the writer (a passive checkpoint never
    // blocks it, nor readers); each page is copied once per interval. A/B against the default:
    // 0.52 -> 0.50 ms of server CPU per sign-in, 2,160-2,200 -> 2,380-2,450 sign-ins/s (100 ms).
    // Every 25 ms rather than 100, a checkpoint's burst of copying (scattered pages, on a large
    // database) is shorter: on 1M accounts p99 16.1 -> 12.1 ms, 2,410-2,450 -> 2,560-2,650/s.

    static let checkpointInterval = Duration.milliseconds(25)
    /// Under steady writes the WAL cannot start over from its beginning between two
    /// checkpoints (a commit always comes first), so it grows to this many pages (~40 MiB),
    /// where a commit checkpoints the little left and it starts over.
    static let fallbackCheckpointPages = 10_000

    /// One passive checkpoint (GRDB runs it on the checkpointer's own queue, off the caller's
    /// thread: it waits for the disk).
    func checkpoint() async {
        _ = try? await checkpointer.writeWithoutTransaction { db in try db.checkpoint(.passive) }
    }

    func transaction<T: Sendable>(timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await groups.member(savepoint: true) { connection in try await body(connection) }
    }

    /// A ``StoreError`` for what GRDB threw: constraint violations are conflicts, everything else
    /// means the database is unavailable.
    static func storeError(_ error: any Error) -> StoreError {
        switch error {
        case let error as StoreError: error
        case let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT:
            StoreError(.conflict, error.message ?? "constraint violated")
        default: StoreError(.unavailable, "\(error)")
        }
    }

    /// Statements are prepared once per connection and reused (GRDB's statement cache):
    /// preparing anew on every call showed up as ~7% of the server's CPU under load. Values are
    /// bound and rows read with SQLite's own calls on the cached statement: GRDB's
    /// `StatementArguments`, `DatabaseValue` and row cursor boxed every value on the way in and
    /// out (~6% of a sign-in's CPU in `perf`). The statement is reset after use, so it never
    /// holds a read snapshot or a lock past this call.
    static func rows(_ sql: SQL, _ db: Database) throws -> [any StoreRow] {
        let statement = try db.cachedStatement(sql: sql.text(.sqlite))
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        defer { sqlite3_reset(handle) }
        guard Int(sqlite3_bind_parameter_count(handle)) == sql.values.count else {
            throw StoreError(.unavailable, "statement expects \(sqlite3_bind_parameter_count(handle)) values, got \(sql.values.count)")
        }
        for (offset, value) in sql.values.enumerated() {
            let code = bind(value, handle, CInt(offset + 1))
            guard code == SQLITE_OK else { throw failure(code, db) }
        }
        let columns = Int(sqlite3_column_count(handle))
        let names = columns == 0 ? [] : statement.columnNames
        var rows: [any StoreRow] = []
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw failure(code, db) }
            var values: [SQLiteRow.Value] = []
            values.reserveCapacity(columns)
            for column in 0..<CInt(columns) { values.append(SQLiteRow.Value(handle, column)) }
            rows.append(SQLiteRow(names: names, values: values))
        }
    }

    /// Binds one value as SQLite stores it: IDs as text, flags as 0 or 1, bytes as a blob (an
    /// empty one too: never NULL).
    private static func bind(_ value: SQLValue, _ handle: OpaquePointer, _ index: CInt) -> CInt {
        switch value {
        case .null: return sqlite3_bind_null(handle, index)
        case .integer(let value): return sqlite3_bind_int64(handle, index, value)
        case .flag(let value): return sqlite3_bind_int64(handle, index, value ? 1 : 0)
        case .text(let value): return sqlite3_bind_text(handle, index, value, -1, transient)
        case .id(let value): return sqlite3_bind_text(handle, index, value.uuidString, -1, transient)
        case .bytes(let value):
            if value.isEmpty { return sqlite3_bind_zeroblob(handle, index, 0) }
            return value.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, CInt($0.count), transient) }
        }
    }

    /// SQLite copies bound text and blobs (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    /// A failed statement as a ``StoreError``: a constraint violation is a conflict, anything
    /// else means the database is unavailable (as ``storeError(_:)`` maps GRDB's errors).
    private static func failure(_ code: CInt, _ db: Database) -> StoreError {
        let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
        if code & 0xFF == SQLITE_CONSTRAINT { return StoreError(.conflict, message) }
        return StoreError(.unavailable, "SQLite error \(code): \(message)")
    }

    // Every statement runs on the calling thread through GRDB's synchronous API (a serial
    // queue's `sync` runs the block on the caller when the queue is idle), not as an async hop
    // to GRDB's queue and back: each hop was two thread wake-ups, and under load they were the
    // largest single cost in the profile. Writes never wait on each other inside GRDB (the
    // write groups admit one member at a time without blocking a thread); a read waits only for a
    // free reader connection, and there are more of them than cooperative threads (see init).
    // Only another process holding SQLite's write lock (`passkeyd admin` on the same file) can
    // make a write wait, for at most the busy timeout.

    /// GRDB's synchronous read, called from async code (the async overload would be chosen
    /// there); GRDB's errors as ``StoreError``. Every read is one statement, which SQLite runs
    /// atomically on one snapshot by itself, so no explicit transaction is opened around it
    /// (GRDB's `read` adds BEGIN and COMMIT: two more statements and WAL lock round trips
    /// per read).
    static func readNow<T>(_ pool: DatabasePool, _ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.unsafeRead(body)
        } catch {
            throw storeError(error)
        }
    }

    /// GRDB's synchronous write without an implicit transaction, called from async code.
    static func writeNow<T>(_ pool: DatabasePool, _ body: (Database) throws -> T) throws -> T {
        do {
            return try pool.writeWithoutTransaction(body)
        } catch {
            throw storeError(error)
        }
    }

    struct Reader: SQLConnection {
        let pool: DatabasePool
        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            try SQLiteEngine.readNow(pool) { db in try SQLiteEngine.rows(sql, db) }
        }
    }

    /// One statement, as a member of the writer's group (``WriteGroups``).
    struct Writer: SQLConnection {
        let groups: WriteGroups
        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            try await groups.member(savepoint: false) { connection in try await connection.rows(sql) }
        }
    }

    /// The statements of one member of a write group (``WriteGroups``; the member holds the
    /// writer). Its first hop to the writer runs the prologue first (the group's `BEGIN`, the
    /// member's savepoint), and ``finish()`` the epilogue (releasing the savepoint).
    /// Statements run only for their effect wait and go to the writer together with the next
    /// statement that answers, or with ``finish()``: a sign-in's transaction is two hops to the
    /// writer, not six.
    final class InTransaction: SQLConnection, Sendable {
        private struct State {
            var begun = false
            var pending: [SQL] = []
        }
        let pool: DatabasePool
        private let prologue: [String]
        private let epilogue: [String]
        private let state = Mutex(State())

        init(pool: DatabasePool, prologue: [String], epilogue: [String]) {
            self.pool = pool
            self.prologue = prologue
            self.epilogue = epilogue
        }

        /// Whether the prologue ran (the member's savepoint is open).
        var begun: Bool { state.withLock { $0.begun } }

        func execute(_ sql: SQL) async throws { state.withLock { $0.pending.append(sql) } }

        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            let (begin, pending) = take()
            return try SQLiteEngine.writeNow(pool) { db in
                try run(db, begin: begin, pending: pending)
                return try SQLiteEngine.rows(sql, db)
            }
        }

        /// Runs what is pending, then the epilogue.
        func finish() throws {
            let (begin, pending) = take()
            if !begin, pending.isEmpty, epilogue.isEmpty { return }
            try SQLiteEngine.writeNow(pool) { db in
                try run(db, begin: begin, pending: pending)
                for statement in epilogue { try db.cachedStatement(sql: statement).execute() }
            }
        }

        private func take() -> (begin: Bool, pending: [SQL]) {
            state.withLock { state in
                defer {
                    state.begun = true
                    state.pending = []
                }
                return (!state.begun, state.pending)
            }
        }

        private func run(_ db: Database, begin: Bool, pending: [SQL]) throws {
            if begin {
                // A transaction the group does not know of can only be one whose end failed:
                // never run inside it.
                if prologue.first == "BEGIN IMMEDIATE", db.isInsideTransaction { try db.rollback() }
                for statement in prologue { try db.cachedStatement(sql: statement).execute() }
            }
            for statement in pending { _ = try SQLiteEngine.rows(statement, db) }
        }
    }
}

/// A row SQLite returned, copied out of the statement. A value of the wrong type reads as
/// malformed, never as a crash.
struct SQLiteRow: StoreRow {
    /// A column's value as SQLite holds it.
    enum Value: Sendable {
        case null
        case integer(Int64)
        case real(Double)
        case text(String)
        case blob([UInt8])

        init(_ handle: OpaquePointer, _ column: CInt) {
            switch sqlite3_column_type(handle, column) {
            case SQLITE_INTEGER: self = .integer(sqlite3_column_int64(handle, column))
            case SQLITE_FLOAT: self = .real(sqlite3_column_double(handle, column))
            case SQLITE_TEXT:
                // By its byte count, asked after the text as SQLite's documentation says (a NUL
                // inside stays); no pointer (out of memory) reads as "".
                guard let text = sqlite3_column_text(handle, column) as UnsafePointer<UInt8>? else {
                    self = .text("")
                    return
                }
                let count = Int(sqlite3_column_bytes(handle, column))
                self = .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
            case SQLITE_BLOB:
                let count = Int(sqlite3_column_bytes(handle, column))
                guard count > 0, let bytes = sqlite3_column_blob(handle, column) else {
                    self = .blob([])
                    return
                }
                self = .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
            default: self = .null
            }
        }
    }

    /// The statement's column names (shared by its rows); a name used twice finds the first.
    let names: [String]
    let values: [Value]

    func optionalText(_ column: String) throws -> String? {
        try value(column) { if case .text(let text) = $0 { text } else { nil } }
    }

    func optionalInteger(_ column: String) throws -> Int64? {
        try value(column) {
            switch $0 {
            case .integer(let value): value
            case .real(let value): Int64(exactly: value)
            default: nil
            }
        }
    }

    func optionalBytes(_ column: String) throws -> [UInt8]? {
        try value(column) {
            switch $0 {
            case .blob(let bytes): bytes
            case .text(let text): Array(text.utf8)  // SQLite's own text-to-blob reading
            default: nil
            }
        }
    }

    func optionalFlag(_ column: String) throws -> Bool? { try optionalInteger(column).map { $0 != 0 } }

    func optionalID(_ column: String) throws -> UUID? {
        guard let text = try optionalText(column) else { return nil }
        guard let id = UUID(uuidString: text) else { throw StoreError(.corruptRow, "\(column) is not a UUID") }
        return id
    }

    /// nil for NULL (or no such column); `corrupt_row` for a value `read` does not accept.
    private func value<T>(_ column: String, _ read: (Value) -> T?) throws -> T? {
        guard let index = names.firstIndex(of: column) else { return nil }
        if case .null = values[index] { return nil }
        guard let value = read(values[index]) else { throw StoreError(.corruptRow, "\(column) holds a value of the wrong type") }
        return value
    }
}

/// How many writes a store has made (single statements and transactions), for its checkpointer.
final class WriteCount: Sendable {
    private let count = Atomic<UInt64>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: UInt64 { count.load(ordering: .relaxed) }
}
