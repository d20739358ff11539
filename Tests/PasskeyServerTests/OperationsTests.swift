import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Production operation through the HTTP API: rate limits, audit log, metrics, readiness,
/// request ids (in process), and the admin verbs against a database a real server wrote.
@Suite("Operations: limits, audit, metrics, admin")
struct OperationsTests {
    @Test func wrongPasswordsAreLimitedPerAccountAndAddressButOptionsAreNot() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.rateLimits = .init(windowSeconds: 60, perIP: 1000, perAccount: 3)
        }
        let account = Account(username: "ada", displayName: "Ada", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(account, Bcrypt(hashing: "analytical engine", cost: 4).text)]) == [true])
        try await harness.run { api in
            // Options reveal nothing secret and count nothing per account: no lock-out through them.
            for _ in 0..<10 {
                #expect(try await api.post("/api/auth/authenticate/options", ["username": "ada"]).status == .ok)
            }
            for _ in 0..<3 {
                #expect(
                    try await api.post("/api/auth/password/sign-in", ["username": "ada", "password": "babbage"]).status == .unauthorized)
            }
            let limited = try await api.post("/api/auth/password/sign-in", ["username": "ADA", "password": "analytical engine"])
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited")
            let retry = Int(limited.headers[.retryAfter] ?? "") ?? 0
            #expect((1...60).contains(retry))
            // Another username is not affected; the window ends: allowed again.
            #expect(try await api.post("/api/auth/password/sign-in", ["username": "bob", "password": "x"]).status == .unauthorized)
            harness.clock.advance(61)
            #expect(try await api.post("/api/auth/password/sign-in", ["username": "ada", "password": "analytical engine"]).status == .ok)
        }
    }

    @Test func theAuditLogRecordsEveryAccountEventWithClientDetails() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("audit".utf8))
            var (token, credential, _) = try await api.signUp("ada", authenticator: &authenticator)
            let bad = try await api.signIn(credential: &credential, authenticator: authenticator) { $0.response.signature.bytes[8] ^= 1 }
            #expect(bad.status == .unauthorized)
            #expect(try await api.signIn(credential: &credential, authenticator: authenticator).status == .ok)
            let id = Base64URLBytes(credential.id).base64URL
            #expect(
                try await api.request(.patch, "/api/auth/passkeys/\(id)", body: Array(#"{"name":"Work laptop"}"#.utf8), token: token).status
                    == .ok)
            var second = try await api.post("/api/auth/register/options", [String: String](), token: token)
            let (registration, other) = try authenticator.register(
                options: try second.decode(PublicKeyCredentialCreationOptionsJSON.self),
                origin: ServerHarness.origin)
            second = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: token)
            #expect(second.status == .ok)
            #expect(
                try await api.request(.delete, "/api/auth/passkeys/\(Base64URLBytes(other.id).base64URL)", token: token).status
                    == .noContent)
            #expect(try await api.request(.delete, "/api/auth/session", token: token).status == .noContent)
            token = ""

            let account = try #require(try await harness.store.account(username: "ada"))
            let events = try await harness.store.auditEvents(accountID: account.id, limit: 50).reversed()
            #expect(
                events.map(\.kind) == [
                    "sign_up", "sign_in_failed", "sign_in", "passkey_renamed", "passkey_added", "passkey_deleted", "session_revoked",
                ])
            let failure = try #require(events.first { $0.kind == "sign_in_failed" })
            #expect(failure.detail == "signature_invalid" && failure.credentialID == credential.id)
            #expect(events.allSatisfy { $0.time == harness.clock.now })
        }
    }

    @Test func metricsCountCeremoniesByOutcomeAndClientAndReadTheStore() async throws {
        let harness = try await ServerHarness { $0.metricsToken = "metrics-token-0123456789" }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("metrics".utf8))
            var (_, credential, _) = try await api.signUp("ada", authenticator: &authenticator)
            _ = try await api.signIn(credential: &credential, authenticator: authenticator) { $0.response.signature.bytes[8] ^= 1 }
            _ = try await api.signIn(credential: &credential, authenticator: authenticator)

            #expect(try await api.request(.get, "/metrics").status == .unauthorized)
            let scrape = try await api.request(.get, "/metrics", headers: [.authorization: "Bearer metrics-token-0123456789"])
            #expect(scrape.status == .ok && scrape.headers[.contentType]?.hasPrefix("text/plain") == true)
            let text = String(decoding: scrape.bytes, as: UTF8.self)
            for line in [
                #"passkeyd_ceremonies_finished_total{ceremony="registration",client="other",result="succeeded",code=""} 1"#,
                #"passkeyd_ceremonies_finished_total{ceremony="authentication",client="other",result="failed",code="signature_invalid"} 1"#,
                #"passkeyd_ceremonies_finished_total{ceremony="authentication",client="other",result="succeeded",code=""} 1"#,
                #"passkeyd_sign_ins_total{method="passkey"} 1"#,
                "passkeyd_accounts 1.0", "passkeyd_sessions_live 2.0", "passkeyd_passkey_adoption_ratio 1.0",
                #"passkeyd_passkeys{provider="Unknown"} 1.0"#,
            ] {
                #expect(text.contains(line), "missing \(line)")
            }
            #expect(text.contains("passkeyd_ceremony_duration_seconds_bucket"))
        }
    }

    @Test func clientKindsComeFromOriginAndUserAgent() {
        typealias Kind = ServerMetrics.ClientKind
        #expect(Kind.classify(origin: "android:apk-key-hash:abc", userAgent: nil) == .android)
        #expect(Kind.classify(origin: "https://example.com", userAgent: "Shiny/3 CFNetwork/1490.0.4 Darwin/23.2.0") == .ios)
        #expect(Kind.classify(origin: nil, userAgent: "okhttp/4.12.0") == .android)
        #expect(
            Kind.classify(origin: nil, userAgent: "Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 Chrome/120 Mobile Safari/537.36")
                == .web)
        #expect(Kind.classify(origin: nil, userAgent: "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Safari/604.1") == .web)
        #expect(Kind.classify(origin: nil, userAgent: nil) == .other)
        #expect(Kind.classify(origin: nil, userAgent: "") == .other)
        #expect(Kind.classify(origin: nil, userAgent: "MyApp/1 cfNETWORK/1 darwin/23") == .ios)
        #expect(Kind.classify(origin: nil, userAgent: "Ktor client") == .android)
        #expect(Kind.classify(origin: nil, userAgent: "curl/8 okhttp") == .other)
        #expect(Kind.classify(origin: nil, userAgent: "Dalvik/2.1.0 (Linux; U; Android 14)") == .android)
        #expect(Kind.classify(origin: nil, userAgent: "Mozilla/5.0 (Macintosh) Darwin/23") == .web)
        #expect(Kind.classify(origin: nil, userAgent: "passkey-load/1") == .other)
    }

    @Test func readinessHealthAndRequestIDs() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            #expect(try await api.request(.get, "/healthz").status == .ok)
            #expect(try await api.request(.get, "/readyz").status == .ok)
            let echoed = try await api.request(.get, "/healthz", headers: [HTTPField.Name("X-Request-Id")!: "abc-123-DEF_456"])
            #expect(echoed.headers[HTTPField.Name("X-Request-Id")!] == "abc-123-DEF_456")
            let made = try await api.request(.get, "/healthz", headers: [HTTPField.Name("X-Request-Id")!: "bad id\u{7f}"])
            #expect(made.headers[HTTPField.Name("X-Request-Id")!]?.count == 24)
        }
    }

    @Test func forwardedForIsBelievedOnlyFromTrustedProxies() {
        let address = PasskeyService.clientAddress
        #expect(address("10.0.0.9", "1.2.3.4", []) == "10.0.0.9")
        #expect(address("10.0.0.9", "1.2.3.4", ["10.0.0.9"]) == "1.2.3.4")
        // A client-supplied first hop cannot hide the real one: the right-most untrusted address counts.
        #expect(address("10.0.0.9", "6.6.6.6, 1.2.3.4, 10.0.0.8", ["10.0.0.9", "10.0.0.8"]) == "1.2.3.4")
        #expect(address("10.0.0.9", nil, ["10.0.0.9"]) == "10.0.0.9")
    }
}
