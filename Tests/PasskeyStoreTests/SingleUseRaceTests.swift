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

    /// An account deleted while it signs in (issue 42, item 20): on PostgreSQL the sign-in locked
    /// the passkey row and then the account's, the deletion the account's and then the
    /// passkey's, and the deadlock between them surfaced as 503. Each round races the deletion
    /// against eight sign-ins of the account (four with a username-first challenge, which the
    /// deletion deletes too, four discoverable), released together: no store call fails, each
    /// sign-in completes before the deletion (its session then goes with the account) or finds
    /// the account gone, and nothing of the account is left.
    @Test(arguments: TestDatabase.kinds)
    func anAccountDeletedWhileItSignsInNeverDeadlocks(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        let signIns = 8
        var outcomes: [String: Int] = [:]
        var deadlockedRounds = 0
        for round in 0..<20 {
            let account = Fixtures.account("gone\(round)")
            let key = Fixtures.passkey(for: account, signCount: 0)
            try await store.createAccount(account, passkey: key, session: nil, audit: [])
            let challenges = (0..<signIns).map { _ in (0..<32).map { _ in UInt8.random(in: 0...255) } }
            for (index, challenge) in challenges.enumerated() {
                try await store.saveChallenge(
                    ChallengeRecord(
                        challenge: challenge, ceremony: .authentication, accountID: index % 2 == 0 ? account.id : nil, api: "native",
                        userVerification: "required", createdAt: Fixtures.t0, expiresAt: Fixtures.t0.addingTimeInterval(300)))
            }
            let results = await Race.run(signIns + 1) { taker -> String in
                guard taker > 0 else {
                    return "\(try await store.deleteAccount(accountID: account.id, audit: []))"
                }
                // A counter that stays 0 (as many authenticators keep it): every sign-in may win.
                let completion = try await store.completeSignIn(
                    challenge: challenges[taker - 1], credentialID: key.credentialID, previousSignCount: 0, signCount: 0, backedUp: true,
                    counterAnomaly: false, at: Fixtures.t0, session: Fixtures.session(for: account),
                    audit: [AuditEvent(time: Fixtures.t0, kind: "sign_in", accountID: account.id)])
                return "\(completion)"
            }
            let before = outcomes["deadlock", default: 0]
            for result in results {
                let outcome: String
                switch result {
                case .success(let value): outcome = value
                case .failure(let error):
                    outcome = "\(error)".contains("40P01") || "\(error)".contains("deadlock") ? "deadlock" : "\(error)"
                }
                outcomes[outcome, default: 0] += 1
            }
            if outcomes["deadlock", default: 0] > before { deadlockedRounds += 1 }
            #expect((try? results[0].get()) == "deleted", "round \(round): \(results[0])")
            for result in results.dropFirst() {
                let outcome = try? result.get()
                #expect(outcome == "signedIn" || outcome == "credentialGone", "round \(round): \(result)")
            }
            #expect(try await store.account(id: account.id) == nil)
            #expect(try await store.passkey(credentialID: key.credentialID) == nil)
            #expect(try await store.sessions(accountID: account.id, now: Fixtures.t0).isEmpty)
            for challenge in challenges { #expect(try await store.challenge(challenge) == nil, "round \(round)") }
        }
        print(
            "account deletion against \(signIns) sign-ins, 20 rounds on \(kind): \(deadlockedRounds) deadlocked;",
            "\(outcomes.sorted { $0.key < $1.key })")
    }
}
