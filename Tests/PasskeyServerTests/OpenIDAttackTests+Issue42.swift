import Foundation
import HTTPTypes
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// Issue 42's findings on the provider: userinfo without a budget, redirect URIs a browser reads
/// as another host, and repeated parameters read first-wins.
extension OpenIDAttackTests {
    // MARK: 9. The userinfo budget

    /// 130 bad tokens from one address used to get 130 × 401, never 429. Each failure spends the
    /// address's client budget (`oauth_client:`); past `perIP`, 429 with Retry-After in the OAuth
    /// error shape, and not even a good token is looked at from there. Good tokens spend nothing,
    /// and another address's token still works.
    @Test func userinfoFailuresSpendTheAddressesClientBudget() async throws {
        let harness = try await ServerHarness {
            $0.rateLimits.perIP = 5
            $0.trustedProxies = ["127.0.0.1", "::1"]
        }
        try await harness.run(live: true) { api in
            let (_, _, _, tokens) = try await Self.tokens(api, harness, "una")
            let access = try #require(tokens.string("access_token"))
            let attacker: HTTPFields = [.xForwardedFor: "198.51.100.7"]
            let owner: HTTPFields = [.xForwardedFor: "203.0.113.9"]

            // Good tokens spend nothing: more than perIP of them from one address all answer.
            for n in 1...8 {
                let info = try await api.request(.get, "/oauth2/userinfo", token: access, origin: nil, headers: owner)
                #expect(info.status == .ok && info.string("sub") != nil, "good request \(n)")
            }
            var statuses: [HTTPResponse.Status] = []
            var last: APIResponse?
            for n in 0..<8 {
                let method: HTTPRequest.Method = n.isMultiple(of: 2) ? .get : .post
                let answer = try await api.request(method, "/oauth2/userinfo", token: "guess-\(n)", origin: nil, headers: attacker)
                statuses.append(answer.status)
                last = answer
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == .unauthorized } && statuses.dropFirst(5).allSatisfy { $0 == .tooManyRequests })
            let limited = try #require(last)
            #expect(limited.string("error") == "rate_limited" && limited.string("error_description") != nil)
            #expect(limited.headers[.retryAfter].flatMap { Int($0) }.map { $0 > 0 } == true)
            #expect(limited.headers[.cacheControl] == "no-store" && limited.headers[.contentType] == "application/json")
            // From the spent address, a good token is not looked at either.
            #expect(
                try await api.request(.get, "/oauth2/userinfo", token: access, origin: nil, headers: attacker).status == .tooManyRequests)
            // Another address is untouched.
            let other = try await api.request(.post, "/oauth2/userinfo", token: access, origin: nil, headers: owner)
            #expect(other.status == .ok && other.string("sub") != nil)
        }
    }

    /// Guesses sent at once get no more than the budget: each is counted before its token is
    /// looked at (a check before the lookup and a count after it let every guess in flight pass).
    @Test func concurrentUserinfoGuessesGetNoMoreThanTheBudget() async throws {
        let harness = try await ServerHarness {
            $0.rateLimits.perIP = 5
            $0.trustedProxies = ["127.0.0.1", "::1"]
        }
        try await harness.run(live: true) { api in
            let attacker: HTTPFields = [.xForwardedFor: "198.51.100.8"]
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for n in 0..<12 {
                    group.addTask {
                        try await api.request(.get, "/oauth2/userinfo", token: "guess-\(n)", origin: nil, headers: attacker).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .unauthorized }.count == 5, "\(statuses)")
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 7, "\(statuses)")
        }
    }

    // MARK: 10. Redirect URIs mean one host to every reader

    /// Registered before issue 42, each of these would have been sent a code; a browser reads
    /// `https:a` as `https://a/`, a host nobody reviewed.
    static let refusedRedirectURIs = [
        "https:a", "https://", "https:///cb", "https:/cb", "https://?x=1", "https://:443/cb", "https:app.example.com/cb",
        "https://user@app.example.com/cb", "https://app.example.com@evil.example/cb", "https://app.example.com/cb#x",
        "https://app.example.com/cb#", "https://*.example.com/cb", "https://%65vil.example/cb", "https://evil.example\\@app.example.com/cb",
        "https://app.example.com:0/cb", "https://app.example.com:99999/cb", "https://app.example.com:/cb", "https://0x7f.1/cb",
        "https://2130706433/cb", "https://[fe80::1%25eth0]/cb", "https://app .example.com/cb", "https://app.example.com/c b",
        "https://app.example.com/cb\n", "https://bücher.example/cb", "https://a..b/cb", "http://app.example.com/cb",
        "http://127.0.0.1.evil.example/cb", "http://localhost.evil.example/cb", "HTTPS://app.example.com/cb", "javascript:alert(1)",
        "data:text/html,x", "file:///etc/passwd", "cb", "/cb", "//app.example.com/cb", "", "com.example.app:", "com.example.app://",
        "com.example.app:?x=1", "com.example.app://user@x/cb", "com.example.app://*/cb", "com.example.app:/cb#x",
        "https://app.example.com/" + String(repeating: "a", count: 2048),
    ]

    /// What passkeyd accepted before and still does: https hosts and addresses with ports, paths
    /// and queries, loopback http for native apps (RFC 8252 §7.3), private-use schemes (§7.1).
    static let acceptedRedirectURIs = [
        "https://app.example.com/cb", "https://app.example.com", "https://app.example.com:8443/cb?tenant=1",
        "https://login.app-1.example.com/oauth2/callback", "https://192.0.2.10/cb", "https://[2001:db8::1]:8443/cb",
        "http://localhost:8080/callback", "http://127.0.0.1:53682/", "http://[::1]/cb", "com.example.app:/oauth2redirect",
        "com.example.app://callback", "com.example.app:///callback", "com.example.app:/",
    ]

    @Test func redirectURIRuleTable() {
        for uri in Self.refusedRedirectURIs { #expect(RedirectURI.refusal(uri) != nil, "\(uri)") }
        for uri in Self.acceptedRedirectURIs { #expect(RedirectURI.refusal(uri) == nil, "\(uri): \(RedirectURI.refusal(uri) ?? "")") }
    }

    /// The server API and the console register through one rule: each bad URI 400
    /// `invalid_value` with nothing stored, as a redirect URI and as a post-logout URI; the good
    /// ones register.
    @Test func theServerAPIAndTheConsoleRefuseRedirectURIsABrowserReadsAsAnotherHost() async throws {
        let harness = try await ConsoleAPITests.harness()
        try await harness.run { api in
            let key = try await IntegrationTests.apiKey(harness, scopes: ["clients"])
            let auth: HTTPFields = [.authorization: "Bearer \(key)"]
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            func json(_ uris: [String], postLogout: [String] = []) throws -> String {
                let body: [String: JSONValue] = [
                    "name": .string("App"), "redirectUris": .array(uris.map(JSONValue.string)),
                    "postLogoutRedirectUris": .array(postLogout.map(JSONValue.string)),
                ]
                return String(decoding: try JSONEncoder().encode(JSONValue.object(body)), as: UTF8.self)
            }
            for uri in Self.refusedRedirectURIs {
                for body in [try json([uri]), try json(["https://app.example.com/cb"], postLogout: [uri])] {
                    let server = try await api.request(.post, "/api/admin/clients", body: Array(body.utf8), origin: nil, headers: auth)
                    #expect(server.status == .badRequest && server.errorCode == "invalid_value", "server API: \(uri)")
                }
                let console = try await api.consoleChange(.post, "clients", root, json: try json([uri]))
                #expect(console.status == .badRequest && console.errorCode == "invalid_value", "console: \(uri)")
            }
            #expect(try await harness.store.oauthClients().isEmpty)
            for uri in Self.acceptedRedirectURIs {
                let server = try await api.request(
                    .post, "/api/admin/clients", body: Array(try json([uri], postLogout: [uri]).utf8), origin: nil, headers: auth)
                #expect(server.status == .created, "server API: \(uri) \(server.errorCode ?? "")")
                let console = try await api.consoleChange(.post, "clients", root, json: try json([uri]))
                #expect(console.status == .created, "console: \(uri) \(console.errorCode ?? "")")
            }
            #expect(try await harness.store.oauthClients().count == 2 * Self.acceptedRedirectURIs.count)
        }
    }

    // MARK: 11. Repeated parameters (RFC 6749 §3.1: "MUST NOT be included more than once")

    /// Each used to be read first-wins. A repeated `client_id` or `redirect_uri` (however its
    /// name is spelled) or `state` gets an error page and no redirect; any other repeated
    /// parameter `invalid_request` on the registered redirect URI. Nothing is stored or issued,
    /// signed in or not.
    /// A person signed up (their session), a confidential client, a PKCE challenge, and the
    /// fields of a code request for them (`state=s1`, `scope` as given).
    static func signedInCodeRequest(_ api: APIClient, _ harness: ServerHarness, _ name: String, scope: String = "openid")
        async throws -> (session: String, client: OAuthClient, challenge: String, fields: [String])
    {
        var authenticator = SoftwareAuthenticator(seed: Array(name.utf8))
        let (session, _, _) = try await api.signUp(name, authenticator: &authenticator)
        let (client, _) = try await Flow.client(harness)
        let (_, challenge) = Flow.pkce()
        let fields = [
            "client_id=\(client.id)", "redirect_uri=\(Self.encodedRedirect)", "response_type=code", "scope=\(scope)",
            "code_challenge=\(challenge)", "code_challenge_method=S256", "state=s1",
        ]
        return (session, client, challenge, fields)
    }

    @Test func authorizationRequestsWithARepeatedParameterAreRefused() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (session, client, challenge, base) = try await Self.signedInCodeRequest(api, harness, "rita")
            func authorize(_ parameters: [String], token: String?) async throws -> APIResponse {
                try await api.request(.get, "/oauth2/authorize?" + parameters.joined(separator: "&"), token: token, origin: nil)
            }
            // As sent once: a code for the signed-in person, a sign-in for nobody.
            #expect(Flow.parameters(try await authorize(base, token: session))["code"] != nil)
            #expect(try await authorize(base, token: nil).headers[.location]?.hasPrefix("/#authorize=") == true)
            let pendingBefore = try await Self.pendingCount(harness)
            let codesBefore = try await harness.store.auditEvents(accountID: nil, limit: 100).filter { $0.kind == "oidc_authorized" }.count

            let paged = [
                "client_id=\(client.id)", "client%5Fid=\(client.id)", "redirect_uri=\(Self.encodedRedirect)",
                "redirect_uri=https%3A%2F%2Fattacker.example%2Fcb", "state=s2",
            ]
            for extra in paged {
                for token in [session, nil] {
                    let answer = try await authorize(base + [extra], token: token)
                    #expect(answer.status == .badRequest && answer.headers[.location] == nil, "\(extra)")
                    #expect(String(decoding: answer.bytes, as: UTF8.self).contains("more than once"), "\(extra)")
                }
            }
            // The repeat first: still never a redirect to either.
            let first = try await authorize(["redirect_uri=https%3A%2F%2Fattacker.example%2Fcb"] + base, token: session)
            #expect(first.status == .badRequest && first.headers[.location] == nil)

            for extra in [
                "scope=openid+profile", "response_type=code", "code_challenge=\(challenge)", "code_challenge_method=S256",
                "nonce=n&nonce=m", "x=1&x=2",
            ] {
                for token in [session, nil] {
                    let answer = try await authorize(base + [extra], token: token)
                    let parameters = Flow.parameters(answer)
                    #expect(answer.status == .found && answer.headers[.location]?.hasPrefix(Self.redirect + "?") == true, "\(extra)")
                    #expect(
                        parameters["error"] == "invalid_request" && parameters["state"] == "s1" && parameters["code"] == nil, "\(extra)")
                }
            }
            #expect(try await Self.pendingCount(harness) == pendingBefore)
            #expect(
                try await harness.store.auditEvents(accountID: nil, limit: 100).filter { $0.kind == "oidc_authorized" }.count == codesBefore
            )
        }
    }

    /// A logout with any parameter repeated gets an error page: no sign-out and no redirect, even
    /// with a good hint (it used to sign out and redirect to the first address).
    @Test func logoutRequestsWithARepeatedParameterAreRefused() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (session, client, _, tokens) = try await Self.tokens(api, harness, "leo")
            let idToken = try #require(tokens.string("id_token"))
            let bye = "https%3A%2F%2Fapp.example.com%2Fbye"
            let good = ["id_token_hint=\(idToken)", "client_id=\(client.id)", "post_logout_redirect_uri=\(bye)", "state=z"]
            for extra in [
                "id_token_hint=\(idToken)", "client_id=\(client.id)", "post_logout_redirect_uri=\(bye)",
                "post_logout_redirect_uri=https%3A%2F%2Fattacker.example%2Fcb", "state=y", "x=1&x=2",
            ] {
                let answer = try await api.request(
                    .get, "/oauth2/logout?" + (good + [extra]).joined(separator: "&"), token: session, origin: nil)
                #expect(answer.status == .badRequest && answer.headers[.location] == nil, "\(extra)")
                #expect(answer.headers[.setCookie] == nil, "\(extra)")
                #expect(try await api.request(.get, "/api/auth/session", token: session).status == .ok, "\(extra)")
            }
            let once = try await api.request(.get, "/oauth2/logout?" + good.joined(separator: "&"), token: session, origin: nil)
            #expect(once.status == .found && once.headers[.location] == "https://app.example.com/bye?state=z")
            #expect(try await api.request(.get, "/api/auth/session", token: session).status == .unauthorized)
        }
    }
}
