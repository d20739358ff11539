import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// Webhooks (issue 17): a receiver on loopback checks the Standard Webhooks signature and counts
/// ids; the outbox survives the receiver being down, delivers in order per account and never
/// twice per id, also with two dispatchers racing. Run on SQLite and again on PostgreSQL.
@Suite("Webhooks: signed, durable, ordered, once")
struct WebhookTests {
    struct Received: Sendable {
        let id: String
        let timestamp: String
        let signature: String
        let body: [UInt8]
    }

    final class Receiver: Sendable {
        let received = Mutex<[Received]>([])
        /// While true the receiver answers 503 (a dead endpoint).
        let down = Mutex(false)
        /// How long the receiver takes to answer (a slow endpoint), and the ids it began on.
        let delay = Mutex<Duration?>(nil)
        let started = Mutex<[String]>([])

        var application: some ApplicationProtocol {
            let router = Router()
            router.post("hook") { request, _ -> Response in
                let body = try await request.body.collect(upTo: 1 << 20)
                self.started.withLock { $0.append(request.headers[HTTPField.Name("webhook-id")!] ?? "") }
                if let delay = self.delay.withLock({ $0 }) { try await Task.sleep(for: delay) }
                if self.down.withLock({ $0 }) { return Response(status: .serviceUnavailable) }
                self.received.withLock {
                    $0.append(
                        Received(
                            id: request.headers[HTTPField.Name("webhook-id")!] ?? "",
                            timestamp: request.headers[HTTPField.Name("webhook-timestamp")!] ?? "",
                            signature: request.headers[HTTPField.Name("webhook-signature")!] ?? "", body: Array(buffer: body)))
                }
                return Response(status: .noContent)
            }
            var logger = Logger(label: "receiver")
            logger.logLevel = .warning
            return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        }
    }

    static func dispatcher(_ harness: ServerHarness) -> WebhookDispatcher {
        var logger = Logger(label: "webhooks")
        logger.logLevel = .error
        return WebhookDispatcher(
            store: harness.store, metrics: harness.service.metrics, logger: logger, policy: .unsafeAllowingPrivateAddresses,
            now: { harness.clock.now },
            // Generous timeouts: the receivers run in this busy test process, and no test here is
            // about a timeout (WebhookIsolationTests is, serially).
            sender: { policy, _, _ in WebhookClient(policy: policy, connectTimeout: .seconds(30), requestTimeout: .seconds(60)) })
    }

    /// The harness for receivers on loopback: private addresses allowed, as in development.
    static func harness() async throws -> ServerHarness {
        try await ServerHarness { $0.webhookAllowPrivateAddresses = true }
    }

    static func admin(_ harness: ServerHarness) -> AdminService {
        AdminService(store: harness.store, now: { harness.clock.now }, webhookPolicy: .unsafeAllowingPrivateAddresses)
    }

    /// `body` with a webhook client of `dispatcher`'s, shut down afterwards.
    static func withClient(_ dispatcher: WebhookDispatcher, _ body: (any WebhookSender) async throws -> Void) async throws {
        let client = dispatcher.makeSender()
        do {
            try await body(client)
        } catch {
            await client.shutdown()
            throw error
        }
        await client.shutdown()
    }

    /// Generates events: two accounts signing up and in, one passkey renamed.
    static func activity(_ api: APIClient) async throws {
        for name in ["wen", "web"] {
            var authenticator = SoftwareAuthenticator(seed: Array(name.utf8))
            let (token, credential0, _) = try await api.signUp(name, authenticator: &authenticator)
            var credential = credential0
            #expect(try await api.signIn(credential: &credential, authenticator: authenticator).status == .ok)
            let id = Base64URLBytes(credential.id).base64URL
            _ = try await api.request(.patch, "/api/auth/passkeys/\(id)", body: Array(#"{"name":"Laptop"}"#.utf8), token: token)
        }
    }

    @Test func eventsArriveSignedInOrderOnceAfterTheReceiverComesBack() async throws {
        let harness = try await Self.harness()
        let receiver = Receiver()
        try await receiver.application.test(.live) { client in
            let port = try #require(client.port)
            let admin = Self.admin(harness)
            let added = try await admin.addWebhook(url: "http://127.0.0.1:\(port)/hook", events: ["*"])
            #expect(added.secret.hasPrefix("whsec_"))
            // Down from the start (the application's own dispatcher may try while the activity
            // runs): every attempt fails, nothing is lost, a failed delivery waits its back-off.
            receiver.down.withLock { $0 = true }
            try await harness.run { api in try await Self.activity(api) }
            let dispatcher = Self.dispatcher(harness)
            try await Self.withClient(dispatcher) { http in
                _ = try await dispatcher.deliverDue(client: http)
                #expect(try await dispatcher.deliverDue(client: http) == 0)
                let pending = try await harness.store.webhookDeliveries(endpointID: added.endpoint.id, limit: 100)
                #expect(pending.allSatisfy { $0.deliveredAt == nil })
                #expect(pending.filter { $0.attempts >= 1 && $0.lastStatus == 503 }.count >= 2)  // the oldest event of each account

                // Up again: after the back-off everything arrives.
                receiver.down.withLock { $0 = false }
                for _ in 0..<60 {
                    harness.clock.advance(6)
                    if try await dispatcher.deliverDue(client: http) == 0,
                        try await harness.store.webhookDeliveries(endpointID: nil, limit: 500).allSatisfy({ $0.deliveredAt != nil })
                    {
                        break
                    }
                }
            }
            let events = try await harness.store.auditEvents(accountID: nil, limit: 500)
            let received = receiver.received.withLock { $0 }
            #expect(received.count == events.count, "\(received.count) of \(events.count)")
            #expect(Set(received.map(\.id)).count == received.count, "an id arrived twice")
            let key = WebhookSigner.key(added.secret)
            var lastByAccount: [String: Int] = [:]
            for delivery in received {
                #expect(
                    delivery.signature
                        == WebhookSigner.signature(key: key, id: delivery.id, timestamp: Int(delivery.timestamp) ?? 0, body: delivery.body))
                let json = try JSONReader.parse(delivery.body)
                #expect(json["id"] == .string(delivery.id))
                let number = Int(delivery.id.dropFirst(4)) ?? 0
                let account: String = if case .string(let a)? = json["data"]?["accountId"] { a } else { "-" }
                #expect(number > lastByAccount[account, default: 0], "events of \(account) out of order")
                lastByAccount[account] = number
            }
            #expect(
                Set(received.compactMap { try? JSONReader.parse($0.body)["type"] }).isSuperset(of: [.string("sign_up"), .string("sign_in")])
            )
        }
    }

    @Test func twoDispatchersDeliverEachEventOnce() async throws {
        let harness = try await Self.harness()
        let receiver = Receiver()
        try await receiver.application.test(.live) { client in
            let port = try #require(client.port)
            _ = try await Self.admin(harness).addWebhook(url: "http://127.0.0.1:\(port)/hook", events: ["sign_up", "sign_in"])
            // The application's own dispatcher may try while the activity runs: the receiver is
            // down then, so what it tried waits its back-off (or its lease, had a send been cut
            // short), which the clock then passes. Only the two racing dispatchers deliver.
            receiver.down.withLock { $0 = true }
            try await harness.run { api in try await Self.activity(api) }
            receiver.down.withLock { $0 = false }
            let first = Self.dispatcher(harness), second = Self.dispatcher(harness)
            harness.clock.advance(first.lease + 1)
            try await Self.withClient(first) { one in
                try await Self.withClient(second) { other in
                    for _ in 0..<20 {
                        async let a = first.deliverDue(client: one, limit: 1)
                        async let b = second.deliverDue(client: other, limit: 1)
                        if try await a + b == 0 { break }
                    }
                }
            }
            let received = receiver.received.withLock { $0 }
            // Two accounts: a sign-up and a sign-in each; the rename was not asked for.
            #expect(received.count == 4 && Set(received.map(\.id)).count == 4, "\(received.map(\.id))")
        }
    }

    @Test func sendsInFlightWhenTheServerStopsAreFinishedNotCutShort() async throws {
        let harness = try await Self.harness()
        let receiver = Receiver()
        try await receiver.application.test(.live) { client in
            let port = try #require(client.port)
            let added = try await Self.admin(harness).addWebhook(url: "http://127.0.0.1:\(port)/hook", events: ["sign_up"])
            receiver.down.withLock { $0 = true }
            try await harness.run { api in try await Self.activity(api) }
            let dispatcher = Self.dispatcher(harness)
            harness.clock.advance(dispatcher.lease + 1)
            receiver.started.withLock { $0 = [] }
            receiver.down.withLock { $0 = false }
            receiver.delay.withLock { $0 = .milliseconds(500) }
            // The endpoint's worker is stopped (as the server's shutdown does) while the receiver
            // is still answering: the sends finish and are settled as delivered, instead of
            // holding their deliveries until the lease runs out.
            try await Self.withClient(dispatcher) { http in
                let worker = Task { await dispatcher.work(for: added.endpoint, client: http) }
                for _ in 0..<3000 where receiver.started.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) }
                worker.cancel()
                await worker.value
            }
            let started = Set(receiver.started.withLock { $0 })
            #expect(!started.isEmpty)
            let deliveries = try await harness.store.webhookDeliveries(endpointID: added.endpoint.id, limit: 100)
            for delivery in deliveries where started.contains("evt_\(delivery.eventID)") {
                #expect(delivery.deliveredAt != nil, "evt_\(delivery.eventID) was cut short")
            }
            #expect(Set(receiver.received.withLock { $0 }.map(\.id)) == started)
        }
    }

    @Test func aDeadEndpointNeverSlowsSignIns() async throws {
        // Nothing listens on this port: the dispatcher's failures stay in the background, and
        // sign-ins (which only write the outbox row in their transaction) answer as before.
        let harness = try await Self.harness()
        _ = try await Self.admin(harness).addWebhook(url: "http://127.0.0.1:9/hook", events: ["*"])
        try await harness.run { api in try await Self.activity(api) }
        let dispatcher = Self.dispatcher(harness)
        try await Self.withClient(dispatcher) { http in _ = try await dispatcher.deliverDue(client: http) }
        let deliveries = try await harness.store.webhookDeliveries(endpointID: nil, limit: 100)
        #expect(deliveries.contains { $0.attempts == 1 && $0.lastError != nil && $0.deliveredAt == nil })
    }
}
