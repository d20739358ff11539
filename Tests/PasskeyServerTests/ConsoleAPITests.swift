import Crypto
import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// An account in a console test: its passkey, its account session, and once signed in to the
/// console, the console cookie and CSRF token.
struct ConsoleAdmin: Sendable {
    var account: Account
    var accountToken: String
    var authenticator: SoftwareAuthenticator
    var credential: SoftwareCredential
    var cookie = ""
    var csrf = ""
}

extension HTTPField.Name {
    static let consoleCSRF = Self("X-CSRF-Token")!
}

extension APIClient {
    /// Signs `username` up through the account API (a passkey with UV) and grants it `role`
    /// through the admin service, as `passkeyd admin grant` does.
    func consoleAccount(_ harness: ServerHarness, _ username: String, role: AdminRole? = nil) async throws -> ConsoleAdmin {
        var authenticator = SoftwareAuthenticator(seed: Array(username.utf8))
        let (token, credential, _) = try await signUp(username, authenticator: &authenticator)
        let account = try #require(try await harness.store.account(username: username))
        if let role {
            try await AdminService(store: harness.store, now: { harness.clock.now }).grantRole(role, to: account, by: "test")
        }
        return ConsoleAdmin(account: account, accountToken: token, authenticator: authenticator, credential: credential)
    }

    /// The console's sign-in ceremony with `admin`'s passkey; on success its cookie and CSRF token are kept.
    @discardableResult
    func consoleSignIn(_ admin: inout ConsoleAdmin, userVerified: Bool = true) async throws -> APIResponse {
        let options = try await post("/admin/api/session/options", [String: String]())
        guard options.status == .ok else { throw HarnessError.unexpected(options) }
        var authenticator = admin.authenticator
        authenticator.userVerified = userVerified
        let assertion = try authenticator.authenticate(
            options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
            credential: &admin.credential)
        let verify = try await post("/admin/api/session/verify", CredentialBody(credential: assertion))
        if verify.status == .ok, let cookie = Self.consoleCookie(verify), let csrf = verify.string("csrfToken") {
            admin.cookie = cookie
            admin.csrf = csrf
        }
        return verify
    }

    /// `passkeyd_admin=VALUE` from a response's Set-Cookie.
    static func consoleCookie(_ response: APIResponse) -> String? {
        guard let header = response.headers[.setCookie], header.hasPrefix("passkeyd_admin="),
            let pair = header.split(separator: ";").first, pair.count > "passkeyd_admin=".count
        else { return nil }
        return String(pair)
    }

    /// A console read with `admin`'s cookie.
    func consoleGet(_ path: String, _ admin: ConsoleAdmin) async throws -> APIResponse {
        try await request(.get, "/admin/api/" + path, cookie: admin.cookie, origin: nil)
    }

    /// A console change with `admin`'s cookie, its CSRF token (or `csrf`; `omitCSRF`: none) and `origin`.
    func consoleChange(
        _ method: HTTPRequest.Method, _ path: String, _ admin: ConsoleAdmin, json: String? = nil, csrf: String? = nil,
        omitCSRF: Bool = false, origin: String? = ServerHarness.origin
    ) async throws -> APIResponse {
        var headers: HTTPFields = [:]
        if !omitCSRF { headers[.consoleCSRF] = csrf ?? admin.csrf }
        let body = json ?? (method == .post ? "{}" : nil)
        return try await request(
            method, "/admin/api/" + path, body: body.map { Array($0.utf8) }, cookie: admin.cookie, origin: origin, headers: headers)
    }
}

/// The operator's console API (issue 36, docs/admin.md): what a viewer reads and cannot change,
/// every action an administrator takes (each audited with the console's name), account search
/// and its bounds, rate limits, and the static page's CSP. Runs on SQLite, and on PostgreSQL
/// with `PASSKEYD_TEST_STORE=postgres`.
@Suite struct ConsoleAPITests {
    static func harness(_ configure: @escaping (inout ServerHarness.Settings) -> Void = { _ in }) async throws -> ServerHarness {
        try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.webhookAllowPrivateAddresses = true
            configure(&$0)
        }
    }

    static func text(_ value: JSONValue?) -> String? {
        if case .string(let text)? = value { return text }
        return nil
    }

    static func number(_ value: JSONValue?) -> Int? {
        if case .number(let number)? = value { return Int(number) }
        return nil
    }

    static func array(_ value: JSONValue?) -> [JSONValue] {
        if case .array(let items)? = value { return items }
        return []
    }

    static func id(_ account: Account) -> String { account.id.uuidString.lowercased() }

    // MARK: Viewer

    @Test func aViewerReadsEverythingAndChangesNothing() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            _ = try await api.consoleAccount(harness, "root", role: .admin)
            var viewer = try await api.consoleAccount(harness, "vera", role: .viewer)
            let target = try await api.consoleAccount(harness, "tess")
            let admin = AdminService(store: harness.store, now: { harness.clock.now }, webhookPolicy: .unsafeAllowingPrivateAddresses)
            let key = try await admin.createAPIKey(name: "backend", scopes: ["users:read"], by: "test").record
            let client = try await admin.addClient(
                name: "app", redirectURIs: ["https://app.example/cb"], isPublic: false, by: "test"
            ).client
            let hook = try await admin.addWebhook(url: "http://127.0.0.1:9/hook", events: ["account_deleted"]).endpoint
            #expect(try await api.consoleSignIn(&viewer).status == .ok)
            let session = try await api.consoleGet("session", viewer)
            #expect(session.status == .ok && session.json["admin"]?["role"] == .string("viewer"))
            #expect(session.string("csrfToken") == viewer.csrf)

            // Every read.
            for path in [
                "overview", "adoption?days=7", "adoption.csv?days=30", "accounts?q=t", "accounts/\(Self.id(target.account))", "audit",
                "audit.csv", "integrations", "policy", "admins",
            ] {
                let read = try await api.consoleGet(path, viewer)
                #expect(read.status == .ok, "\(path): \(read.status) \(String(decoding: read.bytes, as: UTF8.self))")
            }

            // Every change, with a valid Origin and CSRF token inside the step-up window.
            let id = Self.id(target.account)
            let credential = Base64URLBytes(target.credential.id).base64URL
            let webhook = hook.id.uuidString.lowercased()
            let changes: [(HTTPRequest.Method, String, String?)] = [
                (.post, "accounts/\(id)/disable", nil), (.post, "accounts/\(id)/enable", nil),
                (.post, "accounts/\(id)/revoke-sessions", nil), (.delete, "accounts/\(id)/passkeys/\(credential)", nil),
                (.post, "accounts/\(id)/recovery-link", #"{"reason":"lost phone"}"#), (.delete, "accounts/\(id)", #"{"confirm":"tess"}"#),
                (.post, "admins", #"{"account":"tess","role":"admin"}"#), (.delete, "admins/\(Self.id(viewer.account))", nil),
                (.post, "clients", #"{"name":"x","redirectUris":["https://x.example/cb"]}"#),
                (.post, "clients/\(client.id)/rotate-secret", nil), (.delete, "clients/\(client.id)", nil),
                (.post, "api-keys", #"{"name":"k","scopes":["users:read"]}"#), (.delete, "api-keys/\(key.id.uuidString.lowercased())", nil),
                (.post, "webhooks", #"{"url":"http://127.0.0.1:9/other","events":["*"]}"#), (.post, "webhooks/\(webhook)/pause", nil),
                (.post, "webhooks/\(webhook)/resume", nil), (.post, "webhooks/\(webhook)/rotate-secret", nil),
                (.delete, "webhooks/\(webhook)", nil), (.post, "webhooks/\(webhook)/deliveries/evt_1/retry", nil),
                (.post, "signing-keys/rotate", nil),
            ]
            let keysBefore = try await harness.store.signingKeys(now: harness.clock.now).count
            for (method, path, body) in changes {
                let refused = try await api.consoleChange(method, path, viewer, json: body)
                #expect(refused.status == .forbidden && refused.errorCode == "admin_role_required", "\(method) \(path): \(refused.status)")
            }
            // Nothing changed.
            let after = try #require(try await harness.store.account(id: target.account.id))
            #expect(!after.disabled)
            #expect(try await harness.store.passkeys(accountID: target.account.id).count == 1)
            #expect(try await harness.store.sessions(accountID: target.account.id, now: harness.clock.now).count == 1)
            #expect(try await harness.store.adminRole(accountID: target.account.id) == nil)
            #expect(try await harness.store.adminRole(accountID: viewer.account.id) == .viewer)
            #expect(try await harness.store.oauthClients().map(\.id) == [client.id])
            #expect(try await harness.store.oauthClient(id: client.id)?.secretHash == client.secretHash)
            #expect(try await harness.store.apiKeys().map { $0.revokedAt == nil } == [true])
            let hooks = try await harness.store.webhookEndpoints()
            #expect(hooks.map(\.id) == [hook.id] && hooks.first?.disabled == false && hooks.first?.secret == hook.secret)
            #expect(try await harness.store.signingKeys(now: harness.clock.now).count == keysBefore)
            let kinds = Set(try await harness.store.searchAudit(AuditQuery(limit: 500)).map(\.kind))
            #expect(kinds.isDisjoint(with: ["admin_account_disabled", "admin_recovery_link", "account_deleted", "signing_key_rotated"]))
        }
    }

    // MARK: Actions

    @Test func anAdministratorsActionsWorkAndAreAuditedUnderItsName() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            var target = try await api.consoleAccount(harness, "tess")
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let id = Self.id(target.account)

            // Disable (its sessions end), enable, revoke sessions.
            let disabled = try await api.consoleChange(.post, "accounts/\(id)/disable", root)
            #expect(disabled.status == .ok && Self.number(disabled.json["revokedSessions"]) == 1, "\(disabled.status)")
            #expect(try await harness.store.account(id: target.account.id)?.disabled == true)
            #expect(try await api.request(.get, "/api/auth/session", token: target.accountToken).status == .unauthorized)
            #expect(try await api.consoleChange(.post, "accounts/\(id)/enable", root).status == .noContent)
            #expect(try await harness.store.account(id: target.account.id)?.disabled == false)
            var signer = target.credential
            let signedIn = try await api.signIn(credential: &signer, authenticator: target.authenticator)
            target.credential = signer
            let fresh = try #require(signedIn.string("token"))
            let revoked = try await api.consoleChange(.post, "accounts/\(id)/revoke-sessions", root)
            #expect(revoked.status == .ok && Self.number(revoked.json["revoked"]) == 1)
            #expect(try await api.request(.get, "/api/auth/session", token: fresh).status == .unauthorized)

            // Remove a passkey: the last one is refused (409 last_passkey); of two, one goes.
            let only = Base64URLBytes(target.credential.id).base64URL
            let last = try await api.consoleChange(.delete, "accounts/\(id)/passkeys/\(only)", root)
            #expect(last.status == .conflict && last.errorCode == "last_passkey")
            signer = target.credential
            let again = try #require(try await api.signIn(credential: &signer, authenticator: target.authenticator).string("token"))
            target.credential = signer
            var authenticator = target.authenticator
            let (added, second) = try await MigrationTests.addPasskey(api, token: again, authenticator: &authenticator)
            #expect(added.status == .ok)
            let unknown = try await api.consoleChange(.delete, "accounts/\(id)/passkeys/AAAA", root)
            #expect(unknown.status == .notFound && unknown.errorCode == "passkey_not_found")
            let removed = try await api.consoleChange(.delete, "accounts/\(id)/passkeys/\(Base64URLBytes(second.id).base64URL)", root)
            #expect(removed.status == .noContent)
            #expect(try await harness.store.passkeys(accountID: target.account.id).map(\.credentialID) == [target.credential.id])

            // A recovery link: a reason is required; the link is shown once and works once.
            for body in [#"{}"#, #"{"reason":"   "}"#, #"{"reason":"\#(String(repeating: "x", count: 501))"}"#] {
                let refused = try await api.consoleChange(.post, "accounts/\(id)/recovery-link", root, json: body)
                #expect(refused.status == .badRequest && refused.errorCode == "reason_required", "\(body.prefix(20))")
            }
            let link = try await api.consoleChange(
                .post, "accounts/\(id)/recovery-link", root, json: #"{"reason":"ticket 4711: lost her phone"}"#)
            #expect(link.status == .created)
            let url = try #require(link.string("link"))
            #expect(url.hasPrefix(ServerHarness.origin + "/#recover=") && link.string("expiresAt") != nil)
            let token = String(url.dropFirst((ServerHarness.origin + "/#recover=").count))
            let page = try await api.consoleGet("accounts/\(id)", root)
            #expect(page.status == .ok && !String(decoding: page.bytes, as: UTF8.self).contains(token), "shown once")
            let line = try #require(
                try await harness.store.auditEvents(accountID: target.account.id, limit: 50).first { $0.kind == "admin_recovery_link" })
            #expect(line.userAgent?.hasPrefix("console root (") == true && line.userAgent?.contains("ticket 4711: lost her phone") == true)
            #expect(try await api.post("/api/auth/recovery/link", ["token": token]).status == .ok)
            #expect(try await api.post("/api/auth/recovery/link", ["token": token]).errorCode == "invalid_recovery_link")

            // Roles: grant, list, the last admin is kept.
            let granted = try await api.consoleChange(.post, "admins", root, json: #"{"account":"tess","role":"viewer"}"#)
            #expect(granted.status == .created && granted.string("role") == "viewer")
            let admins = try await api.consoleGet("admins", root)
            #expect(Self.array(admins.json["admins"]).compactMap { Self.text($0["username"]) }.sorted() == ["root", "tess"])
            let lastAdmin = try await api.consoleChange(.delete, "admins/\(Self.id(root.account))", root)
            #expect(lastAdmin.status == .conflict && lastAdmin.errorCode == "last_admin")
            #expect(try await harness.store.adminRole(accountID: root.account.id) == .admin)
            #expect(try await api.consoleChange(.post, "admins", root, json: #"{"account":"nobody","role":"viewer"}"#).status == .notFound)
            #expect(try await api.consoleChange(.post, "admins", root, json: #"{"account":"tess","role":"god"}"#).status == .badRequest)
            #expect(try await api.consoleChange(.delete, "admins/\(id)", root).status == .noContent)
            #expect(try await harness.store.adminRole(accountID: target.account.id) == nil)

            // Delete the account: the typed confirmation must match; the audit line stays.
            for body in [#"{}"#, #"{"confirm":"tes"}"#, #"{"confirm":"root"}"#] {
                let refused = try await api.consoleChange(.delete, "accounts/\(id)", root, json: body)
                #expect(refused.status == .badRequest && refused.errorCode == "confirmation_mismatch", "\(body)")
            }
            #expect(try await harness.store.account(id: target.account.id) != nil)
            let own = try await api.consoleChange(.delete, "accounts/\(Self.id(root.account))", root, json: #"{"confirm":"root"}"#)
            #expect(own.status == .badRequest && own.errorCode == "invalid_value")
            #expect(try await api.consoleChange(.delete, "accounts/\(id)", root, json: #"{"confirm":"TESS"}"#).status == .noContent)
            #expect(try await harness.store.account(id: target.account.id) == nil)
            let deletion = try await harness.store.auditEvents(accountID: target.account.id, limit: 50).first {
                $0.kind == "account_deleted"
            }
            #expect(deletion?.detail == "tess" && deletion?.metric == "account_deleted_passkey")
            #expect(try await api.consoleGet("accounts/\(id)", root).errorCode == "account_not_found")

            // API keys: made (shown once), used, revoked.
            let created = try await api.consoleChange(.post, "api-keys", root, json: #"{"name":"crm","scopes":["users:read"]}"#)
            #expect(created.status == .created)
            let key = try #require(created.string("key"))
            let keyID = try #require(Self.text(created.json["apiKey"]?["id"]))
            let bearer: HTTPFields = [.authorization: "Bearer \(key)"]
            #expect(try await api.request(.get, "/api/admin/users?username=root", origin: nil, headers: bearer).status == .ok)
            #expect(try await api.consoleChange(.post, "api-keys", root, json: #"{"name":"crm","scopes":["root"]}"#).status == .badRequest)
            #expect(try await api.consoleChange(.delete, "api-keys/\(keyID)", root).status == .noContent)
            #expect(try await api.request(.get, "/api/admin/users?username=root", origin: nil, headers: bearer).status == .unauthorized)
            let integrations = try await api.consoleGet("integrations", root)
            #expect(!String(decoding: integrations.bytes, as: UTF8.self).contains(key))

            // OpenID clients: add (secret once), rotate (the old secret stops matching), remove.
            let client = try await api.consoleChange(
                .post, "clients", root, json: #"{"name":"shop","redirectUris":["https://shop.example/callback"]}"#)
            #expect(client.status == .created)
            let clientID = try #require(Self.text(client.json["client"]?["clientId"]))
            let secret = try #require(client.string("secret"))
            func stored() async throws -> [UInt8]? {
                let record = try await harness.store.oauthClient(id: clientID)
                return record?.secretHash
            }
            #expect(try await stored() == Array(SHA256.hash(data: Array(secret.utf8))))
            let rotated = try await api.consoleChange(.post, "clients/\(clientID)/rotate-secret", root)
            let newSecret = try #require(rotated.string("secret"))
            #expect(newSecret != secret && newSecret.hasPrefix("pcs_"))
            #expect(try await stored() == Array(SHA256.hash(data: Array(newSecret.utf8))))
            #expect(try await api.consoleChange(.delete, "clients/\(clientID)", root).status == .noContent)
            #expect(try await harness.store.oauthClient(id: clientID) == nil)
            #expect(try await api.consoleChange(.delete, "clients/\(clientID)", root).status == .notFound)

            // Webhooks: add, pause, resume, rotate, remove.
            let hook = try await api.consoleChange(
                .post, "webhooks", root, json: #"{"url":"http://127.0.0.1:9/hook","events":["account_deleted"]}"#)
            #expect(hook.status == .created)
            let hookID = try #require(Self.text(hook.json["webhook"]?["id"]))
            let hookSecret = try #require(hook.string("secret"))
            func paused() async throws -> Bool? {
                let page = try await api.consoleGet("integrations", root)
                return Self.array(page.json["webhooks"]).first { Self.text($0["id"]) == hookID }.flatMap {
                    if case .bool(let value)? = $0["paused"] { return value } else { return nil }
                }
            }
            #expect(try await paused() == false)
            #expect(try await api.consoleChange(.post, "webhooks/\(hookID)/pause", root).status == .noContent)
            #expect(try await paused() == true)
            #expect(try await api.consoleChange(.post, "webhooks/\(hookID)/resume", root).status == .noContent)
            #expect(try await paused() == false)
            let storedKey = try await harness.store.webhookEndpoints().first?.secret
            let newHookSecret = try #require(try await api.consoleChange(.post, "webhooks/\(hookID)/rotate-secret", root).string("secret"))
            #expect(newHookSecret != hookSecret && newHookSecret.hasPrefix("whsec_"))
            #expect(try await harness.store.webhookEndpoints().first?.secret != storedKey)
            let badURL = try await api.consoleChange(.post, "webhooks", root, json: #"{"url":"ftp://x","events":["*"]}"#)
            #expect(badURL.status == .badRequest && badURL.errorCode == "invalid_webhook_url")
            #expect(try await api.consoleChange(.delete, "webhooks/\(hookID)", root).status == .noContent)
            #expect(try await harness.store.webhookEndpoints().isEmpty)
            #expect(try await api.consoleChange(.post, "webhooks/\(hookID)/pause", root).status == .notFound)

            // Signing keys: rotate now; the new key is listed.
            let key2 = try await api.consoleChange(.post, "signing-keys/rotate", root)
            #expect(key2.status == .created)
            let kid = try #require(key2.string("kid"))
            let listed = try await api.consoleGet("integrations", root)
            #expect(Self.array(listed.json["signingKeys"]?["keys"]).contains { Self.text($0["kid"]) == kid })

            // Every change above: one audit line naming the console administrator.
            let events = try await harness.store.searchAudit(AuditQuery(limit: 500))
            let actor = "console root (\(Self.id(root.account)))"
            for kind in [
                "admin_account_disabled", "admin_account_enabled", "admin_sessions_revoked", "admin_passkey_revoked", "admin_recovery_link",
                "admin_role_granted", "admin_role_revoked", "account_deleted", "api_key_created", "api_key_revoked", "oauth_client_added",
                "oauth_client_secret_rotated", "oauth_client_removed", "webhook_added", "webhook_paused", "webhook_resumed",
                "webhook_secret_rotated", "webhook_removed", "signing_key_rotated",
            ] {
                let lines = events.filter { $0.kind == kind && $0.userAgent != "test" }
                #expect(!lines.isEmpty && lines.allSatisfy { $0.userAgent?.hasPrefix(actor) == true }, "\(kind): \(lines.map(\.userAgent))")
            }
            // And the console's audit page finds them by kind.
            let audit = try await api.consoleGet("audit?kind=webhook_paused", root)
            #expect(Self.array(audit.json["events"]).count == 1)
            #expect(try await api.consoleGet("audit?kind=nonsense", root).errorCode == "invalid_query")
            #expect(try await api.consoleGet("audit?address=%27%20OR%201%3D1", root).errorCode == "invalid_query")
        }
    }

    // MARK: Search

    @Test func searchFindsByEveryFieldAndPagesByKeyset() async throws {
        let harness = try await Self.harness()
        // 12 imported accounts whose names share a prefix, and two that tell `_` from a wildcard.
        var rows: [(Account, String)] = []
        for n in 0..<12 {
            let name = String(format: "member%02d", n)
            rows.append(
                (
                    Account(
                        username: name, displayName: "Member Number \(n)", userHandle: RelyingParty.makeUserHandle(),
                        createdAt: harness.clock.now),
                    Bcrypt(hashing: "password \(n)", cost: 4).text
                ))
        }
        for name in ["x_y", "xay"] {
            rows.append(
                (
                    Account(username: name, displayName: name, userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now),
                    Bcrypt(hashing: "pw", cost: 4).text
                ))
        }
        #expect(try await harness.store.importAccounts(rows).allSatisfy { $0 })
        // An import sets no external id; the app's server does.
        for (n, (account, _)) in rows.prefix(12).enumerated() {
            #expect(try await harness.store.setExternalID(accountID: account.id, externalID: "CRM-\(1000 + n)"))
        }
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            func search(_ query: String) async throws -> APIResponse { try await api.consoleGet("accounts?" + query, root) }
            func names(_ response: APIResponse) -> [String] {
                Self.array(response.json["accounts"]).compactMap { Self.text($0["username"]) }
            }
            func escaped(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text }

            // Keyset pages over 12 results, 5 at a time: no duplicates, no gaps, in order.
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let page = try await search("q=MEMBER&limit=5" + (cursor.map { "&after=" + escaped($0) } ?? ""))
                #expect(page.status == .ok)
                seen += names(page)
                cursor = page.string("next")
                pages += 1
            } while cursor != nil && pages < 10
            #expect(seen == (0..<12).map { String(format: "member%02d", $0) }, "\(seen)")
            #expect(pages == 3)

            // Each field, case-insensitive.
            #expect(names(try await search("q=member07")) == ["member07"])
            #expect(names(try await search("q=mEMBER NUMBER 1&by=displayName")).sorted() == ["member01", "member10", "member11"])
            #expect(names(try await search("q=crm-100&by=externalId")).count == 10)
            #expect(names(try await search("q=crm-1011&by=externalId")) == ["member11"])
            let member = try #require(try await harness.store.account(username: "member03"))
            let idPrefix = String(member.id.uuidString.prefix(13))
            #expect(names(try await search("q=\(idPrefix.uppercased())&by=id")).contains("member03"))
            #expect(names(try await search("q=\(idPrefix.lowercased())&by=id")).contains("member03"))
            let credential = Base64URLBytes(root.credential.id).base64URL
            #expect(names(try await search("q=\(escaped(String(credential.prefix(10))))&by=credentialId")) == ["root"])
            let row = Self.array((try await search("q=member03")).json["accounts"]).first
            #expect(row?["externalId"] == .string("CRM-1003") && row?["hasPassword"] == .bool(true) && row?["disabled"] == .bool(false))
            #expect(Self.array((try await search("q=root")).json["accounts"]).first.flatMap { Self.text($0["role"]) } == "admin")

            // `_` and `%` are characters, not wildcards; injection finds nothing and breaks nothing.
            #expect(names(try await search("q=x_")) == ["x_y"])
            for attempt in ["' OR 1=1 --", "%", "_", "x%", "member%", "\\", "'; DROP TABLE accounts; --", "<script>", "*"] {
                for field in ["username", "displayName", "externalId", "id", "credentialId"] {
                    let answer = try await search("q=\(escaped(attempt))&by=\(field)")
                    #expect(answer.status == .ok, "\(attempt) by \(field): \(answer.status)")
                    #expect(names(answer).allSatisfy { $0.hasPrefix(attempt) || field != "username" }, "\(attempt) by \(field)")
                    #expect(attempt == "_" || names(answer).isEmpty, "\(attempt) by \(field): \(names(answer))")
                }
            }
            #expect(try await harness.store.account(username: "member00") != nil)

            // Bounded input.
            let longest = String(repeating: "m", count: 128)
            #expect((try await search("q=\(longest)")).status == .ok)
            for bad in [
                "q=\(longest)m", "q=", "q=%20%20", "limit=5", "q=m&limit=0", "q=m&limit=101", "q=m&limit=ten", "q=m&by=password",
                "q=m&after=\(String(repeating: "A", count: 1100))", "q=m%00", "q=m&after=not-a-cursor",
            ] {
                let refused = try await search(bad)
                #expect(refused.status == .badRequest && refused.errorCode == "invalid_query", "\(bad.prefix(40)): \(refused.status)")
            }
        }
    }

    @Test func markupInAccountDataComesBackAsJSONData() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            var authenticator = SoftwareAuthenticator()
            let script = "<script>alert(1)</script>"
            let options = try await api.registrationOptions(username: "mallory", displayName: script)
            #expect(options.status == .ok)
            let (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            #expect(try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration)).status == .ok)
            let found = try await api.consoleGet("accounts?q=%3Cscript%3E&by=displayName", root)
            #expect(found.status == .ok)
            #expect(found.headers[.contentType]?.hasPrefix("application/json") == true)
            #expect(found.headers[.xContentTypeOptions] == "nosniff")
            #expect(Self.array(found.json["accounts"]).map { Self.text($0["displayName"]) } == [script])
            let account = try #require(try await harness.store.account(username: "mallory"))
            let page = try await api.consoleGet("accounts/\(Self.id(account))", root)
            #expect(page.json["account"]?["displayName"] == .string(script))
            #expect(page.headers[.contentType]?.hasPrefix("application/json") == true)
        }
    }

    // MARK: Limits and the page

    @Test func consoleRequestsAreLimitedPerAdministrator() async throws {
        let harness = try await Self.harness { $0.console.requestsPerWindow = 5 }
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            for n in 1...5 { #expect(try await api.consoleGet("overview", root).status == .ok, "request \(n)") }
            let limited = try await api.consoleGet("overview", root)
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited")
            #expect(limited.headers[.retryAfter] != nil)
            let change = try await api.consoleChange(.post, "signing-keys/rotate", root)
            #expect(change.status == .tooManyRequests && change.errorCode == "rate_limited")
            // The next window opens again.
            harness.clock.advance(Double(harness.service.configuration.rateLimits.windowSeconds) + 1)
            #expect(try await api.consoleGet("overview", root).status == .ok)
        }
    }

    /// The policy page's FIDO metadata facts are the fields the API sends: the BLOB's `no`,
    /// `nextUpdate` and entries, when it was imported and when this instance loaded it (an MDS3
    /// payload has no issue date), and every `metadata.<field>` the page reads is one of them.
    @Test func thePolicyPageReadsTheMetadataFieldsTheAPISends() async throws {
        let mds = try MetadataBLOBIssuer()
        let harness = try await Self.harness { $0.mdsRootCertificates = [mds.root] }
        let importedAt = harness.clock.now.addingTimeInterval(-86_400)
        let blob = try mds.blob(
            number: 7, nextUpdate: "2049-01-01", entries: [.init(aaguid: MetadataServerTests.model, description: "Test MDS Key")])
        try await harness.store.saveMetadataBLOB(
            MetadataBLOBRecord(number: 7, nextUpdate: "2049-01-01", blob: blob, importedAt: importedAt), force: false)
        harness.clock.advance(120)
        await harness.service.refreshMetadata()
        let loadedAt = harness.clock.now
        try await harness.run { api in
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            #expect(try await api.consoleSignIn(&root).status == .ok)
            let policy = try await api.consoleGet("policy", root)
            #expect(policy.status == .ok)
            guard case .object(let metadata)? = policy.json["metadata"] else { throw HarnessError.unexpected(policy) }
            let iso = ISO8601DateFormatter()
            #expect(
                metadata == [
                    "number": .number(7), "nextUpdate": .string("2049-01-01"), "entries": .number(1),
                    "importedAt": .string(iso.string(from: importedAt)), "loadedAt": .string(iso.string(from: loadedAt)),
                ])
            // What the page reads of it.
            let page = try String(contentsOfFile: ServerHarness.publicDirectory + "/admin/pages/policy.js", encoding: .utf8)
            let read = Set(page.matches(of: /metadata\.([A-Za-z]+)/).map { String($0.output.1) })
            #expect(read.subtracting(metadata.keys).subtracting(["warning"]).isEmpty, "the page reads \(read.sorted())")
            #expect(read.isSuperset(of: metadata.keys), "the page shows \(read.sorted())")
        }
    }

    @Test func theConsolePageIsServedUnderAStrictCSP() async throws {
        let harness = try await ServerHarness { $0.publicDirectory = ServerHarness.publicDirectory }
        try await harness.run { api in
            let bare = try await api.request(.get, "/admin", origin: nil)
            #expect(bare.status == .movedPermanently && bare.headers[.location] == "/admin/", "\(bare.status)")
            for path in ["/admin/", "/admin/index.html"] {
                let page = try await api.request(.get, path, origin: nil)
                #expect(page.status == .ok, "\(path)")
                #expect(page.headers[.contentType]?.hasPrefix("text/html") == true)
                let csp = try #require(page.headers[.contentSecurityPolicy])
                #expect(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"))
                #expect(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"))
                #expect(page.headers[.xContentTypeOptions] == "nosniff")
                let html = String(decoding: page.bytes, as: UTF8.self)
                // Scripts are files of this origin, never inline, nothing from a CDN.
                let tags = html.components(separatedBy: "<script").dropFirst().map { $0.prefix { $0 != ">" } }
                #expect(!tags.isEmpty && tags.allSatisfy { $0.contains("src=\"/") }, "\(tags)")
                #expect(!html.contains("src=\"http") && !html.contains("href=\"http"))
            }
            // The API's answers carry the same policy.
            let api403 = try await api.request(.get, "/admin/api/overview", origin: nil)
            #expect(api403.headers[.contentSecurityPolicy]?.contains("unsafe-inline") == false)
        }
    }
}
