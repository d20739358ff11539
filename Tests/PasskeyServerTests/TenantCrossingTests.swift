import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyModels
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// Every kind of credential tenant alpha issues, taken to tenant beta's host and to the default
/// tenant's (`localhost`) on a live server (issue 44): an account session (bearer and cookie) on
/// every account route, an API key on every server API route and introspection, an OAuth client
/// and its code, access, refresh and ID tokens, a registration token, recovery codes and a
/// recovery link, mail links and codes, a console session and a bootstrap link. Each works on alpha's own host (a
/// reusable one before and after, a single-use one after the crossings, which shows they did not
/// spend it); elsewhere each is refused, the refusal names nothing of alpha's (username, account
/// id, client name) and sets no session. A passkey and a WebAuthn challenge are
/// TenantHTTPTests'. Runs on SQLite, and on PostgreSQL with `PASSKEYD_TEST_STORE=postgres`.
@Suite struct TenantCrossingTests {
    static let alpha = TenantHTTPTests.alpha, beta = TenantHTTPTests.beta
    static let originA = "http://a.localhost:8080"
    /// Where alpha's credentials are taken: beta's host and the default tenant's.
    static let elsewhere = [beta, "localhost"]
    static let someID = ConsoleAttackTests.someID

    /// Alpha's person, signed up on alpha's host.
    struct Person {
        let username: String
        let account: Account
        let token: String
        let credential: SoftwareCredential
        let authenticator: SoftwareAuthenticator
        var id: String { account.id.uuidString.lowercased() }
        /// What no answer of another tenant may hold.
        var secrets: [String] { [username, id] }
    }

    static func signUp(_ api: APIClient, _ store: any PasskeyStore, _ username: String, tenant: String, origin: String) async throws
        -> Person
    {
        var authenticator = SoftwareAuthenticator(seed: Array("\(tenant)-\(username)".utf8))
        let (token, credential, _) = try await api.signUp(username, authenticator: &authenticator, origin: origin)
        let account = try #require(try await store.scoped(to: tenant).account(username: username))
        return Person(username: username, account: account, token: token, credential: credential, authenticator: authenticator)
    }

    /// A refusal names nothing of `secrets` (body or `Location`, in any case) and sets no session.
    static func revealsNothing(_ answer: APIResponse, of secrets: [String], _ what: String) {
        let text = (String(decoding: answer.bytes, as: UTF8.self) + " " + (answer.headers[.location] ?? "")).lowercased()
        for secret in secrets where text.contains(secret.lowercased()) { Issue.record("\(what) names \(secret): \(text)") }
        for name in ["passkeyd_session=", "passkeyd_admin="] {
            if let cookie = answer.headers[.setCookie], cookie.hasPrefix(name), !cookie.hasPrefix(name + ";") {
                Issue.record("\(what) sets a session: \(cookie)")
            }
        }
    }

    static func text(_ value: JSONValue?) -> String? { ConsoleAPITests.text(value) }

    /// A form POST (`application/x-www-form-urlencoded`), with the client's Basic credentials when given.
    static func form(_ api: APIClient, _ path: String, _ fields: [String: String], client: (id: String, secret: String)? = nil)
        async throws -> APIResponse
    {
        let body = fields.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&")
        var headers: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if let client { headers[.authorization] = "Basic " + Data("\(client.id):\(client.secret)".utf8).base64EncodedString() }
        return try await api.request(.post, path, body: Array(body.utf8), origin: nil, headers: headers)
    }

    /// Every scope a tenant's key may hold (`tenants` is the default tenant's alone).
    static let scopes = ["introspect", "users:read", "users:write", "webhooks", "clients"]

    static func apiKey(_ store: any PasskeyStore, tenant: String, scopes: [String] = scopes) async throws -> String {
        try await AdminService(store: store.scoped(to: tenant)).createAPIKey(name: "\(tenant) backend", scopes: scopes, by: "test").key
    }

    // MARK: 1. Account sessions

    /// An account route: method, path, JSON body; `required`: it needs a session (the others take
    /// one if given: a bearer token that is no session there is 401, a cookie none is nobody).
    struct AccountRoute: CustomStringConvertible {
        let method: HTTPRequest.Method
        let path: String
        var body: String? = nil
        var required = true
        var description: String { "\(method) \(path)" }
    }

    /// Every route of NativeAPI.swift and EmailAPI.swift that takes the account's session, naming
    /// alpha's own passkey and second session; sign-out last.
    static func accountRoutes(passkey: String, session: String) -> [AccountRoute] {
        [
            AccountRoute(method: .get, path: "/api/auth/session"),
            AccountRoute(method: .post, path: "/api/auth/token", body: "{}"),
            AccountRoute(method: .get, path: "/api/auth/sessions"),
            AccountRoute(method: .get, path: "/api/auth/passkeys"),
            AccountRoute(method: .patch, path: "/api/auth/passkeys/\(passkey)", body: #"{"name":"renamed elsewhere"}"#),
            AccountRoute(method: .post, path: "/api/auth/passkeys/\(passkey)/prf-salt", body: "{}"),
            AccountRoute(method: .get, path: "/api/auth/email"),
            AccountRoute(method: .put, path: "/api/auth/email", body: #"{"address":"ann@alpha.example"}"#),
            AccountRoute(method: .delete, path: "/api/auth/email"),
            AccountRoute(method: .post, path: "/api/auth/recovery-codes", body: "{}"),
            AccountRoute(method: .post, path: "/api/auth/password", body: #"{"newPassword":"a long passphrase of alpha 42"}"#),
            AccountRoute(method: .delete, path: "/api/auth/password"),
            AccountRoute(method: .post, path: "/api/auth/register/options", body: "{}", required: false),
            AccountRoute(method: .post, path: "/api/auth/passkeys/remove-others", body: "{}"),
            AccountRoute(method: .delete, path: "/api/auth/sessions/\(session)"),
            AccountRoute(method: .post, path: "/api/auth/sessions/revoke-others", body: "{}"),
            AccountRoute(method: .delete, path: "/api/auth/passkeys/\(passkey)"),
            AccountRoute(method: .delete, path: "/api/auth/session"),
        ]
    }

    @Test func anAccountSessionOfOneTenantOpensNoAccountRouteOfAnother() async throws {
        try await TenantHTTPTests.server { store, client in
            let a = try client.on(Self.alpha)
            let ann = try await Self.signUp(a, store, "ann-of-alpha", tenant: "alpha", origin: Self.originA)
            // A second session of hers, for `DELETE /api/auth/sessions/{id}` to name.
            var credential = ann.credential
            let second = try await a.signIn(credential: &credential, authenticator: ann.authenticator, origin: Self.originA)
            #expect(second.status == .ok, "\(second.json)")
            let sessions = try await a.request(.get, "/api/auth/sessions", token: ann.token)
            let other = try #require(
                sessions.json["sessions"]?.array?.first { $0["current"] == .bool(false) }.flatMap { Self.text($0["id"]) },
                "\(sessions.json)")
            let passkeys = try await a.request(.get, "/api/auth/passkeys", token: ann.token)
            let passkey = try #require(Self.text(passkeys.json["passkeys"]?.array?.first?["id"]), "\(passkeys.json)")
            let routes = Self.accountRoutes(passkey: passkey, session: other)

            // Works on alpha's host, by bearer and by cookie.
            #expect(try await a.request(.get, "/api/auth/session", token: ann.token).status == .ok)
            #expect(try await a.request(.get, "/api/auth/session", cookie: "passkeyd_session=\(ann.token)").status == .ok)

            for host in Self.elsewhere {
                let api = try client.on(host)
                for route in routes {
                    let body = route.body.map { Array($0.utf8) }
                    let bearer = try await api.request(route.method, route.path, body: body, token: ann.token)
                    #expect(
                        bearer.status == .unauthorized && bearer.errorCode == "not_signed_in", "\(host) bearer \(route): \(bearer.json)")
                    Self.revealsNothing(bearer, of: ann.secrets, "\(host) bearer \(route)")
                    // The cookie, from that host's own page (its own Origin).
                    let cookie = try await api.request(route.method, route.path, body: body, cookie: "passkeyd_session=\(ann.token)")
                    if route.required {
                        #expect(
                            cookie.status == .unauthorized && cookie.errorCode == "not_signed_in", "\(host) cookie \(route): \(cookie.json)"
                        )
                    }
                    Self.revealsNothing(cookie, of: ann.secrets, "\(host) cookie \(route)")
                }
            }

            // Nothing the crossings named changed: both sessions, the passkey and its name.
            let alphaStore = store.scoped(to: "alpha")
            #expect(try await alphaStore.sessions(accountID: ann.account.id, now: Date()).count == 2)
            let kept = try await alphaStore.passkeys(accountID: ann.account.id)
            #expect(kept.count == 1 && kept.first?.name != "renamed elsewhere")
            #expect(try await alphaStore.recoveryCodesLeft(accountID: ann.account.id) == 0)

            // On alpha's host every route takes her session (a fresh connection: the one above idled).
            let own = try client.on(Self.alpha)
            for route in routes {
                let answer = try await own.request(route.method, route.path, body: route.body.map { Array($0.utf8) }, token: ann.token)
                #expect(answer.status != .unauthorized && answer.errorCode != "not_signed_in", "alpha \(route): \(answer.json)")
            }
            #expect(try await own.request(.get, "/api/auth/session", token: ann.token).status == .unauthorized, "signed out last")
        }
    }

    // MARK: 2. API keys

    /// Every route of ServerAPI.swift, naming alpha's account, passkey, session and client.
    static func serverRoutes(account: String, passkey: String, session: String, client: String) -> [AccountRoute] {
        let user = "/api/admin/users/\(account)"
        return [
            AccountRoute(method: .get, path: "/api/admin/clients"),
            AccountRoute(method: .get, path: "/api/admin/users?username=ann-of-alpha"),
            AccountRoute(method: .get, path: user),
            AccountRoute(method: .get, path: "\(user)/passkeys"),
            AccountRoute(method: .get, path: "\(user)/sessions"),
            AccountRoute(method: .get, path: "/api/admin/webhooks"),
            AccountRoute(method: .get, path: "/api/admin/webhooks/deliveries"),
            AccountRoute(
                method: .post, path: "/api/admin/clients", body: #"{"name":"made elsewhere","redirectUris":["https://x.example/cb"]}"#),
            AccountRoute(method: .post, path: "/api/admin/users", body: #"{"username":"made-elsewhere"}"#),
            AccountRoute(method: .patch, path: "\(user)/passkeys/\(passkey)", body: #"{"name":"renamed elsewhere"}"#),
            AccountRoute(method: .post, path: "\(user)/registration-token", body: "{}"),
            AccountRoute(method: .post, path: "\(user)/email-recovery", body: "{}"),
            AccountRoute(method: .post, path: "\(user)/recovery-link", body: "{}"),
            AccountRoute(method: .post, path: "/api/admin/webhooks", body: #"{"url":"https://hooks.example/in"}"#),
            AccountRoute(method: .delete, path: "/api/admin/webhooks/\(someID)"),
            AccountRoute(method: .delete, path: "\(user)/sessions/\(session)"),
            AccountRoute(method: .delete, path: "\(user)/sessions"),
            AccountRoute(method: .post, path: "\(user)/disable", body: "{}"),
            AccountRoute(method: .post, path: "\(user)/enable", body: "{}"),
            AccountRoute(method: .delete, path: "\(user)/passkeys/\(passkey)"),
            AccountRoute(method: .delete, path: "/api/admin/clients/\(client)"),
        ]
    }

    @Test func anAPIKeyOfOneTenantOpensNoServerAPIRouteOfAnother() async throws {
        try await TenantHTTPTests.server { store, client in
            let a = try client.on(Self.alpha)
            let ann = try await Self.signUp(a, store, "ann-of-alpha", tenant: "alpha", origin: Self.originA)
            let keyA = try await Self.apiKey(store, tenant: "alpha")
            let authA: HTTPFields = [.authorization: "Bearer \(keyA)"]
            let added = try await AdminService(store: store.scoped(to: "alpha")).addClient(
                name: "Alpha Shop", redirectURIs: [OpenIDTests.redirect], isPublic: false, by: "test")
            let passkeys = try await a.request(.get, "/api/admin/users/\(ann.id)/passkeys", origin: nil, headers: authA)
            #expect(passkeys.status == .ok, "\(passkeys.json)")
            let passkey = try #require(Self.text(passkeys.json["passkeys"]?.array?.first?["id"]))
            let sessions = try await a.request(.get, "/api/admin/users/\(ann.id)/sessions", origin: nil, headers: authA)
            let session = try #require(Self.text(sessions.json["sessions"]?.array?.first?["id"]), "\(sessions.json)")
            let routes = Self.serverRoutes(account: ann.id, passkey: passkey, session: session, client: added.client.id)
            let secrets = ann.secrets + ["Alpha Shop"]
            let access = try #require(
                try await a.request(.post, "/api/auth/token", body: Array("{}".utf8), token: ann.token).string("accessToken"),
                "a native access token")

            // Alpha's key reads on alpha's host, and introspects alpha's token there.
            for route in routes where route.method == .get {
                let answer = try await a.request(.get, route.path, origin: nil, headers: authA)
                #expect(answer.status == .ok, "alpha \(route): \(answer.json)")
            }
            #expect(IntegrationTests.active(try await IntegrationTests.introspect(a, access, key: keyA)) == true)

            for host in Self.elsewhere {
                let api = try client.on(host)
                for route in routes {
                    let answer = try await api.request(
                        route.method, route.path, body: route.body.map { Array($0.utf8) }, origin: nil, headers: authA)
                    #expect(answer.status == .unauthorized && answer.errorCode == "invalid_api_key", "\(host) \(route): \(answer.json)")
                    Self.revealsNothing(answer, of: secrets, "\(host) \(route)")
                }
                let introspection = try await IntegrationTests.introspect(api, access, key: keyA)
                #expect(introspection.errorCode == "invalid_api_key", "\(host): \(introspection.json)")
                Self.revealsNothing(introspection, of: secrets, "\(host) introspection")
            }

            // That host's own key (all scopes) names nothing of alpha's either: her account, her
            // username, her passkey; her access token is inactive there.
            for (host, tenant) in [(Self.beta, "beta"), ("localhost", TenantID.defaultTenant)] {
                let api = try client.on(host)
                let ownKey = try await Self.apiKey(store, tenant: tenant)
                let own: HTTPFields = [.authorization: "Bearer \(ownKey)"]
                for path in [
                    "/api/admin/users/\(ann.id)", "/api/admin/users?username=ann-of-alpha", "/api/admin/users/\(ann.id)/passkeys",
                    "/api/admin/users/\(ann.id)/sessions",
                ] {
                    let answer = try await api.request(.get, path, origin: nil, headers: own)
                    #expect(answer.errorCode == "account_not_found", "\(host) own key \(path): \(answer.json)")
                    Self.revealsNothing(answer, of: secrets, "\(host) own key \(path)")
                }
                for (method, path) in [
                    (HTTPRequest.Method.post, "/api/admin/users/\(ann.id)/disable"), (.delete, "/api/admin/users/\(ann.id)/sessions"),
                    (.delete, "/api/admin/users/\(ann.id)/passkeys/\(passkey)"), (.post, "/api/admin/users/\(ann.id)/recovery-link"),
                ] {
                    let answer = try await api.request(method, path, body: Array("{}".utf8), origin: nil, headers: own)
                    #expect(answer.errorCode == "account_not_found", "\(host) own key \(method) \(path): \(answer.json)")
                }
                let clients = try await api.request(.get, "/api/admin/clients", origin: nil, headers: own)
                Self.revealsNothing(clients, of: secrets + [added.client.id], "\(host) own key's clients")
                let removed = try await api.request(.delete, "/api/admin/clients/\(added.client.id)", origin: nil, headers: own)
                #expect(removed.status != .noContent, "\(host) removed alpha's client: \(removed.json)")
                let introspection = try await IntegrationTests.introspect(api, access, key: ownKey)
                #expect(IntegrationTests.active(introspection) == false, "\(host): \(introspection.json)")
                Self.revealsNothing(introspection, of: secrets, "\(host) own key's introspection")
            }

            // The server's tenants (`/api/admin/tenants`, the default tenant's routes alone): alpha's key is no
            // key on the default host, and a tenant's host has no such route. The default tenant's key with
            // every scope (`tenants` too) lists them on its own host, and opens nothing on a tenant's.
            let rootKey: HTTPFields = [
                .authorization: "Bearer \(try await Self.apiKey(store, tenant: TenantID.defaultTenant, scopes: AdminService.scopes))"
            ]
            let tenantRoutes = [
                AccountRoute(method: .get, path: "/api/admin/tenants"), AccountRoute(method: .get, path: "/api/admin/tenants/alpha"),
                AccountRoute(method: .post, path: "/api/admin/tenants", body: #"{"name":"gamma","hosts":["c.localhost"]}"#),
                AccountRoute(method: .patch, path: "/api/admin/tenants/beta", body: #"{"hosts":["b.localhost","evil.localhost"]}"#),
                AccountRoute(method: .delete, path: "/api/admin/tenants/beta?deleteData=true"),
            ]
            #expect(try await client.on("localhost").request(.get, "/api/admin/tenants", origin: nil, headers: rootKey).status == .ok)
            for host in [Self.alpha] + Self.elsewhere {
                let api = try client.on(host)
                for route in tenantRoutes {
                    for (name, key) in [("alpha's key", authA), ("the default tenant's key", rootKey)]
                    where host != "localhost" || key == authA {
                        let answer = try await api.request(
                            route.method, route.path, body: route.body.map { Array($0.utf8) }, origin: nil, headers: key)
                        #expect(
                            host == "localhost"
                                ? answer.status == .unauthorized && answer.errorCode == "invalid_api_key" : answer.status == .notFound,
                            "\(host) \(name) \(route): \(answer.json)")
                        Self.revealsNothing(answer, of: secrets + ["a.localhost"], "\(host) \(name) \(route)")
                    }
                }
            }
            #expect(try await store.tenantRecords().map(\.id).sorted() == ["alpha", "beta"])
            for host in [Self.alpha, Self.beta] {
                let api = try client.on(host)
                for route in routes {
                    let answer = try await api.request(
                        route.method, route.path, body: route.body.map { Array($0.utf8) }, origin: nil, headers: rootKey)
                    #expect(
                        answer.status == .unauthorized && answer.errorCode == "invalid_api_key", "\(host) root key \(route): \(answer.json)"
                    )
                    Self.revealsNothing(answer, of: secrets, "\(host) root key \(route)")
                }
            }

            // Nothing changed on alpha: her sessions, passkey, client; nothing made elsewhere.
            let alphaStore = store.scoped(to: "alpha")
            #expect(try await alphaStore.account(id: ann.account.id)?.disabled == false)
            #expect(try await alphaStore.sessions(accountID: ann.account.id, now: Date()).count == 1)
            #expect(try await alphaStore.passkeys(accountID: ann.account.id).first?.name != "renamed elsewhere")
            #expect(try await alphaStore.oauthClient(id: added.client.id) != nil)
            for tenant in ["alpha", "beta", TenantID.defaultTenant] {
                #expect(try await store.scoped(to: tenant).account(username: "made-elsewhere") == nil, "\(tenant)")
            }

            // Alpha's key on every route of alpha's host (a fresh connection).
            let own = try client.on(Self.alpha)
            for route in routes {
                let answer = try await own.request(
                    route.method, route.path, body: route.body.map { Array($0.utf8) }, origin: nil, headers: authA)
                #expect(
                    answer.status != .unauthorized && answer.errorCode != "invalid_api_key" && answer.errorCode != "insufficient_scope",
                    "alpha \(route): \(answer.json)")
            }
        }
    }

    // MARK: 3. OAuth and OpenID Connect

    @Test func anOAuthClientAndItsCodesAndTokensOfOneTenantAreNothingOnAnother() async throws {
        try await TenantHTTPTests.server { store, client in
            let a = try client.on(Self.alpha), b = try client.on(Self.beta)
            let ann = try await Self.signUp(a, store, "ann-of-alpha", tenant: "alpha", origin: Self.originA)
            let bob = try await Self.signUp(b, store, "bob-of-beta", tenant: "beta", origin: "http://b.localhost:8080")
            let secrets = ann.secrets + ["Alpha Shop"]
            func register(_ tenant: String, _ name: String) async throws -> (OAuthClient, (id: String, secret: String)) {
                let added = try await AdminService(store: store.scoped(to: tenant)).addClient(
                    name: name, redirectURIs: [OpenIDTests.redirect], postLogoutURIs: ["https://app.example.com/bye"], isPublic: false,
                    firstParty: true, by: "test")
                return (added.client, (added.client.id, added.secret ?? ""))
            }
            let (clientA, credentialsA) = try await register("alpha", "Alpha Shop")
            let (clientB, credentialsB) = try await register("beta", "Beta Shop")
            let (verifier, challenge) = OpenIDTests.pkce()
            func code(_ api: APIClient, _ client: OAuthClient, token: String?) async throws -> String? {
                OpenIDTests.parameters(try await OpenIDTests.authorize(api, client: client, challenge: challenge, token: token))["code"]
            }
            func redeem(_ code: String) -> [String: String] {
                ["grant_type": "authorization_code", "code": code, "redirect_uri": OpenIDTests.redirect, "code_verifier": verifier]
            }

            // On alpha: a code, tokens for it, the person's info; a second code kept unredeemed.
            let first = try #require(try await code(a, clientA, token: ann.token))
            let tokens = try await Self.form(a, "/oauth2/token", redeem(first), client: credentialsA)
            #expect(tokens.status == .ok, "\(tokens.json)")
            let access = try #require(tokens.string("access_token")), refresh = try #require(tokens.string("refresh_token"))
            let idToken = try #require(tokens.string("id_token"))
            #expect(try await a.request(.get, "/oauth2/userinfo", token: access, origin: nil).string("preferred_username") == ann.username)
            let unredeemed = try #require(try await code(a, clientA, token: ann.token))

            for host in Self.elsewhere {
                let api = try client.on(host)
                // Alpha's client_id asks for a code: an error page, no redirect, with or without a session there.
                for token in [nil, host == Self.beta ? bob.token : nil, ann.token] {
                    let asked = try await OpenIDTests.authorize(api, client: clientA, challenge: challenge, token: token)
                    #expect(asked.status == .badRequest && asked.headers[.location] == nil, "\(host): \(asked.status)")
                    Self.revealsNothing(asked, of: secrets, "\(host) authorize with alpha's client")
                }
                // Alpha's code, refresh token: with alpha's client (unknown there) and with that host's own.
                for grant in [redeem(unredeemed), ["grant_type": "refresh_token", "refresh_token": refresh]] {
                    let foreign = try await Self.form(api, "/oauth2/token", grant, client: credentialsA)
                    #expect(foreign.status == .unauthorized && foreign.string("error") == "invalid_client", "\(host): \(foreign.json)")
                    Self.revealsNothing(foreign, of: secrets, "\(host) token with alpha's client")
                    if host == Self.beta {
                        let local = try await Self.form(api, "/oauth2/token", grant, client: credentialsB)
                        #expect(local.status == .badRequest && local.string("error") == "invalid_grant", "\(host): \(local.json)")
                        Self.revealsNothing(local, of: secrets, "\(host) token with beta's client")
                    }
                }
                // Alpha's access token: no userinfo; inactive to that host's client and API key.
                let info = try await api.request(.get, "/oauth2/userinfo", token: access, origin: nil)
                #expect(info.status == .unauthorized, "\(host): \(info.json)")
                Self.revealsNothing(info, of: secrets, "\(host) userinfo")
                let byAlpha = try await Self.form(api, "/oauth2/introspect", ["token": access], client: credentialsA)
                #expect(byAlpha.string("error") == "invalid_client", "\(host): \(byAlpha.json)")
                let key = try await Self.apiKey(store, tenant: host == Self.beta ? "beta" : TenantID.defaultTenant, scopes: ["introspect"])
                let byKey = try await IntegrationTests.introspect(api, access, key: key)
                #expect(IntegrationTests.active(byKey) == false, "\(host): \(byKey.json)")
                Self.revealsNothing(byKey, of: secrets, "\(host) introspection by its key")
                if host == Self.beta {
                    let byBeta = try await Self.form(api, "/oauth2/introspect", ["token": access], client: credentialsB)
                    #expect(IntegrationTests.active(byBeta) == false, "\(host): \(byBeta.json)")
                    Self.revealsNothing(byBeta, of: secrets, "\(host) introspection by beta's client")
                    // Beta's client revoking alpha's refresh token: answered (RFC 7009) and nothing revoked.
                    #expect(try await Self.form(api, "/oauth2/revoke", ["token": refresh], client: credentialsB).status == .ok)
                    #expect(try await Self.form(api, "/oauth2/revoke", ["token": access], client: credentialsB).status == .ok)
                }
                // Alpha's session there gets no code for that host's client either.
                if host == Self.beta {
                    let asked = try await OpenIDTests.authorize(api, client: clientB, challenge: challenge, token: ann.token)
                    #expect(OpenIDTests.parameters(asked)["code"] == nil, "\(host): \(asked.headers[.location] ?? "")")
                    Self.revealsNothing(asked, of: secrets, "\(host) authorize with alpha's session")
                }
                // Alpha's ID token as the sign-out hint: refused, and beta's person stays signed in.
                let hint = "/oauth2/logout?id_token_hint=\(idToken)&post_logout_redirect_uri=https%3A%2F%2Fapp.example.com%2Fbye&state=z"
                let logout = try await api.request(.get, hint, token: host == Self.beta ? bob.token : ann.token, origin: nil)
                #expect(logout.status == .badRequest && logout.headers[.location] == nil, "\(host): \(logout.status)")
                Self.revealsNothing(logout, of: secrets, "\(host) logout with alpha's hint")
                let bare = try await api.request(
                    .get, "/oauth2/logout?id_token_hint=\(idToken)", cookie: "passkeyd_session=\(ann.token)", origin: nil)
                #expect(bare.status == .badRequest, "\(host): \(bare.status)")
                Self.revealsNothing(bare, of: secrets, "\(host) bare logout with alpha's hint")
            }
            #expect(try await client.on(Self.beta).request(.get, "/api/auth/session", token: bob.token).status == .ok)

            // A pending request (a third-party client waiting for her consent) is alpha's: elsewhere
            // it is no request, names no client, and approving it there makes no code.
            let thirdParty = try await AdminService(store: store.scoped(to: "alpha")).addClient(
                name: "Alpha Partner", redirectURIs: [OpenIDTests.redirect], isPublic: false, firstParty: false, by: "test"
            ).client
            let pending = try await OpenIDTests.authorize(a, client: thirdParty, challenge: challenge, token: ann.token)
            let requestID = String(try #require(pending.headers[.location]).dropFirst("/#authorize=".count))
            for host in Self.elsewhere {
                let api = try client.on(host)
                let token = host == Self.beta ? bob.token : ann.token
                let prompt = try await api.request(.get, "/oauth2/authorize/requests/\(requestID)", token: token)
                #expect(prompt.errorCode == "invalid_authorization_request", "\(host): \(prompt.json)")
                Self.revealsNothing(prompt, of: secrets + ["Alpha Partner"], "\(host) pending request")
                let approved = try await api.post("/oauth2/authorize/requests/\(requestID)", ["approve": true], token: token)
                #expect(approved.status != .ok && approved.string("redirect") == nil, "\(host): \(approved.json)")
                Self.revealsNothing(approved, of: secrets + ["Alpha Partner"], "\(host) approving the pending request")
            }
            let prompt = try await client.on(Self.alpha).request(.get, "/oauth2/authorize/requests/\(requestID)", token: ann.token)
            #expect(prompt.json["client"]?["name"] == .string("Alpha Partner"), "\(prompt.json)")

            // On alpha, all of it still works: the kept code, the refresh token, userinfo, then the hint signs her out.
            let own = try client.on(Self.alpha)
            #expect(try await Self.form(own, "/oauth2/token", redeem(unredeemed), client: credentialsA).status == .ok)
            let refreshed = try await Self.form(
                own, "/oauth2/token", ["grant_type": "refresh_token", "refresh_token": refresh], client: credentialsA)
            #expect(refreshed.status == .ok, "\(refreshed.json)")
            #expect(try await own.request(.get, "/oauth2/userinfo", token: access, origin: nil).status == .ok)
            let byClient = try await Self.form(own, "/oauth2/introspect", ["token": access], client: credentialsA)
            #expect(IntegrationTests.active(byClient) == true, "\(byClient.json)")
            let out = try await own.request(
                .get, "/oauth2/logout?id_token_hint=\(idToken)&post_logout_redirect_uri=https%3A%2F%2Fapp.example.com%2Fbye&state=z",
                token: ann.token, origin: nil)
            #expect(out.status == .found && out.headers[.location] == "https://app.example.com/bye?state=z", "\(out.status)")
            #expect(try await own.request(.get, "/api/auth/session", token: ann.token).status == .unauthorized)
        }
    }

    // MARK: 4. Registration tokens

    @Test func aRegistrationTokenOfOneTenantEnrolsNothingOnAnother() async throws {
        try await TenantHTTPTests.server { store, client in
            let a = try client.on(Self.alpha)
            let auth: HTTPFields = [.authorization: "Bearer \(try await Self.apiKey(store, tenant: "alpha"))"]
            let created = try await a.request(
                .post, "/api/admin/users", body: Array(#"{"username":"enrolee-of-alpha"}"#.utf8), origin: nil, headers: auth)
            #expect(created.status == .created, "\(created.json)")
            let id = try #require(created.string("id"))
            let issued = try await a.request(
                .post, "/api/admin/users/\(id)/registration-token", body: Array("{}".utf8), origin: nil, headers: auth)
            let token = try #require(issued.string("registrationToken"), "\(issued.json)")
            let secrets = ["enrolee-of-alpha", id]

            for host in Self.elsewhere {
                let options = try await client.on(host).post("/api/auth/register/options", ["registrationToken": token])
                #expect(options.errorCode == "invalid_registration_token", "\(host): \(options.json)")
                Self.revealsNothing(options, of: secrets, "\(host) register options")
            }

            // Not spent by those: alpha's host enrols her with it. Its ceremony answered on
            // another host (B never issued that challenge) makes no one.
            let own = try client.on(Self.alpha)
            let options = try await own.post("/api/auth/register/options", ["registrationToken": token])
            #expect(options.status == .ok, "\(options.json)")
            var device = SoftwareAuthenticator(seed: Array("enrolee".utf8))
            let (registration, _) = try device.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: Self.originA)
            for host in Self.elsewhere {
                let verify = try await client.on(host).post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
                #expect(verify.status != .ok && verify.string("token") == nil, "\(host): \(verify.json)")
                Self.revealsNothing(verify, of: secrets, "\(host) register verify")
            }
            let verify = try await own.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(verify.status == .ok && verify.json["user"]?["id"] == .string(id), "\(verify.json)")
            for tenant in ["beta", TenantID.defaultTenant] {
                #expect(try await store.scoped(to: tenant).account(username: "enrolee-of-alpha") == nil, "\(tenant)")
            }
        }
    }

    // MARK: 5. Recovery codes and links

    @Test func recoveryCodesAndLinksOfOneTenantSignInNobodyOnAnother() async throws {
        try await TenantHTTPTests.server { store, client in
            let a = try client.on(Self.alpha), b = try client.on(Self.beta)
            let ann = try await Self.signUp(a, store, "ann", tenant: "alpha", origin: Self.originA)
            // Beta has an "ann" of its own: the name is the same, the codes are not hers.
            let annB = try await Self.signUp(b, store, "ann", tenant: "beta", origin: "http://b.localhost:8080")
            let codes = try await a.request(.post, "/api/auth/recovery-codes", body: Array("{}".utf8), token: ann.token)
            let code = try #require(codes.json["codes"]?.array?.first.flatMap { Self.text($0) }, "\(codes.json)")
            let auth: HTTPFields = [.authorization: "Bearer \(try await Self.apiKey(store, tenant: "alpha"))"]
            let link = try await a.request(
                .post, "/api/admin/users/\(ann.id)/recovery-link", body: Array("{}".utf8), origin: nil, headers: auth)
            let linkToken = try #require(link.string("token"), "\(link.json)")
            #expect(link.string("url")?.hasPrefix(Self.originA) == true, "\(link.json)")

            for host in Self.elsewhere {
                let api = try client.on(host)
                let withCode = try await api.post("/api/auth/recovery/sign-in", ["username": "ann", "code": code])
                #expect(withCode.status == .unauthorized && withCode.string("token") == nil, "\(host): \(withCode.json)")
                Self.revealsNothing(withCode, of: [ann.id], "\(host) recovery code")
                let withLink = try await api.post("/api/auth/recovery/link", ["token": linkToken])
                #expect(withLink.status != .ok && withLink.string("token") == nil, "\(host): \(withLink.json)")
                #expect(withLink.errorCode == "invalid_recovery_link", "\(host): \(withLink.json)")
                Self.revealsNothing(withLink, of: ann.secrets, "\(host) recovery link")
            }
            #expect(try await store.scoped(to: "alpha").recoveryCodesLeft(accountID: ann.account.id) == 10, "none spent elsewhere")
            #expect(try await store.scoped(to: "beta").sessions(accountID: annB.account.id, now: Date()).count == 1)

            // Both still sign her in on alpha's host.
            let own = try client.on(Self.alpha)
            let byCode = try await own.post("/api/auth/recovery/sign-in", ["username": "ann", "code": code])
            #expect(byCode.status == .ok && byCode.json["user"]?["id"] == .string(ann.id), "\(byCode.json)")
            let byLink = try await own.post("/api/auth/recovery/link", ["token": linkToken])
            #expect(byLink.status == .ok && byLink.json["user"]?["id"] == .string(ann.id), "\(byLink.json)")
        }
    }

    // MARK: 5b. Mail: verification, recovery and "this wasn't me" links and codes

    /// The mails the SMTP server got for `address`, the plain-text part decoded: waits for
    /// `count` of them (the dispatcher sends every tenant's mail; at most 20 s).
    static func mails(_ smtp: SMTPTestServer, to address: String, count: Int) async throws -> [(from: String, text: String)] {
        func read() -> [(from: String, text: String)] {
            smtp.received().filter { $0.recipients.contains(address) }.map { ($0.mailFrom, $0.plainText) }
        }
        for _ in 0..<200 where read().count < count { try await Task.sleep(for: .milliseconds(100)) }
        return read()
    }

    /// The token of a mail's `#action=` link.
    static func token(_ text: String, _ action: String) -> String? {
        guard let range = text.range(of: "#\(action)=") else { return nil }
        return String(text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
    }

    /// A mail's six-digit code.
    static func code(_ text: String) -> String? {
        text.components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.first {
            $0.count == 6 && $0.allSatisfy(\.isNumber)
        }
    }

    @Test func mailLinksAndCodesOfOneTenantOpenNothingOnAnother() async throws {
        guard let smtp = try SMTPTestServer.start(["--no-starttls"]) else {
            if EmailTests.required { Issue.record("no Python with aiosmtpd (PASSKEYD_PYTHON): ./scripts/test installs it") }
            return
        }
        defer { smtp.close() }
        let mail = [
            "PASSKEYD_SMTP_URL": "smtp://127.0.0.1:\(smtp.smtpPort)", "PASSKEYD_EMAIL_FROM": "Default <no-reply@localhost.example>",
        ]
        let senders = [
            "alpha": #""email":{"from":"Alpha <no-reply@a.example>"}"#, "beta": #""email":{"from":"Beta <no-reply@b.example>"}"#,
        ]
        try await TenantHTTPTests.server(extraSettings: mail, tenantSettings: senders) { store, client in
            let a = try client.on(Self.alpha), b = try client.on(Self.beta)
            let ann = try await Self.signUp(a, store, "ann", tenant: "alpha", origin: Self.originA)
            // Beta's own "ann", without an address.
            _ = try await Self.signUp(b, store, "ann", tenant: "beta", origin: "http://b.localhost:8080")
            let address = "ann@alpha.example"
            let secrets = ann.secrets.filter { $0 != "ann" } + [address]
            let set = try await a.request(.put, "/api/auth/email", body: Array(#"{"address":"\#(address)"}"#.utf8), token: ann.token)
            #expect(set.status == .accepted, "\(set.json)")
            let verification = try #require(try await Self.mails(smtp, to: address, count: 1).first)
            #expect(verification.from == "no-reply@a.example")
            let verifyLink = try #require(Self.token(verification.text, "verify-email"))
            let verifyCode = try #require(Self.code(verification.text))

            for host in Self.elsewhere {
                let api = try client.on(host)
                for body in [["token": verifyLink], ["code": verifyCode], ["code": verifyCode, "identifier": "ann"]] {
                    let answer = try await api.post("/api/auth/email/verify", body)
                    #expect(answer.status != .ok && answer.errorCode != nil, "\(host) verify \(body): \(answer.json)")
                    Self.revealsNothing(answer, of: secrets, "\(host) verify \(body)")
                }
                let withSession = try await api.post("/api/auth/email/verify", ["code": verifyCode], token: ann.token)
                #expect(withSession.status != .ok, "\(host): \(withSession.json)")
                Self.revealsNothing(withSession, of: secrets, "\(host) verify with her session")
            }
            #expect(try await store.scoped(to: "alpha").accountEmail(accountID: ann.account.id)?.verified == false)
            // Her link verifies her address on alpha's host (not spent above).
            let own = try client.on(Self.alpha)
            let verified = try await own.post("/api/auth/email/verify", ["token": verifyLink])
            #expect(verified.status == .ok, "\(verified.json)")

            // Recovery by mail, asked elsewhere with her address: the same answer as anyone's, no mail.
            for host in Self.elsewhere {
                let asked = try await client.on(host).post("/api/auth/recovery/email", ["identifier": address])
                #expect(asked.status == .accepted, "\(host): \(asked.json)")
            }
            #expect(try await own.post("/api/auth/recovery/email", ["identifier": address]).status == .accepted)
            let recovery = try #require(
                try await Self.mails(smtp, to: address, count: 2).last { Self.token($0.text, "email-recover") != nil })
            let recoverLink = try #require(Self.token(recovery.text, "email-recover"))
            let recoverCode = try #require(Self.code(recovery.text))
            for host in Self.elsewhere {
                let api = try client.on(host)
                for body in [
                    ["token": recoverLink], ["identifier": address, "code": recoverCode], ["identifier": "ann", "code": recoverCode],
                ] {
                    let options = try await api.post("/api/auth/recovery/email/options", body)
                    #expect(options.status != .ok && options.errorCode != nil, "\(host) recovery \(body): \(options.json)")
                    Self.revealsNothing(options, of: secrets, "\(host) recovery \(body)")
                }
            }

            // On alpha's host the link recovers her (a new passkey), and the notice's "this wasn't me" link…
            let options = try await client.on(Self.alpha).post("/api/auth/recovery/email/options", ["token": recoverLink])
            #expect(options.status == .ok, "\(options.json)")
            var laptop = SoftwareAuthenticator(seed: Array("ann-laptop".utf8))
            let (registration, _) = try laptop.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: Self.originA)
            let recovered = try await client.on(Self.alpha).post(
                "/api/auth/recovery/email/verify", APIClient.CredentialBody(credential: registration))
            #expect(recovered.status == .ok && recovered.json["user"]?["id"] == .string(ann.id), "\(recovered.json)")
            let notice = try #require(try await Self.mails(smtp, to: address, count: 3).last { Self.token($0.text, "undo") != nil })
            let undo = try #require(Self.token(notice.text, "undo"))
            // …is nothing elsewhere…
            for host in Self.elsewhere {
                let answer = try await client.on(host).post("/api/auth/email/undo", ["token": undo])
                #expect(answer.errorCode == "invalid_email_link", "\(host) undo: \(answer.json)")
                Self.revealsNothing(answer, of: secrets, "\(host) undo")
            }
            // …and undoes the recovery on hers.
            let undone = try await client.on(Self.alpha).post("/api/auth/email/undo", ["token": undo])
            #expect(undone.status == .ok, "\(undone.json)")

            // Every recovery link she got came from alpha.
            for mail in try await Self.mails(smtp, to: address, count: 3) where Self.token(mail.text, "email-recover") != nil {
                #expect(mail.from == "no-reply@a.example", "\(mail.from)")
            }
        }
    }

    // MARK: 6. The console

    @Test func aConsoleSessionAndBootstrapLinkOfOneTenantOpenNoOtherConsole() async throws {
        try await TenantHTTPTests.server { store, client in
            let alphaService = try PasskeyService(configuration: ServerConfiguration(), store: store.scoped(to: "alpha"))
            let bootstrap = try #require(try await ConsoleService(service: alphaService).issueBootstrapToken(by: "test")).token

            for host in Self.elsewhere {
                let options = try await client.on(host).post("/admin/api/bootstrap/options", ["token": bootstrap, "username": "root"])
                #expect(options.status == .badRequest && options.errorCode == "bootstrap_invalid", "\(host): \(options.json)")
            }

            // Not spent by those: alpha's first administrator is made with it.
            let a = try client.on(Self.alpha)
            var device = SoftwareAuthenticator(seed: Array("alpha-root".utf8))
            let options = try await a.post("/admin/api/bootstrap/options", ["token": bootstrap, "username": "root-of-alpha"])
            #expect(options.status == .ok, "\(options.json)")
            let (registration, _) = try device.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: Self.originA)
            let made = try await a.post(
                "/admin/api/bootstrap/verify", ConsoleAttackTests.BootstrapVerify(token: bootstrap, credential: registration))
            #expect(made.status == .ok, "\(made.json)")
            let cookie = try #require(APIClient.consoleCookie(made)), csrf = try #require(made.string("csrfToken"))
            let root = try #require(try await store.scoped(to: "alpha").account(username: "root-of-alpha"))
            let rootID = root.id.uuidString.lowercased()
            let secrets = ["root-of-alpha", rootID]
            let paths =
                ConsoleAttackTests.paths + [
                    "accounts/\(rootID)", "accounts?q=root", "accounts/\(rootID)/recovery-link", "tenants", "tenants/alpha", "tenants/beta",
                ]
            #expect(try await a.request(.get, "/admin/api/session", cookie: cookie, origin: nil).status == .ok)

            for host in Self.elsewhere {
                let api = try client.on(host)
                for path in paths {
                    for method in [HTTPRequest.Method.get, .post, .patch, .delete] {
                        if method == .post && ConsoleAttackTests.open.contains(String(path.prefix { $0 != "?" })) { continue }
                        let answer = try await api.request(
                            method, "/admin/api/" + path, body: method == .get ? nil : Array("{}".utf8), cookie: cookie,
                            headers: [.consoleCSRF: csrf])
                        #expect(
                            answer.status == .forbidden && answer.errorCode == "admin_required", "\(host) \(method) \(path): \(answer.json)"
                        )
                        Self.revealsNothing(answer, of: secrets, "\(host) \(method) \(path)")
                    }
                }
                // Its token is no account session there either.
                let token = String(cookie.dropFirst("passkeyd_admin=".count))
                #expect(try await api.request(.get, "/api/auth/session", token: token).status == .unauthorized)
            }

            // The default tenant's server operator (who manages tenants there) opens no tenant's console.
            let home = try client.on("localhost")
            var device0 = SoftwareAuthenticator(seed: Array("default-operator".utf8))
            let (opToken, opCredential, _) = try await home.signUp("operator", authenticator: &device0)
            let opAccount = try #require(try await store.account(username: "operator"))
            try await AdminService(store: store).grantRole(.serverOperator, to: opAccount, by: "test")
            var op = ConsoleAdmin(account: opAccount, accountToken: opToken, authenticator: device0, credential: opCredential)
            #expect(try await home.consoleSignIn(&op).status == .ok)
            #expect(try await home.request(.get, "/admin/api/tenants", cookie: op.cookie, origin: nil).status == .ok)
            for host in [Self.alpha, Self.beta] {
                let api = try client.on(host)
                for path in paths {
                    for method in [HTTPRequest.Method.get, .post, .patch, .delete] {
                        if method == .post && ConsoleAttackTests.open.contains(String(path.prefix { $0 != "?" })) { continue }
                        let answer = try await api.request(
                            method, "/admin/api/" + path, body: method == .get ? nil : Array("{}".utf8), cookie: op.cookie,
                            headers: [.consoleCSRF: op.csrf])
                        #expect(
                            answer.status == .forbidden && answer.errorCode == "admin_required",
                            "\(host) operator \(method) \(path): \(answer.json)")
                    }
                }
            }
            #expect(try await store.tenantRecords().map(\.id).sorted() == ["alpha", "beta"])

            // On alpha's host the cookie opens every route (whatever each then says), and signs out last.
            let own = try client.on(Self.alpha)
            for path in paths {
                for method in [HTTPRequest.Method.get, .post, .patch, .delete] {
                    if path == "session" && method == .delete { continue }
                    if method == .post && ConsoleAttackTests.open.contains(String(path.prefix { $0 != "?" })) { continue }
                    let answer = try await own.request(
                        method, "/admin/api/" + path, body: method == .get ? nil : Array("{}".utf8), cookie: cookie,
                        headers: [.consoleCSRF: csrf])
                    #expect(answer.errorCode != "admin_required", "alpha \(method) \(path): \(answer.json)")
                }
            }
            #expect(try await own.request(.get, "/admin/api/accounts/\(rootID)", cookie: cookie, origin: nil).status == .ok)
            #expect(
                try await own.request(.delete, "/admin/api/session", cookie: cookie, headers: [.consoleCSRF: csrf]).status == .noContent)
        }
    }
}
