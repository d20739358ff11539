import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// Two tenants on one live server (issue 44), each on its own host, beside the default one: the
/// same username is two accounts; nothing issued on one host (session, cookie, challenge,
/// passkey, API key, token) is taken on another; `.well-known`, discovery and JWKS answer per
/// host; a host that is no tenant's gets 404 `unknown_tenant` and nothing else.
@Suite struct TenantHTTPTests {
    static let alpha = "a.localhost", beta = "b.localhost"

    /// A live server with tenants alpha and beta (and the default tenant on localhost), the
    /// tenants' records written before it starts.
    /// Clients of the live server, each naming its host; every connection is closed before the
    /// server stops (one left open made NIO trap at shutdown: a writer deinited unfinished).
    final class HostedClients: Sendable {
        let live: any TestClientProtocol
        private let opened = Mutex<[TestClient]>([])

        init(live: any TestClientProtocol) { self.live = live }

        func on(_ host: String) throws -> APIClient {
            let client = try APIClient(live: live, host: host)
            if let hosted = client.hosted { opened.withLock { $0.append(hosted.client) } }
            return client
        }

        func closeAll() async {
            for client in opened.withLock({ $0 }) { try? await client.shutdown() }
        }
    }

    /// `tenantSettings`: more members of a tenant's settings object, by tenant (`"email":{…}`).
    static func server(
        extraSettings: [String: String] = [:], tenantSettings: [String: String] = [:],
        _ body: @escaping @Sendable (any PasskeyStore, HostedClients) async throws -> Void
    ) async throws {
        let store = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        let now = Date()
        for (name, host, app) in [("alpha", alpha, "AAAAAAAAAA.com.alpha"), ("beta", beta, "BBBBBBBBBB.com.beta")] {
            let more = tenantSettings[name].map { "," + $0 } ?? ""
            let settings =
                #"{"rpID":"\#(host)","origins":["http://\#(host):8080"],"appleAppIDs":["\#(app)"],"rpName":"\#(name)"\#(more)}"#
            try await store.addTenant(TenantRecord(id: name, hosts: [host], settings: settings, createdAt: now, updatedAt: now))
        }
        let settings = try ServerSettings(
            environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080", "PASSKEYD_RATE_LIMITS": "off"]
                .merging(extraSettings) { $1 }, file: nil)
        let service = try PasskeyService(configuration: settings.domain, store: store)
        var logger = Logger(label: "passkeyd-test")
        logger.logLevel = .warning
        let app = PasskeyServer.application(service: service, edge: settings.edge, port: 0, logger: logger, settings: settings)
        try await app.test(.live) { client in
            let clients = HostedClients(live: client)
            do {
                try await body(store, clients)
            } catch {
                await clients.closeAll()
                throw error
            }
            await clients.closeAll()
        }
    }

    /// The noisy neighbour's refusals: with counts in the store (several instances), a key past
    /// its limit is refused in this process for the rest of the window without another write,
    /// and counted again when the next window starts.
    @Test func aKeyPastItsLimitIsRefusedWithoutWritingAgainUntilTheWindowEnds() async throws {
        let store = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        let limiter = RateLimiter(window: .seconds(60), store: store)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let key = "ip:192.0.2.7"
        for _ in 0..<3 { #expect(try await limiter.hit(key, limit: 3, now: now) == .allowed) }
        for _ in 0..<50 { #expect(try await limiter.hit(key, limit: 3, now: now) != .allowed) }
        let window = Date(timeIntervalSince1970: 1_800_000_000 - 1_800_000_000.truncatingRemainder(dividingBy: 60))
        #expect(try await store.rateLimitHits(key: RateLimiter.Digest(key).hex, windowStart: window) == 4, "one write past the limit")
        // Another instance (its own limiter) reads the stored count: refused too.
        #expect(try await RateLimiter(window: .seconds(60), store: store).check(key, limit: 3, now: now) != .allowed)
        #expect(try await limiter.hit(key, limit: 3, now: now.addingTimeInterval(60)) == .allowed)
    }

    @Test func hostsAreNormalizedOneWayAndAnythingElseIsNoHost() {
        let same: [(String, String)] = [
            ("a.localhost", "a.localhost"), ("A.LocalHost", "a.localhost"), ("a.localhost.", "a.localhost"),
            ("a.localhost:8443", "a.localhost"), (" a.localhost:80 ", "a.localhost"), ("A.LOCALHOST.:65535", "a.localhost"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"), ("127.0.0.1:8080", "127.0.0.1"), ("[::1]:8080", "[::1]"),
            ("[FE80::1]", "[fe80::1]"), ("a-b.c-d.example", "a-b.c-d.example"),
        ]
        for (raw, host) in same { #expect(TenantHost.normalize(raw) == host, "\(raw)") }
        let none = [
            "", " ", "a..b", ".a", "a.localhost..", "-a.example", "a-.example", "a b.example", "bücher.example", "a_b.example",
            "a.localhost:", "a.localhost:99999", "a.localhost:8o", "a.localhost:8080:80", "[::1", "[::1]x", "[]", "[::g]",
            String(repeating: "a", count: 64) + ".example", String(repeating: "a.", count: 130) + "a", "a\u{0}.example", "a/b",
        ]
        for raw in none { #expect(TenantHost.normalize(raw) == nil, "\(raw)") }
        #expect(
            TenantHost.hosts(ofOrigins: ["https://Shop.Example.com:8443", "android:apk-key-hash:abc", "http://[::1]:8080"]) == [
                "shop.example.com", "[::1]",
            ])
    }

    @Test func theSameUsernameIsOneAccountPerTenantAndNoCredentialCrosses() async throws {
        try await Self.server { store, client in
            let a = try client.on(Self.alpha), b = try client.on(Self.beta)
            var deviceA = SoftwareAuthenticator(), deviceB = SoftwareAuthenticator()
            let (tokenA, firstCredential, _) = try await a.signUp("sam", authenticator: &deviceA, origin: "http://a.localhost:8080")
            var credentialA = firstCredential
            let (tokenB, _, _) = try await b.signUp("sam", authenticator: &deviceB, origin: "http://b.localhost:8080")
            let accountA = try #require(try await store.scoped(to: "alpha").account(username: "sam"))
            let accountB = try #require(try await store.scoped(to: "beta").account(username: "sam"))
            #expect(accountA.id != accountB.id)
            #expect(try await store.account(username: "sam") == nil, "the default tenant has no sam")

            // A's session is A's: refused on B's host and on the default host, by bearer and by cookie.
            #expect(try await a.request(.get, "/api/auth/session", token: tokenA).status == .ok)
            #expect(try await b.request(.get, "/api/auth/session", token: tokenA).status == .unauthorized)
            #expect(try await b.request(.get, "/api/auth/session", cookie: "passkeyd_session=\(tokenA)").status == .unauthorized)
            let root = try client.on("localhost")
            #expect(try await root.request(.get, "/api/auth/session", token: tokenA).status == .unauthorized)
            #expect(try await a.request(.get, "/api/auth/session", token: tokenB).status == .unauthorized)

            // A's passkey answering B's challenge (on B's origin): the credential is no one's there.
            let optionsB = try await b.post("/api/auth/authenticate/options", [String: String]())
            let assertion = try deviceA.authenticate(
                options: try optionsB.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: "http://b.localhost:8080",
                credential: &credentialA, counterStep: 1)
            let crossed = try await b.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
            #expect(crossed.status != .ok && crossed.string("token") == nil, "\(crossed.json)")

            // A's challenge, answered on B's host with A's passkey: B never issued it.
            let optionsA = try await a.post("/api/auth/authenticate/options", [String: String]())
            let forA = try deviceA.authenticate(
                options: try optionsA.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: "http://a.localhost:8080",
                credential: &credentialA, counterStep: 1)
            let replayed = try await b.post(
                "/api/auth/authenticate/verify", APIClient.CredentialBody(credential: forA), origin: "http://a.localhost:8080")
            #expect(replayed.status != .ok && replayed.string("token") == nil, "\(replayed.json)")
            // …and still works where it was issued.
            let own = try await a.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: forA))
            #expect(own.status == .ok, "\(own.json)")

            // B's host refuses A's origin outright (its own origins only).
            let foreignOrigin = try await b.post(
                "/api/auth/register/options", ["username": "eve"], origin: "http://a.localhost:8080")
            #expect(foreignOrigin.status == .forbidden, "\(foreignOrigin.json)")
        }
    }

    /// An unknown name's decoy credential ID differs per tenant: one key for all would answer a
    /// name unknown on both hosts alike and a name with passkeys on one host differently, telling
    /// on a tenant where the name is unknown which names have passkeys on another.
    @Test func anUnknownNamesDecoyIsEachTenantsOwn() async throws {
        try await Self.server { _, client in
            let a = try client.on(Self.alpha), b = try client.on(Self.beta)
            func decoy(_ api: APIClient) async throws -> JSONValue? {
                try await api.post("/api/auth/authenticate/options", ["username": "nobody-here"]).json["allowCredentials"]?.array?.first?[
                    "id"]
            }
            let onA = try await decoy(a), onB = try await decoy(b)
            #expect(onA != nil && onB != nil)
            #expect(onA == (try await decoy(a)), "the same every time on one host")
            #expect(onA != onB)
        }
    }

    /// A tenant's record naming one of the default tenant's hosts does not take it, and once
    /// tenants were added, removing the last one keeps hosts strict (its host: unknown_tenant).
    @Test func theDefaultTenantsHostsStayItsOwnAndRoutingStaysStrict() async throws {
        try await Self.server { store, client in
            let now = Date()
            try await store.addTenant(
                TenantRecord(
                    id: "grabby", hosts: ["localhost"], settings: #"{"rpID":"localhost","origins":["http://localhost:8080"]}"#,
                    createdAt: now, updatedAt: now))
            for _ in 0..<30 { try await Task.sleep(for: .milliseconds(100)) }
            let options = try await client.on("localhost").post("/api/auth/register/options", ["username": "ria"])
            #expect(options.status == .ok, "\(options.json)")
            #expect(try await store.scoped(to: "grabby").statistics(now: now, activeSince: now).openChallenges == 0)
            for name in ["alpha", "beta", "grabby"] { #expect(try await store.removeTenant(id: name, deleteData: true) == .removed) }
            let a = try client.on(Self.alpha)
            var answer = try await a.request(.get, "/.well-known/webauthn", origin: nil)
            for _ in 0..<200 where answer.errorCode != "unknown_tenant" {
                try await Task.sleep(for: .milliseconds(100))
                answer = try await a.request(.get, "/.well-known/webauthn", origin: nil)
            }
            #expect(answer.errorCode == "unknown_tenant", "\(answer.json)")
            // A fresh connection: the server may close an idle one while the loop above waits.
            #expect(try await client.on("localhost").request(.get, "/.well-known/webauthn", origin: nil).status == .ok)
        }
    }

    @Test func wellKnownDiscoveryAndKeysAnswerPerHost() async throws {
        try await Self.server { _, client in
            let a = try client.on(Self.alpha), b = try client.on(Self.beta)
            let aasaA = try await a.request(.get, "/.well-known/apple-app-site-association", origin: nil)
            let aasaB = try await b.request(.get, "/.well-known/apple-app-site-association", origin: nil)
            #expect(String(decoding: aasaA.bytes, as: UTF8.self).contains("AAAAAAAAAA.com.alpha"))
            #expect(!String(decoding: aasaA.bytes, as: UTF8.self).contains("BBBBBBBBBB"))
            #expect(String(decoding: aasaB.bytes, as: UTF8.self).contains("BBBBBBBBBB.com.beta"))
            let discoveryA = try await a.request(.get, "/.well-known/openid-configuration", origin: nil)
            let discoveryB = try await b.request(.get, "/.well-known/openid-configuration", origin: nil)
            #expect(discoveryA.string("issuer") == "http://a.localhost:8080", "\(discoveryA.json)")
            #expect(discoveryB.string("issuer") == "http://b.localhost:8080", "\(discoveryB.json)")
            let keysA = try await a.request(.get, "/.well-known/jwks.json", origin: nil)
            let keysB = try await b.request(.get, "/.well-known/jwks.json", origin: nil)
            func kids(_ response: APIResponse) -> Set<String> {
                Set(
                    (response.json["keys"]?.array ?? []).compactMap {
                        if case .string(let kid)? = $0["kid"] { kid } else { nil }
                    })
            }
            #expect(!kids(keysA).isEmpty && !kids(keysB).isEmpty)
            #expect(kids(keysA).isDisjoint(with: kids(keysB)), "each tenant signs with its own keys")
        }
    }

    @Test func aHostThatIsNoTenantsGetsUnknownTenantAndNothingElse() async throws {
        try await Self.server { _, client in
            for host in ["nowhere.example", "a.localhost.evil", "xn--bcher-kva.example", "localhost.localdomain"] {
                let response = try await client.on(host).request(.get, "/api/auth/session", origin: nil)
                #expect(response.status == .notFound && response.errorCode == "unknown_tenant", "\(host): \(response.json)")
                #expect(
                    String(decoding: response.bytes, as: UTF8.self)
                        == #"{"error":{"code":"unknown_tenant","message":"No service is configured for this host."}}"#)
                #expect(response.headers[.setCookie] == nil)
            }
            // The process's own endpoints answer on any host (load balancers ask by address).
            let health = try await client.on("10.0.0.5:8080").request(.get, "/healthz", origin: nil)
            #expect(health.status == .ok)
            // Odd spellings of a tenant's host are its host.
            for host in ["A.LOCALHOST", "a.localhost.", "a.localhost:9999", "a.LocalHost.:8080"] {
                let aasa = try await client.on(host).request(
                    .get, "/.well-known/apple-app-site-association", origin: nil)
                #expect(String(decoding: aasa.bytes, as: UTF8.self).contains("com.alpha"), "\(host)")
            }
        }
    }

    @Test func aForwardedHostCountsOnlyFromATrustedProxy() async throws {
        try await Self.server { _, client in
            let direct = try client.on("nowhere.example")
            var headers = HTTPFields()
            headers[HTTPField.Name("X-Forwarded-Host")!] = Self.alpha
            let ignored = try await direct.request(.get, "/.well-known/apple-app-site-association", origin: nil, headers: headers)
            #expect(ignored.errorCode == "unknown_tenant", "\(ignored.json)")
        }
        try await Self.server(extraSettings: ["PASSKEYD_TRUSTED_PROXIES": "127.0.0.1"]) { _, client in
            let proxied = try client.on("proxy.internal")
            var headers = HTTPFields()
            headers[HTTPField.Name("X-Forwarded-Host")!] = "spoofed.example, \(Self.beta)"
            let answer = try await proxied.request(.get, "/.well-known/apple-app-site-association", origin: nil, headers: headers)
            #expect(String(decoding: answer.bytes, as: UTF8.self).contains("com.beta"), "\(answer.json)")
        }
    }

    @Test func aTenantAddedOrRemovedIsServedWithinAPollAndItsPeopleGetAClearAnswer() async throws {
        try await Self.server { store, client in
            let b = try client.on(Self.beta)
            var device = SoftwareAuthenticator()
            let (token, _, _) = try await b.signUp("ria", authenticator: &device, origin: "http://b.localhost:8080")
            #expect(try await store.removeTenant(id: "beta", deleteData: false) == .hasAccounts(1))
            #expect(try await store.removeTenant(id: "beta", deleteData: true) == .removed)
            #expect(try await store.scoped(to: "beta").account(username: "ria") == nil)
            // Within the poll (2 s; waited for at most 20 s): the host is no one's.
            var answer = try await b.request(.get, "/api/auth/session", token: token)
            for _ in 0..<200 where answer.errorCode != "unknown_tenant" {
                try await Task.sleep(for: .milliseconds(100))
                answer = try await b.request(.get, "/api/auth/session", token: token)
            }
            #expect(answer.status == .notFound && answer.errorCode == "unknown_tenant", "\(answer.json)")

            let now = Date()
            try await store.addTenant(
                TenantRecord(
                    id: "gamma", hosts: ["c.localhost"], settings: #"{"rpID":"c.localhost","origins":["http://c.localhost:8080"]}"#,
                    createdAt: now, updatedAt: now))
            let c = try client.on("c.localhost")
            var options = try await c.post("/api/auth/register/options", ["username": "ria"])
            for _ in 0..<200 where options.status != .ok {
                try await Task.sleep(for: .milliseconds(100))
                options = try await c.post("/api/auth/register/options", ["username": "ria"])
            }
            #expect(options.status == .ok, "\(options.json)")
            #expect(options.json["rp"]?["id"] == .string("c.localhost"))
        }
    }
}
