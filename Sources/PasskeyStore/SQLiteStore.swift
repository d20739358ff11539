import CSQLite
import Foundation
import Synchronization

/// The embedded store: one SQLite file in WAL mode (concurrent readers, one writer). The store's
/// logic is ``SQLStore``'s; this supplies SQLite connections.
public final class SQLiteStore: SQLStore, @unchecked Sendable {
    /// Opens (creating if needed) the SQLite database at `path`.
    public init(path: String) throws {
        super.init(engine: TracedSQLEngine.wrap(try SQLiteEngine(path: path)))
    }
}

/// SQLite: reads on read-only connections (``SQLiteReaders``), writes on one writer connection
/// shared by group commit (``WriteGroups``).
///
/// A transaction spans several statements with awaits between them, so it is begun and committed
/// on the writer by hand. Writes share the writer in groups: one member at a time, each
/// transaction in a savepoint of the group's transaction, one commit for the group; a member's
/// end (release, rollback, commit) always runs, even when its task is cancelled.
final class SQLiteEngine: SQLEngine {
    let dialect = SQLDialect.sqlite
    let reader: any SQLConnection
    let writer: any SQLConnection
    let groups: WriteGroups
    /// A connection of its own that copies the WAL into the database file (see "Checkpoints"
    /// below), on a queue of its own (it waits for the disk).
    private let checkpointer: SQLiteConnection
    private let checkpointQueue = DispatchQueue(label: "passkeyd.sqlite.checkpoint", qos: .utility)
    private let checkpointing = Mutex<Task<Void, Never>?>(nil)
    /// Commits so far (of write groups), for the checkpointer.
    private let writes = WriteCount()
    private let schema = SchemaGeneration()

    init(path: String) throws {
        let connection: SQLiteConnection
        do {
            connection = try SQLiteConnection(path: path, readOnly: false, create: true, schema: schema)
            try Self.prepareWriter(connection)
            checkpointer = try SQLiteConnection(path: path, readOnly: false, busyTimeout: .seconds(1))
            // A connection finds the WAL on its first read; until then a checkpoint on it
            // does nothing.
            _ = try checkpointer.text("SELECT COUNT(*) FROM sqlite_schema")
        } catch let error as StoreError {
            throw StoreError(.invalidDatabase, "cannot open SQLite database at \(path): \(error.reason)")
        }
        groups = WriteGroups(writer: connection, writes: writes)
        reader = Reader(readers: SQLiteReaders(path: path, schema: schema))
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

    /// The writer's settings (they hold for the file, or for the connections that share it):
    /// WAL mode, so readers never wait for the writer; a sync only at checkpoints (WAL's
    /// `NORMAL`: a power loss can lose the last commits, never corrupt the file); foreign keys.
    /// A non-empty WAL file is made at once: read-only connections cannot open the database
    /// without one.
    private static func prepareWriter(_ connection: SQLiteConnection) throws {
        guard try connection.text("PRAGMA journal_mode = WAL") == "wal" else {
            throw StoreError(.invalidDatabase, "could not switch to WAL mode")
        }
        try connection.execute("PRAGMA synchronous = NORMAL")
        try connection.execute("PRAGMA foreign_keys = ON")
        // A write group's savepoints keep their undo pages in memory: past 64 KiB SQLite
        // would move them to a temporary file, created and deleted once per group.
        try connection.execute("PRAGMA temp_store = MEMORY")
        // The checkpointer below keeps the WAL short; a commit checkpoints only if it has
        // fallen far behind (SQLite's default is 1,000 pages).
        try connection.execute("PRAGMA wal_autocheckpoint = \(fallbackCheckpointPages)")
        let wal = (try? FileManager.default.attributesOfItem(atPath: connection.path + "-wal")[.size] as? Int) ?? 0
        if wal == 0 {
            try connection.executeOnce("BEGIN IMMEDIATE; CREATE TABLE passkeyd_wal (id INTEGER); DROP TABLE passkeyd_wal; COMMIT")
        }
    }

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

    //
    // Under steady writes the WAL cannot start over between two checkpoints (a commit always
    // comes before the checkpointer has caught up), so it grows until a commit takes it past
    // `fallbackCheckpointPages`; that commit checkpoints what the last 25 ms wrote and syncs
    // twice while every write waits, and the WAL starts over. At 10,000 pages (~40 MiB) that
    // stall came several times a second and was the sign-in p99, growing with the database
    // (more scattered pages per 25 ms): 9.9 ms with no stored sessions, 18.7-19.4 ms with
    // 200,000; on the bench's 1M-account run 14.4 ms against 9.7 ms at 1k, and sign-up 41 ms.
    // At 50,000 pages (~200 MiB of WAL at most, under sustained writes only: an idle moment
    // lets it start over) it comes every second or two: 8.3-10.3 ms with 200,000 sessions,
    // 7.0 / 7.5 / 8.2 ms at 1k / 100k / 1M accounts, sign-up 13 ms.

    static let checkpointInterval = Duration.milliseconds(25)
    static let fallbackCheckpointPages = 50_000

    /// One passive checkpoint, on the checkpointer's own queue (off the caller's thread: it
    /// waits for the disk).
    func checkpoint() async {
        let connection = checkpointer
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            checkpointQueue.async {
                _ = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
                done.resume()
            }
        }
    }

    func schemaChanged() { schema.advance() }
    var schemaGeneration: UInt64 { schema.value }

    // No row-level policies in SQLite: a tenant's statements run as any others.
    func reader(tenant: String) -> any SQLConnection { reader }
    func writer(tenant: String) -> any SQLConnection { writer }
    func transaction<T: Sendable>(
        tenant: String, timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T
    ) async throws -> T {
        try await transaction(timeout: timeout, body)
    }

    func transaction<T: Sendable>(timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await groups.member(savepoint: true) { connection in try await body(connection) }
    }

    /// Any error as a ``StoreError`` (what SQLite reported already is one; anything else means
    /// the database is unavailable).
    static func storeError(_ error: any Error) -> StoreError {
        (error as? StoreError) ?? StoreError(.unavailable, "\(error)")
    }

    /// Statements are prepared once per connection and reused: preparing anew on every call
    /// showed up as ~7% of the server's CPU under load. Values are bound and rows read with
    /// SQLite's own calls: GRDB's `StatementArguments`, `DatabaseValue` and row cursor boxed
    /// every value on the way in and out (~6% of a sign-in's CPU in `perf`). The statement is
    /// reset after use, so it never holds a read snapshot or a lock past this call.
    static func rows(_ sql: SQL, _ connection: SQLiteConnection) throws -> [any StoreRow] {
        let statement = try connection.statement(sql.text(.sqlite))
        let handle = statement.handle
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        defer { sqlite3_reset(handle) }
        guard Int(sqlite3_bind_parameter_count(handle)) == sql.values.count else {
            throw StoreError(.unavailable, "statement expects \(sqlite3_bind_parameter_count(handle)) values, got \(sql.values.count)")
        }
        for (offset, value) in sql.values.enumerated() {
            let code = bind(value, handle, CInt(offset + 1))
            guard code == SQLITE_OK else { throw connection.failure(code) }
        }
        var rows: [any StoreRow] = []
        var columns = 0
        var names: [String] = []
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw connection.failure(code) }
            if rows.isEmpty {
                // Read after the first step: a statement prepared against a schema that has
                // since changed is prepared again by that step, with the new columns.
                columns = Int(sqlite3_column_count(handle))
                names = statement.columnNames()
            }
            var values: [SQLiteRow.Value] = []
            values.reserveCapacity(columns)
            for column in 0..<CInt(columns) { values.append(SQLiteRow.Value(handle, column)) }
            rows.append(SQLiteRow(names: names, values: values))
        }
    }

    /// Binds one value as SQLite stores it: IDs as text, flags as 0 or 1, bytes as a blob (an
    /// empty one too: never NULL), text by its UTF-8 bytes (no C string made).
    private static func bind(_ value: SQLValue, _ handle: OpaquePointer, _ index: CInt) -> CInt {
        switch value {
        case .null: return sqlite3_bind_null(handle, index)
        case .integer(let value): return sqlite3_bind_int64(handle, index, value)
        case .flag(let value): return sqlite3_bind_int64(handle, index, value ? 1 : 0)
        case .text(var value):
            if value.isEmpty { return sqlite3_bind_text(handle, index, "", 0, transient) }
            return value.withUTF8 { sqlite3_bind_text(handle, index, $0.baseAddress, CInt($0.count), transient) }
        case .id(let value):
            return value.withUppercaseText { sqlite3_bind_text(handle, index, $0.baseAddress, CInt($0.count), transient) }
        case .bytes(let value):
            if value.isEmpty { return sqlite3_bind_zeroblob(handle, index, 0) }
            return value.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, CInt($0.count), transient) }
        }
    }

    /// SQLite copies bound text and blobs (`SQLITE_TRANSIENT`).
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    // Every statement runs on the calling thread, not as an async hop to a queue of the
    // database's and back: each hop was two thread wake-ups, and under load they were the
    // largest single cost in the profile. Writes never wait on each other inside SQLite (the
    // write groups admit one member at a time without blocking a thread); a read takes an
    // idle reader connection or opens one. Only another process holding SQLite's write lock
    // (`passkeyd admin` on the same file) can make a write wait, for at most the busy timeout.

    struct Reader: SQLConnection {
        let readers: SQLiteReaders
        // Every read is one statement, which SQLite runs atomically on one snapshot by itself,
        // so no transaction is opened around it (BEGIN and COMMIT would be two more statements
        // and WAL lock round trips per read).
        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            try readers.read { connection in try SQLiteEngine.rows(sql, connection) }
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
    /// writer). Its first statement is preceded by the prologue (the group's `BEGIN`, the
    /// member's savepoint), and ``finish()`` runs the epilogue (releasing the savepoint).
    /// Statements run only for their effect wait and go to SQLite together with the next
    /// statement that answers, or with ``finish()``.
    final class InTransaction: SQLConnection, Sendable {
        private struct State {
            var begun = false
            var pending: [SQL] = []
        }
        private let connection: SQLiteConnection
        private let prologue: [String]
        private let epilogue: [String]
        private let state = Mutex(State())

        init(connection: SQLiteConnection, prologue: [String], epilogue: [String]) {
            self.connection = connection
            self.prologue = prologue
            self.epilogue = epilogue
        }

        /// Whether the prologue ran (the member's savepoint is open).
        var begun: Bool { state.withLock { $0.begun } }

        func execute(_ sql: SQL) async throws { state.withLock { $0.pending.append(sql) } }

        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            let (begin, pending) = take()
            try run(begin: begin, pending: pending)
            return try SQLiteEngine.rows(sql, connection)
        }

        /// Runs what is pending, then the epilogue.
        func finish() throws {
            let (begin, pending) = take()
            try run(begin: begin, pending: pending)
            for statement in epilogue { try connection.execute(statement) }
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

        private func run(begin: Bool, pending: [SQL]) throws {
            if begin {
                // A transaction the group does not know of can only be one whose end failed:
                // never run inside it.
                if prologue.first == "BEGIN IMMEDIATE" { try connection.rollbackIfOpen() }
                for statement in prologue { try connection.execute(statement) }
            }
            for statement in pending { _ = try SQLiteEngine.rows(statement, connection) }
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
        guard let id = UUID(text: text) else { throw StoreError(.corruptRow, "\(column) is not a UUID") }
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
