import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

/// The console as a target (issue 36, "Bad input and attacks"): one answer for every route
/// without a console session whatever else the request carries, the console's cookie useless
/// elsewhere, sign-in with an administrator's passkey and UV only, the Origin, CSRF and step-up
/// checks on every change, idle expiry and sign-out, and the single-use bootstrap link (raced
/// on PostgreSQL too). Runs on SQLite, and on PostgreSQL with `PASSKEYD_TEST_STORE=postgres`.
@Suite struct ConsoleAttackTests {
    static let someID = "3f2a1b4c-5d6e-4f70-8a9b-0c1d2e3f4a5b"

    /// Every path of ConsoleAPI.swift (ids filled in), and paths it does not have.
    static let paths = [
        "session", "session/options", "session/verify", "step-up/options", "step-up/verify", "bootstrap/options", "bootstrap/verify",
        "overview", "adoption", "adoption?days=7", "adoption.csv", "accounts", "accounts?q=a", "accounts/\(someID)",
        "audit", "audit.csv", "integrations", "policy", "admins", "accounts/\(someID)/disable", "accounts/\(someID)/enable",
        "accounts/\(someID)/revoke-sessions", "accounts/\(someID)/passkeys/AAAA", "accounts/\(someID)/recovery-link",
        "admins/\(someID)", "clients", "clients/pkc_x/rotate-secret", "clients/pkc_x", "api-keys", "api-keys/\(someID)", "webhooks",
        "webhooks/\(someID)/pause", "webhooks/\(someID)/resume", "webhooks/\(someID)/rotate-secret", "webhooks/\(someID)",
        "webhooks/\(someID)/deliveries/evt_1/retry", "signing-keys/rotate", "signing-keys", "nope", "accounts/\(someID)/nope",
        "admins/\(someID)/nope/deeper",
    ]
    /// The routes that answer without a console session (signing in, the bootstrap).
    static let open: Set<String> = ["session/options", "session/verify", "bootstrap/options", "bootstrap/verify"]

    // MARK: The gate

    @Test func withoutAConsoleSessionEveryRouteAnswersAdminRequiredWhateverElseIsSent() async throws {
        let harness = try await ConsoleAPITests.harness()
        try await harness.run { api in
            let user = try await api.consoleAccount(harness, "root", role: .admin)
            let key = try await IntegrationTests.apiKey(harness, scopes: AdminService.scopes)
            let credentials: [(String, HTTPFields)] = [
                ("nothing", [:]),
                ("account cookie", [.cookie: "passkeyd_session=\(user.accountToken)"]),
                ("account bearer", [.authorization: "Bearer \(user.accountToken)"]),
                ("API key", [.authorization: "Bearer \(key)"]),
                ("account token as console cookie", [.cookie: "passkeyd_admin=\(user.accountToken)"]),
                ("forged console cookie", [.cookie: "passkeyd_admin=\(Base64URLBytes(RelyingParty.randomBytes(32)).base64URL)"]),
                ("all of them", [.cookie: "passkeyd_session=\(user.accountToken)", .authorization: "Bearer \(key)"]),
            ]
            var answers: Set<String> = []
            for (name, headers) in credentials {
                for path in Self.paths {
                    for method in [HTTPRequest.Method.get, .post, .delete] {
                        let bare = String(path.prefix { $0 != "?" })
                        if method == .post && Self.open.contains(bare) { continue }
                        let body: [UInt8]? = method == .get ? nil : Array("{}".utf8)
                        let answer = try await api.request(method, "/admin/api/" + path, body: body, headers: headers)
                        #expect(
                            answer.status == .forbidden && answer.errorCode == "admin_required",
                            "\(name): \(method) \(path) → \(answer.status)")
                        answers.insert(String(decoding: answer.bytes, as: UTF8.self))
                    }
                }
            }
            #expect(answers.count == 1, "the same answer for every route")
            // Nothing the requests named was touched.
            #expect(try await harness.store.adminRole(accountID: user.account.id) == .admin)
            #expect(try await harness.store.sessions(accountID: user.account.id, now: harness.clock.now).count == 1)
        }
    }

    @Test func theConsoleCookieOpensNothingElse() async throws {
        let harness = try await ConsoleAPITests.harness()
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let token = String(root.cookie.dropFirst("passkeyd_admin=".count))
            // The account API: the console cookie, its token as the account cookie or a Bearer token.
            for headers: HTTPFields in [
                [.cookie: root.cookie], [.cookie: "passkeyd_session=\(token)"], [.authorization: "Bearer \(token)"],
            ] {
                let session = try await api.request(.get, "/api/auth/session", origin: nil, headers: headers)
                #expect(session.status == .unauthorized && session.errorCode == "not_signed_in")
                let passkeys = try await api.request(.get, "/api/auth/passkeys", origin: nil, headers: headers)
                #expect(passkeys.status == .unauthorized)
            }
            // The server API.
            for headers: HTTPFields in [[.cookie: root.cookie], [.authorization: "Bearer \(token)"]] {
                let users = try await api.request(.get, "/api/admin/users?username=root", origin: nil, headers: headers)
                #expect(users.status == .unauthorized && users.errorCode == "invalid_api_key")
            }
            // The console still answers the cookie.
            #expect(try await api.consoleGet("session", root).status == .ok)
        }
    }

    @Test func overHTTPSTheCookieIsHostOnlyAndSecure() async throws {
        let origin = "https://console.example"
        let harness = try await ServerHarness {
            $0.rpID = "console.example"
            $0.webOrigins = [origin]
            $0.cookieSecure = true
        }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("root".utf8))
            var (_, credential, _) = try await api.signUp("root", authenticator: &authenticator, origin: origin, requestOrigin: origin)
            let account = try #require(try await harness.store.account(username: "root"))
            try await AdminService(store: harness.store, now: { harness.clock.now }).grantRole(.admin, to: account, by: "test")
            let options = try await api.post("/admin/api/session/options", [String: String](), origin: origin)
            let assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: origin, credential: &credential)
            let verify = try await api.post("/admin/api/session/verify", APIClient.CredentialBody(credential: assertion), origin: origin)
            #expect(verify.status == .ok)
            let cookie = try #require(verify.headers[.setCookie])
            #expect(cookie.hasPrefix("__Host-passkeyd_admin=") && cookie.contains("; Secure") && cookie.contains("Path=/"), "\(cookie)")
            #expect(!cookie.contains("Domain="))
            let pair = String(cookie.prefix { $0 != ";" })
            let token = String(pair.dropFirst("__Host-passkeyd_admin=".count))
            #expect(try await api.request(.get, "/admin/api/session", cookie: pair, origin: nil).status == .ok)
            // The plain-http name is not read over https.
            let plain = try await api.request(.get, "/admin/api/session", cookie: "passkeyd_admin=\(token)", origin: nil)
            #expect(plain.status == .forbidden && plain.errorCode == "admin_required")
            // A foreign Origin cannot start a console sign-in (no login CSRF).
            let forged = try await api.post("/admin/api/session/options", [String: String](), origin: "https://evil.example")
            #expect(forged.status == .forbidden && forged.errorCode == "csrf_origin_mismatch")
        }
    }

    // MARK: Signing in

    @Test func onlyAnAdministratorsVerifiedPasskeyOpensTheConsoleAndNoAccountSession() async throws {
        let harness = try await ConsoleAPITests.harness()
        try await harness.run { api in
            var mallory = try await api.consoleAccount(harness, "mallory")
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            func sessionCount(_ user: ConsoleAdmin) async throws -> Int {
                try await harness.store.sessions(accountID: user.account.id, now: harness.clock.now).count
            }

            // A valid passkey of an account without a role: refused like no session, and audited.
            let refused = try await api.consoleSignIn(&mallory)
            #expect(refused.status == .forbidden && refused.errorCode == "admin_required")
            #expect(refused.headers[.setCookie] == nil)
            let lines = try await harness.store.auditEvents(accountID: mallory.account.id, limit: 20).map(\.kind)
            #expect(lines.contains("admin_console_refused"))
            #expect(try await sessionCount(mallory) == 1)

            // Without user verification: refused, no cookie.
            let unverified = try await api.consoleSignIn(&root, userVerified: false)
            #expect(unverified.status == .unauthorized && unverified.errorCode == "user_not_verified", "\(unverified.status)")
            #expect(unverified.headers[.setCookie] == nil)

            // An account sign-in's challenge does not finish a console sign-in.
            let accountOptions = try await api.post("/api/auth/authenticate/options", [String: String]())
            let crossed = try root.authenticator.authenticate(
                options: try accountOptions.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                credential: &root.credential)
            let mixed = try await api.post("/admin/api/session/verify", APIClient.CredentialBody(credential: crossed))
            #expect(mixed.status != .ok && mixed.headers[.setCookie] == nil, "\(mixed.status)")
            // Nor does the console's challenge finish an account sign-in.
            let consoleOptions = try await api.post("/admin/api/session/options", [String: String]())
            #expect(consoleOptions.json["userVerification"] == .string("required"))
            let other = try root.authenticator.authenticate(
                options: try consoleOptions.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                credential: &root.credential)
            let reverse = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: other))
            #expect(reverse.status != .ok && reverse.string("token") == nil, "\(reverse.status)")

            // The administrator's verified passkey: a console session, and no account session.
            let before = try await sessionCount(root)
            let signedIn = try await api.consoleSignIn(&root)
            #expect(signedIn.status == .ok)
            #expect(signedIn.json["admin"]?["username"] == .string("root") && signedIn.json["admin"]?["role"] == .string("admin"))
            #expect(signedIn.json["idleTimeout"] == .number(900) && signedIn.string("stepUpUntil") != nil)
            let cookie = try #require(signedIn.headers[.setCookie])
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/"))
            #expect(signedIn.string("token") == nil)
            #expect(try await sessionCount(root) == before)
            let session = try await api.consoleGet("session", root)
            #expect(session.status == .ok && session.string("csrfToken") == root.csrf)
            let kinds = try await harness.store.auditEvents(accountID: root.account.id, limit: 20).map(\.kind)
            #expect(kinds.contains("admin_console_sign_in"))
        }
    }

    // MARK: Changes: Origin, CSRF, step-up

    @Test func everyChangeNeedsTheOriginTheCSRFTokenAndARecentPasskey() async throws {
        let harness = try await ConsoleAPITests.harness()
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            var bob = try await api.consoleAccount(harness, "bob")
            let target = try await api.consoleAccount(harness, "tess")
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let path = "accounts/\(ConsoleAPITests.id(target.account))/disable"
            func disabled() async throws -> Bool { try await harness.store.account(id: target.account.id)?.disabled ?? true }

            let noOrigin = try await api.consoleChange(.post, path, root, origin: nil)
            #expect(noOrigin.status == .forbidden && noOrigin.errorCode == "csrf_origin_mismatch")
            let foreign = try await api.consoleChange(.post, path, root, origin: "https://evil.example")
            #expect(foreign.status == .forbidden && foreign.errorCode == "csrf_origin_mismatch")
            let null = try await api.consoleChange(.post, path, root, origin: "null")
            #expect(null.status == .forbidden && null.errorCode == "csrf_origin_mismatch")
            let noToken = try await api.consoleChange(.post, path, root, omitCSRF: true)
            #expect(noToken.status == .forbidden && noToken.errorCode == "csrf_token_invalid")
            for wrong in ["", "x", String(root.csrf.dropLast()) + (root.csrf.hasSuffix("A") ? "B" : "A"), root.csrf + root.csrf] {
                let refused = try await api.consoleChange(.post, path, root, csrf: wrong)
                #expect(refused.status == .forbidden && refused.errorCode == "csrf_token_invalid", "\(wrong)")
            }
            // Another session's token does not fit this one.
            var second = root
            #expect(try await api.consoleSignIn(&second).status == .ok)
            root.credential = second.credential
            #expect(second.csrf != root.csrf)
            #expect(try await api.consoleChange(.post, path, root, csrf: second.csrf).errorCode == "csrf_token_invalid")
            #expect(try await disabled() == false)

            // Past the step-up window: a passkey again.
            let window = Double(harness.service.configuration.console.stepUpWindow.components.seconds)
            harness.clock.advance(window + 1)
            let stale = try await api.consoleChange(.post, path, root)
            #expect(stale.status == .forbidden && stale.errorCode == "reauthentication_required")
            #expect(try await disabled() == false)

            // The step-up lists the administrator's own passkeys; another account's is refused.
            let options = try await api.request(.post, "/admin/api/step-up/options", body: Array("{}".utf8), cookie: root.cookie)
            #expect(options.status == .ok)
            let request = try options.decode(PublicKeyCredentialRequestOptionsJSON.self)
            #expect(request.allowCredentials.map(\.id.bytes) == [root.credential.id])
            let foreignAssertion = try bob.authenticator.authenticate(
                options: request, origin: ServerHarness.origin, credential: &bob.credential)
            let byBob = try await api.request(
                .post, "/admin/api/step-up/verify",
                body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: foreignAssertion))), cookie: root.cookie)
            #expect(byBob.status == .unauthorized && byBob.errorCode == "credential_not_allowed", "\(byBob.status)")
            #expect(try await api.consoleChange(.post, path, root).errorCode == "reauthentication_required")

            // Without user verification: refused.
            let again = try await api.request(.post, "/admin/api/step-up/options", body: Array("{}".utf8), cookie: root.cookie)
            var lax = root.authenticator
            lax.userVerified = false
            let unverified = try lax.authenticate(
                options: try again.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                credential: &root.credential)
            let noUV = try await api.request(
                .post, "/admin/api/step-up/verify", body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: unverified))),
                cookie: root.cookie)
            #expect(noUV.status == .unauthorized && noUV.errorCode == "user_not_verified", "\(noUV.status)")

            // The administrator's own passkey: a new CSRF token; the old one is refused.
            let third = try await api.request(.post, "/admin/api/step-up/options", body: Array("{}".utf8), cookie: root.cookie)
            let assertion = try root.authenticator.authenticate(
                options: try third.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                credential: &root.credential)
            let steppedUp = try await api.request(
                .post, "/admin/api/step-up/verify", body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: assertion))),
                cookie: root.cookie)
            #expect(steppedUp.status == .ok)
            let newToken = try #require(steppedUp.string("csrfToken"))
            #expect(newToken != root.csrf && steppedUp.string("stepUpUntil") != nil)
            let old = try await api.consoleChange(.post, path, root)
            #expect(old.status == .forbidden && old.errorCode == "csrf_token_invalid")
            #expect(try await disabled() == false)
            root.csrf = newToken
            #expect(try await api.consoleGet("session", root).string("csrfToken") == newToken)
            #expect(try await api.consoleChange(.post, path, root).status == .ok)
            #expect(try await disabled() == true)
            let steps = try await harness.store.auditEvents(accountID: root.account.id, limit: 50).filter {
                $0.kind == "admin_console_step_up"
            }
            #expect(steps.count == 1)
        }
    }

    @Test func aConsoleSessionEndsWhenIdleAndAtSignOut() async throws {
        let harness = try await ConsoleAPITests.harness()
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let idle = Double(harness.service.configuration.console.idleTimeout.components.seconds)
            // Use keeps it alive…
            for _ in 0..<3 {
                harness.clock.advance(idle - 60)
                #expect(try await api.consoleGet("session", root).status == .ok)
            }
            // …until a request comes too late.
            harness.clock.advance(idle + 1)
            let expired = try await api.consoleGet("overview", root)
            #expect(expired.status == .forbidden && expired.errorCode == "admin_required")
            #expect(try await api.consoleGet("session", root).errorCode == "admin_required")

            // Sign-out clears the cookie and ends the session.
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let out = try await api.request(.delete, "/admin/api/session", cookie: root.cookie)
            #expect(out.status == .noContent)
            #expect(
                out.headers[.setCookie]?.hasPrefix("passkeyd_admin=;") == true && out.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await api.consoleGet("session", root).errorCode == "admin_required")
            #expect(
                try await harness.store.auditEvents(accountID: root.account.id, limit: 50).contains { $0.kind == "admin_console_sign_out" })

            // The absolute lifetime holds however busy the session is.
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let lifetime = Double(harness.service.configuration.console.sessionLifetime.components.seconds)
            var elapsed = 0.0
            while elapsed + idle - 60 < lifetime {
                harness.clock.advance(idle - 60)
                elapsed += idle - 60
                #expect(try await api.consoleGet("session", root).status == .ok)
            }
            harness.clock.advance(lifetime - elapsed + 1)
            #expect(try await api.consoleGet("session", root).errorCode == "admin_required")

            // Losing the role or the account being disabled ends it too.
            #expect(try await api.consoleSignIn(&root).status == .ok)
            var other = try await api.consoleAccount(harness, "ola", role: .admin)
            #expect(try await api.consoleSignIn(&other).status == .ok)
            try await AdminService(store: harness.store, now: { harness.clock.now }).revokeRole(of: other.account, by: "test")
            #expect(try await api.consoleGet("session", other).errorCode == "admin_required")
            #expect(try await api.consoleGet("session", root).status == .ok)
        }
    }

    // MARK: Bootstrap

    /// The bootstrap ceremony for `username` with `token`: options, then the authenticator's answer.
    static func bootstrapRegistration(
        _ api: APIClient, token: String, username: String, authenticator: inout SoftwareAuthenticator
    ) async throws -> (options: APIResponse, registration: RegistrationResponseJSON?) {
        let options = try await api.post("/admin/api/bootstrap/options", ["token": token, "username": username])
        guard options.status == .ok else { return (options, nil) }
        let (registration, _) = try authenticator.register(
            options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
        return (options, registration)
    }

    struct BootstrapVerify: Encodable {
        let token: String
        let credential: RegistrationResponseJSON
    }

    @Test func theBootstrapLinkMakesOneAdministratorOnce() async throws {
        let harness = try await ConsoleAPITests.harness()
        let console = ConsoleService(service: harness.service)
        let issued = try #require(try await console.issueBootstrapToken(by: "test"))
        #expect(issued.token.hasPrefix("pkb_"))
        #expect(console.bootstrapLink(issued.token) == ServerHarness.origin + "/admin/#bootstrap=" + issued.token)
        try await harness.run { api in
            // Not a token: refused.
            for bad in [
                "", "pkb_", "pkb_short", "pkd_" + issued.token.dropFirst(4), issued.token + "A", "pkb_" + String(repeating: "A", count: 43),
            ] {
                let refused = try await api.post("/admin/api/bootstrap/options", ["token": bad, "username": "x"])
                #expect(refused.status == .badRequest && refused.errorCode == "bootstrap_invalid", "\(bad)")
            }
            var authenticator = SoftwareAuthenticator(seed: Array("root".utf8))
            let (options, registration) = try await Self.bootstrapRegistration(
                api, token: issued.token, username: "root", authenticator: &authenticator)
            #expect(options.status == .ok)
            let made = try #require(registration)
            let verify = try await api.post("/admin/api/bootstrap/verify", BootstrapVerify(token: issued.token, credential: made))
            #expect(verify.status == .ok, "\(String(decoding: verify.bytes, as: UTF8.self))")
            #expect(verify.json["admin"]?["role"] == .string("admin") && verify.json["admin"]?["username"] == .string("root"))
            let cookie = try #require(APIClient.consoleCookie(verify))
            let account = try #require(try await harness.store.account(username: "root"))
            #expect(try await harness.store.adminRole(accountID: account.id) == .admin)
            #expect(try await harness.store.sessions(accountID: account.id, now: harness.clock.now).isEmpty, "no account session")
            #expect(try await api.request(.get, "/admin/api/session", cookie: cookie, origin: nil).status == .ok)
            let lines = try await harness.store.auditEvents(accountID: account.id, limit: 20).map(\.kind)
            #expect(lines.contains("admin_bootstrap_used"))

            // The same token again: refused, at both steps, and nothing is made.
            let again = try await api.post("/admin/api/bootstrap/options", ["token": issued.token, "username": "eve"])
            #expect(again.status == .badRequest && again.errorCode == "bootstrap_invalid")
            let replay = try await api.post("/admin/api/bootstrap/verify", BootstrapVerify(token: issued.token, credential: made))
            #expect(replay.status == .badRequest && replay.errorCode == "bootstrap_invalid")
            #expect(try await harness.store.adminCount() == 1)
            #expect(try await harness.store.account(username: "eve") == nil)
            // With an administrator, no new link.
            #expect(try await console.issueBootstrapToken(by: "test") == nil)
        }
    }

    @Test func issuingABootstrapLinkIsAuditedWithoutItsToken() async throws {
        let harness = try await ConsoleAPITests.harness()
        let console = ConsoleService(service: harness.service)
        // `passkeyd admin bootstrap-link` issues through the service under the operator's name.
        let token = try #require(try await console.issueBootstrapToken(by: "passkeyd admin (ops)")).token
        @Sendable func issued() async throws -> [AuditEvent] {
            try await harness.store.auditEvents(accountID: nil, limit: 100).filter { $0.kind == "admin_bootstrap_issued" }
        }
        #expect(try await issued().compactMap(\.userAgent) == ["passkeyd admin (ops)"])
        try await harness.run { api in
            // The server's start, with no administrator yet, printed another link: audited too.
            let lines = try await issued()
            #expect(lines.compactMap(\.userAgent).sorted() == ["passkeyd admin (ops)", "passkeyd serve"])
            for line in lines {
                #expect(line.accountID == nil && line.credentialID == nil && line.detail == "expires in 3600s" && line.metric == nil)
            }
            var authenticator = SoftwareAuthenticator(seed: Array("root".utf8))
            let options = try await api.post("/admin/api/bootstrap/options", ["token": token, "username": "root"])
            let (registration, credential) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let verify = try await api.post("/admin/api/bootstrap/verify", BootstrapVerify(token: token, credential: registration))
            #expect(verify.status == .ok)
            // No line holds the token, nor its random part.
            for line in try await harness.store.auditEvents(accountID: nil, limit: 100) {
                let text = [line.kind, line.userAgent, line.detail, line.ipAddress].compactMap { $0 }.joined(separator: " ")
                #expect(!text.contains(token.dropFirst(4)), "\(line.kind)")
            }
            // With an administrator no link is issued, and nothing is written.
            #expect(try await console.issueBootstrapToken(by: "passkeyd admin (ops)") == nil)
            #expect(try await issued().count == 2)
            // The console's audit search knows the kind.
            var root = ConsoleAdmin(
                account: try #require(try await harness.store.account(username: "root")), accountToken: "",
                authenticator: authenticator, credential: credential)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let search = try await api.consoleGet("audit?kind=admin_bootstrap_issued", root)
            #expect(search.status == .ok && ConsoleAPITests.array(search.json["events"]).count == 2)
        }
    }

    @Test func anExpiredBootstrapLinkIsRefusedAndMakesNoAccount() async throws {
        let harness = try await ConsoleAPITests.harness()
        let console = ConsoleService(service: harness.service)
        let issued = try #require(try await console.issueBootstrapToken(by: "test"))
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (options, registration) = try await Self.bootstrapRegistration(
                api, token: issued.token, username: "late", authenticator: &authenticator)
            #expect(options.status == .ok)
            harness.clock.advance(Double(harness.service.configuration.console.bootstrapLifetime.components.seconds) + 1)
            let verify = try await api.post(
                "/admin/api/bootstrap/verify", BootstrapVerify(token: issued.token, credential: try #require(registration)))
            #expect(verify.status == .badRequest && verify.errorCode == "bootstrap_invalid")
            #expect(
                try await api.post("/admin/api/bootstrap/options", ["token": issued.token, "username": "late"]).errorCode
                    == "bootstrap_invalid")
            #expect(try await harness.store.account(username: "late") == nil)
            #expect(try await harness.store.adminCount() == 0)
            // A new link can be issued while there is no administrator.
            #expect(try await console.issueBootstrapToken(by: "test") != nil)
        }
    }

    @Test func racingRedemptionsOfOneBootstrapLinkMakeOneAdministrator() async throws {
        let harness = try await ConsoleAPITests.harness()
        let console = ConsoleService(service: harness.service)
        let issued = try #require(try await console.issueBootstrapToken(by: "test"))
        try await harness.run { api in
            let takers = 8
            var registrations: [RegistrationResponseJSON] = []
            for n in 0..<takers {
                var authenticator = SoftwareAuthenticator(seed: Array("racer\(n)".utf8))
                let (_, registration) = try await Self.bootstrapRegistration(
                    api, token: issued.token, username: "racer\(n)", authenticator: &authenticator)
                registrations.append(try #require(registration))
            }
            let made = registrations
            let results = await Race.run(takers) { n in
                try await api.post("/admin/api/bootstrap/verify", BootstrapVerify(token: issued.token, credential: made[n]))
            }
            #expect(Race.winners(results) { $0.status == .ok } == 1)
            for case .success(let answer) in results where answer.status != .ok {
                #expect(answer.status == .badRequest && answer.errorCode == "bootstrap_invalid", "\(answer.status)")
            }
            #expect(try await harness.store.adminCount() == 1)
            let admins = try await harness.store.adminGrants()
            #expect(admins.count == 1 && admins.first?.role == .admin)
            // The losers' accounts are not left behind.
            var accounts = 0
            for n in 0..<takers where try await harness.store.account(username: "racer\(n)") != nil { accounts += 1 }
            #expect(accounts == 1)
        }
    }
}
