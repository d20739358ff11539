import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// OAuth codes and refresh tokens under races, on both stores (issue 33): sixteen takers
/// released together at one start gate, at most one wins, the others are told it was reused
/// (so the server revokes the grant), and a taker for another client never touches the row.
@Suite("OAuth single use under races (SQLite and PostgreSQL)")
struct OAuthRaceTests {
    typealias Fixtures = StoreConformanceTests
    static let takers = 16
    static let owner = "pkc_owner"
    static let other = "pkc_other"

    /// A store with an account and two clients.
    static func store(_ kind: TestDatabase.Kind) async throws -> (any PasskeyStore, Account) {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Fixtures.account("ada")
        try await store.createAccount(ada, passkey: Fixtures.passkey(for: ada), session: nil, audit: [])
        for id in [owner, other] {
            try await store.addOAuthClient(
                OAuthClient(id: id, name: id, secretHash: nil, redirectURIs: ["https://a.example/cb"], createdAt: Fixtures.t0))
        }
        return (store, ada)
    }

    static func grant(_ account: Account, family: String? = nil, lifetime: TimeInterval = 60) -> OAuthGrant {
        OAuthGrant(
            clientID: owner, accountID: account.id, grant: [1, 2], family: family, expiresAt: Fixtures.t0.addingTimeInterval(lifetime))
    }

    static func randomHash() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }

    @Test(arguments: TestDatabase.kinds)
    func aCodeIsTakenByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada) = try await Self.store(kind)
        let code = Self.randomHash()
        try await store.saveOAuthCode(hash: code, grant: Self.grant(ada), createdAt: Fixtures.t0)
        let results = await Race.run(Self.takers) { n in
            try await store.useOAuthCode(hash: code, clientID: Self.owner, family: "family-\(n)", at: Fixtures.t0)
        }
        let outcomes = try results.map { try $0.get() }
        let won = outcomes.compactMap { outcome -> OAuthGrant? in
            if case .taken(let grant) = outcome { return grant }
            return nil
        }
        #expect(won.count == 1)
        // Every loser is told the code was used, with the winner's grant to revoke.
        let winner = try #require(won.first?.family)
        for outcome in outcomes {
            if case .reused(let grant) = outcome { #expect(grant.family == winner) } else { #expect(outcome == .taken(won[0])) }
        }
        #expect(try await store.oauthCode(hash: code, clientID: Self.owner)?.family == winner)
    }

    @Test(arguments: TestDatabase.kinds)
    func aRefreshTokenIsTakenByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let (store, ada) = try await Self.store(kind)
        let token = Self.randomHash()
        try await store.saveRefreshToken(hash: token, grant: Self.grant(ada, family: "f1", lifetime: 3600), createdAt: Fixtures.t0)
        let results = await Race.run(Self.takers) { _ in
            try await store.useRefreshToken(hash: token, clientID: Self.owner, at: Fixtures.t0)
        }
        let outcomes = try results.map { try $0.get() }
        #expect(Race.winners(results) { if case .taken = $0 { true } else { false } } == 1)
        #expect(outcomes.filter { if case .reused(let grant) = $0 { grant.family == "f1" } else { false } }.count == Self.takers - 1)
    }

    /// RFC 6749 §4.1.3 / §6 / RFC 7009 §2.1: a code or refresh token presented by another client
    /// (even sixteen times at once) changes nothing; its owner then takes it.
    @Test(arguments: TestDatabase.kinds)
    func anotherClientCannotSpendACodeOrRefreshToken(_ kind: TestDatabase.Kind) async throws {
        let (store, ada) = try await Self.store(kind)
        let code = Self.randomHash(), token = Self.randomHash()
        try await store.saveOAuthCode(hash: code, grant: Self.grant(ada), createdAt: Fixtures.t0)
        try await store.saveRefreshToken(hash: token, grant: Self.grant(ada, family: "f1", lifetime: 3600), createdAt: Fixtures.t0)
        let codes = await Race.run(Self.takers) { n in
            try await store.useOAuthCode(hash: code, clientID: Self.other, family: "x\(n)", at: Fixtures.t0)
        }
        let tokens = await Race.run(Self.takers) { _ in try await store.useRefreshToken(hash: token, clientID: Self.other, at: Fixtures.t0)
        }
        #expect(try codes.map { try $0.get() } == Array(repeating: .unknown, count: Self.takers))
        #expect(try tokens.map { try $0.get() } == Array(repeating: .unknown, count: Self.takers))
        #expect(try await store.oauthCode(hash: code, clientID: Self.other) == nil)
        #expect(
            try await store.revokeRefreshToken(
                hash: token, clientID: Self.other, at: Fixtures.t0, until: Fixtures.t0.addingTimeInterval(3600))
                == false)
        #expect(try await store.oauthGrantRevoked(family: "f1") == false)

        guard case .taken = try await store.useOAuthCode(hash: code, clientID: Self.owner, family: "f2", at: Fixtures.t0) else {
            Issue.record("the owner could not take its code")
            return
        }
        guard case .taken = try await store.useRefreshToken(hash: token, clientID: Self.owner, at: Fixtures.t0) else {
            Issue.record("the owner could not take its refresh token")
            return
        }
    }

    /// A revoked grant stays revoked for tokens written after the revocation (the first exchange
    /// of a code that a racing second use revoked), and expires; an expired code is not taken.
    @Test(arguments: TestDatabase.kinds)
    func aRevokedGrantRefusesTokensWrittenAfterIt(_ kind: TestDatabase.Kind) async throws {
        let (store, ada) = try await Self.store(kind)
        let until = Fixtures.t0.addingTimeInterval(7200)
        #expect(try await store.revokeOAuthGrant(family: "f1", clientID: Self.owner, accountID: ada.id, at: Fixtures.t0, until: until) == 0)
        #expect(try await store.oauthGrantRevoked(family: "f1"))
        #expect(try await store.oauthGrantRevoked(family: "f2") == false)
        let late = Self.randomHash()
        try await store.saveRefreshToken(hash: late, grant: Self.grant(ada, family: "f1", lifetime: 3600), createdAt: Fixtures.t0)
        #expect(try await store.useRefreshToken(hash: late, clientID: Self.owner, at: Fixtures.t0) == .revoked)
        // Revoking again is harmless (it marks the token written since); the owner's revocation
        // of a live token revokes its grant.
        #expect(try await store.revokeOAuthGrant(family: "f1", clientID: Self.owner, accountID: ada.id, at: Fixtures.t0, until: until) == 1)
        let live = Self.randomHash()
        try await store.saveRefreshToken(hash: live, grant: Self.grant(ada, family: "f3", lifetime: 3600), createdAt: Fixtures.t0)
        #expect(try await store.revokeRefreshToken(hash: live, clientID: Self.owner, at: Fixtures.t0, until: until))
        #expect(try await store.oauthGrantRevoked(family: "f3"))
        #expect(try await store.useRefreshToken(hash: live, clientID: Self.owner, at: Fixtures.t0) == .revoked)

        let code = Self.randomHash()
        try await store.saveOAuthCode(hash: code, grant: Self.grant(ada), createdAt: Fixtures.t0)
        #expect(
            try await store.useOAuthCode(hash: code, clientID: Self.owner, family: "f4", at: Fixtures.t0.addingTimeInterval(61)) == .expired
        )
        // The revocation is remembered until `until`, then swept with the tokens.
        _ = try await store.sweepExpired(now: until.addingTimeInterval(1))
        #expect(try await store.oauthGrantRevoked(family: "f1") == false)
    }

    /// Sixteen refreshes with one token while the grant is being revoked: at most one refresh
    /// wins, and after the revocation no token of the grant refreshes.
    @Test(arguments: TestDatabase.kinds)
    func aRevocationRacingRefreshesLeavesNothingLive(_ kind: TestDatabase.Kind) async throws {
        let (store, ada) = try await Self.store(kind)
        let token = Self.randomHash()
        try await store.saveRefreshToken(hash: token, grant: Self.grant(ada, family: "f1", lifetime: 3600), createdAt: Fixtures.t0)
        let results = await Race.run(Self.takers) { n -> OAuthTake in
            if n == 0 {
                _ = try await store.revokeOAuthGrant(
                    family: "f1", clientID: Self.owner, accountID: ada.id, at: Fixtures.t0, until: Fixtures.t0.addingTimeInterval(7200))
                return .revoked
            }
            return try await store.useRefreshToken(hash: token, clientID: Self.owner, at: Fixtures.t0)
        }
        #expect(Race.winners(results) { if case .taken = $0 { true } else { false } } <= 1)
        // The winner's rotated token, written after the revocation, is refused.
        let rotated = Self.randomHash()
        try await store.saveRefreshToken(hash: rotated, grant: Self.grant(ada, family: "f1", lifetime: 3600), createdAt: Fixtures.t0)
        #expect(try await store.useRefreshToken(hash: rotated, clientID: Self.owner, at: Fixtures.t0) == .revoked)
    }
}
