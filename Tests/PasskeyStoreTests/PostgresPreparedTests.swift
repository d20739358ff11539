import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// The statements every ceremony sends are prepared once per PostgreSQL connection, each as a
/// type of its own (``PreparedStoreStatement``). These run on a store with one connection, so
/// every statement meets what the ones before it left on that connection.
@Suite("PostgreSQL prepared statements")
struct PostgresPreparedTests {
    static var enabled: Bool {
        TestDatabase.postgresURL != nil || ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_POSTGRES"] == "1"
    }

    static func oneConnectionStore(query: String? = nil, migrated: Bool = true) async throws -> PostgresStore {
        var url = try await TestDatabase.makeURL(.postgres)
        if let query { url += (url.contains("?") ? "&" : "?") + query }
        let store = try PostgresStore(url: url, options: TestDatabase.postgresOptions(maxConnections: 1))
        if migrated { _ = try await store.migrate() }
        return store
    }

    /// The prepared statements on the store's one connection.
    static func preparedNames(_ store: PostgresStore) async throws -> [String] {
        try await store.reader.rows("SELECT name AS n FROM pg_prepared_statements ORDER BY name").map { try $0.text("n") }
    }

    static func signedUp(_ store: PostgresStore) async throws -> (Account, Passkey) {
        let ada = StoreConformanceTests.account("ada-\(UUID().uuidString.prefix(8))")
        let key = StoreConformanceTests.passkey(for: ada)
        try await store.createAccount(ada, passkey: key, session: nil, audit: [])
        return (ada, key)
    }

    @Test(.enabled(if: enabled))
    func ceremonyStatementsArePreparedOnceAndReused() async throws {
        let store = try await Self.oneConnectionStore()
        let (ada, key) = try await Self.signedUp(store)
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        let prepared = try await Self.preparedNames(store)
        #expect(prepared.contains { $0.hasPrefix("passkeyd_PasskeysOfAccount") })
        // The same statements again: nothing new is prepared.
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        #expect(try await store.account(username: ada.username)?.id == ada.id)
        let again = try await store.account(username: ada.username)
        #expect(again?.id == ada.id)
        let afterAccountRead = try await Self.preparedNames(store)
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        #expect(try await store.account(username: ada.username)?.id == ada.id)
        #expect(try await Self.preparedNames(store) == afterAccountRead)
    }

    /// A migration that adds columns (as every migration so far does) while instances run must
    /// not break their prepared reads: they name their columns, so their result shape holds.
    @Test(.enabled(if: enabled))
    func preparedReadsSurviveAMigrationThatAddsColumns() async throws {
        let store = try await Self.oneConnectionStore()
        let (ada, key) = try await Self.signedUp(store)
        let session = StoreConformanceTests.session(for: ada, credentialID: key.credentialID)
        try await store.createSession(session)
        let now = StoreConformanceTests.t0
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        #expect(try await store.session(tokenHash: session.tokenHash, now: now)?.1.id == ada.id)
        #expect(try await store.challengeAndPasskey([1, 2, 3], credentialID: key.credentialID).1?.0 == key)
        for table in ["passkeys", "accounts", "sessions", "challenges"] {
            try await store.writer.run(SQL(unsafeText: "ALTER TABLE \(table) ADD COLUMN added_later BIGINT"))
        }
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        #expect(try await store.session(tokenHash: session.tokenHash, now: now)?.1.id == ada.id)
        #expect(try await store.challengeAndPasskey([1, 2, 3], credentialID: key.credentialID).1?.0 == key)
        #expect(try await store.account(username: ada.username)?.id == ada.id)
    }

    /// postgres-nio keeps a failed preparation failed for the connection's life; the store
    /// prepares such a statement afresh, under a new name, the next time it runs.
    @Test(.enabled(if: enabled))
    func aStatementThatFailedToPrepareIsPreparedAfreshNextTime() async throws {
        let store = try await Self.oneConnectionStore(migrated: false)
        // No tables yet: the account read fails to prepare on the store's one connection.
        let before = PreparedStatements.shared.name(of: AccountByUsername.self)
        await #expect(throws: StoreError.self) { try await store.account(username: "ada") }
        let renamed = PreparedStatements.shared.name(of: AccountByUsername.self)
        #expect(renamed != before)
        _ = try await store.migrate()
        let (ada, _) = try await Self.signedUp(store)
        #expect(try await store.account(username: ada.username)?.id == ada.id)
        #expect(try await Self.preparedNames(store).contains(renamed))
    }

    /// A constraint violation is an answer, not a broken statement: the name is kept.
    @Test(.enabled(if: enabled))
    func aConstraintViolationKeepsTheStatementsName() async throws {
        let store = try await Self.oneConnectionStore()
        let record = ChallengeRecord(
            challenge: (0..<32).map { _ in UInt8.random(in: 0...255) }, ceremony: .authentication, userVerification: "required",
            createdAt: StoreConformanceTests.t0, expiresAt: StoreConformanceTests.t0.addingTimeInterval(300))
        try await store.saveChallenge(record)
        let name = PreparedStatements.shared.name(of: SaveChallenge.self)
        await #expect(throws: StoreError.self) { try await store.saveChallenge(record) }
        #expect(PreparedStatements.shared.name(of: SaveChallenge.self) == name)
        #expect(try await Self.preparedNames(store).contains(name))
    }

    /// A NULL has no type of its own, but the statement is prepared with the types PostgreSQL
    /// takes from it (postgres-nio sends none): one prepared statement takes NULLs and values.
    @Test(.enabled(if: enabled))
    func nullAndValueBindsShareOnePreparedStatement() async throws {
        let store = try await Self.oneConnectionStore()
        let (ada, _) = try await Self.signedUp(store)
        for accountID in [nil, ada.id, nil, ada.id] as [UUID?] {
            let challenge = (0..<32).map { _ in UInt8.random(in: 0...255) }
            let record = ChallengeRecord(
                challenge: challenge, ceremony: .authentication, accountID: accountID, unknownUser: accountID == nil, api: "native",
                userVerification: "required", createdAt: StoreConformanceTests.t0,
                expiresAt: StoreConformanceTests.t0.addingTimeInterval(300))
            try await store.saveChallenge(record)
            #expect(try await store.challenge(challenge) == record)
        }
        #expect(try await Self.preparedNames(store).filter { $0.hasPrefix("passkeyd_SaveChallenge") }.count == 1)
    }

    /// The sign-up's statement is prepared in its one shape (a session and one audit line); a
    /// sign-up of another shape runs unnamed, and both write the same rows.
    @Test(.enabled(if: enabled))
    func aStatementOfAnotherShapeRunsUnnamed() async throws {
        let store = try await Self.oneConnectionStore()
        let (ada, key) = try await Self.signedUp(store)
        #expect(try await !Self.preparedNames(store).contains { $0.hasPrefix("passkeyd_CreateAccount") })
        let bob = StoreConformanceTests.account("bob-\(UUID().uuidString.prefix(8))")
        let bobKey = StoreConformanceTests.passkey(for: bob)
        let session = StoreConformanceTests.session(for: bob, credentialID: bobKey.credentialID)
        let signUp = AuditEvent(time: StoreConformanceTests.t0, kind: .signUp, accountID: bob.id, credentialID: bobKey.credentialID)
        try await store.createAccount(bob, passkey: bobKey, session: session, audit: [signUp])
        #expect(try await Self.preparedNames(store).contains { $0.hasPrefix("passkeyd_CreateAccount") })
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        #expect(try await store.passkeys(accountID: bob.id) == [bobKey])
        #expect(try await store.session(tokenHash: session.tokenHash, now: StoreConformanceTests.t0)?.1.id == bob.id)
        #expect(try await store.auditEvents(accountID: bob.id, limit: 10).map(\.kind) == [AuditEvent.Kind.signUp.rawValue])
    }

    @Test(.enabled(if: enabled))
    func preparedStatementsCanBeTurnedOffInTheURL() async throws {
        let store = try await Self.oneConnectionStore(query: "prepared_statements=off")
        let (ada, key) = try await Self.signedUp(store)
        #expect(try await store.passkeys(accountID: ada.id) == [key])
        #expect(try await Self.preparedNames(store).isEmpty)
    }

    @Test func thePreparedStatementsSettingIsOnOrOff() throws {
        let base = "postgres://passkeyd@db.example:5432/passkeyd?sslmode=disable"
        #expect(try PostgresStore.preparesStatements(url: base))
        #expect(try PostgresStore.preparesStatements(url: base + "&prepared_statements=on"))
        #expect(try !PostgresStore.preparesStatements(url: base + "&prepared_statements=off"))
        #expect(try !PostgresStore.preparesStatements(url: base + "&prepared_statements=FALSE"))
        #expect(throws: StoreError.self) { try PostgresStore.preparesStatements(url: base + "&prepared_statements=sometimes") }
    }
}
