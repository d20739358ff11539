import Crypto
import Foundation
import HTTPTypes
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// The OpenID provider attacked the ways issue 34 found it open, each written as the attack: the
/// request that used to work gets the documented refusal, and the owner's next request still
/// works. Run on SQLite and again on PostgreSQL (scripts/test).
@Suite("OpenID Connect: attacks on codes, tokens, logout and limits")
struct OpenIDAttackTests {
    typealias Flow = OpenIDTests
    static let redirect = OpenIDTests.redirect
    static let encodedRedirect = redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? redirect

    static func publicClient(_ harness: ServerHarness) async throws -> OAuthClient {
        try await AdminService(store: harness.store, now: { harness.clock.now }).addClient(
            name: "Attacker", redirectURIs: ["https://attacker.example/cb"], isPublic: true, firstParty: true, by: "test"
        ).client
    }

    /// A code for `client` (first party: straight back), with `scope`.
    static func code(
        _ api: APIClient, client: OAuthClient, session: String, challenge: String, scope: String = "openid profile offline_access"
    )
        async throws -> String
    {
        let query =
            "client_id=\(client.id)&redirect_uri=\(encodedRedirect)&response_type=code&scope=\(scope.replacingOccurrences(of: " ", with: "+"))&state=s1&code_challenge=\(challenge)&code_challenge_method=S256"
        let answer = try await api.request(.get, "/oauth2/authorize?" + query, token: session, origin: nil)
        return try #require(Flow.parameters(answer)["code"], "\(answer.status) \(answer.headers[.location] ?? "")")
    }

    /// Signs up `name`, makes a confidential first-party client and exchanges a code: the tokens.
    static func tokens(
        _ api: APIClient, _ harness: ServerHarness, _ name: String, scope: String = "openid profile offline_access"
    ) async throws -> (session: String, client: OAuthClient, secret: String, tokens: APIResponse) {
        var authenticator = SoftwareAuthenticator(seed: Array(name.utf8))
        let (session, _, _) = try await api.signUp(name, authenticator: &authenticator)
        let (client, secret) = try await Flow.client(harness)
        let (verifier, challenge) = Flow.pkce()
        let code = try await Self.code(api, client: client, session: session, challenge: challenge, scope: scope)
        let tokens = try await Flow.exchange(
            api, client: client, secret: secret,
            form: ["grant_type": "authorization_code", "code": code, "redirect_uri": redirect, "code_verifier": verifier])
        guard tokens.status == .ok else { throw HarnessError.unexpected(tokens) }
        return (session, client, secret, tokens)
    }

    /// A form post as a public client (client_id in the body, no secret).
    static func publicPost(_ api: APIClient, _ path: String, client: OAuthClient, form: [String: String]) async throws -> APIResponse {
        let body = (form.merging(["client_id": client.id]) { $1 }).map {
            "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")"
        }.joined(separator: "&")
        return try await api.request(
            .post, path, body: Array(body.utf8), origin: nil, headers: [.contentType: "application/x-www-form-urlencoded"])
    }

    /// A form post as a confidential client (client_secret_basic).
    static func clientPost(_ api: APIClient, _ path: String, client: OAuthClient, secret: String, form: [String: String]) async throws
        -> APIResponse
    {
        let body = form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(
            separator: "&")
        let basic = Data("\(client.id):\(secret)".utf8).base64EncodedString()
        return try await api.request(
            .post, path, body: Array(body.utf8), origin: nil,
            headers: [.contentType: "application/x-www-form-urlencoded", .authorization: "Basic \(basic)"])
    }

    static func userinfo(_ api: APIClient, _ access: String?) async throws -> HTTPResponse.Status {
        try await api.request(.get, "/oauth2/userinfo", token: access, origin: nil).status
    }

    // MARK: 1. Another client's code or token

    /// RFC 6749 §4.1.3: a public client posting a confidential client's code (with the right
    /// verifier even) gets `invalid_grant`, and the code is untouched: its owner's exchange works.
    @Test func anotherClientCannotSpendYourCode() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("victim-code".utf8))
            let (session, _, _) = try await api.signUp("vic", authenticator: &authenticator)
            let (owner, secret) = try await Flow.client(harness)
            let (other, otherSecret) = try await Flow.client(harness)
            let attacker = try await Self.publicClient(harness)
            let (verifier, challenge) = Flow.pkce()
            let code = try await Self.code(api, client: owner, session: session, challenge: challenge)
            let form = ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirect, "code_verifier": verifier]

            let stolen = try await Self.publicPost(api, "/oauth2/token", client: attacker, form: form)
            #expect(stolen.status == .badRequest && stolen.string("error") == "invalid_grant")
            let confidential = try await Flow.exchange(api, client: other, secret: otherSecret, form: form)
            #expect(confidential.string("error") == "invalid_grant")
            // Neither attempt spent it, nor did a wrong verifier from its own client.
            let wrongVerifier = try await Flow.exchange(
                api, client: owner, secret: secret, form: form.merging(["code_verifier": Flow.pkce().verifier]) { $1 })
            #expect(wrongVerifier.string("error") == "invalid_grant")
            let mine = try await Flow.exchange(api, client: owner, secret: secret, form: form)
            #expect(mine.status == .ok && mine.string("access_token") != nil, "\(mine.json)")
        }
    }

    /// RFC 6749 §6 and RFC 7009 §2.1: another client's refresh at `/oauth2/token` and its
    /// revocation at `/oauth2/revoke` (200, as the RFC allows) change nothing; the owner refreshes.
    @Test func anotherClientCannotSpendOrRevokeYourRefreshToken() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (_, owner, secret, tokens) = try await Self.tokens(api, harness, "rae")
            let refresh = try #require(tokens.string("refresh_token"))
            let attacker = try await Self.publicClient(harness)
            let (other, otherSecret) = try await Flow.client(harness)

            let stolen = try await Self.publicPost(
                api, "/oauth2/token", client: attacker, form: ["grant_type": "refresh_token", "refresh_token": refresh])
            #expect(stolen.string("error") == "invalid_grant")
            let revokedByOther = try await Self.clientPost(
                api, "/oauth2/revoke", client: other, secret: otherSecret, form: ["token": refresh])
            #expect(revokedByOther.status == .ok)
            let revokedByPublic = try await Self.publicPost(api, "/oauth2/revoke", client: attacker, form: ["token": refresh])
            #expect(revokedByPublic.status == .ok)
            // Another client's revocation of the access token changes nothing either.
            let access = try #require(tokens.string("access_token"))
            #expect(try await Self.publicPost(api, "/oauth2/revoke", client: attacker, form: ["token": access]).status == .ok)

            #expect(try await Self.userinfo(api, access) == .ok)
            let rotated = try await Flow.exchange(
                api, client: owner, secret: secret, form: ["grant_type": "refresh_token", "refresh_token": refresh])
            #expect(rotated.status == .ok && rotated.string("refresh_token") != nil, "\(rotated.json)")
        }
    }

    // MARK: 2. A code used twice, a refresh token reused, a grant revoked

    /// RFC 6749 §4.1.2: a code used twice revokes every token its first exchange issued — the
    /// access token too (userinfo 401, introspection inactive), not only the refresh token.
    @Test func aCodeUsedTwiceRevokesTheAccessTokenItIssued() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("twice".utf8))
            let (session, _, _) = try await api.signUp("tia", authenticator: &authenticator)
            let (client, secret) = try await Flow.client(harness)
            let key = try await IntegrationTests.apiKey(harness, scopes: ["introspect"])
            let (verifier, challenge) = Flow.pkce()
            let code = try await Self.code(api, client: client, session: session, challenge: challenge)
            let form = ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirect, "code_verifier": verifier]
            let first = try await Flow.exchange(api, client: client, secret: secret, form: form)
            let access = try #require(first.string("access_token"))
            #expect(try await Self.userinfo(api, access) == .ok)

            let again = try await Flow.exchange(api, client: client, secret: secret, form: form)
            #expect(again.string("error") == "invalid_grant")
            #expect(try await Self.userinfo(api, access) == .unauthorized)
            #expect(IntegrationTests.active(try await IntegrationTests.introspect(api, access, key: key)) == false)
            let refresh = try await Flow.exchange(
                api, client: client, secret: secret,
                form: ["grant_type": "refresh_token", "refresh_token": first.string("refresh_token") ?? ""])
            #expect(refresh.string("error") == "invalid_grant")

            // The person's next sign-in through the app works.
            let (nextVerifier, nextChallenge) = Flow.pkce()
            let next = try await Self.code(api, client: client, session: session, challenge: nextChallenge)
            let fresh = try await Flow.exchange(
                api, client: client, secret: secret,
                form: ["grant_type": "authorization_code", "code": next, "redirect_uri": Self.redirect, "code_verifier": nextVerifier])
            #expect(try await Self.userinfo(api, fresh.string("access_token")) == .ok)
        }
    }

    /// RFC 9700 §4.14.2 and RFC 7009 §2.1: a reused refresh token and a revocation by the owner
    /// end the grant's access tokens as well.
    @Test func aReusedOrRevokedRefreshTokenEndsTheGrantsAccessTokens() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (_, client, secret, tokens) = try await Self.tokens(api, harness, "rex")
            let refresh = try #require(tokens.string("refresh_token"))
            let rotated = try await Flow.exchange(
                api, client: client, secret: secret, form: ["grant_type": "refresh_token", "refresh_token": refresh])
            #expect(try await Self.userinfo(api, rotated.string("access_token")) == .ok)
            let reused = try await Flow.exchange(
                api, client: client, secret: secret, form: ["grant_type": "refresh_token", "refresh_token": refresh])
            #expect(reused.string("error") == "invalid_grant")
            #expect(try await Self.userinfo(api, rotated.string("access_token")) == .unauthorized)
            #expect(try await Self.userinfo(api, tokens.string("access_token")) == .unauthorized)

            let (_, second, secondSecret, other) = try await Self.tokens(api, harness, "rey")
            let revoked = try await Self.clientPost(
                api, "/oauth2/revoke", client: second, secret: secondSecret, form: ["token": other.string("refresh_token") ?? ""])
            #expect(revoked.status == .ok)
            #expect(try await Self.userinfo(api, other.string("access_token")) == .unauthorized)

            // An access token revoked by its own client ends its grant (its refresh token too).
            let (_, third, thirdSecret, more) = try await Self.tokens(api, harness, "ria")
            let access = try #require(more.string("access_token"))
            #expect(
                try await Self.clientPost(api, "/oauth2/revoke", client: third, secret: thirdSecret, form: ["token": access]).status == .ok)
            #expect(try await Self.userinfo(api, access) == .unauthorized)
            let after = try await Flow.exchange(
                api, client: third, secret: thirdSecret,
                form: ["grant_type": "refresh_token", "refresh_token": more.string("refresh_token") ?? ""])
            #expect(after.string("error") == "invalid_grant")
        }
    }

    // MARK: 3. Claims follow the granted scopes

    /// OIDC Core §5.4: with only `openid`, the access token carries neither the username nor the
    /// operator's externalId; with `profile`, the username, and never the externalId.
    @Test func accessTokenClaimsFollowTheGrantedScopes() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("scopes".utf8))
            let (session, _, _) = try await api.signUp("sid", authenticator: &authenticator)
            let account = try #require(try await harness.store.account(username: "sid"))
            #expect(try await harness.store.setExternalID(accountID: account.id, externalID: "cust-7"))
            let (client, secret) = try await Flow.client(harness)
            let cases: [(scope: String, username: String?)] = [("openid", nil), ("openid profile", "sid")]
            for (scope, username) in cases {
                let (verifier, challenge) = Flow.pkce()
                let code = try await Self.code(api, client: client, session: session, challenge: challenge, scope: scope)
                let tokens = try await Flow.exchange(
                    api, client: client, secret: secret,
                    form: ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirect, "code_verifier": verifier])
                let access = try IntegrationTests.JWT(try #require(tokens.string("access_token")))
                #expect(access.string("username") == username, "\(scope)")
                #expect(access.claims["externalId"] == nil, "\(scope)")
                #expect(access.string("scope") == scope && access.string("grant_id") != nil)
                let info = try await api.request(.get, "/oauth2/userinfo", token: tokens.string("access_token"), origin: nil)
                #expect(info.string("preferred_username") == username && info.string("sub") == access.string("sub"))
            }
            // A session's own access token (first-party sign-in) still carries both.
            let own = try IntegrationTests.JWT(
                try #require(try await api.request(.post, "/api/auth/token", token: session).string("accessToken")))
            #expect(own.string("username") == "sid" && own.string("externalId") == "cust-7")
        }
    }

    // MARK: 4. Logout

    /// RP-Initiated Logout §2: the hint must be an ID token passkeyd issued (an access token is
    /// refused), and a `client_id` must be its audience; neither ends the session nor redirects.
    @Test func logoutTakesOnlyAnIDTokenPasskeydIssuedToThatClient() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (session, client, _, tokens) = try await Self.tokens(api, harness, "lou")
            let (other, _) = try await Flow.client(harness)
            let idToken = try #require(tokens.string("id_token"))
            let sessionAccess = try #require(try await api.request(.post, "/api/auth/token", token: session).string("accessToken"))
            let bye = "https%3A%2F%2Fapp.example.com%2Fbye"
            for hint in [try #require(tokens.string("access_token")), sessionAccess] {
                let answer = try await api.request(
                    .get, "/oauth2/logout?id_token_hint=\(hint)&post_logout_redirect_uri=\(bye)", token: session, origin: nil)
                #expect(answer.status == .badRequest && answer.headers[.location] == nil)
            }
            let mismatched = try await api.request(
                .get, "/oauth2/logout?id_token_hint=\(idToken)&client_id=\(other.id)&post_logout_redirect_uri=\(bye)", token: session,
                origin: nil)
            #expect(mismatched.status == .badRequest && mismatched.headers[.location] == nil)
            #expect(try await api.request(.get, "/api/auth/session", token: session).status == .ok)

            let good = try await api.request(
                .get, "/oauth2/logout?id_token_hint=\(idToken)&client_id=\(client.id)&post_logout_redirect_uri=\(bye)&state=z",
                token: session,
                origin: nil)
            #expect(good.status == .found && good.headers[.location] == "https://app.example.com/bye?state=z")
            #expect(try await api.request(.get, "/api/auth/session", token: session).status == .unauthorized)
        }
    }

    // MARK: 5. Introspection of a client's access tokens

    /// RFC 7662: an API key with `introspect` sees a client's access token (aud, client_id,
    /// scope); a client sees its own at `/oauth2/introspect` and nothing of another's.
    @Test func introspectionSeesClientTokensForTheirClientAndAPIKeys() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (session, client, secret, tokens) = try await Self.tokens(api, harness, "ina", scope: "openid offline_access")
            let (other, otherSecret) = try await Flow.client(harness)
            let access = try #require(tokens.string("access_token"))
            let key = try await IntegrationTests.apiKey(harness, scopes: ["introspect"])

            let byKey = try await IntegrationTests.introspect(api, access, key: key)
            #expect(IntegrationTests.active(byKey) == true && byKey.string("client_id") == client.id)
            #expect(byKey.json["aud"] == .array([.string(client.id)]) && byKey.string("scope") == "openid offline_access")
            #expect(byKey.string("username") == nil && byKey.string("externalId") == nil)

            let byOwner = try await Self.clientPost(api, "/oauth2/introspect", client: client, secret: secret, form: ["token": access])
            #expect(IntegrationTests.active(byOwner) == true && byOwner.string("client_id") == client.id, "\(byOwner.json)")
            #expect(byOwner.headers[.cacheControl] == "no-store")
            for token in [access, session] {
                let byOther = try await Self.clientPost(
                    api, "/oauth2/introspect", client: other, secret: otherSecret, form: ["token": token])
                #expect(byOther.status == .ok && byOther.json == .object(["active": .bool(false)]))
            }
            let unauthenticated = try await Self.clientPost(
                api, "/oauth2/introspect", client: client, secret: "pcs_wrong", form: ["token": access])
            #expect(unauthenticated.status == .unauthorized && unauthenticated.string("error") == "invalid_client")

            // Its grant revoked: inactive to both.
            _ = try await Self.clientPost(
                api, "/oauth2/revoke", client: client, secret: secret, form: ["token": tokens.string("refresh_token") ?? ""])
            #expect(IntegrationTests.active(try await IntegrationTests.introspect(api, access, key: key)) == false)
            let afterRevocation = try await Self.clientPost(
                api, "/oauth2/introspect", client: client, secret: secret, form: ["token": access])
            #expect(IntegrationTests.active(afterRevocation) == false)
        }
    }

    // MARK: 7. Budgets

    /// 301 cross-site `<img>` loads of `/oauth2/authorize` used to drive the victim's address to
    /// 429 on its own sign-in. Subresource loads are refused uncounted; failed authorization
    /// requests count against the authorization budget only; sign-in is untouched.
    @Test func crossSiteLoadsAndFailedRequestsDoNotSpendTheSignInBudget() async throws {
        let harness = try await ServerHarness { $0.rateLimits.perIP = 5 }
        try await harness.run(live: true) { api in
            let image: HTTPFields = [.secFetchSite: "cross-site", .secFetchMode: "no-cors", .secFetchDest: "image"]
            for _ in 0..<20 {
                let load = try await api.request(.get, "/oauth2/authorize?client_id=nobody", origin: nil, headers: image)
                #expect(load.status == .badRequest)
            }
            let pendingProbe: HTTPFields = [.secFetchSite: "cross-site", .secFetchMode: "no-cors", .secFetchDest: "image"]
            for _ in 0..<10 {
                #expect(
                    try await api.request(.get, "/oauth2/authorize/requests/abc", origin: nil, headers: pendingProbe).status == .badRequest)
            }
            // Failed (top-level) authorization requests: their own budget runs out…
            let navigation: HTTPFields = [.secFetchSite: "cross-site", .secFetchMode: "navigate", .secFetchDest: "document"]
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<7 {
                statuses.append(try await api.request(.get, "/oauth2/authorize?client_id=nobody", origin: nil, headers: navigation).status)
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == .badRequest } && statuses.last == .tooManyRequests, "\(statuses)")
            // …and the person's sign-in is untouched.
            let options = try await api.post("/api/auth/authenticate/options", [String: String]())
            #expect(options.status == .ok, "\(options.json)")
        }
    }

    // MARK: 8. Bounded parameters and pending requests

    static func pendingCount(_ harness: ServerHarness) async throws -> Int {
        let store = try #require(harness.store as? SQLStore)
        return try await store.reader.count("SELECT COUNT(*) AS n FROM oauth_requests")
    }

    /// A 64 KiB `state` used to be stored anonymously. Every parameter is bounded and a larger
    /// one refused before anything is stored; values at the limit are accepted.
    @Test func authorizationParametersAreBoundedBeforeAnythingIsStored() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (client, _) = try await Flow.client(harness, firstParty: false)
            let (_, challenge) = Flow.pkce()
            func authorize(_ extra: String, state: String = "s1") async throws -> APIResponse {
                try await api.request(
                    .get,
                    "/oauth2/authorize?client_id=\(client.id)&redirect_uri=\(Self.encodedRedirect)&response_type=code&scope=openid&code_challenge=\(challenge)&code_challenge_method=S256&state=\(state)\(extra)",
                    origin: nil)
            }
            let huge = try await authorize("", state: String(repeating: "a", count: 65536))
            #expect(huge.status == .badRequest && huge.headers[.location] == nil)
            let long = try await authorize("", state: String(repeating: "a", count: 513))
            #expect(long.status == .badRequest && long.headers[.location] == nil)
            for (name, limit) in [("nonce", 512), ("login_hint", 256), ("ui_locales", 128), ("max_age", 10)] {
                let answer = try await authorize("&\(name)=" + String(repeating: "1", count: limit + 1))
                #expect(Flow.parameters(answer)["error"] == "invalid_request", "\(name)")
                #expect(Flow.parameters(answer)["state"] == "s1", "\(name)")
            }
            // authorize() sends a scope already, and a repeated parameter is refused: written out.
            let longScope = try await api.request(
                .get,
                "/oauth2/authorize?scope=openid+\(String(repeating: "x", count: 300))&client_id=\(client.id)&redirect_uri=\(Self.encodedRedirect)&response_type=code&code_challenge=\(challenge)&code_challenge_method=S256&state=s1",
                origin: nil)
            #expect(Flow.parameters(longScope)["error"] == "invalid_request" && Flow.parameters(longScope)["state"] == "s1")
            #expect(try await Self.pendingCount(harness) == 0)

            // At the limits: stored, to wait for the sign-in.
            let atLimit = try await authorize(
                "&nonce=" + String(repeating: "n", count: 512) + "&login_hint=" + String(repeating: "h", count: 256),
                state: String(repeating: "s", count: 512))
            #expect(atLimit.status == .found && atLimit.headers[.location]?.hasPrefix("/#authorize=") == true)
            #expect(try await Self.pendingCount(harness) == 1)
        }
    }

    /// Pending requests are capped per address (pendingRequestsPerAddress per request lifetime)
    /// and expire; past the cap the app is told `temporarily_unavailable` and nothing is stored.
    @Test func pendingRequestsAreCappedPerAddressAndExpire() async throws {
        let harness = try await ServerHarness { $0.rateLimits.perIP = 1000 }
        try await harness.run(live: true) { api in
            let (client, _) = try await Flow.client(harness, firstParty: false)
            let (_, challenge) = Flow.pkce()
            let path =
                "/oauth2/authorize?client_id=\(client.id)&redirect_uri=\(Self.encodedRedirect)&response_type=code&scope=openid&code_challenge=\(challenge)&code_challenge_method=S256&state=s1"
            for _ in 0..<OpenIDService.pendingRequestsPerAddress {
                let answer = try await api.request(.get, path, origin: nil)
                #expect(answer.headers[.location]?.hasPrefix("/#authorize=") == true)
            }
            let over = try await api.request(.get, path, origin: nil)
            #expect(Flow.parameters(over)["error"] == "temporarily_unavailable" && Flow.parameters(over)["state"] == "s1")
            #expect(try await Self.pendingCount(harness) == OpenIDService.pendingRequestsPerAddress)
            // A request lifetime later the old ones are gone and new ones are taken again.
            harness.clock.advance(OpenIDService.requestLifetime + 1)
            _ = try await harness.store.sweepExpired(now: harness.clock.now)
            #expect(try await Self.pendingCount(harness) == 0)
            #expect(try await api.request(.get, path, origin: nil).headers[.location]?.hasPrefix("/#authorize=") == true)
        }
    }
}
