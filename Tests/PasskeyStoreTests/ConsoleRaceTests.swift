import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// The console's single-use, guarded and counted rows under races, on both stores: sixteen
/// takers released together (``Race``). The bootstrap token makes one admin; demotions never
/// leave the console without an admin; concurrent rollups (several instances) write the same
/// table as one.
@Suite("Console store under races (SQLite and PostgreSQL)")
struct ConsoleRaceTests {
    typealias Fixtures = StoreConformanceTests
    static let takers = 16
    static let t0 = Fixtures.t0

    static func accounts(_ store: any PasskeyStore, _ count: Int, prefix: String = "racer") async throws -> [Account] {
        var accounts: [Account] = []
        for index in 0..<count {
            let account = Fixtures.account("\(prefix)\(index)")
            try await store.createAccount(account, passkey: Fixtures.passkey(for: account), session: nil, audit: [])
            accounts.append(account)
        }
        return accounts
    }

    /// Sixteen new accounts redeem one bootstrap token at once: one becomes admin, with one
    /// audit line; the others get false and wrote nothing.
    @Test(arguments: TestDatabase.kinds)
    func aBootstrapTokenIsRedeemedByOneOfSixteen(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let accounts = try await Self.accounts(store, Self.takers)
        let hash = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveAdminBootstrapToken(hash: hash, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(3600), audit: [])
        let results = await Race.run(Self.takers) { taker in
            try await store.redeemAdminBootstrapToken(
                hash: hash, accountID: accounts[taker].id, now: Self.t0,
                audit: [AuditEvent(time: Self.t0, kind: "admin_bootstrap", accountID: accounts[taker].id)])
        }
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "no taker failed: \(results)")
        #expect(Race.winners(results) { $0 } == 1)
        #expect(try await store.adminCount() == 1)
        #expect(try await store.adminGrants().count == 1)
        #expect(try await store.searchAudit(AuditQuery(kind: "admin_bootstrap", limit: 100)).count == 1)
    }

    /// Several instances each printed a link: sixteen tokens redeemed at once still make one admin.
    @Test(arguments: TestDatabase.kinds)
    func sixteenBootstrapTokensRedeemedAtOnceMakeOneAdmin(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let accounts = try await Self.accounts(store, Self.takers)
        let hashes = (0..<Self.takers).map { _ in (0..<32).map { _ in UInt8.random(in: 0...255) } }
        for hash in hashes {
            try await store.saveAdminBootstrapToken(hash: hash, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(3600), audit: [])
        }
        let results = await Race.run(Self.takers) { taker in
            try await store.redeemAdminBootstrapToken(hash: hashes[taker], accountID: accounts[taker].id, now: Self.t0, audit: [])
        }
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "no taker failed: \(results)")
        #expect(Race.winners(results) { $0 } == 1)
        #expect(try await store.adminCount() == 1)
    }

    /// Sixteen admins each demote themselves at once (half to viewer, half removed): fifteen
    /// succeed, the last is refused, and one admin is left.
    @Test(arguments: TestDatabase.kinds)
    func demotionsRacingNeverLeaveTheConsoleWithoutAnAdmin(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let accounts = try await Self.accounts(store, Self.takers)
        for account in accounts {
            #expect(try await store.setAdminRole(accountID: account.id, role: .admin, by: "cli", at: Self.t0, audit: []) == .changed)
        }
        let results = await Race.run(Self.takers) { taker in
            try await store.setAdminRole(
                accountID: accounts[taker].id, role: taker % 2 == 0 ? nil : .viewer, by: "cli", at: Self.t0,
                audit: [AuditEvent(time: Self.t0, kind: "admin_role_removed", accountID: accounts[taker].id)])
        }
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "no taker failed: \(results)")
        #expect(Race.winners(results) { $0 == .changed } == Self.takers - 1)
        #expect(Race.winners(results) { $0 == .lastAdmin } == 1)
        #expect(try await store.adminCount() == 1)
        #expect(try await store.searchAudit(AuditQuery(kind: "admin_role_removed", limit: 100)).count == Self.takers - 1)
    }

    /// The last two admins demote each other at once, many times over: one admin always stays.
    @Test(arguments: TestDatabase.kinds)
    func twoAdminsDemotingEachOtherLeaveOne(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let accounts = try await Self.accounts(store, 2)
        for _ in 0..<8 {
            for account in accounts {
                _ = try await store.setAdminRole(accountID: account.id, role: .admin, by: "cli", at: Self.t0, audit: [])
            }
            let results = await Race.run(2) { taker in
                try await store.setAdminRole(
                    accountID: accounts[1 - taker].id, role: nil, by: accounts[taker].id.uuidString, at: Self.t0, audit: [])
            }
            #expect(Race.winners(results) { $0 == .changed } == 1)
            #expect(try await store.adminCount() == 1)
        }
    }

    /// The last two admins delete each other's accounts at once, many times over: one account
    /// goes, the other is refused (`lastAdmin`) and stays the one admin.
    @Test(arguments: TestDatabase.kinds)
    func twoAdminsDeletingEachOtherLeaveOne(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        var survivor: UUID?
        for round in 0..<8 {
            // Exactly this round's pair hold admin when the race starts.
            let pair = try await Self.accounts(store, 2, prefix: "round\(round)-")
            for account in pair {
                #expect(try await store.setAdminRole(accountID: account.id, role: .admin, by: "cli", at: Self.t0, audit: []) == .changed)
            }
            if let survivor {
                #expect(try await store.setAdminRole(accountID: survivor, role: nil, by: "cli", at: Self.t0, audit: []) == .changed)
            }
            let results = await Race.run(2) { taker in
                try await store.deleteAccount(
                    accountID: pair[1 - taker].id,
                    audit: [AuditEvent(time: Self.t0, kind: "account_deleted", accountID: pair[1 - taker].id)])
            }
            #expect(results.allSatisfy { (try? $0.get()) != nil }, "no taker failed: \(results)")
            #expect(Race.winners(results) { $0 == .deleted } == 1)
            #expect(Race.winners(results) { $0 == .lastAdmin } == 1)
            let admins = try await store.adminGrants().filter { $0.role == .admin }
            #expect(admins.count == 1 && pair.map(\.id).contains(admins.first?.account.id ?? UUID()))
            #expect(try await store.searchAudit(AuditQuery(kind: "account_deleted", limit: 100)).count == round + 1)
            survivor = admins.first?.account.id
        }
    }

    /// Sixteen instances roll up the same days at once: the days are rolled once in all, and
    /// the table is what one rollup writes.
    @Test(arguments: TestDatabase.kinds)
    func concurrentRollupsWriteTheSameTableAsOne(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let day0 = ConsoleStoreTests.dayStart(Self.t0)
        var expected: [DailyMetric] = []
        for day in 0..<20 {
            let start = day0.addingTimeInterval(Double(day) * 86_400)
            for index in 0..<(day % 4 + 1) {
                try await store.appendAudit(
                    AuditEvent(time: start.addingTimeInterval(Double(index) * 3000), kind: .signIn, metric: "sign_in_passkey"))
            }
            expected.append(DailyMetric(day: start, metric: "sign_in_passkey", n: day % 4 + 1))
        }
        let before = day0.addingTimeInterval(20 * 86_400)
        let results = await Race.run(Self.takers) { _ in try await store.rollUpMetrics(before: before) }
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "no taker failed: \(results)")
        #expect(results.compactMap { try? $0.get() }.reduce(0, +) == 20)
        #expect(try await store.dailyMetrics(from: day0, to: before) == expected)
        #expect(try await store.metricTotals(before: before) == ["sign_in_passkey": expected.map(\.n).reduce(0, +)])
    }
}
