import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

// Store conformance, part 3: ceremonies and sign-ins, OAuth grants, rate-limit counts and sweeping, on both stores.
extension StoreConformanceTests {
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
        var key = Self.passkey(for: ada, signCount: 41)
        key.extensions = PasskeyExtensions(discoverable: true, prfEnabled: true, credProtect: 2, largeBlob: false, minPinLength: 6)
        key.prfSalt = Array(repeating: 5, count: 32)
        try await store.createAccount(ada, passkey: key, session: nil, audit: [])
        // What a sign-in reads of it: everything but the PRF salt and the extension facts, except
        // `prfEnabled` (the sign-in answer's).
        var signingKey = key
        signingKey.extensions = PasskeyExtensions(prfEnabled: true)
        signingKey.prfSalt = nil
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
        #expect(pair.0 == key)
        #expect(both.1?.0 == signingKey && both.1?.1 == pair.1)
        let noPasskey = try await store.challengeAndPasskey(challenge, credentialID: [1, 2, 3])
        #expect(noPasskey.0 == stored && noPasskey.1 == nil)
        let noChallenge = try await store.challengeAndPasskey([7, 7, 7], credentialID: key.credentialID)
        #expect(noChallenge.0 == nil && noChallenge.1?.0 == signingKey)
        let neither = try await store.challengeAndPasskey([7, 7, 7], credentialID: [1, 2, 3])
        #expect(neither.0 == nil && neither.1 == nil)
        // A read: the ceremony is still there to be taken once.
        #expect(try await store.takeChallenge(challenge) == stored)
        #expect(try await store.challengeAndPasskey(challenge, credentialID: key.credentialID).0 == nil)
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
}
