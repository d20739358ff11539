import Foundation
import PasskeyStore

/// The adoption picture: the overview's counts and the chart's days, from the daily rollups
/// of the audit log's metrics (``AdoptionMetric``) and today's lines counted live.
extension ConsoleService {
    /// Sign-ins by method.
    public struct SignIns: Sendable, Equatable {
        public var autofill = 0
        public var passkey = 0
        public var password = 0
        public var recovery = 0
        public var oidc = 0
    }

    /// Password → passkey upgrades by road.
    public struct Upgrades: Sendable, Equatable {
        public var conditional = 0
        public var button = 0
        public var recovery = 0
    }

    /// One UTC day of the chart. The three totals are the accounts at the end of the day (now,
    /// for today); the rest happened during it.
    public struct AdoptionDay: Sendable, Equatable {
        public var date: Date
        public var accountsWithPasskey = 0
        public var passwordOnly = 0
        public var noWayIn = 0
        public var newPasskeys = 0
        public var upgrades = Upgrades()
        public var passwordsOff = 0
        public var signIns = SignIns()
    }

    /// The overview: today's totals and sign-ins, live sessions and the webhook backlog.
    public struct Overview: Sendable, Equatable {
        public var today: AdoptionDay
        public var activeSessions: Int
        public var webhookBacklog: Int
        /// The mail outbox: queued, failing, sent and given up in the last day.
        public var mail: MailStatistics
        /// Recovery by mail in the last 7 days.
        public var recovery: EmailRecoveryFigures
        public var generatedAt: Date
        public var accounts: Int { today.accountsWithPasskey + today.passwordOnly + today.noWayIn }
    }

    /// The ranges the chart offers.
    public static let adoptionRanges = [7, 30, 90, 365]

    public func overview() async throws -> Overview {
        let time = service.now()
        let today = try await adoption(days: 1)[0]
        return Overview(
            today: today, activeSessions: try await store.liveSessionCount(now: time),
            webhookBacklog: try await store.webhookBacklog(now: time), mail: try await store.mailStatistics(now: time),
            recovery: try await store.emailRecoveryFigures(since: time.addingTimeInterval(-7 * 86_400)), generatedAt: time)
    }

    /// The last `days` UTC days, oldest first, today last.
    ///
    /// Completed days come from the rollups (a day is rolled up once it ended five minutes ago,
    /// so a line written just before midnight is in it); the days after the rollups' watermark
    /// (today, and yesterday during its first minutes) are counted from the audit log. The
    /// totals are running sums of the transitions from migration 13's baselines.
    public func adoption(days: Int) async throws -> [AdoptionDay] {
        guard Self.adoptionRanges.contains(days) || days == 1 else {
            throw PasskeyServiceError(.invalidQuery, "days must be one of \(Self.adoptionRanges.map(String.init).joined(separator: ", ")).")
        }
        let time = service.now()
        try await store.rollUpMetrics(before: time.addingTimeInterval(-300))
        let today = Self.dayStart(time)
        let first = today.addingTimeInterval(-Double(days - 1) * 86_400)
        let rolledThrough = min(try await store.metricsRolledThrough() ?? today, today)
        // Per day in the range: rolled rows, then live counts for the days not rolled yet.
        var counts: [Date: [String: Int]] = [:]
        // Days at or after the watermark read above are counted live, even if another instance
        // rolls them up meanwhile: never both.
        for row in try await store.dailyMetrics(from: first, to: rolledThrough) {
            counts[row.day, default: [:]][row.metric, default: 0] += row.n
        }
        var base = try await store.metricTotals(before: min(first, rolledThrough))
        var day = rolledThrough
        while day <= today {
            let live = try await store.liveMetrics(from: day, to: day.addingTimeInterval(86_400))
            if day < first {
                base.merge(live, uniquingKeysWith: +)
            } else {
                counts[day, default: [:]].merge(live, uniquingKeysWith: +)
            }
            day = day.addingTimeInterval(86_400)
        }
        var totals = (withPasskey: 0, passwordOnly: 0, empty: 0)
        func apply(_ metrics: [String: Int]) {
            for (name, n) in metrics {
                guard let metric = AdoptionMetric(rawValue: name) else { continue }
                let move = metric.transition
                totals.withPasskey += move.withPasskey * n
                totals.passwordOnly += move.passwordOnly * n
                totals.empty += move.empty * n
            }
        }
        apply(base)
        var result: [AdoptionDay] = []
        for index in 0..<days {
            let date = first.addingTimeInterval(Double(index) * 86_400)
            let metrics = counts[date] ?? [:]
            apply(metrics)
            func n(_ metric: AdoptionMetric) -> Int { metrics[metric.rawValue] ?? 0 }
            result.append(
                AdoptionDay(
                    date: date, accountsWithPasskey: totals.withPasskey, passwordOnly: totals.passwordOnly, noWayIn: totals.empty,
                    newPasskeys: n(.signUpPasskey) + n(.firstPasskey) + n(.passkeyAdded) + n(.upgradeConditional) + n(.upgradeButton)
                        + n(.upgradeRecovery),
                    upgrades: Upgrades(conditional: n(.upgradeConditional), button: n(.upgradeButton), recovery: n(.upgradeRecovery)),
                    passwordsOff: n(.passwordOff),
                    signIns: SignIns(
                        autofill: n(.signInAutofill), passkey: n(.signInPasskey), password: n(.signInPassword),
                        recovery: n(.signInRecovery), oidc: n(.signInOIDC))))
        }
        return result
    }

    /// The chart's days as CSV (the same numbers as the chart and its table).
    public func adoptionCSV(days: Int) async throws -> String {
        var lines = [
            "date,accounts_with_passkey,password_only,new_passkeys,upgrades_conditional,upgrades_button,upgrades_recovery,passwords_off,sign_ins_autofill,sign_ins_passkey,sign_ins_password,sign_ins_recovery,sign_ins_oidc"
        ]
        for day in try await adoption(days: days) {
            let values = [
                day.accountsWithPasskey, day.passwordOnly, day.newPasskeys, day.upgrades.conditional, day.upgrades.button,
                day.upgrades.recovery, day.passwordsOff, day.signIns.autofill, day.signIns.passkey, day.signIns.password,
                day.signIns.recovery, day.signIns.oidc,
            ]
            lines.append(([Self.dayText(day.date)] + values.map(String.init)).joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// 00:00 UTC of `date`'s day.
    public static func dayStart(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400)
    }

    /// `YYYY-MM-DD` (UTC).
    public static func dayText(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
}
