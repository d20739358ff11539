import CSQLite
import CSQLiteSettings
import Synchronization

/// One SQLite connection, opened with SQLite's own calls. It is used by one thread at a time:
/// the writer by the member of a write group that holds it (``WriteGroups``), a reader by the
/// caller that took it from ``SQLiteReaders``. Statements are prepared once and kept.
///
/// The store used GRDB's `DatabasePool` for this. Under load its bookkeeping (a dispatch
/// queue's `sync` per statement, a semaphore per read, statement observation) was ~4% of a
/// sign-in's CPU, for nothing the store needed: every statement already went to SQLite
/// directly.
final class SQLiteConnection: @unchecked Sendable {
    let handle: OpaquePointer
    let path: String
    private var statements: [String: Statement] = [:]
    static let maximumStatements = 512
    /// The schema's generation (shared by the store's connections) when the statements were
    /// prepared: a `SELECT *` prepared before a migration would read its columns by the old
    /// names, so the cache starts over after one.
    private let schema: SchemaGeneration
    private var preparedAt: UInt64 = 0

    /// A prepared statement and its column names (read once; again if a migration changed
    /// how many columns it returns).
    final class Statement {
        let handle: OpaquePointer
        private(set) var names: [String] = []

        init(_ handle: OpaquePointer) { self.handle = handle }

        func columnNames() -> [String] {
            let count = Int(sqlite3_column_count(handle))
            if names.count != count {
                names = (0..<CInt(count)).map { String(cString: sqlite3_column_name(handle, $0)) }
            }
            return names
        }

        deinit { sqlite3_finalize(handle) }
    }

    /// Opens `path` (creating the file when `create`), read-only for a reader. A busy database
    /// (another process writing, a recovery) is waited for up to `busyTimeout`.
    init(
        path: String, readOnly: Bool, create: Bool = false, busyTimeout: Duration = .seconds(5),
        schema: SchemaGeneration = SchemaGeneration()
    ) throws {
        _ = Self.configured
        var flags = SQLITE_OPEN_NOMUTEX
        flags |= readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if create && !readOnly { flags |= SQLITE_OPEN_CREATE }
        var opened: OpaquePointer?
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(opened)
            throw StoreError(.invalidDatabase, "cannot open SQLite database at \(path): \(message) (\(code))")
        }
        handle = opened
        self.path = path
        self.schema = schema
        preparedAt = schema.value
        sqlite3_extended_result_codes(opened, 1)
        sqlite3_busy_timeout(opened, CInt(busyTimeout.components.seconds * 1000))
    }

    /// SQLite's process-wide settings, made once before the first connection opens: no memory
    /// statistics. With them on, each of SQLite's allocations took one process-wide mutex;
    /// under load the two event-loop threads, each running statements on its own connection,
    /// waited for each other on it (~0.8 futex sleeps and wake-ups per sign-in, half of all the
    /// server's, in `perf record -e syscalls:sys_enter_futex`). Nothing here reads them.
    private static let configured: CInt = passkeyd_sqlite_configure()

    /// What SQLite counts as allocated now: 0 while its memory statistics are off (for tests).
    static func memoryCounted() -> Int64 {
        var current: Int64 = 0
        var highest: Int64 = 0
        _ = sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &current, &highest, 0)
        return current
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// The prepared statement for `sql`, prepared on first use.
    func statement(_ sql: String) throws -> Statement {
        let generation = schema.value
        if generation != preparedAt {
            statements.removeAll()
            preparedAt = generation
        }
        if let statement = statements[sql] { return statement }
        var prepared: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard code == SQLITE_OK, let prepared else { throw failure(code) }
        // The store's statements are a fixed set (values are bound, never spliced in), but a
        // cache that could grow without end is not kept: past the limit it starts over.
        if statements.count >= Self.maximumStatements { statements.removeAll() }
        let statement = Statement(prepared)
        statements[sql] = statement
        return statement
    }

    /// Runs a statement that returns no rows (a pragma, BEGIN, COMMIT), prepared once.
    func execute(_ sql: String) throws {
        let statement = try statement(sql).handle
        defer { sqlite3_reset(statement) }
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else { throw failure(code) }
        }
    }

    /// Runs `sql` once without keeping it prepared (set-up statements, several at once).
    func executeOnce(_ sql: String) throws {
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw failure(code) }
    }

    /// The first column of the first row of `sql` as text (a pragma's answer).
    func text(_ sql: String) throws -> String? {
        let statement = try statement(sql).handle
        defer { sqlite3_reset(statement) }
        let code = sqlite3_step(statement)
        if code == SQLITE_DONE { return nil }
        guard code == SQLITE_ROW else { throw failure(code) }
        return sqlite3_column_text(statement, 0).map { String(cString: $0) }
    }

    /// Whether a transaction is open (SQLite is out of autocommit mode).
    var isInsideTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    func rollbackIfOpen() throws { if isInsideTransaction { try execute("ROLLBACK") } }

    /// A failed call as a ``StoreError``: a constraint violation is a conflict, anything else
    /// means the database is unavailable.
    func failure(_ code: CInt) -> StoreError {
        let message = String(cString: sqlite3_errmsg(handle))
        if code & 0xFF == SQLITE_CONSTRAINT { return StoreError(.conflict, message) }
        return StoreError(.unavailable, "SQLite error \(code): \(message)")
    }
}

/// How many times migrations changed the schema, for ``SQLiteConnection``'s statement cache.
final class SchemaGeneration: Sendable {
    private let count = Atomic<UInt64>(0)
    func advance() { count.add(1, ordering: .releasing) }
    var value: UInt64 { count.load(ordering: .acquiring) }
}

/// The read-only connections: a reader is taken for one statement and given back, so each is
/// used by one thread at a time. There are as many as threads have read at once (statements
/// run on the calling thread, so that is at most the threads that call the store).
final class SQLiteReaders: Sendable {
    private let idle = Mutex<[SQLiteConnection]>([])
    private let path: String
    private let schema: SchemaGeneration

    init(path: String, schema: SchemaGeneration) {
        self.path = path
        self.schema = schema
    }

    func read<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        let connection: SQLiteConnection
        if let idle = idle.withLock({ $0.popLast() }) {
            connection = idle
        } else {
            do {
                connection = try SQLiteConnection(path: path, readOnly: true, schema: schema)
            } catch let error as StoreError {
                throw StoreError(.unavailable, error.reason)
            }
        }
        defer { idle.withLock { $0.append(connection) } }
        return try body(connection)
    }
}
