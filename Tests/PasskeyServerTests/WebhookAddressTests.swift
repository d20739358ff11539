import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing
import WebAuthn

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// Webhooks never reach inside addresses (issue 34, item 9): refused when registered, by their
/// text and by what a name resolves to, and refused again on the address each connection
/// actually reaches; redirects are never followed. The HTTP cases run on SQLite and again on
/// PostgreSQL.
@Suite("Webhooks: no inside addresses, no redirects")
struct WebhookAddressTests {
    /// Each host behind `https://HOST:9/hook`: what an attacker with a `webhooks` key tried.
    static let insideHosts = [
        "127.0.0.1", "[::1]", "localhost", "LOCALHOST.", "foo.localhost", "0.0.0.0", "169.254.169.254", "2130706433", "127.1",
        "0x7f.1", "0x7f000001", "0177.0.0.1", "017700000001", "127.0.0.1.", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]",
        "[::127.0.0.1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::1]", "10.0.0.1", "172.16.5.4", "172.31.255.255", "192.168.1.1",
        "100.64.0.1", "100.127.255.254", "[fc00::1]", "[fd12:3456::1]", "[fe80::1]", "[fe80::1%25eth0]", "[::]", "224.0.0.1",
        "239.255.255.250", "255.255.255.255", "240.0.0.1", "[ff02::1]", "192.0.2.1", "198.18.0.1", "intranet", "metadata",
        // IANA's special-purpose registries (RFC 6890 and updates), each block's first and last
        // address or one inside (issue 42, item 16: 2001:2::/48 was accepted).
        "[2001:2::1]", "[2001:2:0:ffff:ffff:ffff:ffff:ffff]", "[2001::1]", "[2001:1::1]", "[2001:3::1]", "[2001:4:112::1]",
        "[2001:10::1]", "[2001:20::1]", "[2001:30::1]", "[2001:1ff:ffff::1]", "[2001:db8::1]", "[2001:db8:ffff::1]", "[3fff::1]",
        "[3fff:fff:ffff::1]", "[5f00::1]", "[64:ff9b:1::a00:1]", "[64:ff9b::808:808]", "[100::1]", "[100::ffff:ffff:ffff:ffff]",
        "[2002:808:808::1]", "[fec0::1]", "[4000::1]", "198.18.0.0", "198.19.255.255", "192.0.0.0", "192.0.0.9", "192.0.0.255",
        "192.88.99.1", "198.51.100.7", "203.0.113.255", "0.1.2.3", "255.255.255.254", "127.255.255.255",
    ]

    @Test(arguments: insideHosts)
    func insideAddressesAreRefused(host: String) {
        #expect(throws: OutboundURLPolicy.Refusal.self, "\(host)") { try OutboundURLPolicy().check(url: "https://\(host):9/hook") }
        // Allowed by the operator, each is fine (plain http too), but for ambiguous spellings,
        // which no switch lets through.
        if Self.ambiguousHosts.contains(host) {
            #expect(throws: OutboundURLPolicy.Refusal.self) {
                try OutboundURLPolicy.unsafeAllowingPrivateAddresses.check(url: "http://\(host):9/hook")
            }
        } else {
            #expect(throws: Never.self) { try OutboundURLPolicy.unsafeAllowingPrivateAddresses.check(url: "http://\(host):9/hook") }
        }
    }

    /// IPv4 written as `inet_aton` reads it but not as four dotted decimals, and IPv6 with a zone.
    static let ambiguousHosts: Set = ["2130706433", "127.1", "0x7f.1", "0x7f000001", "0177.0.0.1", "017700000001", "[fe80::1%25eth0]"]

    @Test(arguments: [
        "https://hooks.example.com/passkeyd", "https://93.184.215.14/hook", "https://[2606:4700:4700::1111]:8443/hook",
        "https://8.8.8.8/", "https://100.128.0.1/", "https://172.32.0.1/", "https://hooks.example.com./x",
        // Just outside special blocks: the first regional allocations after 2001::/23 and beside
        // 3fff::/20, 198.20/16, 192.0.1/24 and 192.88.98/24.
        "https://[2001:200::1]/", "https://[3fff:1000::1]/", "https://[3ffe::1]/", "https://198.20.0.1/", "https://192.0.1.1/",
        "https://192.88.98.1/",
    ])
    func publicHTTPSURLsPass(url: String) throws {
        _ = try OutboundURLPolicy().check(url: url)
    }

    @Test func plainHTTPAndOtherSchemesAreRefused() {
        #expect(throws: OutboundURLPolicy.Refusal.self) { try OutboundURLPolicy().check(url: "http://hooks.example.com/x") }
        for url in ["ftp://hooks.example.com/x", "file:///etc/passwd", "gopher://x.example.com/", "https:///nohost", "not a url"] {
            #expect(throws: OutboundURLPolicy.Refusal.self, "\(url)") {
                try OutboundURLPolicy.unsafeAllowingPrivateAddresses.check(url: url)
            }
        }
    }

    /// The issue's eight URLs through `POST /api/admin/webhooks`: each used to be accepted.
    @Test func registrationRefusesInsideURLsWithTheirOwnCode() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let key = try await IntegrationTests.apiKey(harness, scopes: ["webhooks"])
            let auth: HTTPFields = [.authorization: "Bearer \(key)"]
            func add(_ url: String) async throws -> APIResponse {
                try await api.request(.post, "/api/admin/webhooks", body: Array(#"{"url":"\#(url)"}"#.utf8), origin: nil, headers: auth)
            }
            for url in [
                "http://127.0.0.1:9/hook", "http://[::1]:9/hook", "http://localhost:9/hook", "http://0.0.0.0:9/hook",
                "http://169.254.169.254/latest/meta-data/", "http://2130706433:9/hook", "http://127.1:9/hook",
                "http://[::ffff:127.0.0.1]:9/hook", "https://127.0.0.1:9/hook", "https://169.254.169.254/latest/meta-data/",
                "https://2130706433:9/hook", "https://[::ffff:127.0.0.1]:9/hook", "https://10.1.2.3/hook",
            ] {
                let refused = try await add(url)
                #expect(refused.status == .badRequest && refused.errorCode == "invalid_webhook_url", "\(url): \(refused.status)")
                let message: String = if case .string(let m)? = refused.json["error"]?["message"] { m } else { "" }
                #expect(message.contains("refused:"), "\(url): \(message)")
            }
            let named = try await add("http://localhost:9/hook")
            #expect(named.errorCode == "invalid_webhook_url")
            #expect(try await harness.store.webhookEndpoints().isEmpty)
            // A public https receiver is still welcome (for an event this test never makes, and
            // removed again: nothing is sent off this machine).
            let added = try await api.request(
                .post, "/api/admin/webhooks", body: Array(#"{"url":"https://93.184.215.14/passkeyd","events":["oidc_token_issued"]}"#.utf8),
                origin: nil, headers: auth)
            #expect(added.status == .created, "\(String(decoding: added.bytes, as: UTF8.self))")
            let id = try #require(added.string("id"))
            #expect(try await api.request(.delete, "/api/admin/webhooks/\(id)", origin: nil, headers: auth).status == .noContent)
        }
        // With the operator's switch on, a loopback receiver registers (development, tests).
        let allowing = try await ServerHarness { $0.webhookAllowPrivateAddresses = true }
        try await allowing.run { api in
            let key = try await IntegrationTests.apiKey(allowing, scopes: ["webhooks"])
            let added = try await api.request(
                .post, "/api/admin/webhooks", body: Array(#"{"url":"http://127.0.0.1:9/hook"}"#.utf8), origin: nil,
                headers: [.authorization: "Bearer \(key)"])
            #expect(added.status == .created)
        }
    }

    @Test func configuredWebhooksFollowTheSameRule() throws {
        var configuration = ServerConfiguration()
        configuration.webhooks = [.init(url: "http://169.254.169.254/latest/", secret: String(repeating: "s", count: 32))]
        #expect(throws: ConfigurationError.self) { try configuration.relyingParty() }
        configuration.webhookAllowPrivateAddresses = true
        _ = try configuration.relyingParty()
    }

    /// A receiver that counts what reaches it.
    final class Counter: Sendable {
        let hits = Mutex(0)
        /// Where it redirects to, when set.
        let location = Mutex<String?>(nil)
        var application: some ApplicationProtocol {
            let router = Router()
            router.post("hook") { request, _ -> Response in
                _ = try await request.body.collect(upTo: 1 << 20)
                self.hits.withLock { $0 += 1 }
                if let location = self.location.withLock({ $0 }) {
                    return Response(status: .temporaryRedirect, headers: [.location: location])
                }
                return Response(status: .noContent)
            }
            var logger = Logger(label: "receiver")
            logger.logLevel = .error
            return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        }
    }

    /// The connect-time rule holds whatever the URL said: the strict client's connection to a
    /// loopback receiver (as a name that resolved to a public address at registration and to
    /// 127.0.0.1 when connecting would make) is closed before a byte is written.
    @Test func theAddressAConnectionReachesIsCheckedAgain() async throws {
        let receiver = Counter()
        try await receiver.application.test(.live) { client in
            let port = try #require(client.port)
            let strict = WebhookClient(policy: OutboundURLPolicy(), connectTimeout: .seconds(2), requestTimeout: .seconds(5))
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/hook")
            request.method = .POST
            request.body = .bytes(.init(string: "{}"))
            // The error is the policy's refusal, not a connect or request timeout: the connection
            // was closed when its address was known, not left to time out (no clock is read here:
            // under a loaded CI machine any bound on seconds would be a guess).
            await #expect(throws: OutboundURLPolicy.Refusal.self) { _ = try await strict.http.execute(request, timeout: .seconds(5)) }
            // Through the delivery path, the same URL is refused before connecting.
            let outcome = await strict.post(url: "http://127.0.0.1:\(port)/hook", headers: [], body: [])
            #expect(outcome.reason == "address_refused")
            await strict.shutdown()
            #expect(receiver.hits.withLock { $0 } == 0)
            // Allowed by the operator, the same request arrives.
            let allowing = WebhookClient(
                policy: .unsafeAllowingPrivateAddresses, connectTimeout: .seconds(30), requestTimeout: .seconds(60))
            let delivered = await allowing.post(url: "http://127.0.0.1:\(port)/hook", headers: [], body: [])
            await allowing.shutdown()
            #expect(delivered.delivered && receiver.hits.withLock { $0 } == 1)
        }
    }

    /// A receiver answering 307 to another local port used to get the signed event re-posted
    /// there: now the 3xx is a failed delivery, logged and retried, and the target gets nothing.
    @Test func redirectsAreNeverFollowed() async throws {
        let harness = try await ServerHarness { $0.webhookAllowPrivateAddresses = true }
        let redirecting = Counter(), target = Counter()
        try await target.application.test(.live) { targetClient in
            try await redirecting.application.test(.live) { client in
                let port = try #require(client.port), targetPort = try #require(targetClient.port)
                redirecting.location.withLock { $0 = "http://127.0.0.1:\(targetPort)/hook" }
                _ = try await WebhookTests.admin(harness).addWebhook(url: "http://127.0.0.1:\(port)/hook", events: ["*"])
                try await harness.run { api in try await WebhookTests.activity(api) }
                let dispatcher = WebhookTests.dispatcher(harness)
                try await WebhookTests.withClient(dispatcher) { http in _ = try await dispatcher.deliverDue(client: http) }
                let deliveries = try await harness.store.webhookDeliveries(endpointID: nil, limit: 100)
                #expect(redirecting.hits.withLock { $0 } >= 1)
                #expect(target.hits.withLock { $0 } == 0)
                #expect(deliveries.allSatisfy { $0.deliveredAt == nil })
                #expect(deliveries.contains { $0.lastStatus == 307 && ($0.lastError ?? "").contains("redirect") })
            }
        }
    }
}
