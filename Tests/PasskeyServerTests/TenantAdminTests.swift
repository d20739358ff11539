import Foundation
import HTTPTypes
import HummingbirdTesting
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

/// Managing tenants over HTTP (issue 44): the server API's `/api/admin/tenants` behind a key with
/// the `tenants` scope, which only the default tenant's keys hold; the console's server
/// operators, while a tenant's own administrators see only their tenant. Each change is checked
/// as `passkeyd tenant` checks it, served by the server within its poll, and audited. Runs on
/// SQLite, and on PostgreSQL with `PASSKEYD_TEST_STORE=postgres`.
@Suite struct TenantAdminTests {
    static let settings: ServerSettings = {
        do {
            return try ServerSettings(
                environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080", "PASSKEYD_RATE_LIMITS": "off"],
                file: nil)
        } catch {
            preconditionFailure("the test's settings: \(error)")
        }
    }()

    /// A live server that serves tenants, its clients on `localhost` (the default tenant) and
    /// any other host, every connection closed before it stops.
    static func server(_ body: @escaping @Sendable (ServerHarness, TenantHTTPTests.HostedClients) async throws -> Void) async throws {
        let harness = try await ServerHarness { $0.rateLimits.enabled = false }
        try await harness.run(live: true, settings: settings) { api in
            let clients = TenantHTTPTests.HostedClients(live: api.client)
            do {
                try await body(harness, clients)
            } catch {
                await clients.closeAll()
                throw error
            }
            await clients.closeAll()
        }
    }

    static func json(_ text: String) -> [UInt8] { Array(text.utf8) }

    static func tenant(_ name: String, host: String) -> String {
        #"{"name":"\#(name)","hosts":["\#(host)"],"settings":{"rpID":"\#(host)","origins":["http://\#(host):8080"]}}"#
    }

    /// Waits for `host` to be served as its own tenant (`served`: its discovery names its own
    /// issuer) or to answer `unknown_tenant`, on a fresh connection each time, for at most 20
    /// seconds (the poll is 2).
    static func wait(_ clients: TenantHTTPTests.HostedClients, host: String, served: Bool) async throws -> Bool {
        for _ in 0..<200 {
            let answer = try await clients.on(host).request(.get, "/.well-known/openid-configuration", origin: nil)
            if served ? answer.string("issuer") == "http://\(host):8080" : answer.errorCode == "unknown_tenant" { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    @Test func anOperatorKeyAddsChangesAndRemovesTenantsAndEveryInstanceServesThem() async throws {
        try await Self.server { harness, clients in
            let admin = AdminService(store: harness.store, now: { harness.clock.now })
            let key = try await admin.createAPIKey(name: "ops", scopes: ["tenants"], by: "test")
            let users = try await admin.createAPIKey(name: "users", scopes: ["users:read", "users:write"], by: "test")
            let root = try clients.on("localhost")
            let auth: HTTPFields = [.authorization: "Bearer \(key.key)"]

            #expect(try await root.request(.get, "/api/admin/tenants", origin: nil).errorCode == "invalid_api_key")
            let unscoped = try await root.request(.get, "/api/admin/tenants", origin: nil, headers: [.authorization: "Bearer \(users.key)"])
            #expect(unscoped.status == .forbidden && unscoped.errorCode == "insufficient_scope")
            #expect(try await root.request(.get, "/api/admin/tenants", origin: nil, headers: auth).json["tenants"] == .array([]))

            // Added: answered with its record, served within the poll, audited.
            let added = try await root.request(
                .post, "/api/admin/tenants", body: Self.json(Self.tenant("gamma", host: "c.localhost")), origin: nil, headers: auth)
            #expect(added.status == .created, "\(added.json)")
            #expect(added.json["hosts"] == .array([.string("c.localhost")]) && added.json["settings"]?["rpID"] == .string("c.localhost"))
            #expect(try await Self.wait(clients, host: "c.localhost", served: true))
            let aasa = try await clients.on("c.localhost").request(.get, "/.well-known/openid-configuration", origin: nil)
            #expect(aasa.string("issuer") == "http://c.localhost:8080", "\(aasa.json)")

            // Changed by a merge patch: a member set, another kept.
            let changed = try await root.request(
                .patch, "/api/admin/tenants/gamma", body: Self.json(#"{"settings":{"rpName":"Gamma","rateLimits":{"perIP":50}}}"#),
                origin: nil, headers: auth)
            #expect(changed.status == .ok, "\(changed.json)")
            let shown = try await root.request(.get, "/api/admin/tenants/gamma", origin: nil, headers: auth)
            #expect(shown.json["settings"]?["rpName"] == .string("Gamma") && shown.json["settings"]?["rpID"] == .string("c.localhost"))
            #expect(shown.json["settings"]?["rateLimits"]?["perIP"] == .number(50) && shown.json["accounts"] == .number(0))
            let removedSetting = try await root.request(
                .patch, "/api/admin/tenants/gamma", body: Self.json(#"{"settings":{"rateLimits":null}}"#), origin: nil, headers: auth)
            #expect(removedSetting.json["settings"]?["rateLimits"] == nil && removedSetting.json["settings"]?["rpName"] == .string("Gamma"))

            // Refusals, each with its reason, and nothing written.
            let refusals: [(HTTPRequest.Method, String, String, HTTPResponse.Status, String, String)] = [
                (.post, "/api/admin/tenants", Self.tenant("gamma", host: "z.localhost"), .conflict, "conflict", "taken"),
                (.post, "/api/admin/tenants", Self.tenant("delta", host: "c.localhost"), .conflict, "conflict", "c.localhost"),
                (
                    .post, "/api/admin/tenants", Self.tenant("Bad", host: "d.localhost"), .badRequest, "invalid_tenant",
                    "cannot name a tenant"
                ),
                (.post, "/api/admin/tenants", Self.tenant("default", host: "d.localhost"), .badRequest, "invalid_tenant", "cannot name"),
                (.post, "/api/admin/tenants", Self.tenant("delta", host: "localhost"), .badRequest, "invalid_tenant", "server's own host"),
                (
                    .post, "/api/admin/tenants",
                    #"{"name":"delta","hosts":["bad host"],"settings":{"rpID":"d.localhost","origins":["http://d.localhost:8080"]}}"#,
                    .badRequest, "invalid_tenant", "not a host name"
                ),
                (
                    .post, "/api/admin/tenants", #"{"name":"delta","settings":{"rpID":"d.localhost"}}"#, .badRequest, "invalid_tenant",
                    "origins is missing"
                ),
                (
                    .post, "/api/admin/tenants",
                    #"{"name":"delta","settings":{"rpID":"d.localhost","origins":["http://d.localhost:8080"],"attestationTrustAnchors":["/etc/passwd"]}}"#,
                    .badRequest, "invalid_tenant", "names files on the server"
                ),
                (
                    .post, "/api/admin/tenants", #"{"name":"delta","settings":"rpID"}"#, .badRequest, "malformed_json", "settings"
                ),
                (
                    .post, "/api/admin/tenants",
                    #"{"name":"delta","hosts":["d.localhost"],"settings":{"rpID":"localhost","origins":["http://localhost:8080"]}}"#,
                    .badRequest, "invalid_tenant", "is the server's"
                ),
                (
                    .post, "/api/admin/tenants",
                    #"{"name":"delta","hosts":["d.localhost"],"settings":{"rpID":"c.localhost","origins":["http://c.localhost:8080"]}}"#,
                    .badRequest, "invalid_tenant", "is tenant gamma's"
                ),
                (
                    .post, "/api/admin/tenants",
                    #"{"name":"delta","settings":{"rpID":"d.localhost","origins":["http://d.localhost:8080"],"tokens":{"issuer":"http://c.localhost:8080"}}}"#,
                    .badRequest, "invalid_tenant", "token issuer http://c.localhost:8080 is tenant gamma's"
                ),
                (.patch, "/api/admin/tenants/gamma", #"{"settings":{"listen":"0.0.0.0:1"}}"#, .badRequest, "invalid_tenant", "listen"),
                (.patch, "/api/admin/tenants/gamma", #"{"settings":{"rpID":null}}"#, .badRequest, "invalid_tenant", "rpID is missing"),
                (.patch, "/api/admin/tenants/nobody", #"{"hosts":["n.localhost"]}"#, .notFound, "tenant_not_found", "nobody"),
                (.get, "/api/admin/tenants/nobody", "", .notFound, "tenant_not_found", "nobody"),
                (.delete, "/api/admin/tenants/gamma?deleteData=maybe", "", .badRequest, "invalid_value", "deleteData"),
            ]
            for (method, path, body, status, code, reason) in refusals {
                let refused = try await root.request(method, path, body: body.isEmpty ? nil : Self.json(body), origin: nil, headers: auth)
                #expect(
                    refused.status == status && refused.errorCode == code
                        && String(decoding: refused.bytes, as: UTF8.self).contains(reason),
                    "\(method) \(path) \(body): \(refused.status) \(String(decoding: refused.bytes, as: UTF8.self))")
            }
            let records = try await harness.store.tenantRecords()
            #expect(records.map(\.id) == ["gamma"] && records[0].hosts == ["c.localhost"])

            // Removal: refused while it has accounts, then with its data.
            var device = SoftwareAuthenticator()
            _ = try await clients.on("c.localhost").signUp("gia", authenticator: &device, origin: "http://c.localhost:8080")
            let kept = try await root.request(.delete, "/api/admin/tenants/gamma", origin: nil, headers: auth)
            #expect(kept.status == .conflict && kept.errorCode == "tenant_has_accounts", "\(kept.json)")
            #expect(try await root.request(.get, "/api/admin/tenants/gamma", origin: nil, headers: auth).json["accounts"] == .number(1))
            let removed = try await root.request(.delete, "/api/admin/tenants/gamma?deleteData=true", origin: nil, headers: auth)
            #expect(removed.status == .noContent)
            #expect(try await Self.wait(clients, host: "c.localhost", served: false))
            #expect(try await harness.store.scoped(to: "gamma").account(username: "gia") == nil)

            // An operator's account is changed only with a key that also holds `tenants`: a
            // users:write key handing itself a recovery link or a registration token for it
            // would take the operator's power.
            var opsDevice = SoftwareAuthenticator(seed: Array("opal".utf8))
            _ = try await root.signUp("opal", authenticator: &opsDevice)
            let opal = try #require(try await harness.store.account(username: "opal"))
            try await admin.grantRole(.serverOperator, to: opal, by: "test")
            let writer: HTTPFields = [.authorization: "Bearer \(users.key)"]
            let opalID = opal.id.uuidString.lowercased()
            for path in ["registration-token", "recovery-link", "disable"] {
                let refused = try await root.request(
                    .post, "/api/admin/users/\(opalID)/\(path)", body: Self.json("{}"), origin: nil, headers: writer)
                #expect(refused.status == .forbidden && refused.errorCode == "insufficient_scope", "\(path): \(refused.json)")
            }
            #expect(try await harness.store.account(id: opal.id)?.disabled == false)
            let both = try await admin.createAPIKey(name: "both", scopes: ["users:write", "tenants"], by: "test")
            let allowed = try await root.request(
                .post, "/api/admin/users/\(opalID)/registration-token", body: Self.json("{}"), origin: nil,
                headers: [.authorization: "Bearer \(both.key)"])
            #expect(allowed.status == .created, "\(allowed.json)")

            // Secrets in a tenant's settings are not shown back; a number JSON cannot carry is a 400.
            let hooked = try await root.request(
                .post, "/api/admin/tenants",
                body: Self.json(
                    #"{"name":"eps","hosts":["e.localhost"],"settings":{"rpID":"e.localhost","origins":["http://e.localhost:8080"],"webhooks":[{"url":"https://hooks.example.com/in","secret":"whsec_dGhpcyBpcyBhIHNlY3JldCBvZiAzMiBieXRlcyEh"}]}}"#
                ), origin: nil, headers: auth)
            #expect(hooked.status == .created, "\(hooked.json)")
            #expect(!String(decoding: hooked.bytes, as: UTF8.self).contains("whsec_"), "\(hooked.json)")
            let listed = try await root.request(.get, "/api/admin/tenants", origin: nil, headers: auth)
            #expect(!String(decoding: listed.bytes, as: UTF8.self).contains("whsec_") && listed.status == .ok)
            let huge = try await root.request(
                .patch, "/api/admin/tenants/eps", body: Self.json(#"{"settings":{"rateLimits":{"perIP":1e400}}}"#), origin: nil,
                headers: auth)
            #expect(huge.status == .badRequest && huge.errorCode == "malformed_json", "\(huge.status) \(huge.json)")

            // Audited in the default tenant's log under the key's name.
            let lines = try await harness.store.searchAudit(AuditQuery(limit: 100))
            for kind in [AuditEvent.Kind.tenantAdded, .tenantChanged, .tenantRemoved] {
                let found = lines.contains {
                    $0.kind == kind.rawValue && $0.userAgent?.hasPrefix("api key ops") == true
                        && $0.detail?.hasPrefix("gamma on c.localhost") == true
                }
                #expect(found, "\(kind)")
            }
        }
    }

    /// The `tenants` scope is the server's: a tenant's keys cannot hold it, and a tenant's host
    /// has no `/api/admin/tenants` whatever key is sent.
    /// Changes racing on one tenant (two operators, two instances): each is made on the record
    /// it read or refused with `conflict`; none is lost under another (every change that said
    /// it was made is in the record that stays).
    @Test func racingChangesToOneTenantAreEachKeptOrRefusedNeverLost() async throws {
        let store = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        defer { (store as? PostgresStore)?.close() }
        let settings = try ServerSettings(
            environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080"], file: nil)
        let admin = TenantAdmin(store: store, server: settings, namesFiles: false)
        _ = try await admin.add(
            name: "shop", hosts: [], settings: Data(#"{"rpID":"shop.localhost","origins":["http://shop.localhost:8080"]}"#.utf8), by: "t")
        let patches = [
            #"{"rpName":"Shop"}"#, #"{"appleAppIDs":["ABCDE12345.com.example.shop"]}"#,
            #"{"corsOrigins":["https://app.shop.localhost"]}"#, #"{"relatedOrigins":["https://shop.example"]}"#,
            #"{"userVerification":"required"}"#, #"{"rateLimits":{"perIP":99}}"#,
        ]
        let keys = ["rpName", "appleAppIDs", "corsOrigins", "relatedOrigins", "userVerification", "rateLimits"]
        let results = await Race.run(patches.count) { taker in
            try await admin.change(name: "shop", hosts: nil, patch: Data(patches[taker].utf8), by: "t\(taker)")
        }
        #expect(Race.winners(results) { _ in true } >= 1)
        let final = try await admin.show("shop").settings
        for (taker, result) in results.enumerated() {
            switch result {
            case .success: #expect(final[keys[taker]] != nil, "\(keys[taker]) was changed, then lost")
            case .failure(let error): #expect((error as? APIError)?.code == "conflict", "\(error)")
            }
        }
    }

    /// `tokens.issuer` is free text: one issuer spelled another way is still the same one.
    @Test func issuersAreComparedAsURLs() {
        let same = [
            ("https://id.example.com", "https://id.example.com/"), ("https://id.example.com", "https://id.example.com:443"),
            ("https://id.example.com", " HTTPS://ID.Example.com "), ("http://a.localhost:80/", "http://a.localhost"),
            ("https://id.example.com/t/a", "https://id.example.com/t/a/"),
        ]
        for (a, b) in same { #expect(TenantAdmin.sameIssuer(a, b), "\(a) \(b)") }
        let different = [
            ("https://id.example.com", "http://id.example.com"), ("https://id.example.com", "https://id.example.com:8443"),
            ("https://id.example.com/t/a", "https://id.example.com/t/b"), ("https://id.example.com/T", "https://id.example.com/t"),
        ]
        for (a, b) in different { #expect(!TenantAdmin.sameIssuer(a, b), "\(a) \(b)") }
    }

    @Test func onlyTheDefaultTenantsKeysManageTenants() async throws {
        try await Self.server { harness, clients in
            let now = Date()
            try await harness.store.addTenant(
                TenantRecord(
                    id: "alpha", hosts: ["a.localhost"], settings: #"{"rpID":"a.localhost","origins":["http://a.localhost:8080"]}"#,
                    createdAt: now, updatedAt: now))
            let tenantAdmin = AdminService(store: harness.store.scoped(to: "alpha"), now: { harness.clock.now })
            await #expect(throws: PasskeyServiceError.self) {
                try await tenantAdmin.createAPIKey(name: "grab", scopes: ["tenants"], by: "test")
            }
            let own = try await tenantAdmin.createAPIKey(name: "own", scopes: AdminService.scopes.filter { $0 != "tenants" }, by: "test")
            let server = try await AdminService(store: harness.store, now: { harness.clock.now })
                .createAPIKey(name: "ops", scopes: ["tenants"], by: "test")
            #expect(try await Self.wait(clients, host: "a.localhost", served: true))
            let a = try clients.on("a.localhost")
            for key in [own.key, server.key] {
                let answer = try await a.request(.get, "/api/admin/tenants", origin: nil, headers: [.authorization: "Bearer \(key)"])
                #expect(answer.status == .notFound && answer.errorCode == "not_found", "\(answer.json)")
                let write = try await a.request(
                    .post, "/api/admin/tenants", body: Self.json(Self.tenant("sneaky", host: "s.localhost")), origin: nil,
                    headers: [.authorization: "Bearer \(key)"])
                #expect(write.status == .notFound, "\(write.json)")
            }
            // The tenant's own key is no key on the default host.
            let crossed = try await clients.on("localhost").request(
                .get, "/api/admin/tenants", origin: nil, headers: [.authorization: "Bearer \(own.key)"])
            #expect(crossed.errorCode == "invalid_api_key")
            #expect(try await harness.store.tenantRecords().map(\.id) == ["alpha"])
        }
    }

    /// The console's operator role: an operator lists, adds, changes and removes tenants (each
    /// change behind the CSRF token and the step-up); an admin of the default tenant does not,
    /// cannot grant the role or make a `tenants` key; a tenant's console has no tenants page
    /// and its admins cannot be made operators.
    @Test func aServerOperatorManagesTenantsInTheConsoleAndNobodyElseDoes() async throws {
        try await Self.server { harness, clients in
            let root = try clients.on("localhost")
            var boss = try await root.consoleAccount(harness, "boss", role: .serverOperator)
            var ada = try await root.consoleAccount(harness, "ada", role: .admin)
            _ = try await root.consoleAccount(harness, "vic", role: .viewer)
            #expect(try await root.consoleSignIn(&boss).status == .ok)
            #expect(try await root.consoleSignIn(&ada).status == .ok)
            #expect(try await root.consoleGet("session", boss).json["admin"]?["role"] == .string("operator"))

            // The operator: list, add, change, remove (its name typed again).
            #expect(try await root.consoleGet("tenants", boss).json["tenants"] == .array([]))
            let added = try await root.consoleChange(.post, "tenants", boss, json: Self.tenant("gamma", host: "c.localhost"))
            #expect(added.status == .created, "\(added.json)")
            let changed = try await root.consoleChange(.patch, "tenants/gamma", boss, json: #"{"settings":{"rpName":"Gamma"}}"#)
            #expect(changed.status == .ok && changed.json["settings"]?["rpName"] == .string("Gamma"), "\(changed.json)")
            // A change without the CSRF token is refused before anything is read.
            let forged = try await root.consoleChange(.patch, "tenants/gamma", boss, json: #"{"settings":{"rpName":"X"}}"#, omitCSRF: true)
            #expect(forged.errorCode == "csrf_token_invalid")
            #expect(try await Self.wait(clients, host: "c.localhost", served: true))

            // An admin who is not an operator: no tenants, no operator role, no tenants key.
            let refusedRead = try await root.consoleGet("tenants", ada)
            #expect(refusedRead.status == .forbidden && refusedRead.errorCode == "operator_role_required", "\(refusedRead.json)")
            for (method, path, body) in [
                (HTTPRequest.Method.post, "tenants", Self.tenant("delta", host: "d.localhost")),
                (.patch, "tenants/gamma", #"{"settings":{"rpName":"Mine"}}"#), (.delete, "tenants/gamma", #"{"confirm":"gamma"}"#),
                (.post, "admins", #"{"account":"ada","role":"operator"}"#), (.post, "admins", #"{"account":"vic","role":"operator"}"#),
                (.post, "admins", #"{"account":"boss","role":"viewer"}"#),
                (.post, "api-keys", #"{"name":"grab","scopes":["tenants"]}"#),
            ] {
                let refused = try await root.consoleChange(method, path, ada, json: body)
                #expect(refused.status == .forbidden && refused.errorCode == "operator_role_required", "\(method) \(path): \(refused.json)")
            }
            #expect(
                try await root.consoleChange(.delete, "admins/\(ConsoleAPITests.id(boss.account))", ada).errorCode
                    == "operator_role_required")
            // Nor can it take the operator's account: a recovery link it would see, a disable, its
            // sessions, its passkey, its deletion.
            let bossID = ConsoleAPITests.id(boss.account)
            let passkeyID = Base64URLBytes(boss.credential.id).base64URL
            for (method, path, body) in [
                (HTTPRequest.Method.post, "accounts/\(bossID)/recovery-link", #"{"reason":"locked out"}"#),
                (.post, "accounts/\(bossID)/disable", "{}"), (.post, "accounts/\(bossID)/revoke-sessions", "{}"),
                (.delete, "accounts/\(bossID)/passkeys/\(passkeyID)", "{}"), (.delete, "accounts/\(bossID)", #"{"confirm":"boss"}"#),
            ] {
                let refused = try await root.consoleChange(method, path, ada, json: body)
                #expect(refused.status == .forbidden && refused.errorCode == "operator_role_required", "\(method) \(path): \(refused.json)")
            }
            #expect(try await harness.store.account(id: boss.account.id)?.disabled == false)
            #expect(try await harness.store.passkeys(accountID: boss.account.id).count == 1)
            #expect(try await harness.store.adminRole(accountID: ada.account.id) == .admin)
            #expect(try await harness.store.adminRole(accountID: boss.account.id) == .serverOperator)
            #expect(try await harness.store.tenantRecords().map { $0.settings.contains("Gamma") } == [true])

            // The operator makes a tenants key and grants the role.
            let key = try await root.consoleChange(.post, "api-keys", boss, json: #"{"name":"ops","scopes":["tenants"]}"#)
            #expect(key.status == .created, "\(key.json)")
            #expect(try await root.consoleChange(.post, "admins", boss, json: #"{"account":"vic","role":"operator"}"#).status == .created)

            // A tenant's console: no tenants page, and no operator role to grant there.
            let tenantConsole = try clients.on("c.localhost")
            let gammaStore = harness.store.scoped(to: "gamma")
            var device = SoftwareAuthenticator(seed: Array("gil".utf8))
            let (_, credential, _) = try await tenantConsole.signUp("gil", authenticator: &device, origin: "http://c.localhost:8080")
            let gil = try #require(try await gammaStore.account(username: "gil"))
            await #expect(throws: PasskeyServiceError.self) {
                try await AdminService(store: gammaStore, now: { harness.clock.now }).grantRole(.serverOperator, to: gil, by: "test")
            }
            try await AdminService(store: gammaStore, now: { harness.clock.now }).grantRole(.admin, to: gil, by: "test")
            let options = try await tenantConsole.post("/admin/api/session/options", [String: String]())
            var signer = credential
            let assertion = try device.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: "http://c.localhost:8080",
                credential: &signer)
            let verify = try await tenantConsole.post("/admin/api/session/verify", APIClient.CredentialBody(credential: assertion))
            #expect(verify.status == .ok, "\(verify.json)")
            var gilConsole = ConsoleAdmin(account: gil, accountToken: "", authenticator: device, credential: signer)
            gilConsole.cookie = try #require(APIClient.consoleCookie(verify))
            gilConsole.csrf = verify.string("csrfToken") ?? ""
            let page = try await tenantConsole.consoleGet("tenants", gilConsole)
            #expect(page.status == .notFound && page.errorCode == "not_found", "\(page.json)")
            let tenantWrite = try await tenantConsole.consoleChange(
                .post, "tenants", gilConsole, json: Self.tenant("delta", host: "d.localhost"), origin: "http://c.localhost:8080")
            #expect(tenantWrite.status == .notFound, "\(tenantWrite.json)")
            let grant = try await tenantConsole.consoleChange(
                .post, "admins", gilConsole, json: #"{"account":"gil","role":"operator"}"#, origin: "http://c.localhost:8080")
            #expect(grant.status == .forbidden && grant.errorCode == "operator_role_required", "\(grant.status) \(grant.json)")

            // Removal: the name typed again; with accounts, only with deleteData.
            let mistyped = try await root.consoleChange(.delete, "tenants/gamma", boss, json: #"{"confirm":"gama"}"#)
            #expect(mistyped.errorCode == "confirmation_mismatch")
            let kept = try await root.consoleChange(.delete, "tenants/gamma", boss, json: #"{"confirm":"gamma"}"#)
            #expect(kept.errorCode == "tenant_has_accounts")
            let removed = try await root.consoleChange(.delete, "tenants/gamma", boss, json: #"{"confirm":"gamma","deleteData":true}"#)
            #expect(removed.status == .noContent, "\(removed.json)")
            #expect(try await harness.store.tenantRecords().isEmpty)
            let lines = try await harness.store.searchAudit(AuditQuery(limit: 100))
            #expect(lines.contains { $0.kind == AuditEvent.Kind.tenantRemoved.rawValue && $0.userAgent?.contains("boss") == true })
        }
    }
}
