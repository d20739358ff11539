import CoreMetrics
import Foundation
import PasskeyStore
import Prometheus
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
            guard let agent = userAgent?.lowercased() else { return .other }
            if agent.contains("cfnetwork") || (agent.contains("darwin/") && !agent.contains("mozilla")) { return .ios }
            if agent.hasPrefix("okhttp") || agent.hasPrefix("ktor") || (agent.contains("android") && !agent.contains("mozilla")) {
                return .android
            }
            if agent.contains("mozilla") { return .web }
            return .other
        }
    }

    func ceremonyStarted(_ ceremony: String, client: ClientKind) {
        Counter(
            label: "passkeyd_ceremonies_started_total", dimensions: [("ceremony", ceremony), ("client", client.rawValue)],
            factory: factory
        ).increment()
    }

    func ceremonyFinished(_ ceremony: String, client: ClientKind, code: String?, duration: Duration) {
        Counter(
            label: "passkeyd_ceremonies_finished_total",
            dimensions: [
                ("ceremony", ceremony), ("client", client.rawValue), ("result", code == nil ? "succeeded" : "failed"),
                ("code", code ?? ""),
            ], factory: factory
        ).increment()
        Timer(
            label: "passkeyd_ceremony_duration_seconds", dimensions: [("ceremony", ceremony), ("client", client.rawValue)],
            preferredDisplayUnit: .seconds, factory: factory
        ).recordNanoseconds(duration.nanoseconds)
    }

    /// A successful sign-in by `method` (passkey, password, recovery_code, recovery_link).
    func signedIn(method: String) {
        Counter(label: "passkeyd_sign_ins_total", dimensions: [("method", method)], factory: factory).increment()
    }

    func rateLimited(scope: String) {
        Counter(label: "passkeyd_rate_limited_total", dimensions: [("scope", scope)], factory: factory).increment()
    }

    /// Open ceremonies deleted to keep their number under `maxOpenChallenges`.
    func ceremoniesDiscarded(_ count: Int) {
        Counter(label: "passkeyd_ceremonies_discarded_total", factory: factory).increment(by: count)
    }

    /// A webhook delivery attempt (`result`: `delivered` or `failed`).
    func webhookDelivery(succeeded: Bool) {
        Counter(label: "passkeyd_webhook_deliveries_total", dimensions: [("result", succeeded ? "delivered" : "failed")], factory: factory)
            .increment()
    }

    /// A request whose client closed the connection before the answer.
    func requestAborted() {
        Counter(label: "passkeyd_requests_aborted_total", factory: factory).increment()
    }

    /// A connection refused or closed by the listener's limits (`reason`: `global_cap`,
    /// `address_cap`, `header_timeout`, `body_timeout`, `idle_timeout`).
    func connectionClosed(reason: String) {
        Counter(label: "passkeyd_connections_closed_total", dimensions: [("reason", reason)], factory: factory).increment()
    }

    func request(status: Int, duration: Duration) {
        Timer(
            label: "passkeyd_http_request_duration_seconds", dimensions: [("status_class", "\(status / 100)xx")],
            preferredDisplayUnit: .seconds, factory: factory
        ).recordNanoseconds(duration.nanoseconds)
    }

    /// The exposition text, after refreshing the store gauges.
    func render(store: any PasskeyStore, now: Date, metadata: FIDOMetadata? = nil) async throws -> String {
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
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
