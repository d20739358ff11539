import Foundation

/// A statement written once for both databases: SQL text with its values kept apart, built by
/// string interpolation (`"SELECT * FROM accounts WHERE id = \(id)"` binds `id`, never splices
/// it into the text). Each database renders the placeholders its own way (`?` for SQLite, `$1`,
/// `$2`, … for PostgreSQL).
struct SQL: Sendable, ExpressibleByStringInterpolation {
    /// The text around the values: always one more piece than there are values.
    let pieces: [String]
    let values: [SQLValue]
    /// The prepared statement PostgreSQL runs this as, once prepared on a connection (see
    /// ``prepared(as:)``). SQLite reuses every statement already.
    private(set) var preparedAs: (any PreparedStoreStatement.Type)?

    init(stringLiteral text: String) {
        pieces = [text]
        values = []
    }

    init(stringInterpolation: StringInterpolation) {
        pieces = stringInterpolation.pieces
        values = stringInterpolation.values
    }

    /// A statement with no values (schema migrations).
    init(unsafeText text: String) {
        pieces = [text]
        values = []
    }

    /// This statement followed by `other` (its text and values).
    func appending(_ other: SQL) -> SQL {
        var pieces = self.pieces
        pieces[pieces.count - 1] += other.pieces[0]
        pieces += other.pieces.dropFirst()
        return SQL(pieces: pieces, values: values + other.values)
    }

    /// This statement, marked for PostgreSQL to prepare once per connection as `type` and then
    /// only bind and run: for the few statements every sign-in or sign-up sends (see
    /// ``PreparedStoreStatement``). Its result columns must be named, never `*`: a prepared
    /// statement's result shape is fixed when it is prepared, so `*` would fail once a migration
    /// adds a column.
    func prepared(as type: any PreparedStoreStatement.Type) -> SQL {
        var copy = self
        copy.preparedAs = type
        return copy
    }

    /// `sql`, marked to be prepared as `type`: `reader.first(.prepared(as: AccountByUsername.self, "SELECT …"))`.
    static func prepared(as type: any PreparedStoreStatement.Type, _ sql: SQL) -> SQL { sql.prepared(as: type) }

    private init(pieces: [String], values: [SQLValue]) {
        self.pieces = pieces
        self.values = values
    }

    /// The text with each value's placeholder in the dialect's spelling.
    func text(_ dialect: SQLDialect) -> String {
        guard pieces.count > 1 else { return pieces[0] }
        var text = pieces[0]
        for index in 1..<pieces.count {
            switch dialect {
            case .sqlite: text += "?"
            case .postgres: text += "$\(index)"
            }
            text += pieces[index]
        }
        return text
    }

    struct StringInterpolation: StringInterpolationProtocol {
        var pieces: [String] = [""]
        var values: [SQLValue] = []

        init(literalCapacity: Int, interpolationCount: Int) {
            pieces.reserveCapacity(interpolationCount + 1)
            values.reserveCapacity(interpolationCount)
        }

        mutating func appendLiteral(_ literal: String) { pieces[pieces.count - 1] += literal }

        mutating func appendInterpolation(_ value: some SQLBindable) {
            values.append(value.sqlValue)
            pieces.append("")
        }

        mutating func appendInterpolation(_ value: (some SQLBindable)?) {
            values.append(value?.sqlValue ?? .null)
            pieces.append("")
        }

        /// Text of the statement itself (a dialect's keyword), never a value.
        mutating func appendInterpolation(sql fragment: SQLFragment) { pieces[pieces.count - 1] += fragment.text }
    }
}

/// Text that is part of a statement, chosen by the code (never from input).
struct SQLFragment: Sendable {
    let text: String
}

/// A value bound to a placeholder. Both databases store the same values the same way: times as
/// integer Unix milliseconds, IDs as UUIDs (text in SQLite), bytes as binary, flags as booleans
/// (0/1 in SQLite).
enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case text(String)
    case bytes([UInt8])
    case flag(Bool)
    case id(UUID)
}

protocol SQLBindable: Sendable {
    var sqlValue: SQLValue { get }
}

extension Int64: SQLBindable { var sqlValue: SQLValue { .integer(self) } }
extension Int: SQLBindable { var sqlValue: SQLValue { .integer(Int64(self)) } }
extension String: SQLBindable { var sqlValue: SQLValue { .text(self) } }
extension Bool: SQLBindable { var sqlValue: SQLValue { .flag(self) } }
extension UUID: SQLBindable { var sqlValue: SQLValue { .id(self) } }
extension Date: SQLBindable { var sqlValue: SQLValue { .integer(StoreValues.millis(self)) } }
extension Array: SQLBindable where Element == UInt8 { var sqlValue: SQLValue { .bytes(self) } }

/// Where the two databases' SQL truly differs.
enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// Row locks: PostgreSQL's `FOR UPDATE`; SQLite has one writer and needs none.
    var forUpdate: SQLFragment { SQLFragment(text: self == .postgres ? " FOR UPDATE" : "") }

    /// Counts the rows of `schema_migrations` if the table exists (0 or 1).
    var migrationsTableExists: SQL {
        switch self {
        case .sqlite: "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        case .postgres:
            "SELECT COUNT(*) AS n FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'schema_migrations'"
        }
    }

    /// The tables tenants own, parents first (migration 16).
    var tenantTables: [String] {
        switch self {
        case .sqlite: SQLiteSchema.tenantTables
        case .postgres: PostgresSchema.tenantTables
        }
    }

    var migrations: [SQLiteSchema.Migration] {
        switch self {
        case .sqlite: SQLiteSchema.migrations
        case .postgres: PostgresSchema.migrations
        }
    }
}

/// One database connection as the store core uses it: a statement in, its rows out.
protocol SQLConnection: Sendable {
    /// Runs `sql` and returns its rows (none for a statement without `RETURNING`).
    func rows(_ sql: SQL) async throws -> [any StoreRow]
    /// Runs `sql` for its effect only. Inside a transaction a connection may hold it back and
    /// send it with the next statement that answers, or with the commit (SQLite does: one hop
    /// to the writer instead of one per statement); its error, if any, then ends the
    /// transaction there.
    func execute(_ sql: SQL) async throws
}

extension SQLConnection {
    func execute(_ sql: SQL) async throws { _ = try await rows(sql) }

    /// Runs `sql`; the number of rows it returned (a write with `RETURNING 1`: the rows it changed).
    @discardableResult func run(_ sql: SQL) async throws -> Int { try await rows(sql).count }

    func first(_ sql: SQL) async throws -> (any StoreRow)? { try await rows(sql).first }

    /// The integer column `n` of the first row (`SELECT COUNT(*) AS n …`), 0 without one.
    func count(_ sql: SQL) async throws -> Int { Int(try await first(sql)?.integer("n") ?? 0) }
}

/// What a SQL database gives the one store core (``SQLStore``): a dialect, connections for
/// single statements, and transactions. SQLite and PostgreSQL are this and nothing more; every
/// store method is written once, in ``SQLStore`` (`SQLStore.swift` and its `SQLStore+<model>.swift`
/// extensions).
protocol SQLEngine: Sendable {
    var dialect: SQLDialect { get }
    /// Runs statements that only read (SQLite: on a reader, concurrently with the writer).
    var reader: any SQLConnection { get }
    /// Runs single writing statements, each committed on its own.
    var writer: any SQLConnection { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    /// `timeout` overrides the database's deadline for one operation (migrations).
    func transaction<T: Sendable>(timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T
    /// Migrations changed the schema: statements prepared before are prepared again.
    func schemaChanged()

    /// ``reader``, ``writer`` and ``transaction(timeout:_:)`` for `tenant`'s statements
    /// (``TenantID/everyTenant`` for upkeep): on PostgreSQL each connection names its tenant
    /// (`passkeyd.tenant`) before the statements run, and the row-level policies (migration 17)
    /// show it that tenant's rows only. SQLite has no such policies: these are the plain ones.
    /// Required of every engine (no default): a wrapper that forgot to pass the tenant on would
    /// otherwise slip past the policies.
    func reader(tenant: String) -> any SQLConnection
    func writer(tenant: String) -> any SQLConnection
    func transaction<T: Sendable>(
        tenant: String, timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T
    ) async throws -> T
}

extension SQLEngine {
    func schemaChanged() {}
}
