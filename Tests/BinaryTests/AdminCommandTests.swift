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

/// A real server and the admin verbs on its database.
@Suite("passkeyd admin and per-IP limits on a real server")
struct AdminCommandTests {
    static var passkeyd: URL { ServeBinaryTests.binary }

    static func signUp(
        _ server: ServeBinaryTests.Server, _ username: String, origin: String,
        authenticator: inout SoftwareAuthenticator
    ) async throws -> (String, SoftwareCredential) {
        let (optionsStatus, optionsJSON) = try await server.call(
            "POST", "/api/auth/register/options", json: Data(#"{"username":"\#(username)"}"#.utf8))
        guard optionsStatus == 200 else {
            Issue.record("sign-up options for \(username) answered \(optionsStatus): \(optionsJSON)")
            throw POSIXError(.EPROTO)
        }
        let options = try JSONDecoder().decode(PublicKeyCredentialCreationOptionsJSON.self, from: JSONEncoder().encode(optionsJSON))
        let (registration, credential) = try authenticator.register(options: options, origin: origin)
        let (status, body) = try await server.call(
            "POST", "/api/auth/register/verify",
            json: JSONEncoder().encode(ServeBinaryTests.Wrapped(credential: registration)))
        guard status == 200, case .string(let token)? = body["token"] else {
            Issue.record("sign-up of \(username) answered \(status): \(body)")
            throw POSIXError(.EPROTO)
        }
        return (token, credential)
    }

    static func signIn(
        _ server: ServeBinaryTests.Server, origin: String, authenticator: SoftwareAuthenticator,
        credential: inout SoftwareCredential
    ) async throws -> (Int, JSONValue) {
        let (_, requestJSON) = try await server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
        let request = try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: JSONEncoder().encode(requestJSON))
        let assertion = try authenticator.authenticate(options: request, origin: origin, credential: &credential)
        return try await server.call(
            "POST", "/api/auth/authenticate/verify", json: JSONEncoder().encode(ServeBinaryTests.Wrapped(credential: assertion)))
    }

    @Test func adminVerbsListShowDisableRevokeAuditAndExport() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-admin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = "sqlite://" + directory.appendingPathComponent("admin.sqlite").path
        let server = try ServeBinaryTests.Server(database: database)
        defer { server.stop() }
        try await server.waitUntilReady()
        let port = server.port
        let origin = server.origin
        var authenticator = SoftwareAuthenticator(seed: Array("admin".utf8))
        let (token, credential) = try await Self.signUp(server, "ada", origin: origin, authenticator: &authenticator)
        _ = try await Self.signUp(server, "bob", origin: origin, authenticator: &authenticator)
        func admin(_ arguments: [String]) throws -> PasskeyCLITests.Result {
            try PasskeyCLITests.run(Self.passkeyd, ["admin"] + arguments + ["--database", database], environment: ["PASSKEYD_CONFIG": ""])
        }

        let list = try admin(["accounts"])
        #expect(list.status == 0 && list.stdout.hasPrefix("ada\t") && list.stdout.contains("\nbob\t"), "\(list.stdout)\(list.stderr)")
        let show = try admin(["show", "ada", "--json"])
        let report = try JSONReader.parse(Array(show.stdout.utf8))
        #expect(show.status == 0 && report["username"] == .string("ada"))
        if case .array(let passkeys)? = report["passkeys"] {
            #expect(passkeys.first?["id"] == .string(Base64URLBytes(credential.id).base64URL))
        } else {
            Issue.record("no passkeys")
        }
        if case .array(let sessions)? = report["sessions"] { #expect(sessions.count == 1) } else { Issue.record("no sessions") }

        let missing = try admin(["show", "nobody"])
        #expect(missing.status == 2 && missing.stderr.contains("no account"))

        let disabled = try admin(["disable", "ada"])
        #expect(disabled.status == 0 && disabled.stdout.contains("1 session revoked"), "\(disabled.stdout)\(disabled.stderr)")
        #expect(try await server.call("GET", "/api/auth/session", token: token).0 == 401)
        var signingIn = credential
        let (refused, body) = try await Self.signIn(server, origin: origin, authenticator: authenticator, credential: &signingIn)
        #expect(refused == 403 && body["error"]?["code"] == .string("account_disabled"))
        #expect(try admin(["enable", "ada"]).status == 0)
        #expect(try await Self.signIn(server, origin: origin, authenticator: authenticator, credential: &signingIn).0 == 200)

        let revokedSessions = try admin(["revoke-sessions", "ada"])
        #expect(revokedSessions.status == 0 && revokedSessions.stdout.contains("revoked 1 session"))
        let revoked = try admin(["revoke-passkey", "ada", Base64URLBytes(credential.id).base64URL])
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(try await Self.signIn(server, origin: origin, authenticator: authenticator, credential: &signingIn).0 == 401)

        let audit = try admin(["audit", "--user", "ada", "--json"])
        let kinds: [String] =
            (try? JSONDecoder().decode([[String: String?]].self, from: Data(audit.stdout.utf8)).compactMap { $0["kind"] ?? nil }) ?? []
        // The last sign-in failed before any account was known (discoverable, unknown passkey): not in ada's log.
        #expect(
            kinds == [
                "admin_passkey_revoked", "admin_sessions_revoked", "sign_in", "admin_account_enabled",
                "sign_in_failed", "admin_account_disabled", "sign_up",
            ], "\(audit.stdout)")
        let failures = try admin(["audit", "--kind", "sign_in_failed", "--limit", "1"])
        #expect(failures.stdout.split(separator: "\n").count == 1 && failures.stdout.contains("credential_not_found"))

        let export = try admin(["export", "ada"])
        let exported = try JSONReader.parse(Array(export.stdout.utf8))
        #expect(exported["username"] == .string("ada"))
        if case .array(let events)? = exported["auditEvents"] {
            #expect(events.count == kinds.count)
        } else {
            Issue.record("no audit in export")
        }

        let adoption = try admin(["adoption", "--json"])
        let stats = try JSONReader.parse(Array(adoption.stdout.utf8))
        #expect(stats["accounts"] == .number(2) && stats["accountsWithPasskey"] == .number(1), "\(adoption.stdout)")
    }

    /// The verbs of apps that trust passkeyd, on a running server's database: an API key made by
    /// the CLI introspects a token over HTTP and stops at `revoke`; a registration token from the
    /// CLI enrols a passkey; a key rotation is published in the JWKS at once; webhook endpoints.
    @Test func apiKeysSigningKeysRegistrationTokensAndWebhooksFromTheCLI() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-keys-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = "sqlite://" + directory.appendingPathComponent("keys.sqlite").path
        let server = try ServeBinaryTests.Server(database: database)
        defer { server.stop() }
        try await server.waitUntilReady()
        let port = server.port
        let origin = server.origin
        func admin(_ arguments: [String]) throws -> PasskeyCLITests.Result {
            try PasskeyCLITests.run(Self.passkeyd, ["admin"] + arguments + ["--database", database], environment: ["PASSKEYD_CONFIG": ""])
        }
        var authenticator = SoftwareAuthenticator(seed: Array("cli-keys".utf8))
        let (session, _) = try await Self.signUp(server, "kit", origin: origin, authenticator: &authenticator)

        let created = try admin(["api-keys", "create", "backend", "--scopes", "introspect"])
        let key = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(created.status == 0 && key.hasPrefix("pkd_") && created.stderr.contains("shown once"), "\(created.stderr)")
        #expect(try admin(["api-keys", "create", "bad", "--scopes", "everything"]).status == 2)
        let form = Data("token=\(session)".utf8)
        let (status, answer) = try await server.call(
            "POST", "/api/auth/introspect", json: form,
            headers: ["Authorization": "Bearer \(key)", "Content-Type": "application/x-www-form-urlencoded"])
        #expect(status == 200 && answer["active"] == .bool(true) && answer["username"] == .string("kit"), "\(answer)")
        let listed = try admin(["api-keys", "list"])
        let id = String(listed.stdout.prefix(36))
        #expect(listed.stdout.contains("backend") && !listed.stdout.contains(key))
        #expect(try admin(["api-keys", "revoke", id]).status == 0)
        let (afterRevoke, _) = try await server.call(
            "POST", "/api/auth/introspect", json: form,
            headers: ["Authorization": "Bearer \(key)", "Content-Type": "application/x-www-form-urlencoded"])
        #expect(afterRevoke == 401)

        let (_, before) = try await server.call("GET", "/.well-known/jwks.json")
        let rotated = try admin(["keys", "rotate"])
        #expect(rotated.status == 0 && rotated.stdout.contains("new key"), "\(rotated.stderr)")
        #expect(try admin(["keys", "list"]).stdout.split(separator: "\n").count == 2)
        // The server reloads its keys within 30 s; the new one is in the database's JWKS at once.
        if case .array(let keys)? = before["keys"] { #expect(keys.count == 1) }

        let token = try admin(["registration-token", "kit"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.hasPrefix("prt_"))
        let (optionsStatus, optionsJSON) = try await server.call(
            "POST", "/api/auth/register/options", json: Data(#"{"registrationToken":"\#(token)"}"#.utf8))
        #expect(optionsStatus == 200 && optionsJSON["user"]?["name"] == .string("kit"), "\(optionsJSON)")

        // Inside addresses need the operator's switch (docs/security.md, "Webhooks").
        let inside = try admin(["webhooks", "add", "http://127.0.0.1:9/hook"])
        #expect(inside.status == 2 && inside.stderr.contains("refused"), "\(inside.stderr)")
        let hook = try PasskeyCLITests.run(
            Self.passkeyd,
            ["admin", "webhooks", "add", "http://127.0.0.1:9/hook", "--events", "sign_in", "passkey_added", "--database", database],
            environment: ["PASSKEYD_CONFIG": "", "PASSKEYD_WEBHOOK_ALLOW_PRIVATE": "1"])
        #expect(hook.status == 0 && hook.stdout.hasPrefix("whsec_"), "\(hook.stderr)")
        let hooks = try admin(["webhooks", "list"])
        #expect(hooks.stdout.contains("http://127.0.0.1:9/hook") && hooks.stdout.contains("sign_in,passkey_added"))
        #expect(try admin(["webhooks", "add", "ftp://nowhere"]).status == 2)
        #expect(try admin(["webhooks", "remove", String(hooks.stdout.prefix(36))]).status == 0)
        #expect(try admin(["webhooks", "deliveries"]).status == 0)
    }

    @Test func perIPLimitsAnswer429WithRetryAfterOnARealSocket() async throws {
        // Windows are fixed (they start at multiples of 600 s): seven calls that straddle a start
        // are counted in two windows. On a busy machine the calls can take many seconds, so the
        // window is read before and after them, and a run that straddled one starts again on a
        // fresh database (its counters start at zero). Two straddles in a row would need the
        // calls to take a whole window.
        for attempt in 1...3 {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-limit-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let server = try ServeBinaryTests.Server(
                database: directory.appendingPathComponent("l.sqlite").path,
                environment: ["PASSKEYD_RATE_LIMIT_PER_IP": "5", "PASSKEYD_RATE_LIMIT_WINDOW": "600"])
            defer { server.stop() }
            try await server.waitUntilReady()
            let port = server.port
            let window = { Int(Date().timeIntervalSince1970 / 600) }
            let started = window()
            var statuses: [Int] = []
            for _ in 0..<7 { statuses.append(try await server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8)).0) }
            let (status, body, headers) = try await server.send("POST", "/api/auth/register/verify", json: Data("{}".utf8))
            if window() != started && attempt < 3 { continue }
            #expect(statuses == [200, 200, 200, 200, 200, 429, 429])
            #expect(status == 429 && body["error"]?["code"] == .string("rate_limited"))
            #expect(Int(headers["Retry-After"] ?? "").map { (1...600).contains($0) } == true)
            // Pages, the session check and health are not limited.
            #expect(try await server.call("GET", "/healthz").0 == 200)
            #expect(try await server.call("GET", "/api/auth/session").0 == 401)
            return
        }
    }
}
