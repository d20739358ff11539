import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PasskeyStoreTesting
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

#if canImport(Glibc)
    import Glibc
#endif

/// One dead receiver never slows another (issue 33, item 3): the application's own dispatcher,
/// under concurrent sign-ins, with a receiver on a closed port, one that accepts connections and
/// never answers, and a healthy one. Run on SQLite and again on PostgreSQL.
@Suite("Webhooks: each endpoint on its own")
struct WebhookIsolationTests {
    /// A port nothing listens on, and a listener that completes connections (the kernel's
    /// backlog) but never reads or answers: the two ways a receiver is dead.
    final class DeadReceiver: Sendable {
        let port: Int
        private let socket: Int32

        init(listening: Bool) throws {
            let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw POSIXError(.EMFILE) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    Glibc.bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            guard bound, !listening || Glibc.listen(fd, 128) == 0 else {
                Glibc.close(fd)
                throw POSIXError(.EADDRINUSE)
            }
            port = Int(UInt16(bigEndian: address.sin_port))
            if listening {
                socket = fd
            } else {
                // Bound and closed again: a port that refuses connections.
                Glibc.close(fd)
                socket = -1
            }
        }

        func close() { if socket >= 0 { Glibc.close(socket) } }
    }

    struct Arrival: Sendable {
        let account: String
        let event: Int
        let at: ContinuousClock.Instant
    }

    final class Receiver: Sendable {
        let arrivals = Mutex<[Arrival]>([])
        var application: some ApplicationProtocol {
            let router = Router()
            router.post("hook") { request, _ -> Response in
                let body = try await request.body.collect(upTo: 1 << 20)
                let at = ContinuousClock.now
                let json = try JSONReader.parse(Array(buffer: body))
                let account: String = if case .string(let a)? = json["data"]?["accountId"] { a } else { "-" }
                let event = Int((request.headers[HTTPField.Name("webhook-id")!] ?? "").dropFirst(4)) ?? 0
                self.arrivals.withLock { $0.append(Arrival(account: account, event: event, at: at)) }
                return Response(status: .noContent)
            }
            var logger = Logger(label: "receiver")
            logger.logLevel = .error
            return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        }
    }

    /// When each account's sign-ins were answered, in order.
    final class Answers: Sendable {
        let times = Mutex<[String: [ContinuousClock.Instant]]>([:])
    }

    static let accounts = 8
    static let signInsEach = 3

    @Test(.timeLimit(.minutes(2)))
    func aDeadEndpointNeverDelaysAHealthyOne() async throws {
        let harness = try await ServerHarness {
            $0.webhookAllowPrivateAddresses = true
            $0.rateLimits.enabled = false
        }
        let refusing = try DeadReceiver(listening: false), silent = try DeadReceiver(listening: true)
        defer { silent.close() }
        let healthy = Receiver()
        try await healthy.application.test(.live) { client in
            let port = try #require(client.port)
            let admin = WebhookTests.admin(harness)
            let refusedHook = try await admin.addWebhook(url: "http://127.0.0.1:\(refusing.port)/hook", events: ["sign_in"]).endpoint
            let silentHook = try await admin.addWebhook(url: "http://127.0.0.1:\(silent.port)/hook", events: ["sign_in"]).endpoint
            _ = try await admin.addWebhook(url: "http://127.0.0.1:\(port)/hook", events: ["sign_in"])
            let answered = Answers()
            try await harness.run { api in
                // The dispatcher gives each endpoint its worker within a second of starting.
                try await Task.sleep(for: .milliseconds(1500))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for n in 0..<Self.accounts {
                        group.addTask {
                            var authenticator = SoftwareAuthenticator(seed: Array("isolation-\(n)".utf8))
                            let (_, first, signedUp) = try await api.signUp("isolation\(n)", authenticator: &authenticator)
                            let account: String = if case .string(let id)? = signedUp.json["user"]?["id"] { id } else { "" }
                            var credential = first
                            for _ in 0..<Self.signInsEach {
                                let signedIn = try await api.signIn(credential: &credential, authenticator: authenticator)
                                #expect(signedIn.status == .ok)
                                answered.times.withLock { $0[account, default: []].append(.now) }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let expected = Self.accounts * Self.signInsEach
                for _ in 0..<100 where healthy.arrivals.withLock({ $0.count }) < expected { try await Task.sleep(for: .milliseconds(100)) }

                // Each sign-in reached the healthy receiver within a second of its answer, in
                // order per account, while the dead ones were being tried.
                let arrivals = healthy.arrivals.withLock { $0 }
                #expect(arrivals.count == expected, "\(arrivals.count) of \(expected)")
                var lateness: [Duration] = []
                for (account, times) in answered.times.withLock({ $0 }) {
                    let received = arrivals.filter { $0.account == account }
                    #expect(received.map(\.event) == received.map(\.event).sorted(), "events of \(account) out of order")
                    for (answer, arrival) in zip(times, received) { lateness.append(max(.zero, arrival.at - answer)) }
                }
                lateness.sort()
                let worst = lateness.last ?? .zero
                #expect(worst < .seconds(1), "healthy receiver lateness: worst \(worst)")
                print(
                    "webhook isolation (\(TestDatabase.httpSuiteKind)): healthy receiver, \(lateness.count) events: median \(lateness.isEmpty ? .zero : lateness[lateness.count / 2]), worst \(worst)"
                )

                // The dead endpoints' deliveries were tried (the silent one's until its request
                // timeout) and recorded as failed, each due again after its back-off.
                var dead: [WebhookDelivery] = []
                for _ in 0..<150 {
                    dead = try await harness.store.webhookDeliveries(endpointID: nil, limit: 500).filter {
                        [refusedHook.id, silentHook.id].contains($0.endpointID) && $0.attempts > 0
                    }
                    if Set(dead.map(\.endpointID)).count == 2 && dead.filter({ $0.endpointID == silentHook.id }).count >= Self.accounts {
                        break
                    }
                    try await Task.sleep(for: .milliseconds(100))
                }
                let refused = dead.filter { $0.endpointID == refusedHook.id }
                let timedOut = dead.filter { $0.endpointID == silentHook.id }
                #expect(refused.count == Self.accounts && timedOut.count == Self.accounts, "\(refused.count), \(timedOut.count)")
                #expect(refused.allSatisfy { $0.deliveredAt == nil && $0.lastError == "connection refused" }, "\(refused.map(\.lastError))")
                #expect(
                    timedOut.allSatisfy { $0.deliveredAt == nil && ($0.lastError ?? "").hasPrefix("timed out") },
                    "\(timedOut.map(\.lastError))")
                #expect(dead.allSatisfy { $0.nextAttemptAt == harness.clock.now.addingTimeInterval(5) })

                // Their back-off passes: each is tried again, and waits twice as long after.
                harness.clock.advance(6)
                var retried: [WebhookDelivery] = []
                for _ in 0..<100 {
                    retried = try await harness.store.webhookDeliveries(endpointID: refusedHook.id, limit: 500).filter { $0.attempts == 2 }
                    if retried.count == Self.accounts { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(retried.count == Self.accounts)
                #expect(retried.allSatisfy { $0.nextAttemptAt == harness.clock.now.addingTimeInterval(10) && $0.deliveredAt == nil })

                // Failures are counted per endpoint and reason.
                let metrics = harness.service.metrics.registry.emitToString().split(separator: "\n")
                func failures(_ endpoint: WebhookEndpoint, _ reason: String) -> Bool {
                    metrics.contains {
                        $0.hasPrefix("passkeyd_webhook_failures_total") && $0.contains(endpoint.id.uuidString.lowercased())
                            && $0.contains("reason=\"\(reason)\"")
                    }
                }
                #expect(failures(refusedHook, "refused") && failures(silentHook, "timeout"), "\(metrics.filter { $0.contains("webhook") })")
            }
        }
    }
}
