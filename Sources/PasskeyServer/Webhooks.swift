import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import PasskeyStore
import ServiceLifecycle
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
struct WebhookEventJSON: Encodable {
    struct Payload: Encodable {
        let accountId: String?
        let passkeyId: String?
        let ipAddress: String?
        let userAgent: String?
        let detail: String?
    }
    let id: String
    let type: String
    let timestamp: Date
    let data: Payload

    init(_ event: AuditEvent) {
        id = WebhookDispatcher.eventID(event)
        type = event.kind
        timestamp = event.time
        data = Payload(
            accountId: event.accountID?.uuidString.lowercased(), passkeyId: event.credentialID.map { Base64URLBytes($0).base64URL },
            ipAddress: event.ipAddress, userAgent: event.userAgent, detail: event.detail)
    }
}

/// Delivers the outbox (`webhook_deliveries`, filled in the same transaction as each audit line)
/// in the background: at least once, in order per account and endpoint, retried with exponential
/// back-off (5 s doubling to an hour), each delivery leased so that of several instances on one
/// PostgreSQL exactly one sends it. Sign-ins never wait for it.
public struct WebhookDispatcher: Service {
    let store: any PasskeyStore
    let metrics: ServerMetrics
    let logger: Logger
    let interval: Duration
    let timeout: Duration
    let now: @Sendable () -> Date

    public init(
        store: any PasskeyStore, metrics: ServerMetrics, logger: Logger, interval: Duration = .seconds(1), timeout: Duration = .seconds(10),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.interval = interval
        self.timeout = timeout
        self.now = now
    }

    static func eventID(_ event: AuditEvent) -> String { "evt_\(event.id ?? 0)" }

    /// The wait before attempt `attempts + 1`: 5 s, 10 s, 20 s, … at most an hour.
    static func backoff(afterAttempts attempts: Int) -> TimeInterval { min(3600, 5 * pow(2, Double(min(attempts, 20)))) }

    public func run() async throws {
        let client = HTTPClient.shared
        // Rounds start after a pause: the database is migrated before the server starts, while
        // this service is already up.
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
                do {
                    if try await deliverDue(client: client) == 0 { break }
                } catch {
                    logger.warning("webhook delivery round failed", metadata: ["error": "\(error)"])
                    break
                }
            }
        }
    }

    /// One round: claims what is due and sends it (different accounts at once); returns how many.
    @discardableResult
    public func deliverDue(client: HTTPClient, limit: Int = 32) async throws -> Int {
        let time = now()
        let claimed = try await store.claimWebhookDeliveries(
            now: time, leaseUntil: time.addingTimeInterval(Double(timeout.components.seconds) + 30), limit: limit)
        guard !claimed.isEmpty else { return 0 }
        let endpoints = Dictionary(uniqueKeysWithValues: try await store.webhookEndpoints().map { ($0.id, $0) })
        await withTaskGroup(of: Void.self) { group in
            for (delivery, event) in claimed {
                group.addTask { await deliver(delivery, event, endpoint: endpoints[delivery.endpointID], client: client) }
            }
        }
        return claimed.count
    }

    private func deliver(_ delivery: WebhookDelivery, _ event: AuditEvent, endpoint: WebhookEndpoint?, client: HTTPClient) async {
        var status: Int?
        var failure: String?
        if let endpoint {
            do {
                let encoder = JSONEncoder()
                encoder.dateEncodingStrategy = .iso8601
                encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
                let body = Array(try encoder.encode(WebhookEventJSON(event)))
                let id = Self.eventID(event)
                let timestamp = Int(now().timeIntervalSince1970)
                var request = HTTPClientRequest(url: endpoint.url)
                request.method = .POST
                request.headers.add(name: "Content-Type", value: "application/json")
                request.headers.add(name: "User-Agent", value: "passkeyd-webhooks")
                request.headers.add(name: "webhook-id", value: id)
                request.headers.add(name: "webhook-timestamp", value: String(timestamp))
                request.headers.add(
                    name: "webhook-signature",
                    value: WebhookSigner.signature(key: endpoint.secret, id: id, timestamp: timestamp, body: body))
                request.body = .bytes(ByteBuffer(bytes: body))
                let response = try await client.execute(request, timeout: .seconds(timeout.components.seconds))
                status = Int(response.status.code)
                _ = try? await response.body.collect(upTo: 64 * 1024)
                if !(200..<300).contains(response.status.code) { failure = "HTTP \(response.status.code)" }
            } catch {
                failure = String("\(error)".prefix(200))
            }
        } else {
            failure = "endpoint removed"
        }
        let time = now()
        let delivered = failure == nil
        metrics.webhookDelivery(succeeded: delivered)
        if !delivered {
            logger.info(
                "webhook delivery failed; will retry",
                metadata: ["event": "\(Self.eventID(event))", "endpoint": "\(delivery.endpointID)", "error": "\(failure ?? "")"])
        }
        do {
            try await store.settleWebhookDelivery(
                eventID: delivery.eventID, endpointID: delivery.endpointID, deliveredAt: delivered ? time : nil, status: status,
                error: failure, retryAt: time.addingTimeInterval(Self.backoff(afterAttempts: delivery.attempts)))
        } catch {
            // The lease runs out and the delivery is tried again: at least once.
            logger.warning("webhook settle failed", metadata: ["error": "\(error)"])
        }
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
