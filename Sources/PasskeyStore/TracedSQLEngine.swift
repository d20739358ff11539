import Tracing

/// An engine whose statements (`db.query`) and transactions (`db.transaction`) are spans, each
/// the child of its caller's span (only inside a trace: a request's, not background work's), with `db.system` (`sqlite`, `postgresql`) and a summary of
/// the statement (`SELECT passkeys`): never its text's values, which are never in its text.
///
/// A store wraps its engine only when spans are on at its start (``Spans``); otherwise the
/// engine is used as it is and nothing here runs.
final class TracedSQLEngine: SQLEngine {
    let base: any SQLEngine
    let system: String

    /// `engine`, traced when spans are on.
    static func wrap(_ engine: any SQLEngine) -> any SQLEngine {
        Spans.enabled ? TracedSQLEngine(engine) : engine
    }

    private init(_ base: any SQLEngine) {
        self.base = base
        switch base.dialect {
        case .sqlite: system = "sqlite"
        case .postgres: system = "postgresql"
        }
    }

    var dialect: SQLDialect { base.dialect }
    var reader: any SQLConnection { Connection(base: base.reader, system: system) }
    var writer: any SQLConnection { Connection(base: base.writer, system: system) }
    func schemaChanged() { base.schemaChanged() }

    func reader(tenant: String) -> any SQLConnection { Connection(base: base.reader(tenant: tenant), system: system) }
    func writer(tenant: String) -> any SQLConnection { Connection(base: base.writer(tenant: tenant), system: system) }

    func transaction<T: Sendable>(timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        try await measured { system in
            try await self.base.transaction(timeout: timeout) { connection in try await body(Connection(base: connection, system: system)) }
        }
    }

    func transaction<T: Sendable>(
        tenant: String, timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T
    ) async throws -> T {
        try await measured { system in
            try await self.base.transaction(tenant: tenant, timeout: timeout) { connection in
                try await body(Connection(base: connection, system: system))
            }
        }
    }

    private func measured<T: Sendable>(_ work: @escaping @Sendable (String) async throws -> T) async throws -> T {
        let system = self.system
        let attributes: (inout SpanAttributes) -> Void = { $0["db.system"] = system }
        return try await Spans.measure("db.transaction", kind: .client, inTraceOnly: true, attributes: attributes) {
            try await work(system)
        }
    }

    /// A connection whose every statement is a span.
    struct Connection: SQLConnection {
        let base: any SQLConnection
        let system: String

        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            try await Spans.measure("db.query", kind: .client, inTraceOnly: true, attributes: describe(sql)) {
                try await base.rows(sql)
            }
        }

        /// A statement run for its effect (inside a SQLite transaction it may be sent later,
        /// with the next statement that answers: its span then only marks when it was asked).
        func execute(_ sql: SQL) async throws {
            try await Spans.measure("db.query", kind: .client, inTraceOnly: true, attributes: describe(sql)) {
                try await base.execute(sql)
            }
        }

        /// The statement's attributes, read only when its span is made.
        private func describe(_ sql: SQL) -> (inout SpanAttributes) -> Void {
            { [system] attributes in
                let (operation, summary) = sql.summary
                attributes["db.system"] = system
                attributes["db.operation.name"] = operation
                attributes["db.query.summary"] = summary
            }
        }
    }
}

extension SQL {
    /// The statement's operation and the first table it names (`SELECT`, `SELECT passkeys`),
    /// read from the text before its first value (a statement's values are never in its text).
    var summary: (operation: String, summary: String) {
        let keywords: Set<String> = ["FROM", "INTO", "UPDATE", "TABLE", "INDEX", "ON"]
        let skipped: Set<String> = ["IF", "NOT", "EXISTS", "ONLY"]
        var operation: String?
        var found = false
        for word in pieces[0].split(whereSeparator: { " \n\t(),;".contains($0) }) {
            let upper = word.uppercased()
            guard let first = operation else {
                operation = upper
                found = keywords.contains(upper)
                continue
            }
            if found, !skipped.contains(upper) {
                return (first, word.first?.isLetter == true ? first + " " + word : first)
            }
            found = found || keywords.contains(upper)
        }
        return (operation ?? "", operation ?? "")
    }
}
