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
        var generator = SystemRandomNumberGenerator()
        var samples = ["0.0.0.0", "255.255.255.255", "10.0.0.1", "127.0.0.1", "100.10.1.0", "1.20.199.9", "192.168.100.255"]
        for _ in 0..<2000 {
            samples.append((0..<4).map { _ in String(UInt8.random(in: 0...255, using: &generator)) }.joined(separator: "."))
        }
        for text in samples {
            let address = try SocketAddress(ipAddress: text, port: 443)
            #expect(address.addressText == text && address.addressText == address.ipAddress, "\(text)")
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

    // MARK: 4. Sessions bound to how they were made

    @Test func deletingAPasskeyEndsTheSessionsItMade() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("bound".utf8))
            let (first, _, _) = try await api.signUp("ada", authenticator: &authenticator)
            let (added, laptop) = try await MigrationTests.addPasskey(api, token: first, authenticator: &authenticator)
            #expect(added.status == .ok)
            var signingIn = laptop
            let viaLaptop = try await api.signIn(username: "ada", credential: &signingIn, authenticator: authenticator)
            let second = try #require(viaLaptop.string("token"))
            let sessions = try await api.request(.get, "/api/auth/sessions", token: first)
            guard case .array(let list)? = sessions.json["sessions"] else {
                Issue.record("no sessions")
                return
            }
            #expect(list.count == 2)
            #expect(list.contains { $0["current"] == .bool(true) && $0["method"] == .string("sign_up") })
            #expect(list.contains { $0["method"] == .string("passkey") && $0["passkeyId"] == .string(Base64URLBytes(laptop.id).base64URL) })

            let id = Base64URLBytes(laptop.id).base64URL
            #expect(try await api.request(.delete, "/api/auth/passkeys/\(id)", token: first).status == .noContent)
            #expect(try await api.request(.get, "/api/auth/session", token: second).status == .unauthorized)
            #expect(try await api.request(.get, "/api/auth/session", token: first).status == .ok)
        }
    }

    @Test func signOutEverywhereElseAndDisablingEndSessions() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("elsewhere".utf8))
            var (first, credential, _) = try await api.signUp("bea", authenticator: &authenticator)
            var tokens: [String] = []
            for _ in 0..<3 {
                tokens.append(try #require(try await api.signIn(credential: &credential, authenticator: authenticator).string("token")))
            }
            let revoked = try await api.post("/api/auth/sessions/revoke-others", [String: String](), token: tokens[0])
            #expect(revoked.json["revoked"] == .number(3))
            for token in [first, tokens[1], tokens[2]] {
                #expect(try await api.request(.get, "/api/auth/session", token: token).status == .unauthorized)
            }
            first = tokens[0]
            // One session by id.
            let other = try #require(try await api.signIn(credential: &credential, authenticator: authenticator).string("token"))
            let list = try await api.request(.get, "/api/auth/sessions", token: first)
            guard case .array(let items)? = list.json["sessions"],
                case .string(let otherID)? = items.first(where: { $0["current"] == .bool(false) })?["id"]
            else {
                Issue.record("no list")
                return
            }
            #expect(try await api.request(.delete, "/api/auth/sessions/\(otherID)", token: first).status == .noContent)
            #expect(try await api.request(.get, "/api/auth/session", token: other).status == .unauthorized)
            #expect(try await api.request(.delete, "/api/auth/sessions/\(otherID)", token: first).errorCode == "session_not_found")

            let account = try #require(try await harness.store.account(username: "bea"))
            #expect(try await harness.store.setDisabled(accountID: account.id, disabled: true))
            #expect(try await harness.store.setDisabled(accountID: account.id, disabled: false))
            #expect(try await api.request(.get, "/api/auth/session", token: first).status == .unauthorized)
        }
    }

    @Test func sensitiveActionsNeedARecentSignIn() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.reauthenticationWindow = .seconds(300)
        }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("recent".utf8))
            var (token, credential, _) = try await api.signUp("cy", authenticator: &authenticator)
            let (added, second) = try await MigrationTests.addPasskey(api, token: token, authenticator: &authenticator)
            #expect(added.status == .ok)
            harness.clock.advance(301)
            let stale = [
                try await api.post("/api/auth/register/options", [String: String](), token: token),
                try await api.post("/api/auth/recovery-codes", [String: String](), token: token),
                try await api.request(.delete, "/api/auth/passkeys/\(Base64URLBytes(second.id).base64URL)", token: token),
            ]
            for response in stale {
                #expect(response.status == .forbidden && response.errorCode == "reauthentication_required")
            }
            // Signing in again (what the web UI's passkey prompt does) makes them possible.
            token = try #require(
                try await api.signIn(username: "cy", credential: &credential, authenticator: authenticator).string("token"))
            #expect(try await api.post("/api/auth/recovery-codes", [String: String](), token: token).status == .ok)
            #expect(
                try await api.request(.delete, "/api/auth/passkeys/\(Base64URLBytes(second.id).base64URL)", token: token).status
                    == .noContent)
        }
    }

    @Test func aPasswordChangeEndsTheOtherSessions() async throws {
        let harness = try await ServerHarness { $0.passwordScryptCost = 10 }
        let account = Account(username: "dee", displayName: "Dee", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(account, Bcrypt(hashing: "first password", cost: 4).text)]) == [true])
        try await harness.run { api in
            let a = try #require(
                try await api.post("/api/auth/password/sign-in", ["username": "dee", "password": "first password"]).string("token"))
            let b = try #require(
                try await api.post("/api/auth/password/sign-in", ["username": "dee", "password": "first password"]).string("token"))
            let short = try await api.post("/api/auth/password", ["newPassword": "short"], token: a)
            #expect(short.status == .badRequest && short.errorCode == "invalid_password")
            #expect(try await api.post("/api/auth/password", ["newPassword": "a much better one"], token: a).status == .noContent)
            #expect(try await api.request(.get, "/api/auth/session", token: b).status == .unauthorized)
            #expect(try await api.request(.get, "/api/auth/session", token: a).status == .ok)
            #expect(
                try await api.post("/api/auth/password/sign-in", ["username": "dee", "password": "first password"]).status == .unauthorized)
            #expect(try await api.post("/api/auth/password/sign-in", ["username": "dee", "password": "a much better one"]).status == .ok)
            harness.clock.advance(301)
            #expect(
                try await api.post("/api/auth/password", ["newPassword": "and another one"], token: a).errorCode
                    == "reauthentication_required")
        }
    }

    @Test func aSignInReplacesTheSessionTheBrowserHad() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("rotate".utf8))
            var (token, credential, _) = try await api.signUp("eve", authenticator: &authenticator)
            let cookie = "passkeyd_session=\(token)"
            let options = try await api.post("/api/auth/authenticate/options", [String: String]())
            let assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self),
                origin: ServerHarness.origin, credential: &credential)
            let signedIn = try await api.request(
                .post, "/api/auth/authenticate/verify",
                body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: assertion))), cookie: cookie)
            #expect(signedIn.status == .ok)
            #expect(try await api.request(.get, "/api/auth/session", cookie: cookie).status == .unauthorized)
            token = try #require(signedIn.string("token"))
            #expect(try await api.request(.get, "/api/auth/session", token: token).status == .ok)
        }
    }

    // MARK: 5. No login CSRF

    static let sessionIssuing = [
        "/api/auth/register/verify", "/api/auth/authenticate/verify", "/api/auth/password/sign-in",
        "/api/auth/recovery/sign-in", "/api/auth/recovery/link", "/makeCredential?userId=00000000-0000-0000-0000-000000000000",
        "/authenticate?username=ada",
    ]

    @Test(arguments: sessionIssuing)
    func crossSiteRequestsCannotSignAnyoneIn(_ path: String) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let body = Array(#"{"username":"ada","password":"x","code":"x","token":"x"}"#.utf8)
            // An HTML form or a no-preflight fetch: text/plain.
            let plain = try await api.request(.post, path, body: body, origin: nil, headers: [.contentType: "text/plain"])
            #expect(plain.status == .unsupportedMediaType && plain.errorCode == "unsupported_media_type", "\(path)")
            let noType = try await api.request(.post, path, origin: nil)
            #expect(noType.status == .unsupportedMediaType, "\(path)")
            let evil = try await api.request(.post, path, body: body, origin: "https://evil.example")
            #expect(evil.status == .forbidden && evil.errorCode == "csrf_origin_mismatch", "\(path)")
            let crossSite = try await api.request(
                .post, path, body: body, origin: nil, headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"])
            #expect(crossSite.status == .forbidden && crossSite.errorCode == "cross_site_request", "\(path)")
            // A native app (no Origin) and the site itself get through to the handler.
            let native = try await api.request(.post, path, body: body, origin: nil)
            #expect(native.status != .forbidden && native.status != .unsupportedMediaType, "\(path)")
            let sameOrigin = try await api.request(
                .post, path, body: body,
                headers: [
                    HTTPField.Name("Sec-Fetch-Site")!: "same-origin",
                    .contentType: "application/json; charset=UTF-8",
                ])
            #expect(sameOrigin.status != .forbidden && sameOrigin.status != .unsupportedMediaType, "\(path)")
        }
    }

    static let crossSiteReachable = [
        "/api/auth/authenticate/options", "/api/auth/authenticate/options?username=ada", "/signup?username=bea",
        "/authenticate?username=ada",
    ]

    /// `<img src="https://passkeyd.example/api/auth/authenticate/options">` on another site: a
    /// GET with no CORS and no Origin. It must neither write a ceremony nor spend the visitor's
    /// per-address budget.
    @Test(arguments: crossSiteReachable)
    func crossSiteGetsAreRefusedBeforeTheyCountOrWrite(_ path: String) async throws {
        let harness = try await ServerHarness { $0.rateLimits.perIP = 3 }
        try await harness.run(live: true) { api in
            var authenticator = SoftwareAuthenticator(seed: Array("img".utf8))
            _ = try await api.signUp("ada", authenticator: &authenticator)
            let before = try await harness.store.openChallengeCount(now: harness.clock.now)
            for mode in ["no-cors", "navigate", "cors"] {
                let response = try await api.request(
                    .get, path, origin: nil,
                    headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site", HTTPField.Name("Sec-Fetch-Mode")!: mode])
                #expect(response.status == .forbidden && response.errorCode == "cross_site_request", "\(path) \(mode)")
            }
            for _ in 0..<5 {
                let evil = try await api.request(
                    .get, path, origin: "https://evil.example", headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"])
                #expect(evil.status == .forbidden, "\(path)")
            }
            #expect(try await harness.store.openChallengeCount(now: harness.clock.now) == before, "\(path)")
            // The address's budget is untouched (sign-up spent 2 of 3 in this window): the app
            // (no Sec-Fetch-Site) and a CORS fetch from the site's own origin still get through.
            let app = try await api.request(.get, path, origin: nil)
            #expect(app.status == .ok, "\(path): \(app.status)")
            harness.clock.advance(61)
            let site = try await api.request(.get, path, headers: [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"])
            #expect(site.status == .ok, "\(path): \(site.status)")
        }
    }

    @Test func cookiesAreHostPrefixedAndSecureOnHTTPS() async throws {
        let harness = try await ServerHarness { $0 = ServerConfiguration(rpID: "example.com", webOrigins: ["https://example.com"]) }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("secure".utf8))
            let (_, _, response) = try await api.signUp(
                "fay", authenticator: &authenticator, origin: "https://example.com", requestOrigin: "https://example.com")
            let cookie = try #require(response.headers[.setCookie])
            #expect(cookie.hasPrefix("__Host-passkeyd_session="))
            for attribute in ["; Path=/", "; HttpOnly", "; SameSite=Lax", "; Secure"] { #expect(cookie.contains(attribute), "\(cookie)") }
            #expect(!cookie.contains("Domain="))
        }
        let development = try await ServerHarness()
        try await development.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("plain".utf8))
            let (_, _, response) = try await api.signUp("gus", authenticator: &authenticator)
            let cookie = try #require(response.headers[.setCookie])
            #expect(cookie.hasPrefix("passkeyd_session=") && !cookie.contains("Secure"))
        }
    }

    // MARK: 6. Usernames

    @Test func usernamesThatLookAlikeAreOneAccount() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("alike".utf8))
            _ = try await api.signUp("José.ADA", authenticator: &authenticator)
            for twin in ["josé.ada", "Jose\u{301}.ada", "ＪＯＳÉ．ａｄａ", " jOSÉ.ada "] {
                let response = try await api.registrationOptions(username: twin)
                #expect(response.status == .conflict && response.errorCode == "username_taken", "\(twin)")
            }
            for bad in [
                "аlice", "ali\u{200B}ce", "ﬁle", "a b", String(repeating: "a", count: 65), String(repeating: "é", count: 200),
                "\u{301}abc", "tab\there", String(repeating: "x", count: 40_000),
                // Invisible (default-ignorable) code points and Hangul fillers: a second account
                // that looks like the first.
                "ada\u{FE0F}", "a\u{34F}da", "ad\u{E0100}a", "a\u{180B}da", "ada\u{17B4}", "\u{115F}ada", "ada\u{1160}",
                "\u{3164}ada", "\u{FFA0}ada", "ada\u{AD}", "ada\u{2060}",
                // Conjoining jamo NFC cannot compose (old Hangul), and a compatibility jamo.
                "\u{1100}\u{1100}\u{1161}", "\u{3131}",
            ] {
                let response = try await api.registrationOptions(username: bad)
                #expect(response.status == .badRequest && response.errorCode == "invalid_username", "\(bad.prefix(20))")
            }
            #expect(try await api.registrationOptions(username: "山田たろう").status == .ok)
            #expect(try await api.registrationOptions(username: "Ελένη").status == .ok)
            // Modern jamo compose to syllables under NFC and are one name with the syllables.
            #expect(try await api.registrationOptions(username: "\u{1112}\u{1161}\u{11AB}\u{1100}\u{1173}\u{11AF}").status == .ok)
            #expect(try await api.registrationOptions(username: "한글").status == .ok)
        }
    }

    @Test func oldKeysAreReKeyedAndCollisionsReportedNotMerged() {
        let a = UUID(), b = UUID(), c = UUID()
        let plan = UsernameRekeying.plan([
            (a, "ada", "ada"), (b, "ＡＤＡ", "ａｄａ"), (c, "José", "josé"),
        ])
        #expect(plan.changes.isEmpty || plan.changes.allSatisfy { $0.id != b })
        #expect(plan.collisions.map(\.accountID) == [b] && plan.collisions.first?.otherAccountID == a)
        let decomposed = UsernameRekeying.plan([(c, "Jose\u{301}", "jose\u{301}")])
        #expect(decomposed.changes.map { Array($0.key.utf8) } == [Array("jos\u{E9}".utf8)] && decomposed.collisions.isEmpty)
    }

    // MARK: 8. Metrics closed by default

    @Test func metricsAreClosedUnlessOpened() async throws {
        try await ServerHarness().run { (api: APIClient) async throws in
            #expect(try await api.request(.get, "/metrics").status == .notFound)
        }
        try await ServerHarness { $0.metricsPublic = true }.run { (api: APIClient) async throws in
            #expect(try await api.request(.get, "/metrics").status == .ok)
            for path in ["/metrics/", "//metrics", "/./metrics", "/metrics%2F"] {
                #expect(try await api.request(.get, path).status == .notFound, "\(path)")
            }
        }
    }

    // MARK: 9. Bad input

    @Test(arguments: [0, 1024, 4000])
    func credentialIDsOfNoOrTooManyBytesAreRefused(_ length: Int) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("ids".utf8))
            authenticator.credentialIDLength = length
            let options = try await api.registrationOptions(username: "hal")
            let (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self),
                origin: ServerHarness.origin)
            let response = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(response.status == .badRequest)
            #expect(
                ["malformed_authenticator_data", "credential_id_too_long", "malformed_json", "credential_id_mismatch"].contains(
                    response.errorCode ?? ""),
                "\(response.json)")
            #expect(try await harness.store.account(username: "hal") == nil)
        }
    }

    @Test(arguments: ["=", "padded"])
    func aChallengeIsAnsweredOnlyInItsBase64URLSpelling(_ variant: String) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("spelling".utf8))
            let options = try await api.registrationOptions(username: "ian")
            let decoded = try options.decode(PublicKeyCredentialCreationOptionsJSON.self)
            // The same bytes in standard base64 with padding.
            let standard = Data(decoded.challenge.bytes).base64EncodedString()
            let (registration, _) = try authenticator.register(
                options: decoded, origin: ServerHarness.origin,
                overrides: .init(challenge: variant == "=" ? standard : decoded.challenge.base64URL + "="))
            let response = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(response.status == .badRequest && response.errorCode == "malformed_client_data", "\(response.json)")
        }
    }

    @Test func errorMessagesNameNoLibraryInternals() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("internals".utf8))
            let options = try await api.registrationOptions(username: "jo")
            var (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self),
                origin: ServerHarness.origin)
            // Move the P-256 point off the curve: the crypto library refuses it.
            var object = registration.response.attestationObject.bytes
            if let index = object.indices.reversed().first(where: { object[$0] == 0x58 && object.count - $0 == 34 }) {
                object[index + 5] ^= 0xFF
            }
            registration.response.attestationObject = Base64URLBytes(object)
            let response = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(response.status == .badRequest)
            let message = String(decoding: response.bytes, as: UTF8.self)
            for leak in ["CryptoKit", "BoringSSL", "underlying", "Error(", "error:"] { #expect(!message.contains(leak), "\(message)") }
        }
    }

    // MARK: 10. No account oracle

    @Test func usernameFirstOptionsLookTheSameForEveryKindOfAccount() async throws {
        let harness = try await ServerHarness { $0.passwordScryptCost = 10 }
        let password = Account(username: "pat", displayName: "Pat", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let disabled = Account(username: "dan", displayName: "Dan", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(
            try await harness.store.importAccounts([
                (password, Bcrypt(hashing: "pat's password", cost: 4).text),
                (disabled, Bcrypt(hashing: "dan's password", cost: 4).text),
            ]) == [true, true])
        _ = try await harness.store.setDisabled(accountID: disabled.id, disabled: true)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oracle".utf8))
            _ = try await api.signUp("kay", authenticator: &authenticator)
            func shape(_ username: String) async throws -> [String] {
                let response = try await api.post("/api/auth/authenticate/options", ["username": username])
                #expect(response.status == .ok)
                guard case .object(let object) = response.json, case .array(let allow)? = object["allowCredentials"] else { return [] }
                let entry: [String] =
                    allow.first.flatMap { if case .object(let e) = $0 { return e.keys.sorted() } else { return nil } } ?? []
                return object.keys.sorted() + ["allow:\(allow.count)"] + entry
            }
            let known = try await shape("kay")
            #expect(try await shape("nobody") == known)
            #expect(try await shape("pat") == known)
            #expect(try await shape("dan") == known)

            // A disabled account's wrong password answers exactly like an unknown username.
            let wrong = try await api.post("/api/auth/password/sign-in", ["username": "dan", "password": "guess"])
            let unknown = try await api.post("/api/auth/password/sign-in", ["username": "nobody", "password": "guess"])
            #expect(wrong.status == unknown.status && wrong.bytes == unknown.bytes)

            // Timings within noise: medians of many samples taken in turn (so a busy moment hits
            // every kind alike), a loose bound.
            var samples: [String: [Duration]] = [:]
            for round in 0..<45 {
                for username in ["kay", "nobody", "pat"] {
                    let start = ContinuousClock.now
                    _ = try await api.post("/api/auth/authenticate/options", ["username": username])
                    if round >= 5 { samples[username, default: []].append(ContinuousClock.now - start) }
                }
            }
            func median(_ username: String) -> Duration {
                samples[username, default: [.zero]].sorted()[samples[username, default: [.zero]].count / 2]
            }
            let (a, b, c) = (median("kay"), median("nobody"), median("pat"))
            let slowest = max(a, b, c), fastest = min(a, b, c)
            #expect(slowest < fastest * 4, "\(a) \(b) \(c)")
        }
    }

    /// The compatibility `GET /authenticate?username=` answered 400 `unknown_user` for unknown,
    /// password-only and disabled accounts and real options for passkey accounts: an oracle
    /// beyond what sign-up reveals. It now answers like the native API.
    @Test func compatibilityOptionsLookTheSameForEveryKindOfAccount() async throws {
        let harness = try await ServerHarness { $0.passwordScryptCost = 10 }
        let password = Account(username: "pat", displayName: "Pat", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let disabled = Account(username: "dan", displayName: "Dan", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(
            try await harness.store.importAccounts([
                (password, Bcrypt(hashing: "pat's password", cost: 4).text),
                (disabled, Bcrypt(hashing: "dan's password", cost: 4).text),
            ]) == [true, true])
        _ = try await harness.store.setDisabled(accountID: disabled.id, disabled: true)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("compat-oracle".utf8))
            _ = try await api.signUp("kay", authenticator: &authenticator)
            func shape(_ username: String) async throws -> [String] {
                let response = try await api.request(.get, "/authenticate?username=\(username)", origin: nil)
                #expect(response.status == .ok, "\(username): \(response.status)")
                guard case .object(let object) = response.json, case .array(let allow)? = object["allowCredentials"] else { return [] }
                let entry: [String] =
                    allow.first.flatMap { if case .object(let e) = $0 { return e.keys.sorted() } else { return nil } } ?? []
                return object.keys.sorted() + ["allow:\(allow.count)"] + entry
            }
            let known = try await shape("kay")
            for other in ["nobody", "pat", "dan"] { #expect(try await shape(other) == known, "\(other)") }
            // The decoy is stable, like a real account's list.
            let first = try await api.request(.get, "/authenticate?username=nobody", origin: nil).json["allowCredentials"]
            let again = try await api.request(.get, "/authenticate?username=nobody", origin: nil).json["allowCredentials"]
            #expect(first == again)
        }
    }

    // MARK: 11. Costly work

    /// `maxOpenChallenges` bounds storage without being a switch: at the cap the oldest
    /// ceremonies make room, and new ones are never refused.
    @Test func theCeremonyCapMakesRoomInsteadOfRefusing() async throws {
        let harness = try await ServerHarness { $0.maxOpenChallenges = 10 }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("cap".utf8))
            var (_, credential, _) = try await api.signUp("cap", authenticator: &authenticator)
            let oldest = try await api.post("/api/auth/authenticate/options", [String: String]())
            for index in 0..<40 {
                harness.clock.advance(0.01)
                let response = try await api.post("/api/auth/authenticate/options", [String: String]())
                #expect(response.status == .ok, "\(index): \(response.status)")
            }
            let open = try await harness.store.openChallengeCount(now: harness.clock.now)
            #expect(open <= 11, "\(open) open")
            // The oldest ceremony was deleted to make room; a fresh one completes.
            let stale = try authenticator.authenticate(
                options: try oldest.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                credential: &credential)
            let refused = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: stale))
            #expect(refused.errorCode == "challenge_unknown")
            #expect(try await api.signIn(credential: &credential, authenticator: authenticator).status == .ok)
        }
    }

    @Test func namesAreBoundedInBytesToo() async throws {
        // One character, ~600 bytes: a letter with 300 combining marks.
        let heavy = "e" + String(repeating: "\u{301}", count: 300)
        #expect(heavy.count == 1)
        #expect(throws: PasskeyServiceError.self) { try PasskeyService.validDisplayName(heavy, default: "x") }
        #expect(throws: PasskeyServiceError.self) { try PasskeyService.validPasskeyName(heavy) }
        #expect(throws: PasskeyServiceError.self) { try PasskeyService.validPasskeyName(String(repeating: "a", count: 40_000)) }
        #expect(try PasskeyService.validPasskeyName(" Work laptop ") == "Work laptop")
        #expect(try PasskeyService.validDisplayName(String(repeating: "é", count: 64), default: "x").count == 64)
        let harness = try await ServerHarness()
        try await harness.run { api in
            let refused = try await api.registrationOptions(username: "heavy", displayName: heavy)
            #expect(refused.status == .badRequest && refused.errorCode == "invalid_display_name")
            var authenticator = SoftwareAuthenticator(seed: Array("heavy".utf8))
            let (token, credential, _) = try await api.signUp("light", authenticator: &authenticator)
            let id = Base64URLBytes(credential.id).base64URL
            let rename = try await api.request(
                .patch, "/api/auth/passkeys/\(id)", body: Array(try JSONEncoder().encode(["name": heavy])), token: token)
            #expect(rename.status == .badRequest && rename.errorCode == "invalid_name")
        }
    }

    @Test func aLimiterTableOneAddressCanFillIsFlagged() throws {
        var limits = ServerConfiguration.RateLimits()
        #expect(!limits.oneAddressCanEvict)
        limits.perIP = 600
        limits.maxKeys = 1201
        #expect(limits.oneAddressCanEvict)
        limits.maxKeys = 1202
        #expect(!limits.oneAddressCanEvict)
    }

    @Test func thePasswordPoolRunsABoundedNumberAndRefusesPastItsQueue() async throws {
        let pool = BoundedWorkPool(width: 1, maxWaiting: 2)
        let results = await withTaskGroup(of: Int?.self) { group in
            for index in 0..<6 {
                group.addTask {
                    await pool.run {
                        usleep(150_000)
                        return index
                    }
                }
            }
            var results: [Int?] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(results.compactMap { $0 }.count == 3)
        #expect(results.filter { $0 == nil }.count == 3)
    }
}

extension HTTPField.Name {
    static let xForwardedFor = HTTPField.Name("X-Forwarded-For")!
}
