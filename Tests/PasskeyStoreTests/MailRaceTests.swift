import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// Mail's single-use rules under races (issue 43): sixteen takers on four store instances (four
/// connection pools, as four passkeyd instances on one database) released together. A link is
/// taken once; of sixteen right codes one takes the token; of sixteen wrong codes five are
/// counted and the right one is refused after them; a queued mail is leased to one sender. On
/// SQLite and on PostgreSQL.
@Suite("Mail tokens and the outbox under races (SQLite and PostgreSQL)")
struct MailRaceTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func instances(_ kind: TestDatabase.Kind) async throws -> [any PasskeyStore] {
        try await WebhookClaimRaceTests.instances(kind)
    }

    static func account(_ store: any PasskeyStore, _ name: String) async throws -> Account {
        let account = StoreConformanceTests.account(name)
        try await store.createAccount(account, passkey: StoreConformanceTests.passkey(for: account), session: nil, audit: [])
        return account
    }

    static func token(_ account: Account, _ purpose: EmailToken.Purpose, link: [UInt8], code: [UInt8]? = nil) -> EmailToken {
        EmailToken(
            accountID: account.id, purpose: purpose, address: "\(account.username)@example.com", linkHash: link, codeHash: code,
            createdAt: t0, expiresAt: t0.addingTimeInterval(600))
    }

    @Test(arguments: TestDatabase.kinds)
    func aLinkIsTakenOnce(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let ada = try await Self.account(stores[0], "ada")
        let link = [UInt8](repeating: 7, count: 32)
        try await stores[0].saveEmailToken(Self.token(ada, .recover, link: link))
        let results = await Race.run(16) { taker in
            try await stores[taker % stores.count].takeEmailToken(linkHash: link, purpose: .recover, now: Self.t0)
        }
        #expect(Race.winners(results) { $0 != nil } == 1)
        // Another purpose never takes it, nor does a later time.
        let other = [UInt8](repeating: 8, count: 32)
        try await stores[0].saveEmailToken(Self.token(ada, .verify, link: other))
        #expect(try await stores[1].takeEmailToken(linkHash: other, purpose: .recover, now: Self.t0) == nil)
        #expect(try await stores[1].takeEmailToken(linkHash: other, purpose: .verify, now: Self.t0.addingTimeInterval(600)) == nil)
        #expect(try await stores[1].takeEmailToken(linkHash: other, purpose: .verify, now: Self.t0) != nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func ofSixteenRightCodesOneTakesTheToken(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let ada = try await Self.account(stores[0], "ada")
        let code = [UInt8](repeating: 1, count: 32)
        try await stores[0].saveEmailToken(Self.token(ada, .recover, link: [UInt8](repeating: 2, count: 32), code: code))
        let results = await Race.run(16) { taker in
            try await stores[taker % stores.count].attemptEmailCode(accountID: ada.id, purpose: .recover, codeHash: code, now: Self.t0)
        }
        #expect(
            Race.winners(results) {
                if case .taken = $0 { return true }
                return false
            } == 1)
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "\(results)")
    }

    @Test(arguments: TestDatabase.kinds)
    func ofSixteenWrongCodesFiveCountAndThenTheRightOneIsRefused(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let ada = try await Self.account(stores[0], "ada")
        let right = [UInt8](repeating: 1, count: 32)
        try await stores[0].saveEmailToken(Self.token(ada, .verify, link: [UInt8](repeating: 3, count: 32), code: right))
        let results = await Race.run(16) { taker in
            try await stores[taker % stores.count].attemptEmailCode(
                accountID: ada.id, purpose: .verify, codeHash: [UInt8](repeating: UInt8(10 + taker), count: 32), now: Self.t0)
        }
        let counted = Race.winners(results) {
            if case .wrong = $0 { return true }
            return false
        }
        #expect(counted == EmailToken.maxTries)
        #expect(
            try await stores[0].attemptEmailCode(accountID: ada.id, purpose: .verify, codeHash: right, now: Self.t0)
                == EmailCodeAttempt.none)
    }

    @Test(arguments: TestDatabase.kinds)
    func aNewTokenEndsTheOlderOneOfItsPurpose(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        let ada = try await Self.account(store, "ada")
        let first = [UInt8](repeating: 4, count: 32), second = [UInt8](repeating: 5, count: 32), undo = [UInt8](repeating: 6, count: 32)
        try await store.saveEmailToken(Self.token(ada, .undo, link: undo))
        try await store.saveEmailToken(Self.token(ada, .recover, link: first))
        try await store.saveEmailToken(Self.token(ada, .recover, link: second))
        #expect(try await store.takeEmailToken(linkHash: first, purpose: .recover, now: Self.t0) == nil)
        #expect(try await store.takeEmailToken(linkHash: second, purpose: .recover, now: Self.t0) != nil)
        // Undo tokens (one per notice) are not ended by the others.
        #expect(try await store.takeEmailToken(linkHash: undo, purpose: .undo, now: Self.t0) != nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func aQueuedMailIsLeasedToOneSenderAndSettledOnlyByIt(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        for index in 0..<40 {
            try await stores[0].queueMail(
                QueuedMail(
                    accountID: nil, kind: "recovery", recipient: "a\(index)@example.com", sender: "no-reply@example.com",
                    message: Array("mail \(index)".utf8), createdAt: Self.t0, nextAttemptAt: Self.t0),
                token: nil, audit: [])
        }
        let results = await Race.run(16) { taker in
            let token = [UInt8](repeating: UInt8(taker), count: 16)
            let claimed = try await stores[taker % stores.count].claimMail(
                now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(600), leaseToken: token, limit: 4)
            return (token, claimed)
        }
        let claims = results.compactMap { try? $0.get() }
        #expect(claims.count == 16)
        let ids = claims.flatMap { $0.1.map(\.id) }
        #expect(Set(ids).count == ids.count, "a mail was leased twice")
        // Only the lease's holder settles it; a settled mail is not claimed again.
        guard let (token, mails) = claims.first(where: { !$0.1.isEmpty }), let mail = mails.first else { return }
        #expect(try await stores[0].markMailSent(id: mail.id, leaseToken: [0xFF], at: Self.t0) == false)
        #expect(try await stores[0].markMailSent(id: mail.id, leaseToken: token, at: Self.t0))
        #expect(try await stores[0].markMailSent(id: mail.id, leaseToken: token, at: Self.t0) == false)
        let later = try await stores[0].claimMail(
            now: Self.t0.addingTimeInterval(700), leaseUntil: Self.t0.addingTimeInterval(1300), leaseToken: [9], limit: 100)
        #expect(!later.contains { $0.id == mail.id })
        #expect(later.count == 39)
    }

    /// Sent mails go after 7 days (their message at once), given-up ones after 30, tokens a day
    /// after their end; what waits stays however old.
    @Test(arguments: TestDatabase.kinds)
    func sentMailsAndDeadTokensAreSweptAndWaitingMailIsKept(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        let ada = try await Self.account(store, "ada")
        for index in 0..<3 {
            try await store.queueMail(
                QueuedMail(
                    accountID: ada.id, kind: "recovery", recipient: "ada@example.com", sender: "no-reply@example.com",
                    message: Array("mail \(index)".utf8), createdAt: Self.t0, nextAttemptAt: Self.t0),
                token: index == 0 ? Self.token(ada, .recover, link: [UInt8](repeating: 1, count: 32)) : nil, audit: [])
        }
        let lease: [UInt8] = [7]
        let claimed = try await store.claimMail(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), leaseToken: lease, limit: 10)
        #expect(claimed.count == 3)
        #expect(try await store.markMailSent(id: claimed[0].id, leaseToken: lease, at: Self.t0))
        #expect(try await store.markMailFailed(id: claimed[1].id, leaseToken: lease, error: "550", retryAt: nil, at: Self.t0))
        #expect(try await store.markMailFailed(id: claimed[2].id, leaseToken: lease, error: "451", retryAt: Self.t0, at: Self.t0))
        // The sent and given-up messages are erased at once (a link lives only until sent).
        let messages = try await #require(store as? SQLStore).reader.rows("SELECT message FROM mail_outbox ORDER BY id").map {
            try $0.optionalBytes("message")
        }
        #expect(messages.map { $0 == nil } == [true, true, false])
        #expect(try await store.sweepMail(now: Self.t0.addingTimeInterval(6 * 86_400)) == 1)  // the dead token
        #expect(try await store.sweepMail(now: Self.t0.addingTimeInterval(8 * 86_400)) == 1)  // the sent mail
        #expect(try await store.sweepMail(now: Self.t0.addingTimeInterval(31 * 86_400)) == 1)  // the given-up mail
        let stats = try await store.mailStatistics(now: Self.t0.addingTimeInterval(31 * 86_400))
        #expect(stats.failing == 1 && stats.queued == 0)
    }
}
