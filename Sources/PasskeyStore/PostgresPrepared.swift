import Logging
import PostgresNIO
import Synchronization

// PostgreSQL prepared statements for the statements every ceremony sends: one type per
// statement, the rules for naming them afresh, and how the engine runs them.
//
// An unnamed statement is parsed, analysed and planned by PostgreSQL on every call; a prepared
// one once per connection, then only bound and run. postgres-nio prepares a statement on a
// connection the first time it runs there, and knows it by its Swift type (its name and SQL are
// static). The store's statements are written once, in ``SQLStore``, for both databases; the
// few on a ceremony's path are marked there with their type (`.prepared(as: AccountByUsername.self)`),
// and SQLite runs them as it runs any other.

/// `account(username:)`: an account by its username key.
struct AccountByUsername: PreparedStoreStatement { let bindings: PostgresBindings }
/// `createAccount(_:passkey:session:audit:)` as one statement (account, passkey, session, one audit line).
struct CreateAccount: PreparedStoreStatement { let bindings: PostgresBindings }
/// `passkeys(accountID:)`: an account's passkeys.
struct PasskeysOfAccount: PreparedStoreStatement { let bindings: PostgresBindings }
/// `completeSignIn(…)` as one statement, with one audit line (a sign-in).
struct CompleteSignIn: PreparedStoreStatement { let bindings: PostgresBindings }
/// `completeSignIn(…)` as one statement, with two audit lines (a sign-in whose counter is flagged).
struct CompleteFlaggedSignIn: PreparedStoreStatement { let bindings: PostgresBindings }
/// `saveChallenge(_:)`: a ceremony begun.
struct SaveChallenge: PreparedStoreStatement { let bindings: PostgresBindings }
/// `challengeAndPasskey(_:credentialID:)`: a sign-in's ceremony, passkey and account in one read.
struct ChallengeAndPasskey: PreparedStoreStatement { let bindings: PostgresBindings }
/// `session(tokenHash:now:)`: a live session with its account.
struct SessionByToken: PreparedStoreStatement { let bindings: PostgresBindings }
/// `touchSession(tokenHash:at:)`: a session's last use, at most once a minute.
struct TouchSession: PreparedStoreStatement { let bindings: PostgresBindings }

/// A statement PostgreSQL prepares once per connection. Its text is the text of the ``SQL`` the
/// store first marked with this type (``PreparedStatements/sql(of:)``): the store's statements
/// keep one text whatever their values, since values are bound, never spliced in. Its result
/// columns are named, never `*`: a prepared statement's result shape is fixed when it is
/// prepared, so `*` would fail once a migration adds a column.
protocol PreparedStoreStatement: PostgresPreparedStatement where Row == PostgresRandomAccessRow {
    init(bindings: PostgresBindings)
    var bindings: PostgresBindings { get }
}

extension PreparedStoreStatement {
    static var name: String { PreparedStatements.shared.name(of: Self.self) }
    static var sql: String { PreparedStatements.shared.sql(of: Self.self) }
    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> PostgresRandomAccessRow { row.makeRandomAccess() }

    /// Runs `sql` prepared as this statement on `connection`.
    static func rows(_ sql: SQL, on connection: PostgresConnection, logger: Logger) async throws -> [PostgresRandomAccessRow] {
        let statement = Self(bindings: PostgresEngine.bindings(sql))
        var rows: [PostgresRandomAccessRow] = []
        for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
        return rows
    }
}

/// The texts and names of the prepared statements, one entry per ``PreparedStoreStatement``
/// type, shared by every connection of the process.
///
/// A statement whose preparation or run the server refuses is given a new name (`_1`, `_2`, …)
/// the next time (at most once a second): postgres-nio keeps a failed preparation as failed for
/// the connection's life, and a statement prepared before a schema change can fail ("cached
/// plan must not change result type") on every later run. Refusals about the data or the moment
/// keep the name: constraint violations, serialization failures and deadlocks, and lost
/// connections or shutdowns (a connection's prepared statements go with it).
///
/// A NULL bind needs no statement of its own: postgres-nio 1.33 prepares with no parameter types
/// (``PostgresPreparedStatement/bindingDataTypes`` is empty), so PostgreSQL takes each one from
/// the statement (its column, or its cast), and a NULL fits any type.
final class PreparedStatements: Sendable {
    static let shared = PreparedStatements()

    private struct Entry {
        var sql: String
        var name: String
        var generation = 0
        var retired: ContinuousClock.Instant?
    }

    private let entries = Mutex([ObjectIdentifier: Entry]())

    /// Whether `sql` runs prepared as `type`: its text is the one `type` has (the first text it
    /// was marked with). A statement of another shape (another number of audit lines) runs
    /// unnamed.
    func claims(_ sql: SQL, as type: any PreparedStoreStatement.Type) -> Bool {
        let text = sql.text(.postgres)
        return entries.withLock { entries in
            if let entry = entries[ObjectIdentifier(type)] { return entry.sql == text }
            let name = "passkeyd_" + String(describing: type)
            entries[ObjectIdentifier(type)] = Entry(sql: text, name: name)
            return true
        }
    }

    /// The name `type` is prepared under now (postgres-nio reads it on every run).
    func name(of type: any PreparedStoreStatement.Type) -> String {
        entries.withLock { $0[ObjectIdentifier(type)]?.name } ?? "passkeyd_" + String(describing: type)
    }

    /// The text `type` is prepared with (postgres-nio reads it on every run).
    func sql(of type: any PreparedStoreStatement.Type) -> String {
        entries.withLock { $0[ObjectIdentifier(type)]?.sql } ?? ""
    }

    /// Gives up `name` for `type`: its next run prepares it afresh under a new name. A name is
    /// never given to another statement.
    func retire(_ type: any PreparedStoreStatement.Type, name: String) {
        let now = ContinuousClock.now
        entries.withLock { entries in
            guard var entry = entries[ObjectIdentifier(type)], entry.name == name else { return }
            if let last = entry.retired, now - last < .seconds(1) { return }
            entry.generation += 1
            entry.name = "passkeyd_\(type)_\(entry.generation)"
            entry.retired = now
            entries[ObjectIdentifier(type)] = entry
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

    /// Runs `sql` prepared as `type`, with its values bound, on `connection`.
    func rows(_ sql: SQL, as type: any PreparedStoreStatement.Type, on connection: PostgresConnection, logger: Logger) async throws
        -> [PostgresRandomAccessRow]
    {
        let name = type.name
        do {
            return try await type.rows(sql, on: connection, logger: logger)
        } catch {
            if Self.retires(after: error) { retire(type, name: name) }
            throw error
        }
    }
}
