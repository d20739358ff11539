import Foundation
import HTTPTypes
import NIOCore
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// The hardened edge (docs/security.md), through the HTTP API: one spelling per path, limits that
/// cannot be sidestepped or turned against someone, no login CSRF, sessions bound to how they
/// were made, and no account oracle. Run on SQLite and again on PostgreSQL by scripts/test.
@Suite("Edge: paths, limits, lock-out, CSRF, sessions")
struct EdgeTests {
    static let verifyPaths = [
        "/api/auth/authenticate/verify/", "//api/auth/authenticate/verify", "/api/auth//authenticate/verify",
        "/api/auth/./authenticate/verify", "/api/auth/x/../authenticate/verify", "/api/auth/authenticate%2Fverify",
        "/api/auth/authenticate/verify%00", "/api/auth/authenticate/%2e%2e/authenticate/verify",
    ]

    // MARK: 1. One spelling per path

    @Test(arguments: verifyPaths)
    func nonCanonicalSpellingsNeverReachAHandler(_ path: String) async throws {
        let harness = try await ServerHarness { $0.rateLimits.perIP = 3 }
        try await harness.run(live: true) { api in
            let refused = try await api.request(.post, path, body: Array("{}".utf8))
            #expect(refused.status == .notFound && refused.errorCode == "not_found", "\(path): \(refused.status)")
            // The limit is the route's: the canonical path is counted whatever was tried before.
            for _ in 0..<3 {
                #expect(try await api.request(.post, "/api/auth/authenticate/verify", body: Array("{}".utf8)).status == .badRequest)
            }
            #expect(try await api.request(.post, "/api/auth/authenticate/verify", body: Array("{}".utf8)).status == .tooManyRequests)
            #expect(try await api.request(.post, path, body: Array("{}".utf8)).status == .notFound)
        }
    }

    @Test(arguments: [
        "/index.html%00", "/./index.html", "/../index.html", "/%2e%2e/etc/passwd", "/app.js/", "//app.js", "/%61pp.js", "/app%2Ejs",
        "/api/auth/authenticate/%6Fptions",
    ])
    func staticPathsWithNULOrDotSegmentsAreRefused(_ path: String) async throws {
        let harness = try await ServerHarness { $0.publicDirectory = ServerHarness.publicDirectory }
        try await harness.run(live: true) { api in
            let response = try await api.request(.get, path)
            #expect(response.status == .notFound, "\(path): \(response.status)")
        }
        try await harness.run(live: true) { api in
            let script = try await api.request(.get, "/app.js")
            #expect(script.status == .ok)
        }
    }

    @Test func staticFilesAreServedWholeWhateverRangeIsAsked() async throws {
        let harness = try await ServerHarness { $0.publicDirectory = ServerHarness.publicDirectory }
        try await harness.run(live: true) { api in
            let whole = try await api.request(.get, "/app.js")
            #expect(whole.status == .ok && !whole.bytes.isEmpty)
            // Revalidated on every use (passkeyd.js is imported by other sites: an upgrade must
            // reach them), while API answers stay no-store.
            for file in ["/app.js", "/passkeyd.js", "/i18n/fr.json"] {
                #expect(try await api.request(.get, file).headers[.cacheControl] == "no-cache", "\(file)")
            }
            #expect(try await api.request(.get, "/api/auth/session").headers[.cacheControl] == "no-store")
            // Out of bounds, reversed, inside, and several ranges: always the whole file, with its
            // true length (an out-of-bounds range was a 206 with a negative Content-Length).
            for range in ["bytes=100000000-200000000", "bytes=50-10", "bytes=0-10", "bytes=-5", "bytes=0-1,5-9", "bytes=x"] {
                let response = try await api.request(.get, "/app.js", headers: [.range: range])
                #expect(response.status == .ok && response.bytes == whole.bytes, "\(range): \(response.status)")
                #expect(response.headers[.contentLength] == String(whole.bytes.count), "\(range)")
                #expect(response.headers[.acceptRanges] == nil && response.headers[.contentRange] == nil, "\(range)")
            }
        }
    }

    @Test func errorsCarryTheSecurityHeadersToo() async throws {
        try await ServerHarness().run { (api: APIClient) async throws in
            for response in [
                try await api.request(.get, "/nowhere"), try await api.request(.get, "/api/auth/session"),
                try await api.request(.post, "/api/auth/authenticate/verify", body: Array("{".utf8)),
                try await api.request(.post, "/api/auth/password/sign-in", body: Array("{}".utf8), headers: [.contentType: "text/plain"]),
            ] {
                #expect(response.status.code >= 400)
                #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(response.status)")
                #expect(response.headers[HTTPField.Name("X-Frame-Options")!] == "DENY")
                #expect(response.headers[.contentSecurityPolicy]?.contains("frame-ancestors 'none'") == true)
                #expect(response.headers[.cacheControl] == "no-store")
            }
        }
    }

    /// The peer's address as the audit log, the rate limits and the connection caps key it:
    /// IPv4 is written by passkeyd itself, and must read exactly as NIO's `inet_ntop` text.
    @Test func peerAddressesReadAsNIOWritesThem() throws {
        var generator = SplitMix64.forTest()
        var samples = ["0.0.0.0", "255.255.255.255", "10.0.0.1", "127.0.0.1", "100.10.1.0", "1.20.199.9", "192.168.100.255"]
        for _ in 0..<2000 {
            samples.append((0..<4).map { _ in String(UInt8.random(in: 0...255, using: &generator)) }.joined(separator: "."))
        }
        for text in samples {
            let address = try SocketAddress(ipAddress: text, port: 443)
            #expect(address.addressText == text && address.addressText == address.ipAddress, "\(text) (seed \(generator.seed))")
        }
        for text in ["::1", "2001:db8::8a2e:370:7334", "fe80::1"] {
            let address = try SocketAddress(ipAddress: text, port: 443)
            #expect(address.addressText == address.ipAddress, "\(text)")
        }
        #expect(try SocketAddress(unixDomainSocketPath: "/tmp/passkeyd.sock").addressText == nil)
    }

    // MARK: 2. Bounded limiter

    @Test func theLimiterHoldsAtMostItsKeysAndForgetsEndedWindows() async throws {
        let limiter = RateLimiter(window: .seconds(60), store: nil, maxKeys: 1000)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let junk = String(repeating: "x", count: 60_000)
        for index in 0..<20_000 {
            _ = try await limiter.hit("\(index):\(index % 7 == 0 ? junk : "")", limit: 5, now: now)
        }
        #expect(limiter.keyCount <= 1000)
        // The newest keys are the ones kept: a key counted just now still meets its limit.
        for _ in 0..<5 { _ = try await limiter.hit("recent", limit: 5, now: now) }
        #expect(try await limiter.hit("recent", limit: 5, now: now) != .allowed)
        limiter.prune(now: now.addingTimeInterval(61))
        #expect(limiter.keyCount == 0)
    }

    @Test func hugeUsernamesAreRefusedBeforeTheyAreCounted() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let name = String(repeating: "a", count: 40_000)
            for path in [
                "/api/auth/password/sign-in", "/api/auth/recovery/sign-in", "/api/auth/authenticate/options", "/api/auth/register/options",
            ] {
                let response = try await api.post(path, ["username": name, "password": "x", "code": "x"])
                #expect(response.status == .badRequest && response.errorCode == "invalid_username", "\(path)")
            }
        }
        #expect(harness.service.limiter.keyCount == 0)
    }

    // MARK: 3. No targeted lock-out

    @Test func anAttackersFailuresNeverLockTheVictimOut() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.trustedProxies = ["127.0.0.1", "::1"]
            $0.rateLimits = .init(windowSeconds: 60, perIP: 10_000, perAccount: 10, perAccountTotal: 1000, slowdownSeconds: 1)
        }
        try await harness.run(live: true) { api in
            let victim: HTTPFields = [.xForwardedFor: "203.0.113.9"]
            let attacker: HTTPFields = [.xForwardedFor: "198.51.100.7"]
            var authenticator = SoftwareAuthenticator(seed: Array("victim".utf8))
            let (token, credential, _) = try await api.signUp("victim", authenticator: &authenticator)
            let codes = try await api.post("/api/auth/recovery-codes", [String: String](), token: token)
            guard case .array(let list)? = codes.json["codes"], case .string(let code)? = list.first else {
                Issue.record("no codes")
                return
            }

            // 100 forged assertions for the victim's account, and 100 of each other failure.
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<100 {
                let options = try await api.request(
                    .post, "/api/auth/authenticate/options", body: Array(#"{"username":"victim"}"#.utf8), headers: attacker)
                var forged = credential
                var assertion = try authenticator.authenticate(
                    options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self),
                    origin: ServerHarness.origin, credential: &forged)
                assertion.response.signature = Base64URLBytes(assertion.response.signature.bytes.reversed())
                statuses.append(
                    try await api.request(
                        .post, "/api/auth/authenticate/verify",
                        body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: assertion))),
                        headers: attacker
                    ).status)
                statuses.append(
                    try await api.request(
                        .post, "/api/auth/register/options", body: Array(#"{"username":"victim"}"#.utf8),
                        headers: attacker
                    ).status)
            }
            #expect(Set(statuses) == [.unauthorized, .conflict], "\(Set(statuses))")
            var recoveryStatuses: [HTTPResponse.Status] = []
            for _ in 0..<100 {
                recoveryStatuses.append(
                    try await api.request(
                        .post, "/api/auth/recovery/sign-in",
                        body: Array(#"{"username":"victim","code":"0000-0000-0000"}"#.utf8),
                        headers: attacker
                    ).status)
            }
            // The attacker's own address is stopped after 10 wrong codes...
            #expect(
                recoveryStatuses.prefix(10).allSatisfy { $0 == .unauthorized }
                    && recoveryStatuses.dropFirst(10).allSatisfy { $0 == .tooManyRequests })

            // ...and the victim signs in with the passkey and with a recovery code.
            var signingIn = credential
            let options = try await api.request(
                .post, "/api/auth/authenticate/options", body: Array(#"{"username":"victim"}"#.utf8), headers: victim)
            let assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self),
                origin: ServerHarness.origin, credential: &signingIn)
            let signedIn = try await api.request(
                .post, "/api/auth/authenticate/verify",
                body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: assertion))), headers: victim)
            #expect(signedIn.status == .ok)
            let recovered = try await api.request(
                .post, "/api/auth/recovery/sign-in",
                body: Array(#"{"username":"victim","code":"\#(code)"}"#.utf8), headers: victim)
            #expect(recovered.status == .ok, "\(recovered.json)")
        }
    }

    @Test func pastTheAccountCeilingPasswordsAreSlowedNotRefused() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.trustedProxies = ["127.0.0.1", "::1"]
            $0.rateLimits = .init(windowSeconds: 60, perIP: 10_000, perAccount: 3, perAccountTotal: 12, slowdownSeconds: 1)
        }
        let account = Account(
            username: "alan", displayName: "Alan", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(account, Bcrypt(hashing: "enigma machine", cost: 4).text)]) == [true])
        try await harness.run(live: true) { api in
            // Four addresses fail three times each: 12 failures on the account.
            for address in 1...4 {
                for _ in 0..<4 {
                    _ = try await api.request(
                        .post, "/api/auth/password/sign-in", body: Array(#"{"username":"alan","password":"bombe"}"#.utf8),
                        headers: [.xForwardedFor: "198.51.100.\(address)"])
                }
            }
            let start = ContinuousClock.now
            let person = try await api.request(
                .post, "/api/auth/password/sign-in", body: Array(#"{"username":"ALAN","password":"enigma machine"}"#.utf8),
                headers: [.xForwardedFor: "203.0.113.20"])
            #expect(person.status == .ok)
            #expect(ContinuousClock.now - start >= .seconds(1))
        }
    }

    @Test func attemptsSentAtOnceCannotOutrunTheLimitAndSuccessesDoNotCount() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.passwordHashConcurrency = 2
            $0.trustedProxies = ["127.0.0.1", "::1"]
            $0.rateLimits = .init(windowSeconds: 60, perIP: 10_000, perAccount: 10, perAccountTotal: 1000, slowdownSeconds: 1)
        }
        let account = Account(username: "ivy", displayName: "Ivy", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(account, Bcrypt(hashing: "ivy's password", cost: 4).text)]) == [true])
        try await harness.run(live: true) { api in
            func attempt(_ password: String, from address: String) async throws -> HTTPResponse.Status {
                try await api.request(
                    .post, "/api/auth/password/sign-in", body: Array(#"{"username":"ivy","password":"\#(password)"}"#.utf8),
                    headers: [.xForwardedFor: address]
                ).status
            }
            // 30 wrong passwords at once from one address: the limit holds (each is counted before its check).
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<30 { group.addTask { try await attempt("guess", from: "198.51.100.30") } }
                var statuses: [HTTPResponse.Status] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            #expect(statuses.filter { $0 == .unauthorized }.count == 10, "\(statuses)")
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 20)
            // The person's own successes are handed back: 9 failures, 5 sign-ins, 1 more failure is still not limited.
            for _ in 0..<9 { #expect(try await attempt("typo", from: "203.0.113.40") == .unauthorized) }
            for _ in 0..<5 { #expect(try await attempt("ivy's password", from: "203.0.113.40") == .ok) }
            #expect(try await attempt("typo", from: "203.0.113.40") == .unauthorized)
            #expect(try await attempt("typo", from: "203.0.113.40") == .tooManyRequests)
        }
    }

    @Test func passwordChangesAreCountedPerAddress() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.rateLimits.perIP = 3
        }
        let account = Account(username: "pam", displayName: "Pam", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(account, Bcrypt(hashing: "pam's password", cost: 4).text)]) == [true])
        try await harness.run(live: true) { api in
            let token = try #require(
                try await api.post("/api/auth/password/sign-in", ["username": "pam", "password": "pam's password"]).string("token"))
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<3 { statuses.append(try await api.post("/api/auth/password", ["newPassword": "short"], token: token).status) }
            #expect(statuses.last == .tooManyRequests, "\(statuses)")
        }
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}
