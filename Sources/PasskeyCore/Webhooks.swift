import Crypto
import Foundation
import Logging
import PasskeyStore
import ServiceLifecycle
import Tracing
import WebAuthn

/// Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256(secret, "id.timestamp.body")>`
/// with `webhook-id` and `webhook-timestamp` beside it (https://www.standardwebhooks.com).
public enum WebhookSigner {
    /// The HMAC key of a secret: the base64 after `whsec_`, else the text's UTF-8 bytes.
    public static func key(_ secret: String) -> [UInt8] {
        if secret.hasPrefix("whsec_"), let data = Data(base64Encoded: String(secret.dropFirst(6))), !data.isEmpty {
            return Array(data)
        }
        return Array(secret.utf8)
    }

    public static func signature(key: [UInt8], id: String, timestamp: Int, body: [UInt8]) -> String {
        let message = Array("\(id).\(timestamp).".utf8) + body
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }
}

/// An event as an endpoint receives it.
package struct WebhookEventJSON: Encodable {
    package struct Payload: Encodable {
        package let accountId: String?
        package let passkeyId: String?
        package let ipAddress: String?
        package let userAgent: String?
        package let detail: String?
    }
    package let id: String
    package let type: String
    package let timestamp: Date
    package let data: Payload

    package init(_ event: AuditEvent) {
        id = WebhookDispatcher.eventID(event)
        type = event.kind
        timestamp = event.time
        data = Payload(
            accountId: event.accountID?.uuidString.lowercased(), passkeyId: event.credentialID.map { Base64URLBytes($0).base64URL },
            ipAddress: event.ipAddress, userAgent: event.userAgent, detail: event.detail)
    }
}

/// How one webhook send ended, for the outbox row, the log and the failure metric's `reason`.
public struct WebhookSendOutcome: Sendable {
    public var status: Int?
    /// nil when delivered.
    public var failure: String?
    /// `refused`, `timeout`, `address_refused`, `redirect`, `http_status`, `error`.
    public var reason: String?
    public var delivered: Bool { failure == nil }
    public init(status: Int? = nil, failure: String? = nil, reason: String? = nil) {
        self.status = status
        self.failure = failure
        self.reason = reason
    }
}

/// What sends a signed webhook request: the edge's HTTP client, held to an
/// ``OutboundURLPolicy`` and to timeouts. It never throws and never takes longer than its
/// request timeout (plus the name's resolution, itself bounded).
public protocol WebhookSender: Sendable {
    func post(url: String, headers: [(String, String)], body: [UInt8]) async -> WebhookSendOutcome
    /// Closes its connections; called once, when the dispatcher stops.
    func shutdown() async
}

/// Delivers the outbox (`webhook_deliveries`, filled in the same transaction as each audit line)
/// in the background: at least once, in order per account and endpoint, retried with exponential
/// back-off (5 s doubling to an hour), each delivery leased so that of several instances on one
/// PostgreSQL exactly one sends it at a time. Sign-ins never wait for it.
///
/// Each endpoint has a worker of its own, so a slow or dead receiver delays nobody else: a
/// refused connection fails at once, a connection attempt gives up after `connectTimeout`, a
/// request after `requestTimeout`, and an endpoint whose every send fails rests (0.25 s doubling
/// to 5 s) on top of each delivery's own back-off. Addresses are held to `policy`
/// (``OutboundURLPolicy``) when connecting, and redirects are never followed.
public struct WebhookDispatcher: Service {
    package let store: any PasskeyStore
    package let metrics: ServerMetrics
    package let logger: Logger
    package let policy: OutboundURLPolicy
    /// How often the list of endpoints is read (a new endpoint gets its worker within it).
    package let interval: Duration
    /// How often an idle endpoint's worker looks for due deliveries (a failing one: `interval`).
    package let pollInterval: Duration
    package let connectTimeout: Duration
    package let requestTimeout: Duration
    /// Deliveries in flight at once to one endpoint (each to a different account).
    package let concurrency: Int
    package let now: @Sendable () -> Date
    /// Makes the sender, from the policy and the two timeouts.
    package let sender: @Sendable (OutboundURLPolicy, _ connectTimeout: Duration, _ requestTimeout: Duration) -> any WebhookSender

    /// The dispatcher of `service`'s outbox, on its store, metrics, clock and webhook rule.
    public init(
        service: PasskeyService, logger: Logger,
        sender: @escaping @Sendable (OutboundURLPolicy, _ connectTimeout: Duration, _ requestTimeout: Duration) -> any WebhookSender
    ) {
        self.init(
            store: service.store, metrics: service.metrics, logger: logger, policy: service.configuration.webhookPolicy,
            now: service.now, sender: sender)
    }

    public init(
        store: any PasskeyStore, metrics: ServerMetrics, logger: Logger, policy: OutboundURLPolicy = OutboundURLPolicy(),
        interval: Duration = .seconds(1), pollInterval: Duration = .milliseconds(200), connectTimeout: Duration = .seconds(2),
        requestTimeout: Duration = .seconds(5), concurrency: Int = 8, now: @escaping @Sendable () -> Date = { Date() },
        sender: @escaping @Sendable (OutboundURLPolicy, _ connectTimeout: Duration, _ requestTimeout: Duration) -> any WebhookSender
    ) {
        self.sender = sender
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.policy = policy
        self.interval = interval
        self.pollInterval = pollInterval
        self.connectTimeout = connectTimeout
        self.requestTimeout = requestTimeout
        self.concurrency = max(1, concurrency)
        self.now = now
    }

    /// The same dispatcher on `tenant`'s rows.
    package func scoped(to tenant: String) -> WebhookDispatcher {
        WebhookDispatcher(
            store: store.scoped(to: tenant), metrics: metrics, logger: logger, policy: policy, interval: interval,
            pollInterval: pollInterval,
            connectTimeout: connectTimeout, requestTimeout: requestTimeout, concurrency: concurrency, now: now, sender: sender)
    }

    package static func eventID(_ event: AuditEvent) -> String { "evt_\(event.id ?? 0)" }

    /// The wait before attempt `attempts + 1`: 5 s, 10 s, 20 s, … at most an hour.
    package static func backoff(afterAttempts attempts: Int) -> TimeInterval { min(3600, 5 * pow(2, Double(min(attempts, 20)))) }

    /// How long a claim holds its deliveries: longer than any send can take (the name's
    /// resolution, the connection and the request, all bounded), so a lease never runs out
    /// while its delivery is still being sent and no other instance sends it meanwhile.
    package var lease: TimeInterval { Double((connectTimeout + requestTimeout).components.seconds) + 2 + 30 }

    /// A sender held to this dispatcher's policy and timeouts; shut it down after use.
    public func makeSender() -> any WebhookSender {
        sender(policy, connectTimeout, requestTimeout)
    }

    public func run() async throws {
        let client = makeSender()
        var workers: [UUID: Task<Void, Never>] = [:]
        // Rounds start after a pause: the database is migrated before the server starts, while
        // this service is already up.
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            guard !Task.isCancelled && !Task.isShuttingDownGracefully else { break }
            do {
                // Every tenant's endpoints; each worker claims and settles on its tenant's store.
                let endpoints = try await store.allWebhookEndpoints().filter { !$0.endpoint.disabled }
                let live = Set(endpoints.map(\.endpoint.id))
                for (id, worker) in workers where !live.contains(id) {
                    worker.cancel()
                    workers[id] = nil
                }
                for (tenant, endpoint) in endpoints where workers[endpoint.id] == nil {
                    let dispatcher = scoped(to: tenant)
                    workers[endpoint.id] = Task { await dispatcher.work(for: endpoint, client: client) }
                }
            } catch {
                logger.warning("webhook endpoints could not be read", metadata: ["error": "\(error)"])
            }
        }
        for worker in workers.values { worker.cancel() }
        for worker in workers.values { await worker.value }
        await client.shutdown()
    }

    /// One endpoint's worker: delivers what is due to it, round after round, until cancelled.
    package func work(for endpoint: WebhookEndpoint, client: any WebhookSender) async {
        var failedRounds = 0
        while !Task.isCancelled {
            let pause: Duration
            do {
                // A round runs to its end even when the worker is cancelled (the server stopping):
                // its sends are bounded by the two timeouts, and one cut short would hold its
                // delivery until the lease runs out. Sleeps between rounds end at once.
                let round = try await Task { try await deliverDue(to: endpoint, client: client) }.value
                if round.claimed == 0 {
                    // Nothing due. A failing endpoint's backlog (every account's head in its
                    // back-off) is looked through no more often than the endpoints are listed.
                    pause = failedRounds > 0 ? interval : pollInterval
                } else if round.delivered == 0 {
                    // Nothing got through: the endpoint rests, longer each time, besides each
                    // delivery's own back-off.
                    failedRounds += 1
                    pause = .milliseconds(min(5000, 250 << min(failedRounds - 1, 5)))
                } else {
                    failedRounds = 0
                    continue
                }
            } catch {
                logger.warning(
                    "webhook delivery round failed", metadata: ["endpoint": "\(endpoint.id)", "error": "\(error)"])
                pause = interval
            }
            try? await Task.sleep(for: pause)
        }
    }

    /// One round for one endpoint: claims up to `concurrency` due deliveries (each the oldest
    /// of its account) and sends them at once.
    package func deliverDue(to endpoint: WebhookEndpoint, client: any WebhookSender) async throws -> (claimed: Int, delivered: Int) {
        let time = now()
        let claimed = try await store.claimWebhookDeliveries(
            endpointID: endpoint.id, now: time, leaseUntil: time.addingTimeInterval(lease), limit: concurrency)
        guard !claimed.isEmpty else { return (0, 0) }
        let delivered = await send(claimed, endpoints: [endpoint.id: endpoint], client: client)
        return (claimed.count, delivered)
    }

    /// One round over every endpoint at once (tests, and a one-off drain): claims what is due
    /// and sends it; returns how many were claimed.
    @discardableResult
    public func deliverDue(client: any WebhookSender, limit: Int = 32) async throws -> Int {
        let time = now()
        let claimed = try await store.claimWebhookDeliveries(
            endpointID: nil, now: time, leaseUntil: time.addingTimeInterval(lease), limit: limit)
        guard !claimed.isEmpty else { return 0 }
        let endpoints = Dictionary(uniqueKeysWithValues: try await store.webhookEndpoints().map { ($0.id, $0) })
        _ = await send(claimed, endpoints: endpoints, client: client)
        return claimed.count
    }

    /// Sends claimed deliveries at once and settles each; returns how many got through.
    private func send(
        _ claimed: [(WebhookDelivery, AuditEvent)], endpoints: [UUID: WebhookEndpoint], client: any WebhookSender
    ) async -> Int {
        await withTaskGroup(of: Bool.self) { group in
            for (delivery, event) in claimed {
                group.addTask { await deliver(delivery, event, endpoint: endpoints[delivery.endpointID], client: client) }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
    }

    private func deliver(_ delivery: WebhookDelivery, _ event: AuditEvent, endpoint: WebhookEndpoint?, client: any WebhookSender) async
        -> Bool
    {
        var outcome = WebhookSendOutcome(failure: "endpoint removed", reason: "removed")
        var latency: Int?
        if let endpoint {
            do {
                let encoder = JSONEncoder()
                encoder.dateEncodingStrategy = .iso8601
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                let body = Array(try encoder.encode(WebhookEventJSON(event)))
                let id = Self.eventID(event)
                let timestamp = Int(now().timeIntervalSince1970)
                let headers = [
                    ("Content-Type", "application/json"), ("User-Agent", "passkeyd-webhooks"), ("webhook-id", id),
                    ("webhook-timestamp", String(timestamp)),
                    ("webhook-signature", WebhookSigner.signature(key: endpoint.secret, id: id, timestamp: timestamp, body: body)),
                ]
                let started = ContinuousClock.now
                outcome = await traced(event) { traceParent in
                    await client.post(url: endpoint.url, headers: headers + (traceParent.map { [("traceparent", $0)] } ?? []), body: body)
                }
                // How long the receiver took (connection included), for the console's deliveries.
                latency = Int((ContinuousClock.now - started).nanoseconds / 1_000_000)
            } catch {
                outcome = WebhookSendOutcome(failure: String("\(error)".prefix(200)), reason: "error")
            }
        }
        // Shutting down: the send was cut short, not refused. Its lease runs out and it is sent
        // again (by this instance after a restart, or by another): at least once.
        guard !Task.isCancelled else { return false }
        let time = now()
        metrics.webhookDelivery(endpoint: delivery.endpointID, succeeded: outcome.delivered, reason: outcome.reason)
        if !outcome.delivered {
            logger.info(
                "webhook delivery failed; will retry",
                metadata: [
                    "event": "evt_\(delivery.eventID)", "endpoint": "\(delivery.endpointID)", "attempt": "\(delivery.attempts + 1)",
                    "reason": "\(outcome.reason ?? "")", "error": "\(outcome.failure ?? "")",
                ])
        }
        do {
            try await store.settleWebhookDelivery(
                eventID: delivery.eventID, endpointID: delivery.endpointID, deliveredAt: outcome.delivered ? time : nil,
                status: outcome.status, error: outcome.failure, latencyMs: latency,
                retryAt: time.addingTimeInterval(Self.backoff(afterAttempts: delivery.attempts)))
        } catch {
            // The lease runs out and the delivery is tried again: at least once.
            logger.warning("webhook settle failed", metadata: ["error": "\(error)"])
        }
        return outcome.delivered
    }
}

extension WebhookDispatcher {
    /// A send in the trace of the request that wrote the event (its `traceparent`, kept on the
    /// audit line). With tracing on, a `webhook.deliver` span of that trace is current while it
    /// sends: the HTTP client's span (the query, path and user information of the URL left out) is
    /// its child and writes the request's `traceparent`.
    /// With tracing off, the request carries the line's `traceparent` as it was kept (written by
    /// an instance with tracing on); none without one.
    fileprivate func traced(_ event: AuditEvent, _ send: (String?) async -> WebhookSendOutcome) async -> WebhookSendOutcome {
        guard let parent = event.traceParent, Spans.isTraceParent(parent) else { return await send(nil) }
        guard Spans.enabled else { return await send(parent) }
        let span = startSpan("webhook.deliver", context: Spans.context(traceParent: parent), ofKind: .internal)
        defer { span.end() }
        span.attributes["webhook.event.type"] = event.kind
        let outcome = await InstrumentationContext.$current.withValue(span.context) { await send(nil) }
        if let status = outcome.status { span.attributes["http.response.status_code"] = status }
        if !outcome.delivered {
            span.attributes["error.type"] = outcome.reason ?? "error"
            span.setStatus(SpanStatus(code: .error))
        }
        return outcome
    }
}

extension PasskeyService {
    /// At start, once the database is migrated: the first signing key, and the webhook
    /// endpoints of the configuration file (added when no endpoint has their URL; to change one,
    /// `passkeyd admin webhooks remove` it first).
    public func prepareIntegrations() async throws {
        try await tokens.prepare()
        guard !configuration.webhooks.isEmpty else { return }
        let known = Set(try await store.webhookEndpoints().map(\.url))
        for hook in configuration.webhooks where !known.contains(hook.url) {
            let events = hook.events.isEmpty ? ["*"] : hook.events
            try await store.addWebhookEndpoint(
                WebhookEndpoint(url: hook.url, secret: WebhookSigner.key(hook.secret), events: events, createdAt: now()))
        }
    }
}
