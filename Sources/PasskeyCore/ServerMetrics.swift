import CoreMetrics
import Foundation
import PasskeyStore
import Prometheus
import Synchronization
import WebAuthn

/// The server's Prometheus metrics, through swift-metrics on a registry of its own (so several
/// servers in one process, as in the tests, never share counts). Served at `/metrics`.
///
/// Counters and histograms move as requests happen; the gauges (accounts, passkeys by provider,
/// sessions, adoption) are read from the store when scraped, so every instance reports the
/// same database-wide figures.
public final class ServerMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    /// The handles already made, by label and dimensions: making one through the factory
    /// (validating, sorting and looking up its labels under the registry's lock) cost more than
    /// the count itself, several times per request.
    private let counters = Mutex<[MetricKey: CoreMetrics.Counter]>([:])
    private let timers = Mutex<[MetricKey: CoreMetrics.Timer]>([:])

    private struct MetricKey: Hashable {
        let label: String
        let dimensions: [String]
        init(_ label: String, _ dimensions: [(String, String)]) {
            self.label = label
            self.dimensions = dimensions.flatMap { [$0.0, $0.1] }
        }
    }

    private func counter(_ label: String, _ dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        let key = MetricKey(label, dimensions)
        if let known = counters.withLock({ $0[key] }) { return known }
        let made = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
        counters.withLock { $0[key] = made }
        return made
    }

    private func timer(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Timer {
        let key = MetricKey(label, dimensions)
        if let known = timers.withLock({ $0[key] }) { return known }
        let made = CoreMetrics.Timer(label: label, dimensions: dimensions, preferredDisplayUnit: .seconds, factory: factory)
        timers.withLock { $0[key] = made }
        return made
    }

    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        self.factory = factory
    }

    /// Which kind of client ran a ceremony: Android apps sign an `android:apk-key-hash:` origin;
    /// iOS apps send the web origin but talk through URLSession (`CFNetwork` in the User-Agent).
    public enum ClientKind: String, Sendable {
        case web, ios, android, other

        public static func classify(origin: String?, userAgent: String?) -> ClientKind {
            if let origin, origin.hasPrefix("android:apk-key-hash:") { return .android }
            guard let userAgent else { return .other }
            // ASCII lower case, compared as bytes (once per ceremony: Foundation's
            // `lowercased()` and `contains` were ~1% of a sign-in).
            let agent = userAgent.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
            func has(_ word: StaticString) -> Bool { find(word, in: agent, prefixOnly: false) }
            func starts(_ word: StaticString) -> Bool { find(word, in: agent, prefixOnly: true) }
            let mozilla = has("mozilla")
            if has("cfnetwork") || (has("darwin/") && !mozilla) { return .ios }
            if starts("okhttp") || starts("ktor") || (has("android") && !mozilla) { return .android }
            if mozilla { return .web }
            return .other
        }

        private static func find(_ word: StaticString, in text: [UInt8], prefixOnly: Bool) -> Bool {
            word.withUTF8Buffer { needle in
                guard needle.count <= text.count else { return false }
                let last = prefixOnly ? 0 : text.count - needle.count
                var start = 0
                while start <= last {
                    var index = 0
                    while index < needle.count && text[start + index] == needle[index] { index += 1 }
                    if index == needle.count { return true }
                    start += 1
                }
                return false
            }
        }
    }

    package func ceremonyStarted(_ ceremony: String, client: ClientKind) {
        counter("passkeyd_ceremonies_started_total", [("ceremony", ceremony), ("client", client.rawValue)]).increment()
    }

    package func ceremonyFinished(_ ceremony: String, client: ClientKind, code: String?, duration: Duration) {
        counter(
            "passkeyd_ceremonies_finished_total",
            [("ceremony", ceremony), ("client", client.rawValue), ("result", code == nil ? "succeeded" : "failed"), ("code", code ?? "")]
        ).increment()
        timer("passkeyd_ceremony_duration_seconds", [("ceremony", ceremony), ("client", client.rawValue)])
            .recordNanoseconds(duration.nanoseconds)
    }

    /// A successful sign-in by `method` (passkey, password, recovery_code, recovery_link).
    package func signedIn(method: String) {
        counter("passkeyd_sign_ins_total", [("method", method)]).increment()
    }

    /// A password hash replaced at sign-in (imported bcrypt, or scrypt below the configured cost).
    package func passwordRehashed() {
        counter("passkeyd_password_rehashes_total").increment()
    }

    package func rateLimited(scope: String) {
        counter("passkeyd_rate_limited_total", [("scope", scope)]).increment()
    }

    /// A per-address refusal of an address refused before in its window: held before it was
    /// sent, or not (the address or the process held as many as they may, or the hold was cut
    /// short: ``RefusalHold``).
    package func refusalHeld(_ held: Bool) {
        counter("passkeyd_refusals_held_total", [("result", held ? "held" : "not_held")]).increment()
    }

    /// Open ceremonies deleted to keep their number under `maxOpenChallenges`.
    package func ceremoniesDiscarded(_ count: Int) {
        counter("passkeyd_ceremonies_discarded_total").increment(by: count)
    }

    /// A webhook delivery attempt (`result`: `delivered` or `failed`); a failure is also counted
    /// per endpoint (its id) and `reason` (`refused`, `timeout`, `address_refused`, `redirect`,
    /// `http_status`, `error`, `removed`) in `passkeyd_webhook_failures_total`.
    package func webhookDelivery(endpoint: UUID, succeeded: Bool, reason: String?) {
        counter("passkeyd_webhook_deliveries_total", [("result", succeeded ? "delivered" : "failed")]).increment()
        guard !succeeded else { return }
        counter("passkeyd_webhook_failures_total", [("endpoint", endpoint.uuidString.lowercased()), ("reason", reason ?? "error")])
            .increment()
    }

    /// A mail queued (`kind`: `verify_address`, `recovery`, `notice_…`).
    package func mailQueued(kind: String) {
        counter("passkeyd_mail_queued_total", [("kind", kind)]).increment()
    }

    /// A mail handed to the SMTP server (`result`: `sent`), tried again later (`retry`) or given
    /// up (`failed`); `reason` is the ``SMTPError`` kind (`refused`, `timeout`, `tls`, `auth`,
    /// `rejected`, `protocol`, `configuration`).
    package func mailAttempt(result: String, reason: String?) {
        counter("passkeyd_mail_attempts_total", [("result", result), ("reason", reason ?? "")]).increment()
    }

    /// Recovery by mail (`step`: `requested`, `opened`, `completed`, `undone`).
    package func emailRecovery(_ step: String) {
        counter("passkeyd_email_recovery_total", [("step", step)]).increment()
    }

    /// A request whose client closed the connection before the answer.
    package func requestAborted() {
        counter("passkeyd_requests_aborted_total").increment()
    }

    /// A connection refused or closed by the listener's limits (`reason`: `global_cap`,
    /// `address_cap`, `header_timeout`, `body_timeout`, `idle_timeout`).
    package func connectionClosed(reason: String) {
        counter("passkeyd_connections_closed_total", [("reason", reason)]).increment()
    }

    /// Something single use offered again and refused (`what`: `challenge`, `counter`,
    /// `oauth_code`, `refresh_token`): a replay, a double submission or a race lost.
    package func singleUseRefused(_ what: String) {
        counter("passkeyd_single_use_refusals_total", [("what", what)]).increment()
    }

    /// A request the store could not serve (`code`: `database_unavailable`, `conflict`, …).
    package func storeError(code: String) {
        counter("passkeyd_store_errors_total", [("code", code)]).increment()
    }

    private static let statusClasses = ["0xx", "1xx", "2xx", "3xx", "4xx", "5xx"]

    package func request(status: Int, duration: Duration) {
        let statusClass = (0..<6).contains(status / 100) ? Self.statusClasses[status / 100] : "\(status / 100)xx"
        timer("passkeyd_http_request_duration_seconds", [("status_class", statusClass)]).recordNanoseconds(duration.nanoseconds)
    }

    /// The exposition text, after refreshing the store gauges.
    package func render(store: any PasskeyStore, now: Date, metadata: FIDOMetadata? = nil) async throws -> String {
        let stats = try await store.statistics(now: now, activeSince: now.addingTimeInterval(-30 * 86_400))
        gauge("passkeyd_accounts", stats.accounts)
        gauge("passkeyd_accounts_disabled", stats.disabledAccounts)
        gauge("passkeyd_accounts_with_passkey", stats.accountsWithPasskey)
        gauge("passkeyd_active_accounts_30d", stats.activeAccounts)
        gauge("passkeyd_active_accounts_with_passkey_30d", stats.activeAccountsWithPasskey)
        gauge(
            "passkeyd_passkey_adoption_ratio",
            stats.activeAccounts == 0 ? 0 : Double(stats.activeAccountsWithPasskey) / Double(stats.activeAccounts))
        gauge("passkeyd_sessions_live", stats.liveSessions)
        gauge("passkeyd_ceremonies_open", stats.openChallenges)
        var byProvider: [String: Int] = [:]
        for (aaguid, count) in stats.passkeysByAAGUID {
            let known = AAGUID(aaguid).flatMap { metadata?.entry(for: $0)?.description ?? $0.providerName }
            byProvider[known ?? "Unknown", default: 0] += count
        }
        for (provider, count) in byProvider {
            Gauge(label: "passkeyd_passkeys", dimensions: [("provider", provider)], factory: factory).record(count)
        }
        // The mail outbox: what waits, what fails, what went out in the last day.
        let mail = try await store.mailStatistics(now: now)
        gauge("passkeyd_mail_queued", mail.queued)
        gauge("passkeyd_mail_failing", mail.failing)
        gauge("passkeyd_mail_sent_24h", mail.sentLastDay)
        gauge("passkeyd_mail_failed_24h", mail.failedLastDay)
        gauge("passkeyd_mail_oldest_queued_seconds", mail.oldestQueuedSeconds)
        // Recovery by mail over 7 days, database-wide (the console's overview shows the same).
        let recovery = try await store.emailRecoveryFigures(since: now.addingTimeInterval(-7 * 86_400))
        for (step, count) in [("requested", recovery.requested), ("completed", recovery.completed), ("undone", recovery.undone)] {
            Gauge(label: "passkeyd_email_recoveries_7d", dimensions: [("step", step)], factory: factory).record(count)
        }
        // FIDO metadata (MDS3): when the BLOB in force wants replacing.
        if let metadata {
            gauge("passkeyd_mds_next_update_timestamp_seconds", metadata.nextUpdate.timeIntervalSince1970)
            gauge("passkeyd_mds_stale", metadata.isStale(at: now) ? 1 : 0)
        }
        return registry.emitToString()
    }

    private func gauge(_ name: String, _ value: Int) { Gauge(label: name, factory: factory).record(value) }
    private func gauge(_ name: String, _ value: Double) { Gauge(label: name, factory: factory).record(value) }
}

extension Duration {
    package var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}

extension PasskeyService {
    /// `/metrics`: the Prometheus text exposition, with the store's gauges and the metadata's age.
    package func renderMetrics() async throws -> String {
        try await metrics.render(store: store, now: now(), metadata: fidoMetadata)
    }
}
