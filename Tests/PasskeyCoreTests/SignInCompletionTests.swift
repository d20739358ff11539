import Foundation
import PasskeyCore
import PasskeyStore
import Testing
import WebAuthn

/// What a sign-in does besides starting its session, now in the domain (issue 42: the edge used
/// to revoke the replaced session and mint the access token itself).
@Suite struct SignInCompletionTests {
    static func account(_ harness: DomainHarness, _ name: String) async throws {
        let account = Account(username: name, displayName: name, userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let hash = try PasswordHash.Scrypt(hashing: "correct horse", parameters: .init(logN: 10)).text
        #expect(try await harness.store.importAccounts([(account, hash)]) == [true])
    }

    @Test func aSignInThatReplacesASessionEndsItAndMintsTheNewOnesAccessToken() async throws {
        let harness = try await DomainHarness { $0.passwordScryptCost = 10 }
        try await Self.account(harness, "lin")
        let service = harness.service
        let first = try await service.passwordSignIn(username: "lin", password: "correct horse", client: DomainHarness.client)
        #expect(first.accessToken == nil)
        let previous = try #require(try await service.signedIn(token: first.token))

        let second = try await service.passwordSignIn(
            username: "lin", password: "correct horse", client: DomainHarness.client,
            completion: .init(replacing: previous, accessToken: true))
        #expect(try await service.signedIn(token: first.token) == nil)
        #expect(try await service.signedIn(token: second.token) != nil)
        let access = try #require(second.accessToken)
        #expect(access.expiresAt > harness.clock.now && access.token.split(separator: ".").count == 3)
    }

    @Test func aFailedSignInEndsNothing() async throws {
        let harness = try await DomainHarness { $0.passwordScryptCost = 10 }
        try await Self.account(harness, "mo")
        let service = harness.service
        let first = try await service.passwordSignIn(username: "mo", password: "correct horse", client: DomainHarness.client)
        let previous = try #require(try await service.signedIn(token: first.token))
        await #expect(throws: PasskeyServiceError(.invalidCredentials, "")) {
            try await service.passwordSignIn(
                username: "mo", password: "wrong", client: DomainHarness.client, completion: .init(replacing: previous, accessToken: true))
        }
        #expect(try await service.signedIn(token: first.token) != nil)
    }
}
