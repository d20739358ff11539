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

    /// With no session to keep, deleting a passkey ends every session it made: the empty token
    /// hash the store compares against is bound as an empty blob, never as NULL (with NULL,
    /// `token_hash <> NULL` matches nothing and every session would survive its passkey).
    @Test(arguments: TestDatabase.kinds)
    func deletingAPasskeyWithNoSessionToKeepEndsAllItsSessions(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let phone = Self.passkey(for: ada), laptop = Self.passkey(for: ada)
        try await store.createAccount(ada, passkey: phone, session: nil, audit: [])
        try await store.addPasskey(laptop)
        let first = Self.session(for: ada, credentialID: laptop.credentialID)
        let second = Self.session(for: ada, credentialID: laptop.credentialID)
        let viaPhone = Self.session(for: ada, credentialID: phone.credentialID)
        for session in [first, second, viaPhone] { try await store.createSession(session) }
        #expect(try await store.deletePasskey(accountID: ada.id, credentialID: laptop.credentialID) == .deleted)
        #expect(try await store.session(tokenHash: first.tokenHash, now: Self.t0) == nil)
        #expect(try await store.session(tokenHash: second.tokenHash, now: Self.t0) == nil)
        #expect(try await store.session(tokenHash: viaPhone.tokenHash, now: Self.t0)?.0.credentialID == phone.credentialID)
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
    func sessionsEndWithThePasskeyThatMadeThem(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let phone = Self.passkey(for: ada), laptop = Self.passkey(for: ada), key = Self.passkey(for: ada)
        let signUp = Self.session(for: ada, method: "sign_up", credentialID: phone.credentialID)
        try await store.createAccount(ada, passkey: phone, session: signUp, audit: [])
        try await store.addPasskey(laptop)
        try await store.addPasskey(key)
        let viaLaptop = Self.session(for: ada, credentialID: laptop.credentialID)
        let viaKey = Self.session(for: ada, credentialID: key.credentialID)
        let viaRecovery = Self.session(for: ada, method: "recovery_code")
        for session in [viaLaptop, viaKey, viaRecovery] { try await store.createSession(session) }
        let stored = try #require(try await store.session(tokenHash: viaLaptop.tokenHash, now: Self.t0)?.0)
        #expect(stored.method == "passkey" && stored.credentialID == laptop.credentialID)

        let alsoViaLaptop = Self.session(for: ada, credentialID: laptop.credentialID)
        try await store.createSession(alsoViaLaptop)
        #expect(
            try await store.deletePasskey(accountID: ada.id, credentialID: laptop.credentialID, keepSession: alsoViaLaptop.tokenHash)
                == .deleted)
        #expect(try await store.session(tokenHash: viaLaptop.tokenHash, now: Self.t0) == nil)
        // The session that deleted it stays, standing on no passkey.
        #expect(try await store.session(tokenHash: alsoViaLaptop.tokenHash, now: Self.t0)?.0.credentialID == nil)
        try await store.revokeSession(tokenHash: alsoViaLaptop.tokenHash)
        // An administrator's revocation ends its sessions too; a rebound session survives.
        try await store.rebindSession(tokenHash: viaRecovery.tokenHash, credentialID: key.credentialID)
        #expect(try await store.session(tokenHash: viaRecovery.tokenHash, now: Self.t0)?.0.credentialID == key.credentialID)
        try await store.rebindSession(tokenHash: viaRecovery.tokenHash, credentialID: phone.credentialID)
        #expect(try await store.revokePasskey(credentialID: key.credentialID))
        #expect(try await store.session(tokenHash: viaKey.tokenHash, now: Self.t0) == nil)
        #expect(
            try await store.sessions(accountID: ada.id, now: Self.t0).map(\.tokenHash).sorted { $0.lexicographicallyPrecedes($1) }
                == [signUp.tokenHash, viaRecovery.tokenHash].sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasswordChangeKeepsOnlyTheChangingSession(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada"), bob = Self.account("bob")
        #expect(try await store.importAccounts([(ada, "$2b$04$old"), (bob, "$2b$04$bob")]) == [true, true])
        let mine = Self.session(for: ada, method: "password"), other = Self.session(for: ada, method: "password")
        try await store.createSession(mine)
        try await store.createSession(other)
        #expect(try await store.changePassword(accountID: ada.id, hash: "$2b$04$new", keepSession: mine.tokenHash))
        #expect(try await store.account(id: ada.id)?.passwordHash == "$2b$04$new")
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).map(\.tokenHash) == [mine.tokenHash])
        #expect(try await store.account(id: bob.id)?.passwordHash == "$2b$04$bob")
        #expect(try await store.removePassword(accountID: bob.id) == false)
        let carl = Self.account("carl")
        try await store.createAccount(carl, passkey: Self.passkey(for: carl), session: nil, audit: [])
        #expect(try await store.changePassword(accountID: carl.id, hash: "$2b$04$x", keepSession: nil) == false)
    }

    /// Deleting the last passkey and removing the password at the same moment never both
    /// succeed (each transaction holds the account).
    @Test(arguments: TestDatabase.kinds)
    func theLastWayInSurvivesConcurrentRemovals(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        for round in 0..<12 {
            let account = Self.account("race\(round)")
            let passkey = Self.passkey(for: account)
            #expect(try await store.importAccounts([(account, "$2b$04$hash")]) == [true])
            try await store.addPasskey(passkey)
            async let deleted = store.deletePasskey(accountID: account.id, credentialID: passkey.credentialID)
            async let removed = store.removePassword(accountID: account.id)
            let (deletion, removal) = try await (deleted, removed)
            #expect(!(deletion == .deleted && removal), "round \(round): both ways in were removed")
            let left =
                try await store.passkeys(accountID: account.id).count
                + (try await store.account(id: account.id)?.passwordHash == nil ? 0 : 1)
            #expect(left >= 1)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func rateLimitCountsCanBeReadWithoutCounting(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        #expect(try await store.rateLimitHits(key: "k", windowStart: Self.t0) == 0)
        _ = try await store.countHit(key: "k", windowStart: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        _ = try await store.countHit(key: "k", windowStart: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        #expect(try await store.rateLimitHits(key: "k", windowStart: Self.t0) == 2)
        #expect(try await store.rateLimitHits(key: "k", windowStart: Self.t0.addingTimeInterval(60)) == 0)
        // A hit handed back (an attempt that succeeded); never below zero.
        try await store.refundHit(key: "k", windowStart: Self.t0)
        #expect(try await store.rateLimitHits(key: "k", windowStart: Self.t0) == 1)
        try await store.refundHit(key: "k", windowStart: Self.t0)
        try await store.refundHit(key: "k", windowStart: Self.t0)
        #expect(try await store.rateLimitHits(key: "k", windowStart: Self.t0) == 0)
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
        #expect(try await store.schemaVersion() == 11)
        #expect(try await store.migrate().isEmpty)
        try await store.ping()
    }

    /// Migration 10 rebuilds SQLite's ceremonies and sessions tables (WITHOUT ROWID) and drops an
    /// index on both stores: what a version-9 database held is all there after it, and works.
    @Test(arguments: TestDatabase.kinds)
    func migrationTenKeepsSessionsAndOpenCeremonies(_ kind: TestDatabase.Kind) async throws {
        let url = try await TestDatabase.makeURL(kind)
        let store: SQLStore =
            switch kind {
            case .sqlite: try SQLiteStore(path: String(url.dropFirst("sqlite://".count)))
            case .postgres: try PostgresStore(url: url)
            }
        #expect(try await store.migrate(through: 9) == Array(1...9))
        #expect(try await store.schemaVersion() == 9)
        let ada = Self.account("ada")
        let key = Self.passkey(for: ada, signCount: 5)
        let session = Self.session(for: ada)
        try await store.createAccount(
            ada, passkey: key, session: session, audit: [AuditEvent(time: Self.t0, kind: "sign_up", accountID: ada.id)])
        let challenge = ChallengeRecord(
            challenge: Array(repeating: 7, count: 32), ceremony: .authentication, accountID: ada.id, api: "native",
            userVerification: "required", state: [1, 2, 3], createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(300))
        try await store.saveChallenge(challenge)

        #expect(try await store.migrate() == [10, 11])
        #expect(try await store.schemaVersion() == 11)
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
            #expect(try tables.map { try $0.text("name") } == ["challenges", "sessions"])
        }
        #expect(
            try await store.reader.count(
                kind == .sqlite
                    ? "SELECT COUNT(*) AS n FROM sqlite_master WHERE name = 'audit_time'"
                    : "SELECT COUNT(*) AS n FROM pg_indexes WHERE indexname = 'audit_time'") == 0)
        if let postgres = store as? PostgresStore { postgres.close() }
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

    @Test(arguments: TestDatabase.kinds)
    func signInCountersMoveByCompareAndSetUnderRaces(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, key) = try await Self.adaWithPasskey(kind, signCount: 5)
        // Twenty sign-ins verified against counter 5 land at once: exactly one wins.
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for n in 0..<20 {
                let session = Self.session(for: ada)
                group.addTask {
                    try await store.completeSignIn(
                        challenge: nil, credentialID: key.credentialID, previousSignCount: 5, signCount: UInt32(6 + n), backedUp: false,
                        counterAnomaly: false, at: Self.t0.addingTimeInterval(60), session: session,
                        audit: [AuditEvent(time: Self.t0, kind: "sign_in", accountID: ada.id)]) == .signedIn
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(wins == 1)
        let stored = try #require(try await store.passkey(credentialID: key.credentialID))
        #expect(stored.signCount > 5 && stored.backedUp == false && stored.lastUsedAt != nil)
        // The losers wrote no session and no audit line.
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).count == 1)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 100).count == 1)
        #expect(try await store.account(id: ada.id)?.lastSignInAt != nil)
        // A stale previous value never moves it back.
        #expect(
            try await store.completeSignIn(
                challenge: nil, credentialID: key.credentialID, previousSignCount: 5, signCount: 1, backedUp: false,
                counterAnomaly: false, at: Self.t0, session: Self.session(for: ada), audit: []) == .counterRaced)
        #expect(try await store.passkey(credentialID: key.credentialID)?.signCount == stored.signCount)
    }

    /// The sign-in's combined read gives what the two reads it replaces give, each side nil
    /// when absent, and leaves the ceremony in place.
    @Test(arguments: TestDatabase.kinds)
    func aChallengeAndAPasskeyAreReadTogether(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let key = Self.passkey(for: ada, signCount: 41)
        try await store.createAccount(ada, passkey: key, session: nil, audit: [])
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let record = ChallengeRecord(
            challenge: challenge, ceremony: .authentication, accountID: ada.id, pendingUsername: "ada", pendingDisplayName: "Ada",
            pendingUserHandle: [9, 8], pendingAccountID: ada.id, api: "compat", userVerification: "preferred", conditional: true,
            state: [1, 2, 3], createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(300))
        try await store.saveChallenge(record)
        let stored = try #require(try await store.challenge(challenge))
        let pair = try #require(try await store.passkeyAndAccount(credentialID: key.credentialID))

        let both = try await store.challengeAndPasskey(challenge, credentialID: key.credentialID)
        #expect(both.0 == stored)
        #expect(both.1?.0 == pair.0 && both.1?.1 == pair.1)
        let noPasskey = try await store.challengeAndPasskey(challenge, credentialID: [1, 2, 3])
        #expect(noPasskey.0 == stored && noPasskey.1 == nil)
        let noChallenge = try await store.challengeAndPasskey([7, 7, 7], credentialID: key.credentialID)
        #expect(noChallenge.0 == nil && noChallenge.1?.0 == key)
        let neither = try await store.challengeAndPasskey([7, 7, 7], credentialID: [1, 2, 3])
        #expect(neither.0 == nil && neither.1 == nil)
        // A read: the ceremony is still there to be taken once.
        #expect(try await store.takeChallenge(challenge) == stored)
        #expect(try await store.challengeAndPasskey(challenge, credentialID: key.credentialID).0 == nil)
    }

    /// Hot reads name their columns one by one (PostgreSQL prepares them, and a prepared
    /// statement's result shape is fixed): the lists must be exactly the tables' (a column added
    /// by a migration and not listed would be lost). Accounts leave out only `username_key`.
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
            ("challenges", ChallengeRecord.columns), ("passkeys", Passkey.columns), ("accounts", Account.columns + ["username_key"]),
        ] {
            let actual = try await columns(table)
            #expect(Set(actual) == Set(listed), "\(table)")
            #expect(actual.count == listed.count, "\(table)")
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func aChallengeIsTakenOnceEvenWhenRaced(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255) }
        let record = ChallengeRecord(
            challenge: challenge, ceremony: .authentication, pendingUserHandle: [1, 2, 3],
            pendingAccountID: UUID(), api: "native", userVerification: "required",
            createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(300))
        try await store.saveChallenge(record)
        #expect(try await store.openChallengeCount(now: Self.t0) == 1)
        let taken = try await withThrowingTaskGroup(of: ChallengeRecord?.self) { group in
            for _ in 0..<16 { group.addTask { try await store.takeChallenge(challenge) } }
            return try await group.reduce(into: [ChallengeRecord]()) { if let r = $1 { $0.append(r) } }
        }
        #expect(taken == [record])
        #expect(try await store.takeChallenge(challenge) == nil)
        #expect(try await store.openChallengeCount(now: Self.t0) == 0)
    }

    /// A sign-in takes its challenge in the transaction that completes it: of answers racing to
    /// one challenge (each with its own counter value), exactly one signs in; a lost counter race
    /// still takes the challenge; a challenge already taken writes nothing.
    @Test(arguments: TestDatabase.kinds)
    func aSignInTakesItsChallengeInItsOwnTransaction(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, key) = try await Self.adaWithPasskey(kind, signCount: 5)
        func ceremony(_ challenge: [UInt8]) async throws {
            try await store.saveChallenge(
                ChallengeRecord(
                    challenge: challenge, ceremony: .authentication, accountID: ada.id, api: "native", userVerification: "required",
                    createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(300)))
        }
        let first = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await ceremony(first)
        // Reading it leaves it in place.
        #expect(try await store.challenge(first)?.accountID == ada.id)
        #expect(try await store.challenge(first)?.accountID == ada.id)
        #expect(try await store.challenge([1, 2, 3]) == nil)
        let outcomes = try await withThrowingTaskGroup(of: SignInCompletion.self) { group in
            for n in 0..<12 {
                let session = Self.session(for: ada)
                group.addTask {
                    try await store.completeSignIn(
                        challenge: first, credentialID: key.credentialID, previousSignCount: 5, signCount: UInt32(6 + n),
                        backedUp: false, counterAnomaly: false, at: Self.t0, session: session,
                        audit: [AuditEvent(time: Self.t0, kind: "sign_in", accountID: ada.id)])
                }
            }
            return try await group.reduce(into: [SignInCompletion]()) { $0.append($1) }
        }
        #expect(outcomes.filter { $0 == .signedIn }.count == 1)
        #expect(outcomes.filter { $0 == .challengeTaken }.count == 11)
        #expect(try await store.challenge(first) == nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).count == 1)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 100).count == 1)

        // A counter race lost: the challenge is taken all the same, and nothing else written.
        let second = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await ceremony(second)
        #expect(
            try await store.completeSignIn(
                challenge: second, credentialID: key.credentialID, previousSignCount: 5, signCount: 99, backedUp: false,
                counterAnomaly: false, at: Self.t0, session: Self.session(for: ada), audit: []) == .counterRaced)
        #expect(try await store.challenge(second) == nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).count == 1)
        #expect(try await store.openChallengeCount(now: Self.t0) == 0)
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
    func oauthCodesAreSingleUseAndRefreshFamiliesRevokeTogether(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        try await store.createAccount(ada, passkey: Self.passkey(for: ada), session: nil, audit: [])
        let client = OAuthClient(id: "pkc_1", name: "App", secretHash: nil, redirectURIs: ["https://a.example/cb"], createdAt: Self.t0)
        try await store.addOAuthClient(client)
        #expect(try await store.oauthClient(id: "pkc_1") == client)
        let grant = OAuthGrant(clientID: "pkc_1", accountID: ada.id, grant: [1, 2], family: nil, expiresAt: Self.t0.addingTimeInterval(60))
        try await store.saveOAuthCode(hash: [9], grant: grant, createdAt: Self.t0)
        guard case .taken(let first) = try await store.useOAuthCode(hash: [9], clientID: "pkc_1", family: "f1", at: Self.t0) else {
            Issue.record("the code was not taken")
            return
        }
        #expect(first.grant == [1, 2])
        guard case .reused(let second) = try await store.useOAuthCode(hash: [9], clientID: "pkc_1", family: "f2", at: Self.t0) else {
            Issue.record("a second use was not reported")
            return
        }
        #expect(second.usedAt != nil && second.family == "f1")
        #expect(try await store.useOAuthCode(hash: [8], clientID: "pkc_1", family: "f3", at: Self.t0) == .unknown)

        for hash: [UInt8] in [[1], [2]] {
            var token = grant
            token.family = "f1"
            token.expiresAt = Self.t0.addingTimeInterval(3600)
            try await store.saveRefreshToken(hash: hash, grant: token, createdAt: Self.t0)
        }
        if case .taken = try await store.useRefreshToken(hash: [1], clientID: "pkc_1", at: Self.t0) {} else { Issue.record("not taken") }
        if case .reused = try await store.useRefreshToken(hash: [1], clientID: "pkc_1", at: Self.t0) {} else { Issue.record("not reused") }
        #expect(try await store.refreshFamily(hash: [2]) == "f1")
        #expect(try await store.revokeRefreshFamily("f1", at: Self.t0) == 2)
        #expect(try await store.useRefreshToken(hash: [2], clientID: "pkc_1", at: Self.t0) == .revoked)

        #expect(try await store.consent(accountID: ada.id, clientID: "pkc_1") == nil)
        try await store.saveConsent(accountID: ada.id, clientID: "pkc_1", scope: "openid", at: Self.t0)
        try await store.saveConsent(accountID: ada.id, clientID: "pkc_1", scope: "openid profile", at: Self.t0)
        #expect(try await store.consent(accountID: ada.id, clientID: "pkc_1") == "openid profile")
        try await store.saveOAuthRequest(
            hash: [7], clientID: "pkc_1", request: [3], createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(600))
        #expect(try await store.oauthRequest(hash: [7], now: Self.t0)?.request == [3])
        #expect(try await store.oauthRequest(hash: [7], now: Self.t0.addingTimeInterval(601)) == nil)
        // Removing the client takes its grants and consents with it.
        #expect(try await store.removeOAuthClient(id: "pkc_1"))
        #expect(try await store.consent(accountID: ada.id, clientID: "pkc_1") == nil)
        #expect(try await store.useRefreshToken(hash: [2], clientID: "pkc_1", at: Self.t0) == .unknown)
    }

    @Test(arguments: TestDatabase.kinds)
    func theOldestChallengesAreDiscardedFirst(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        for index in 0..<10 {
            try await store.saveChallenge(
                ChallengeRecord(
                    challenge: [UInt8(index)], ceremony: .authentication, userVerification: "preferred",
                    createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(300 + Double(index))))
        }
        #expect(try await store.discardOldestChallenges(count: 0) == 0)
        #expect(try await store.discardOldestChallenges(count: 4) == 4)
        #expect(try await store.openChallengeCount(now: Self.t0) == 6)
        for index in 0..<4 { #expect(try await store.takeChallenge([UInt8(index)]) == nil) }
        #expect(try await store.takeChallenge([4]) != nil)
        #expect(try await store.discardOldestChallenges(count: 100) == 5)
        #expect(try await store.openChallengeCount(now: Self.t0) == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func passkeysAreRenamedDeletedButNeverTheLast(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada"), bob = Self.account("bob")
        let first = Self.passkey(for: ada), second = Self.passkey(for: ada)
        try await store.createAccount(ada, passkey: first, session: nil, audit: [])
        try await store.createAccount(bob, passkey: Self.passkey(for: bob), session: nil, audit: [])
        try await store.addPasskey(second)
        #expect(try await store.passkeys(accountID: ada.id).count == 2)
        #expect(try await store.renamePasskey(accountID: ada.id, credentialID: first.credentialID, name: "Laptop"))
        #expect(try await store.renamePasskey(accountID: bob.id, credentialID: first.credentialID, name: "Stolen") == false)
        #expect(try await store.passkey(credentialID: first.credentialID)?.name == "Laptop")
        #expect(try await store.deletePasskey(accountID: bob.id, credentialID: first.credentialID) == .notFound)
        #expect(try await store.deletePasskey(accountID: ada.id, credentialID: first.credentialID) == .deleted)
        #expect(try await store.deletePasskey(accountID: ada.id, credentialID: second.credentialID) == .lastPasskey)
        // An administrator may revoke even the last one.
        #expect(try await store.revokePasskey(credentialID: second.credentialID))
        #expect(try await store.passkeys(accountID: ada.id).isEmpty)
        #expect(try await store.revokePasskey(credentialID: second.credentialID) == false)
    }

    @Test(arguments: TestDatabase.kinds)
    func sessionsExpireAndDisabledAccountsHaveNone(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        try await store.createAccount(ada, passkey: Self.passkey(for: ada), session: nil, audit: [])
        let short = Self.session(for: ada, expires: 60), long = Self.session(for: ada, expires: 7200)
        try await store.createSession(short)
        try await store.createSession(long)
        #expect(try await store.session(tokenHash: short.tokenHash, now: Self.t0.addingTimeInterval(61)) == nil)
        #expect(try await store.session(tokenHash: long.tokenHash, now: Self.t0.addingTimeInterval(61)) != nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0.addingTimeInterval(61)).map(\.tokenHash) == [long.tokenHash])
        #expect(try await store.setDisabled(accountID: ada.id, disabled: true))
        #expect(try await store.session(tokenHash: long.tokenHash, now: Self.t0) == nil)
        #expect(try await store.account(id: ada.id)?.disabled == true)
        // Disabling revoked them: re-enabling brings none back.
        #expect(try await store.setDisabled(accountID: ada.id, disabled: false))
        #expect(try await store.session(tokenHash: long.tokenHash, now: Self.t0) == nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).isEmpty)
        let kept = Self.session(for: ada)
        try await store.createSession(kept)
        try await store.revokeSession(tokenHash: kept.tokenHash)
        #expect(try await store.session(tokenHash: kept.tokenHash, now: Self.t0) == nil)
        let mine = Self.session(for: ada)
        try await store.createSession(mine)
        try await store.createSession(Self.session(for: ada))
        try await store.createSession(Self.session(for: ada))
        #expect(try await store.revokeSessions(accountID: ada.id, except: mine.tokenHash) == 2)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).map(\.tokenHash) == [mine.tokenHash])
        #expect(try await store.revokeSessions(accountID: ada.id) == 1)
        #expect(try await store.setDisabled(accountID: UUID(), disabled: true) == false)
    }

    @Test(arguments: TestDatabase.kinds)
    func rateLimitHitsAreCountedAtomically(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let window = Self.t0, end = Self.t0.addingTimeInterval(60)
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<40 { group.addTask { try await store.countHit(key: "ip:10.0.0.1", windowStart: window, expiresAt: end) } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(counts.sorted() == Array(1...40))
        #expect(try await store.countHit(key: "ip:10.0.0.2", windowStart: window, expiresAt: end) == 1)
        #expect(try await store.countHit(key: "ip:10.0.0.1", windowStart: end, expiresAt: end.addingTimeInterval(60)) == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func sweepingRemovesOnlyWhatExpired(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        try await store.createAccount(ada, passkey: Self.passkey(for: ada), session: Self.session(for: ada, expires: 60), audit: [])
        let live = Self.session(for: ada, expires: 7200)
        try await store.createSession(live)
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: [1], ceremony: .registration, userVerification: "required",
                createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(30)))
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: [2], ceremony: .registration, userVerification: "required",
                createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(3000)))
        _ = try await store.countHit(key: "k", windowStart: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        #expect(try await store.sweepExpired(now: Self.t0.addingTimeInterval(100)) == 3)
        #expect(try await store.session(tokenHash: live.tokenHash, now: Self.t0) != nil)
        #expect(try await store.takeChallenge([2]) != nil)
        #expect(try await store.takeChallenge([1]) == nil)
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
    func passwordAccountsImportOnceAndRecoveryIsSingleUse(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let grace = Self.account("grace"), alan = Self.account("alan")
        let hash = "$2b$04$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq."
        #expect(try await store.importAccounts([(grace, hash), (alan, hash)]) == [true, true])
        #expect(try await store.importAccounts([(Self.account("GRACE"), hash)]) == [false])
        #expect(try await store.account(username: "grace")?.passwordHash == hash)
        // The password goes only once there is a passkey; with a password, the last passkey may go.
        #expect(try await store.removePassword(accountID: grace.id) == false)
        let key = Self.passkey(for: grace)
        try await store.addPasskey(key)
        #expect(try await store.deletePasskey(accountID: grace.id, credentialID: key.credentialID) == .deleted)
        try await store.addPasskey(key)
        #expect(try await store.removePassword(accountID: grace.id))
        #expect(try await store.account(id: grace.id)?.passwordHash == nil)
        #expect(try await store.deletePasskey(accountID: grace.id, credentialID: key.credentialID) == .lastPasskey)

        // Recovery codes: racing uses of one code, one wins.
        try await store.replaceRecoveryCodes(accountID: alan.id, hashes: [[1], [2], [3]], at: Self.t0)
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 { group.addTask { try await store.useRecoveryCode(accountID: alan.id, hash: [2], at: Self.t0) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let left = try await store.recoveryCodesLeft(accountID: alan.id)
        #expect(wins == 1 && left == 2)
        #expect(try await store.useRecoveryCode(accountID: grace.id, hash: [1], at: Self.t0) == false)

        // A recovery sign-in ends every other session.
        try await store.createSession(Self.session(for: alan))
        let fresh = Self.session(for: alan)
        try await store.recordSignIn(
            accountID: alan.id, session: fresh, audit: [AuditEvent(time: Self.t0, kind: "recovery_sign_in", accountID: alan.id)],
            revokeOtherSessions: true)
        #expect(try await store.sessions(accountID: alan.id, now: Self.t0).map(\.tokenHash) == [fresh.tokenHash])

        // Recovery tokens: single use, expiring.
        try await store.saveRecoveryToken(hash: [7], accountID: alan.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        try await store.saveRecoveryToken(hash: [8], accountID: alan.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        #expect(try await store.takeRecoveryToken(hash: [7], now: Self.t0) == alan.id)
        #expect(try await store.takeRecoveryToken(hash: [7], now: Self.t0) == nil)
        #expect(try await store.takeRecoveryToken(hash: [8], now: Self.t0.addingTimeInterval(61)) == nil)
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
