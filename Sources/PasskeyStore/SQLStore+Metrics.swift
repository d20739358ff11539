import Foundation

/// The adoption picture's numbers: audit lines carry a metric (`AuditEvent.metric`); each
/// completed UTC day is counted once into `daily_metrics` (a year's chart then reads a few
/// thousand rows, never the log), and today is counted live from the log.
///
/// The watermark (`metrics_rollup.next_day`) is the first day not rolled up yet. Migration 13
/// sets it to the day it ran on a database with accounts (older days have no metrics: unknown,
/// not zero) and writes their `baseline_*` counts on the day before; on an empty database it is
/// set by the first rollup, to the day of the first audit line with a metric.
extension SQLStore {
    static let dayMillis: Int64 = 86_400_000
    /// Most days one call rolls up (a long-stopped instance catches up over several calls).
    static let maximumRollupDays: Int64 = 400

    /// The start (00:00 UTC) of the day holding `time`, in Unix milliseconds.
    static func dayStart(_ time: Date) -> Int64 {
        let millis = StoreValues.millis(time)
        return millis >= 0 ? millis / dayMillis * dayMillis : -((-millis + dayMillis - 1) / dayMillis * dayMillis)
    }

    /// Upkeep: every tenant's days are rolled up together, each into its own tenant's rows.
    public func rollUpMetrics(before: Date) async throws -> Int {
        let end = Self.dayStart(before)
        let forUpdate = dialect.forUpdate
        return try await upkeepTransaction { [self] db in
            // Rollers take turns on the watermark row (PostgreSQL; SQLite has one writer): the
            // second finds the days rolled by the first and has nothing left to do.
            var start = try await db.first("SELECT next_day FROM metrics_rollup WHERE id = 1\(sql: forUpdate)").map {
                try $0.integer("next_day")
            }
            // Each tenant's lines are read from its own range of audit_time (tenant, time, metric).
            let tenants = try await Self.allTenants(db)
            if start == nil {
                var earliest: Int64?
                for tenant in tenants {
                    let first = try await db.first(
                        "SELECT MIN(time) AS earliest FROM audit_events WHERE tenant_id = \(tenant) AND metric IS NOT NULL")
                    if let time = try first?.optionalInteger("earliest") { earliest = min(earliest ?? time, time) }
                }
                guard let time = earliest else { return 0 }
                try await db.execute(
                    """
                    INSERT INTO metrics_rollup (id, next_day) VALUES (1, \(Self.dayStart(StoreValues.date(time))))
                    ON CONFLICT (id) DO NOTHING
                    """)
                start = try await db.first("SELECT next_day FROM metrics_rollup WHERE id = 1\(sql: forUpdate)").map {
                    try $0.integer("next_day")
                }
            }
            guard let start, start < end else { return 0 }
            let stop = min(end, start + Self.maximumRollupDays * Self.dayMillis)
            // The day's length as text of the statement (a constant): both GROUP BY and the
            // SELECT list then name the same expression.
            let day = SQLFragment(text: "\(Self.dayMillis)")
            // One statement for every day of the range (an index range scan of audit_time, which
            // holds the metric: the log's rows are not read). Recomputing a day writes the same
            // rows; a day without metrics has no rows (zero).
            for tenant in tenants {
                try await db.execute(
                    """
                    INSERT INTO daily_metrics (tenant_id, day, metric, n)
                    SELECT tenant_id, time / \(sql: day) * \(sql: day) AS day, metric, COUNT(*) AS n FROM audit_events
                    WHERE tenant_id = \(tenant) AND time >= \(start) AND time < \(stop) AND metric IS NOT NULL
                    GROUP BY tenant_id, time / \(sql: day) * \(sql: day), metric
                    ON CONFLICT (tenant_id, day, metric) DO UPDATE SET n = excluded.n
                    """)
            }
            // Forward only.
            try await db.execute("UPDATE metrics_rollup SET next_day = \(stop) WHERE id = 1 AND next_day < \(stop)")
            return Int((stop - start) / Self.dayMillis)
        }
    }

    public func dailyMetrics(from: Date, to: Date) async throws -> [DailyMetric] {
        try await reader.rows(
            """
            SELECT day, metric, n FROM daily_metrics WHERE tenant_id = \(tenant) AND day >= \(StoreValues.millis(from)) AND day < \(StoreValues.millis(to))
            ORDER BY day, metric
            """
        ).map { DailyMetric(day: try $0.date("day"), metric: try $0.text("metric"), n: Int(try $0.integer("n"))) }
    }

    public func metricTotals(before: Date) async throws -> [String: Int] {
        try await counts(
            "SELECT metric, CAST(SUM(n) AS BIGINT) AS n FROM daily_metrics WHERE tenant_id = \(tenant) AND day < \(StoreValues.millis(before)) GROUP BY metric"
        )
    }

    public func liveMetrics(from: Date, to: Date) async throws -> [String: Int] {
        try await counts(
            """
            SELECT metric, COUNT(*) AS n FROM audit_events
            WHERE tenant_id = \(tenant) AND time >= \(from) AND time < \(to) AND metric IS NOT NULL GROUP BY metric
            """)
    }

    public func metricsRolledThrough() async throws -> Date? {
        try await upkeepReader.first("SELECT next_day FROM metrics_rollup WHERE id = 1").map { try $0.date("next_day") }
    }

    /// `metric → n` from rows of (`metric`, `n`).
    private func counts(_ sql: SQL) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try await reader.rows(sql) { counts[try row.text("metric")] = Int(try row.integer("n")) }
        return counts
    }
}
