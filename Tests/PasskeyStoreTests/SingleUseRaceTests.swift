import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// Everything single use, counted or guarded, raced by 16 takers released together on both
/// stores (SQLite's one writer hides races; PostgreSQL runs the takers at once): at most one
/// wins, and what the losers tried left nothing behind. OAuth codes and refresh tokens have
/// their own suite.
@Suite("Single use under races (SQLite and PostgreSQL)")
struct SingleUseRaceTests {
    typealias Fixtures = StoreConformanceTests
    static let takers = 16

    @Test(arguments: TestDatabase.kinds)
    func aChallengeIsTakenByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: challenge, ceremony: .registration, pendingUserHandle: [9], pendingAccountID: UUID(), api: "native",
                userVerification: "required", createdAt: Fixtures.t0, expiresAt: Fixtures.t0.addingTimeInterval(300)))
        let results = await Race.run(Self.takers) { _ in try await store.takeChallenge(challenge) }
        #expect(Race.winners(results) { $0 != nil } == 1)
        #expect(try await store.openChallengeCount(now: Fixtures.t0) == 0)
    }

    /// Sixteen answers to one sign-in challenge, each with its own next counter value: one
    /// signs in, the rest find the challenge taken (or lose the counter race) and write nothing.
    @Test(arguments: TestDatabase.kinds)
    func aSignInChallengeAndItsCounterAreTakenByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, key) = try await Fixtures.adaWithPasskey(kind, signCount: 3)
        let challenge = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: challenge, ceremony: .authentication, pendingUserHandle: nil, pendingAccountID: nil, api: "native",
                userVerification: "required", createdAt: Fixtures.t0, expiresAt: Fixtures.t0.addingTimeInterval(300)))
        let results = await Race.run(Self.takers) { n in
            try await store.completeSignIn(
                challenge: challenge, credentialID: key.credentialID, previousSignCount: 3, signCount: UInt32(4 + n), backedUp: true,
                counterAnomaly: false, at: Fixtures.t0, session: Fixtures.session(for: ada),
                audit: [AuditEvent(time: Fixtures.t0, kind: "sign_in", accountID: ada.id)])
        }
        #expect(Race.winners(results) { $0 == .signedIn } == 1)
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "no taker failed: \(results)")
        #expect(try await store.sessions(accountID: ada.id, now: Fixtures.t0).count == 1)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 100).count == 1)
    }

    /// The counter's compare-and-set alone (no challenge: the compatibility API's sign-ins).
    @Test(arguments: TestDatabase.kinds)
    func aCounterValueMovesForOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, key) = try await Fixtures.adaWithPasskey(kind, signCount: 10)
        let results = await Race.run(Self.takers) { n in
            try await store.completeSignIn(
                challenge: nil, credentialID: key.credentialID, previousSignCount: 10, signCount: UInt32(11 + n), backedUp: false,
                counterAnomaly: false, at: Fixtures.t0, session: Fixtures.session(for: ada), audit: [])
        }
        #expect(Race.winners(results) { $0 == .signedIn } == 1)
        #expect(Race.winners(results) { $0 == .counterRaced } == Self.takers - 1)
        #expect(try await store.sessions(accountID: ada.id, now: Fixtures.t0).count == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func aRegistrationTokenIsTakenByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, _) = try await Fixtures.adaWithPasskey(kind, signCount: 0)
        let hash = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveRegistrationToken(
            hash: hash, accountID: ada.id, createdAt: Fixtures.t0, expiresAt: Fixtures.t0.addingTimeInterval(600))
        let results = await Race.run(Self.takers) { _ in try await store.takeRegistrationToken(hash: hash, now: Fixtures.t0) }
        #expect(Race.winners(results) { $0 == ada.id } == 1)
        #expect(Race.winners(results) { $0 != nil } == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func aRecoveryCodeIsUsedByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, _) = try await Fixtures.adaWithPasskey(kind, signCount: 0)
        try await store.replaceRecoveryCodes(accountID: ada.id, hashes: [[1], [2], [3]], at: Fixtures.t0)
        let results = await Race.run(Self.takers) { _ in try await store.useRecoveryCode(accountID: ada.id, hash: [2], at: Fixtures.t0) }
        #expect(Race.winners(results) { $0 } == 1)
        #expect(try await store.recoveryCodesLeft(accountID: ada.id) == 2)
    }

    @Test(arguments: TestDatabase.kinds)
    func aRecoveryLinkIsTakenByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, _) = try await Fixtures.adaWithPasskey(kind, signCount: 0)
        let hash = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveRecoveryToken(
            hash: hash, accountID: ada.id, createdAt: Fixtures.t0, expiresAt: Fixtures.t0.addingTimeInterval(600))
        let results = await Race.run(Self.takers) { _ in try await store.takeRecoveryToken(hash: hash, now: Fixtures.t0) }
        #expect(Race.winners(results) { $0 == ada.id } == 1)
        #expect(Race.winners(results) { $0 != nil } == 1)
    }

    /// Sixteen deletions of an account's passkeys (it has two and no password) at once: one
    /// succeeds, the account keeps a way in.
    @Test(arguments: TestDatabase.kinds)
    func theLastPasskeyOutlivesSixteenDeletions(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, first) = try await Fixtures.adaWithPasskey(kind, signCount: 0)
        let second = Fixtures.passkey(for: ada)
        try await store.addPasskey(second)
        let results = await Race.run(Self.takers) { n in
            try await store.deletePasskey(
                accountID: ada.id, credentialID: n % 2 == 0 ? first.credentialID : second.credentialID, keepSession: nil)
        }
        #expect(Race.winners(results) { $0 == .deleted } == 1)
        #expect(try await store.passkeys(accountID: ada.id).count == 1)
    }

    /// The last passkey and the password removed by sixteen takers at once: never both.
    @Test(arguments: TestDatabase.kinds)
    func theLastWayInOutlivesSixteenRemovals(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let grace = Fixtures.account("grace")
        let key = Fixtures.passkey(for: grace)
        #expect(try await store.importAccounts([(grace, "$2b$04$hash")]) == [true])
        try await store.addPasskey(key)
        let results = await Race.run(Self.takers) { n -> Bool in
            if n % 2 == 0 {
                return try await store.deletePasskey(accountID: grace.id, credentialID: key.credentialID, keepSession: nil) == .deleted
            }
            return try await store.removePassword(accountID: grace.id)
        }
        #expect(Race.winners(results) { $0 } == 1)
        let left =
            try await store.passkeys(accountID: grace.id).count + (try await store.account(id: grace.id)?.passwordHash == nil ? 0 : 1)
        #expect(left == 1)
    }
}
