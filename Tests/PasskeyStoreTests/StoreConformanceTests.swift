import Foundation
import NIOSSL
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// One suite, both stores: SQLite always; PostgreSQL when `PASSKEYD_TEST_POSTGRES_URL` names a
/// server (scripts/test starts one and sets `PASSKEYD_REQUIRE_POSTGRES=1`, so it cannot be skipped).
@Suite("PasskeyStore conformance (SQLite and PostgreSQL)")
struct StoreConformanceTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func account(_ name: String) -> Account {
        Account(username: name, displayName: name.capitalized, userHandle: (0..<64).map { _ in UInt8.random(in: 0...255) }, createdAt: t0)
    }

    static func passkey(for account: Account, id: [UInt8]? = nil, signCount: UInt32 = 0) -> Passkey {
        Passkey(
            credentialID: id ?? (0..<32).map { _ in UInt8.random(in: 0...255) }, accountID: account.id, publicKey: [0xA5, 1, 2],
            signCount: signCount, aaguid: "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", transports: ["internal", "hybrid"],
            backupEligible: true, backedUp: true, userVerified: true, attestationFormat: "none", attestationTrusted: false,
            name: "iCloud Keychain", createdAt: t0)
    }

    static func session(for account: Account, expires: TimeInterval = 3600, method: String = "passkey", credentialID: [UInt8]? = nil)
        -> SessionRecord
    {
        SessionRecord(
            tokenHash: (0..<32).map { _ in UInt8.random(in: 0...255) }, accountID: account.id, createdAt: t0,
            expiresAt: t0.addingTimeInterval(expires), userAgent: "test", ipAddress: "127.0.0.1", method: method,
            credentialID: credentialID)
    }

    /// postgres-nio 1.33's pool stops the process when a request comes while fewer connections
    /// are alive than its minimum (a database outage under load): the pools keep no minimum.
    /// Each cancelled idle timer holds memory until its deadline, so the idle timeout is short,
    /// and no keep-alive pings are sent (a keep-alive timer per query).
    @Test func thePoolKeepsNoMinimumAndArmsNoKeepAliveTimer() throws {
        let url = "postgres://passkeyd@db.example:5432/passkeyd?sslmode=disable"
        let server = try PostgresStore.configuration(url: url, options: PostgresStore.Options())
        #expect(server.options.minimumConnections == 0)
        #expect(server.options.maximumConnections == 20)
        #expect(server.options.connectionIdleTimeout == .seconds(10))
        #expect(server.options.keepAliveBehavior == nil)
        let probe = try PostgresStore.probeConfiguration(url: url, timeout: .seconds(2))
        #expect(probe.options.connectTimeout == .seconds(2))
        #expect(probe.host == "db.example" && probe.port == 5432)
    }

    /// Every kind of value comes back as it went in: empty and binary bytes, text beyond ASCII,
    /// the extremes of a 64-bit integer, NULL, flags and IDs.
    @Test(arguments: TestDatabase.kinds)
    func valuesComeBackAsTheyWentIn(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        var ada = Self.account("zoë-名前")
        ada.displayName = "Zoë \u{1F511} \"quoted\" 'single' \\ back"
        ada.userHandle = [0, 0xFF, 0, 0x80] + (0..<60).map { UInt8($0) }
        var key = Self.passkey(for: ada, signCount: UInt32.max)
        key.publicKey = [0]
        key.transports = []
        key.backedUp = false
        try await store.createAccount(ada, passkey: key, session: nil, audit: [])
        let account = try #require(try await store.account(id: ada.id))
        #expect(account == ada)
        #expect(try await store.account(userHandle: ada.userHandle)?.id == ada.id)
        let passkey = try #require(try await store.passkey(credentialID: key.credentialID))
        #expect(passkey.signCount == UInt32.max && passkey.publicKey == [0] && passkey.transports == [] && !passkey.backedUp)
        #expect(passkey.lastUsedAt == nil && account.lastSignInAt == nil && account.passwordHash == nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func usernameKeysFollowTheCurrentRules(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ＡＤＡ")
        try await store.createAccount(ada, passkey: Self.passkey(for: ada), session: nil, audit: [])
        #expect(try await store.account(username: "ada")?.id == ada.id)
        #expect(try await store.account(username: "Ａｄａ")?.id == ada.id)
        #expect(try await store.rekeyUsernames().isEmpty)
    }

    @Test func sslModesHaveTheirLibpqMeanings() throws {
        func verification(_ mode: String, root: String? = nil) throws -> CertificateVerification? {
            switch try PostgresStore.tlsUse(sslmode: mode, rootCertificate: root) {
            case .disable: return nil
            case .prefer(let configuration), .require(let configuration): return configuration.certificateVerification
            }
        }
        #expect(try verification("disable") == nil)
        #expect(try verification("prefer") == CertificateVerification.none)
        #expect(try verification("require") == CertificateVerification.none)
        #expect(try verification("require", root: "/etc/ssl/ca.pem") == .noHostnameVerification)
        #expect(try verification("verify-ca") == .noHostnameVerification)
        #expect(try verification("verify-full") == .fullVerification)
        #expect(throws: StoreError.self) { try PostgresStore.tlsUse(sslmode: "verify-everything", rootCertificate: nil) }
        if case .require = try PostgresStore.tlsUse(sslmode: "require", rootCertificate: nil) {
        } else {
            Issue.record("require must require TLS")
        }
        if case .prefer = try PostgresStore.tlsUse(sslmode: "prefer", rootCertificate: nil) {
        } else {
            Issue.record("prefer must only prefer TLS")
        }
    }

    @Test func postgresIsThereWhenRequired() {
        if ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_POSTGRES"] == "1" {
            #expect(TestDatabase.postgresURL != nil, "scripts/test must start PostgreSQL and set PASSKEYD_TEST_POSTGRES_URL")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func migrationsAreIdempotentAndVersioned(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        #expect(try await store.schemaVersion() == 18)
        #expect(try await store.migrate().isEmpty)
        try await store.ping()
    }

    /// Migration 10 rebuilds SQLite's ceremonies and sessions tables (WITHOUT ROWID) and drops an
    /// index on both stores: what a version-9 database held is all there after it, and works.
    @Test(arguments: TestDatabase.kinds)
    func migrationTenKeepsSessionsAndOpenCeremonies(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeUnmigratedStore(kind)
        #expect(try await store.migrate(through: 9) == Array(1...9))
        #expect(try await store.schemaVersion() == 9)
        let ada = Self.account("ada")
        let key = Self.passkey(for: ada, signCount: 5)
        let session = Self.session(for: ada)
        // Written as version 9 wrote them (the passkey without the columns of version 12, the
        // account and audit line without those of version 13).
        try await store.transaction { db in
            try await db.execute(Self.insertAsVersion12(ada))
            try await db.execute(Self.insertWithoutExtensionColumns(key))
            try await db.execute(
                """
                INSERT INTO sessions (token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
                VALUES (\(session.tokenHash), \(session.accountID), \(session.createdAt), \(session.expiresAt), \(session.userAgent),
                        \(session.ipAddress), \(session.method), \(session.credentialID))
                """)
            try await db.execute(Self.insertAsVersion12(AuditEvent(time: Self.t0, kind: "sign_up", accountID: ada.id)))
        }
        let challenge = ChallengeRecord(
            challenge: Array(repeating: 7, count: 32), ceremony: .authentication, accountID: ada.id, api: "native",
            userVerification: "required", state: [1, 2, 3], createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(300))
        // As version 9 wrote it (no `pending_email`, migration 15's).
        try await store.writer.run(
            """
            INSERT INTO challenges (challenge_hash, challenge, ceremony, account_id, unknown_user, api, user_verification, conditional, state,
                                    created_at, expires_at)
            VALUES (\(ChallengeHash.of(challenge.challenge)), \(challenge.challenge), \(challenge.ceremony.rawValue), \(challenge.accountID),
                    \(false), \(challenge.api), \(challenge.userVerification), \(false), \(challenge.state), \(challenge.createdAt),
                    \(challenge.expiresAt))
            """)

        #expect(try await store.migrate() == [10, 11, 12, 13, 14, 15, 16, 17, 18])
        #expect(try await store.schemaVersion() == 18)
        // Migration 12: the passkey's extension facts and PRF salt are unknown, not made up.
        let migrated = try #require(try await store.passkey(credentialID: key.credentialID))
        #expect(migrated.extensions == PasskeyExtensions())
        #expect(migrated.prfSalt == nil)
        #expect(migrated.signCount == key.signCount && migrated.publicKey == key.publicKey)
        #expect(try await store.challenge(challenge.challenge) == challenge)
        #expect(try await store.session(tokenHash: session.tokenHash, now: Self.t0)?.1.id == ada.id)
        #expect(try await store.openChallengeCount(now: Self.t0) == 1)
        // The rebuilt tables take new rows, keep their keys unique and their cascades.
        #expect(
            try await store.completeSignIn(
                challenge: challenge.challenge, credentialID: key.credentialID, previousSignCount: 5, signCount: 6, backedUp: false,
                counterAnomaly: false, at: Self.t0, session: Self.session(for: ada), audit: []) == .signedIn)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).count == 2)
        await #expect(throws: StoreError.self) { try await store.createSession(session) }
        #expect(try await store.sweepExpired(now: Self.t0.addingTimeInterval(86_400 * 400)) >= 2)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).isEmpty)
        if kind == .sqlite {
            let tables = try await store.reader.rows(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%WITHOUT ROWID%' ORDER BY name")
            #expect(
                try tables.map { try $0.text("name") } == ["admin_bootstrap", "admin_sessions", "challenges", "daily_metrics", "sessions"])
        }
        // Migration 10 dropped audit_time; migration 13 made it again, on (time, metric).
        #expect(
            try await store.reader.count(
                kind == .sqlite
                    ? "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'audit_time' AND sql LIKE '%metric%'"
                    : "SELECT COUNT(*) AS n FROM pg_indexes WHERE indexname = 'audit_time' AND indexdef LIKE '%metric%'") == 1)
        if let postgres = store as? PostgresStore { postgres.close() }
    }

    /// An account row as versions before 13 wrote it (no search keys).
    static func insertAsVersion12(_ account: Account) -> SQL {
        """
        INSERT INTO accounts (id, username, username_key, display_name, user_handle, created_at, disabled, last_sign_in_at, password_hash)
        VALUES (\(account.id), \(account.username), \(Account.key(for: account.username)), \(account.displayName),
                \(account.userHandle), \(account.createdAt), \(account.disabled), \(account.lastSignInAt), \(account.passwordHash))
        """
    }

    /// An audit line as versions before 13 wrote it (no metric, no traceparent).
    static func insertAsVersion12(_ event: AuditEvent) -> SQL {
        """
        INSERT INTO audit_events (time, kind, account_id, credential_id, ip_address, user_agent, detail)
        VALUES (\(event.time), \(event.kind), \(event.accountID), \(event.credentialID), \(event.ipAddress), \(event.userAgent), \(event.detail))
        """
    }

    /// A passkey row as versions before 12 wrote it.
    static func insertWithoutExtensionColumns(_ passkey: Passkey) -> SQL {
        """
        INSERT INTO passkeys (credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                              user_verified, attestation_format, attestation_trusted, name, created_at, last_used_at, counter_anomalies)
        VALUES (\(passkey.credentialID), \(passkey.accountID), \(passkey.publicKey), \(Int64(passkey.signCount)), \(passkey.aaguid),
                \(StoreValues.encodeList(passkey.transports)), \(passkey.backupEligible), \(passkey.backedUp), \(passkey.userVerified),
                \(passkey.attestationFormat), \(passkey.attestationTrusted), \(passkey.name), \(passkey.createdAt), \(passkey.lastUsedAt),
                \(passkey.counterAnomalies))
        """
    }

    @Test(arguments: TestDatabase.kinds)
    func accountsAreFoundByIDUsernameAnyCaseAndHandle(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("Ada")
        let key = Self.passkey(for: ada)
        let first = Self.session(for: ada)
        try await store.createAccount(
            ada, passkey: key, session: first, audit: [AuditEvent(time: Self.t0, kind: "sign_up", accountID: ada.id)])
        #expect(try await store.account(id: ada.id)?.username == "Ada")
        #expect(try await store.account(username: "ADA")?.id == ada.id)
        #expect(try await store.account(userHandle: ada.userHandle)?.id == ada.id)
        #expect(try await store.account(username: "bob") == nil)
        #expect(try await store.passkey(credentialID: key.credentialID) == key)
        let pair = try #require(try await store.passkeyAndAccount(credentialID: key.credentialID))
        let stored = try await store.account(id: ada.id)
        #expect(pair.0 == key && pair.1 == stored)
        #expect(try await store.passkeyAndAccount(credentialID: [1, 2, 3]) == nil)
        #expect(try await store.session(tokenHash: first.tokenHash, now: Self.t0)?.1.id == ada.id)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 10).map(\.kind) == ["sign_up"])
    }

    @Test(arguments: TestDatabase.kinds)
    func aConflictingSignUpWritesNothing(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let key = Self.passkey(for: ada)
        try await store.createAccount(ada, passkey: key, session: nil, audit: [])
        // Same username in another case: conflict, and the new account's session and audit are not there either.
        let twin = Self.account("ADA")
        let twinSession = Self.session(for: twin)
        await #expect(throws: StoreError(.conflict, "")) {
            try await store.createAccount(
                twin, passkey: Self.passkey(for: twin), session: twinSession,
                audit: [AuditEvent(time: Self.t0, kind: "sign_up", accountID: twin.id)])
        }
        #expect(try await store.account(id: twin.id) == nil)
        #expect(try await store.auditEvents(accountID: twin.id, limit: 10).isEmpty)
        // A credential ID registered to someone else: conflict, and the account is not created.
        let bob = Self.account("bob")
        await #expect(throws: StoreError(.conflict, "")) {
            try await store.createAccount(bob, passkey: Self.passkey(for: bob, id: key.credentialID), session: nil, audit: [])
        }
        #expect(try await store.account(username: "bob") == nil)
        await #expect(throws: StoreError(.conflict, "")) { try await store.addPasskey(Self.passkey(for: ada, id: key.credentialID)) }
    }

    /// A store holding one account, Ada, with one passkey at `signCount`.
    static func adaWithPasskey(_ kind: TestDatabase.Kind, signCount: UInt32) async throws -> (any PasskeyStore, Account, Passkey) {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let key = Self.passkey(for: ada, signCount: signCount)
        try await store.createAccount(ada, passkey: key, session: nil, audit: [])
        return (store, ada, key)
    }

    /// Hot reads name their columns one by one (PostgreSQL prepares them, and a prepared
    /// statement's result shape is fixed): the lists must be exactly the tables' (a column added
    /// by a migration and not listed would be lost). Accounts leave out only their keys
    /// (`username_key`, and the search keys of version 13).
    @Test(arguments: TestDatabase.kinds)
    func theColumnListsAreTheTables(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        func columns(_ table: String) async throws -> [String] {
            switch kind {
            case .sqlite:
                try await store.reader.rows("SELECT name AS n FROM pragma_table_info(\(table))").map { try $0.text("n") }
            case .postgres:
                try await store.reader.rows(
                    "SELECT column_name::text AS n FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = \(table)"
                ).map { try $0.text("n") }
            }
        }
        for (table, listed) in [
            ("challenges", ChallengeRecord.columns), ("passkeys", Passkey.columns),
            (
                "accounts",
                Account.columns + ["username_key", "display_name_key", "external_id_key"]
                    + ["email", "email_key", "email_verified_at", "email_recovery_closed", "email_language"]
            ),
        ] {
            // Every table a tenant owns has its tenant_id, read by no model.
            let actual = try await columns(table).filter { $0 != "tenant_id" }
            #expect(Set(actual) == Set(listed), "\(table)")
            #expect(actual.count == listed.count, "\(table)")
        }
    }

    /// A transaction whose task is cancelled half-way, or whose body throws, leaves nothing
    /// behind and nothing open: the next writes run on their own, not inside it.
    @Test(arguments: TestDatabase.kinds)
    func anInterruptedTransactionIsRolledBackAndLeavesTheWriterFree(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        let started = AsyncStream<Void>.makeStream()
        let stuck = Task {
            try await store.engine.transaction(timeout: nil) { db in
                try await db.run("INSERT INTO settings (name, value) VALUES ('half-way', \([UInt8]([1])))")
                started.continuation.yield()
                try await Task.sleep(for: .seconds(600))
            }
        }
        for await _ in started.stream { break }
        stuck.cancel()
        _ = await stuck.result
        struct Refused: Error {}
        await #expect(throws: StoreError.self) {
            try await store.engine.transaction(timeout: nil) { db in
                try await db.run("INSERT INTO settings (name, value) VALUES ('thrown', \([UInt8]([2])))")
                throw Refused()
            }
        }
        // Both were rolled back, and the writer takes new work (in and out of transactions).
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: [9], ceremony: .authentication, userVerification: "preferred", createdAt: Self.t0, expiresAt: Self.t0))
        #expect(try await store.engine.reader.count("SELECT COUNT(*) AS n FROM settings WHERE name IN ('half-way', 'thrown')") == 0)
        #expect(try await store.takeChallenge([9]) != nil)
        let account = Self.account("after")
        try await store.createAccount(account, passkey: Self.passkey(for: account), session: nil, audit: [])
        #expect(try await store.account(username: "after") != nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func theServerSecretIsCreatedOnceAndShared(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let secrets = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<8 { group.addTask { try await store.serverSecret() } }
            return try await group.reduce(into: Set<[UInt8]>()) { $0.insert($1) }
        }
        #expect(secrets.count == 1 && secrets.first?.count == 32)
    }

    @Test(arguments: TestDatabase.kinds)
    func adminListsAuditAndStatistics(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        var accounts: [Account] = []
        for name in ["carol", "Ada", "bob"] {
            let account = Self.account(name)
            accounts.append(account)
            try await store.createAccount(account, passkey: Self.passkey(for: account), session: nil, audit: [])
        }
        #expect(try await store.accounts(after: nil, limit: 2).map(\.username) == ["Ada", "bob"])
        #expect(try await store.accounts(after: "bob", limit: 10).map(\.username) == ["carol"])
        for n in 0..<5 {
            try await store.appendAudit(
                AuditEvent(
                    time: Self.t0.addingTimeInterval(Double(n)), kind: "sign_in_failed", accountID: accounts[0].id,
                    credentialID: [9], ipAddress: "10.0.0.\(n)", userAgent: "ua", detail: "signature_invalid"))
        }
        let events = try await store.auditEvents(accountID: accounts[0].id, limit: 3)
        #expect(events.map(\.ipAddress) == ["10.0.0.4", "10.0.0.3", "10.0.0.2"])
        #expect(events.first?.credentialID == [9] && events.first?.detail == "signature_invalid")
        #expect(try await store.auditEvents(accountID: nil, limit: 100).count == 5)

        let key = try #require(try await store.passkeys(accountID: accounts[1].id).first)
        _ = try await store.completeSignIn(
            challenge: nil, credentialID: key.credentialID, previousSignCount: 0, signCount: 1, backedUp: true, counterAnomaly: false,
            at: Self.t0, session: Self.session(for: accounts[1]), audit: [])
        _ = try await store.setDisabled(accountID: accounts[2].id, disabled: true)
        let stats = try await store.statistics(now: Self.t0, activeSince: Self.t0.addingTimeInterval(-86_400))
        #expect(stats.accounts == 3 && stats.disabledAccounts == 1 && stats.passkeys == 3 && stats.accountsWithPasskey == 3)
        #expect(stats.passkeysByAAGUID == ["fbfc3007-154e-4ecc-8c0b-6e020557d7bd": 3])
        #expect(stats.liveSessions == 1 && stats.activeAccounts == 1 && stats.activeAccountsWithPasskey == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func aMetadataBLOBIsReplacedOnlyByANewerOne(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        #expect(try await store.metadataBLOB() == nil)
        #expect(try await store.metadataBLOBNumber() == nil)
        let first = MetadataBLOBRecord(number: 41, nextUpdate: "2027-02-01", blob: "a.b.c", importedAt: Self.t0)
        try await store.saveMetadataBLOB(first, force: false)
        #expect(try await store.metadataBLOB() == first)
        // The same number again, or an older one: refused, the stored one stays.
        for number in [41, 40] {
            await #expect(throws: StoreError(.outdated, "")) {
                try await store.saveMetadataBLOB(
                    MetadataBLOBRecord(number: number, nextUpdate: "2026-01-01", blob: "old", importedAt: Self.t0), force: false)
            }
        }
        #expect(try await store.metadataBLOB() == first)
        let newer = MetadataBLOBRecord(
            number: 42, nextUpdate: "2027-03-01", blob: String(repeating: "x", count: 100_000), importedAt: Self.t0)
        try await store.saveMetadataBLOB(newer, force: false)
        #expect(try await store.metadataBLOB() == newer)
        #expect(try await store.metadataBLOBNumber() == 42)
        // Forced: an operator rolls back on purpose.
        try await store.saveMetadataBLOB(first, force: true)
        #expect(try await store.metadataBLOBNumber() == 41)
    }
}
