import Foundation
import HTTPTypes
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

// Edge tests, part 2: sessions bound to how they were made, no login CSRF, and the session cookie.
extension EdgeTests {
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
        let harness = try await ServerHarness {
            $0.domain = ServerConfiguration(rpID: "example.com", webOrigins: ["https://example.com"])
            // Cookies are Secure by default when no web origin is plain http.
            $0.edge = EdgeConfiguration(webOrigins: ["https://example.com"])
        }
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
}
