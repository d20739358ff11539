import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// A tenant in a database of its own (`passkeyd tenant add --database`, issue 44): everything
/// it owns is written there and nothing in the server's database; the server's registry names
/// it; its upkeep (here: its mail outbox) runs on it; removing it removes its rows there; a
/// database that cannot be opened makes its tenant answer 503 and nothing else.
@Suite struct TenantDatabaseTests {
    static let host = "g.localhost"
    static let origin = "http://g.localhost:8080"
    static let opener: TenantDatabases.Opener = { try await TestDatabase.open(url: $0) }

    /// A live server on a new database of the HTTP suites' kind, with tenant gamma added in a
    /// new database of its own (`database`: another URL instead, nil: none made).
    static func server(
        environment: [String: String] = [:], gammaSettings: String = "", serverOpener: TenantDatabases.Opener? = nil,
        _ body:
            @escaping @Sendable (_ main: any PasskeyStore, _ own: any PasskeyStore, TenantAdmin, TenantHTTPTests.HostedClients)
            async throws -> Void
    ) async throws {
        let main = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        let ownURL = try await TestDatabase.makeURL(TestDatabase.httpSuiteKind)
        let settings = try ServerSettings(
            environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080", "PASSKEYD_RATE_LIMITS": "off"]
                .merging(environment) { $1 }, file: nil)
        let databases = TenantDatabases(main: main, opener: opener)
        let admin = TenantAdmin(store: main, server: settings, namesFiles: true, databases: databases)
        let record = try await admin.add(
            name: "gamma", hosts: [host], settings: Data(#"{"rpID":"\#(host)","origins":["\#(origin)"]\#(gammaSettings)}"#.utf8),
            database: ownURL, by: "test")
        #expect(record.database == ownURL)
        let own = try await databases.store(for: ownURL)
        let service = try PasskeyService(configuration: settings.domain, store: main)
        var logger = Logger(label: "passkeyd-test")
        logger.logLevel = .warning
        let app = PasskeyServer.application(
            service: service, edge: settings.edge, port: 0, logger: logger, settings: settings, openDatabase: serverOpener ?? opener)
        try await app.test(.live) { client in
            let clients = TenantHTTPTests.HostedClients(live: client)
            do {
                try await body(main, own, admin, clients)
            } catch {
                await clients.closeAll()
                throw error
            }
            await clients.closeAll()
        }
        await databases.close()
    }

    @Test func everythingATenantOfItsOwnDatabaseOwnsIsWrittenThereAndRemovedWithIt() async throws {
        try await Self.server { main, own, admin, clients in
            let gamma = try clients.on(Self.host), home = try clients.on("localhost")
            var device = SoftwareAuthenticator(), other = SoftwareAuthenticator()
            let (token, firstCredential, _) = try await gamma.signUp("sam", authenticator: &device, origin: Self.origin)
            var credential = firstCredential
            #expect(
                try await gamma.signIn(username: "sam", credential: &credential, authenticator: device, origin: Self.origin).status == .ok)
            #expect(try await gamma.request(.get, "/api/auth/session", token: token).status == .ok)
            _ = try await home.signUp("sam", authenticator: &other, origin: "http://localhost:8080")

            // The account, its passkey, its sessions and audit are in gamma's database alone.
            let account = try #require(try await own.scoped(to: "gamma").account(username: "sam"))
            #expect(try await own.scoped(to: "gamma").passkeys(accountID: account.id).count == 1)
            #expect(try await own.scoped(to: "gamma").auditEvents(accountID: account.id, limit: 10).count >= 2)
            #expect(try await main.scoped(to: "gamma").account(username: "sam") == nil)
            #expect(try await main.scoped(to: "gamma").statistics(now: Date(), activeSince: .distantPast).accounts == 0)
            // The default tenant's own sam is in the server's database, and not in gamma's.
            #expect(try await main.account(username: "sam") != nil)
            #expect(try await own.account(username: "sam") == nil)
            // Its signing keys too: gamma's JWKS names keys kept in its database.
            let jwks = try await gamma.request(.get, "/.well-known/jwks.json")
            #expect(jwks.status == .ok)

            #expect(try await admin.show("gamma").accounts == 1)
            await #expect(throws: PasskeyServiceError.self) { try await admin.remove(name: "gamma", deleteData: false, by: "test") }
            #expect(try await own.scoped(to: "gamma").account(username: "sam") != nil, "a refused removal deletes nothing")
            try await admin.remove(name: "gamma", deleteData: true, by: "test")
            #expect(try await own.scoped(to: "gamma").account(username: "sam") == nil)
            #expect(try await own.scoped(to: "gamma").statistics(now: Date(), activeSince: .distantPast).accounts == 0)
            #expect(try await main.account(username: "sam") != nil, "the default tenant keeps its own")

            // Every instance stops serving it within a poll: its host is no tenant's.
            var answer = try await gamma.request(.get, "/api/auth/session", token: token)
            for _ in 0..<100 where answer.errorCode != "unknown_tenant" {
                try await Task.sleep(for: .milliseconds(100))
                answer = try await gamma.request(.get, "/api/auth/session", token: token)
            }
            #expect(answer.status == .notFound && answer.errorCode == "unknown_tenant", "\(answer.json)")
        }
    }

    /// Once no tenant names a database, the server lets it go (its upkeep stops, its pools
    /// close): a tenant added on it again later makes the server open it anew.
    @Test func aDatabaseNoTenantNamesIsLetGoAndOpenedAnewWhenNamedAgain() async throws {
        final class Opens: Sendable { let count = Atomic(0) }
        let opens = Opens()
        let counting: TenantDatabases.Opener = { url in
            opens.count.add(1, ordering: .relaxed)
            return try await TestDatabase.open(url: url)
        }
        try await Self.server(serverOpener: counting) { _, _, admin, clients in
            // Each look on a fresh connection; one that fails (the server closing it) is a "not yet".
            func until(_ condition: () async throws -> Bool) async throws -> Bool {
                for _ in 0..<200 {
                    if (try? await condition()) == true { return true }
                    try await Task.sleep(for: .milliseconds(100))
                }
                return false
            }
            let record = try await admin.record("gamma")
            let url = try #require(record.database)
            #expect(try await until { opens.count.load(ordering: .relaxed) == 1 })
            try await admin.remove(name: "gamma", deleteData: true, by: "test")
            #expect(
                try await until {
                    try await clients.on(Self.host).request(.get, "/.well-known/webauthn", origin: nil).errorCode == "unknown_tenant"
                })
            _ = try await admin.add(name: "gamma", hosts: record.hosts, settings: Data(record.settings.utf8), database: url, by: "test")
            #expect(
                try await until {
                    try await clients.on(Self.host).request(.get, "/.well-known/webauthn", origin: nil).status == .ok
                        && opens.count.load(ordering: .relaxed) == 2
                }, "opened \(opens.count.load(ordering: .relaxed)) times")
        }
    }

    /// Only the CLI, run on the server, chooses a tenant's database: never the server's own
    /// database, never over HTTP, never changed afterwards.
    @Test func aTenantsDatabaseIsChosenOnceOnTheServerAndNeverTheServersOwn() async throws {
        let mainURL = try await TestDatabase.makeURL(.sqlite)
        let main = try await TestDatabase.open(url: mainURL)
        let settings = try ServerSettings(
            environment: [
                "PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080", "PASSKEYD_DATABASE_URL": "sqlite://main.sqlite",
            ], file: nil)
        let databases = TenantDatabases(main: main, opener: Self.opener)
        defer { Task { await databases.close() } }
        let cli = TenantAdmin(store: main, server: settings, namesFiles: true, databases: databases)
        let api = TenantAdmin(store: main, server: settings, namesFiles: false, databases: databases)
        let json = Data(#"{"rpID":"\#(Self.host)","origins":["\#(Self.origin)"]}"#.utf8)
        func refusal(_ body: () async throws -> Void) async -> String {
            do {
                try await body()
                return "accepted"
            } catch let error as PasskeyServiceError {
                return error.message
            } catch let error as APIError {
                return error.message
            } catch {
                return "\(error)"
            }
        }
        #expect(
            await refusal { _ = try await cli.add(name: "g", hosts: [], settings: json, database: "sqlite://main.sqlite", by: "t") }
                .contains("is the server's database"))
        #expect(
            await refusal { _ = try await api.add(name: "g", hosts: [], settings: json, database: "sqlite://x.sqlite", by: "t") }
                .contains("passkeyd tenant add --database"))
        #expect(
            await refusal { _ = try await cli.add(name: "g", hosts: [], settings: json, database: "mysql://db/x", by: "t") }
                .contains("cannot be used"))
        // The server's database spelled another way is known by its secret.
        let respelled = mainURL.replacingOccurrences(of: "/test.sqlite", with: "/./test.sqlite")
        #expect(
            await refusal { _ = try await cli.add(name: "g", hosts: [], settings: json, database: respelled, by: "t") }
                .contains("is the server's database"))
        // Another server's database (accounts of its own) is never taken over.
        let otherURL = try await TestDatabase.makeURL(.sqlite)
        let other = try await TestDatabase.open(url: otherURL)
        try await other.createAccount(
            Account(username: "theirs", displayName: "", userHandle: RelyingParty.makeUserHandle(), createdAt: Date()), audit: [])
        #expect(
            await refusal { _ = try await cli.add(name: "g", hosts: [], settings: json, database: otherURL, by: "t") }
                .contains("is a passkeyd server's database"))
        #expect(try await other.account(username: "theirs") != nil)
        // Rows under the name that this server did not put there: accounts are never deleted;
        // another registry's mark is refused.
        let strayURL = try await TestDatabase.makeURL(.sqlite)
        let stray = try await TestDatabase.open(url: strayURL)
        try await stray.scoped(to: "h").createAccount(
            Account(username: "someone", displayName: "", userHandle: RelyingParty.makeUserHandle(), createdAt: Date()), audit: [])
        #expect(
            await refusal { _ = try await cli.add(name: "h", hosts: [], settings: json, database: strayURL, by: "t") }
                .contains("that this server did not put there"))
        #expect(try await stray.scoped(to: "h").account(username: "someone") != nil)
        try await stray.setTenantMark(id: "i", mark: [9, 9, 9])
        #expect(
            await refusal { _ = try await cli.add(name: "i", hosts: [], settings: json, database: strayURL, by: "t") }
                .contains("of another server"))
        #expect(try await main.tenantRecords().isEmpty, "nothing written by a refusal")

        let ownURL = try await TestDatabase.makeURL(.sqlite)
        _ = try await cli.add(name: "g", hosts: [], settings: json, database: ownURL, by: "t")
        // The same name again is a conflict, and its database's rows are not touched.
        let own = try await databases.store(for: ownURL)
        let account = Account(username: "kept", displayName: "Kept", userHandle: RelyingParty.makeUserHandle(), createdAt: Date())
        try await own.scoped(to: "g").createAccount(account, audit: [])
        #expect(
            await refusal { _ = try await cli.add(name: "g", hosts: ["other.localhost"], settings: json, database: ownURL, by: "t") }
                .contains("taken"))
        #expect(try await own.scoped(to: "g").account(username: "kept") != nil)
        // A change keeps its database.
        let changed = try await api.change(name: "g", hosts: nil, patch: Data(#"{"rpName":"G"}"#.utf8), by: "t")
        #expect(changed.database == ownURL)
        #expect(try await main.tenantRecords().first?.database == ownURL)

        // Removed, then rows written late under its name (an instance that had not polled
        // yet): added again in that database, it starts with none of them (its mark is ours).
        try await cli.remove(name: "g", deleteData: true, by: "t")
        try await own.scoped(to: "g").createAccount(
            Account(username: "late", displayName: "", userHandle: RelyingParty.makeUserHandle(), createdAt: Date()), audit: [])
        _ = try await cli.add(name: "g", hosts: [], settings: json, database: ownURL, by: "t")
        #expect(try await own.scoped(to: "g").account(username: "late") == nil)
    }

    /// A tenant's own mail outbox is sent through the server's relay by the upkeep that runs on
    /// its database (nothing sends it otherwise: the default tenant's dispatcher reads the
    /// server's database).
    @Test func aTenantsMailQueuedInItsDatabaseIsSent() async throws {
        guard let smtp = try SMTPTestServer.start(["--no-starttls"]) else {
            if EmailTests.required { Issue.record("no Python with aiosmtpd (PASSKEYD_PYTHON): ./scripts/test installs it") }
            return
        }
        defer { smtp.close() }
        try await Self.server(
            environment: [
                "PASSKEYD_SMTP_URL": "smtp://127.0.0.1:\(smtp.smtpPort)", "PASSKEYD_SMTP_ALLOW_PLAINTEXT": "1",
                "PASSKEYD_EMAIL_FROM": "Home <auth@example.com>",
            ],
            gammaSettings: #","email":{"from":"Gamma <auth@gamma.example>"}"#
        ) { main, own, _, clients in
            let gamma = try clients.on(Self.host)
            let options = try await gamma.post("/api/auth/register/options", ["username": "mia", "email": "mia@example.com"])
            #expect(options.status == .ok, "\(options.json)")
            var device = SoftwareAuthenticator()
            let (registration, _) = try device.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: Self.origin)
            let verify = try await gamma.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(verify.status == .ok, "\(verify.json)")
            var received: [SMTPTestServer.Received] = []
            for _ in 0..<200 {
                received = smtp.received().filter { $0.recipients.contains("mia@example.com") }
                if !received.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(received.count == 1, "the tenant's mail, sent from its database's outbox")
            #expect(received.first?.text.contains("auth@gamma.example") == true)
            #expect(try await main.scoped(to: "gamma").account(username: "mia") == nil)
            #expect(try await own.scoped(to: "gamma").account(username: "mia") != nil)
        }
    }

    /// A database that cannot be opened: its tenant answers 503 `tenant_unavailable`, the
    /// others are served.
    @Test func aTenantWhoseDatabaseCannotBeOpenedAnswers503AndTheOthersAreServed() async throws {
        let main = try await TestDatabase.makeStore(.sqlite)
        let now = Date()
        try await main.addTenant(
            TenantRecord(
                id: "lost", hosts: ["lost.localhost"], settings: #"{"rpID":"lost.localhost","origins":["http://lost.localhost:8080"]}"#,
                createdAt: now, updatedAt: now, database: "sqlite:///nonexistent-\(UUID().uuidString)/x.sqlite"))
        let settings = try ServerSettings(
            environment: ["PASSKEYD_RP_ID": "localhost", "PASSKEYD_ORIGINS": "http://localhost:8080"], file: nil)
        let service = try PasskeyService(configuration: settings.domain, store: main)
        var logger = Logger(label: "passkeyd-test")
        logger.logLevel = .critical
        let app = PasskeyServer.application(
            service: service, edge: settings.edge, port: 0, logger: logger, settings: settings, openDatabase: Self.opener)
        try await app.test(.live) { client in
            let clients = TenantHTTPTests.HostedClients(live: client)
            let lost = try clients.on("lost.localhost"), home = try clients.on("localhost")
            for _ in 0..<3 {
                let answer = try await lost.request(.get, "/.well-known/webauthn")
                #expect(answer.status == .serviceUnavailable && answer.errorCode == "tenant_unavailable", "\(answer.json)")
            }
            #expect(try await home.registrationOptions(username: "ok").status == .ok)
            await clients.closeAll()
        }
    }
}
