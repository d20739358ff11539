import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// The webhook outbox's lease under races: sixteen claimers on four store instances (four
/// connection pools, as four passkeyd instances on one database) released together never lease
/// one delivery twice, and take only the oldest undelivered event of each (endpoint, account),
/// so no account's events overtake each other. On SQLite and on PostgreSQL.
@Suite("Webhook outbox claims under races (SQLite and PostgreSQL)")
struct WebhookClaimRaceTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    static let claimers = 16
    static let instances = 4
    static let accounts = 24

    /// Four stores on one new database of `kind`.
    static func instances(_ kind: TestDatabase.Kind) async throws -> [any PasskeyStore] {
        let url = try await TestDatabase.makeURL(kind)
        var stores: [any PasskeyStore] = []
        for _ in 0..<instances {
            switch kind {
            case .sqlite: stores.append(try SQLiteStore(path: String(url.dropFirst("sqlite://".count))))
            case .postgres:
                stores.append(try PostgresStore(url: url, options: TestDatabase.postgresOptions(maxConnections: 4)))
            }
        }
        try await stores[0].migrate()
        return stores
    }

    @Test(arguments: TestDatabase.kinds)
    func aDeliveryIsLeasedToOneClaimerAtATime(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let endpoints = [
            WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0),
            WebhookEndpoint(url: "https://b.example.com/hook", secret: [2], events: ["*"], createdAt: Self.t0),
        ]
        for endpoint in endpoints { try await stores[0].addWebhookEndpoint(endpoint) }
        // Two events per account: only the first of each may be claimed while it is undelivered.
        let accountIDs = (0..<Self.accounts).map { _ in UUID() }
        for round in 0..<2 {
            for account in accountIDs {
                try await stores[0].appendAudit(AuditEvent(time: Self.t0, kind: round == 0 ? "sign_up" : "sign_in", accountID: account))
            }
        }

        // Each claimer claims until nothing is left for it, all at the same instant.
        let results = await Race.run(Self.claimers) { taker in
            let store = stores[taker % Self.instances]
            var taken: [WebhookDelivery] = []
            for _ in 0..<20 {
                let claimed = try await store.claimWebhookDeliveries(
                    endpointID: taker % 3 == 0 ? endpoints[taker % 2].id : nil, now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60),
                    limit: 4)
                if claimed.isEmpty { break }
                taken += claimed.map(\.0)
            }
            return taken
        }
        let taken = results.flatMap { (try? $0.get()) ?? [] }
        #expect(results.allSatisfy { (try? $0.get()) != nil }, "no claimer failed: \(results.filter { (try? $0.get()) == nil })")
        struct Key: Hashable {
            let event: Int64
            let endpoint: UUID
        }
        let keys = taken.map { Key(event: $0.eventID, endpoint: $0.endpointID) }
        #expect(Set(keys).count == keys.count, "a delivery was leased twice")
        // Every first event of each account, to each endpoint; never a second event before it.
        #expect(keys.count == Self.accounts * endpoints.count, "\(keys.count)")
        let events = try await stores[0].auditEvents(accountID: nil, limit: 1000)
        let firsts = Set(events.filter { $0.kind == "sign_up" }.compactMap(\.id))
        #expect(keys.allSatisfy { firsts.contains($0.event) })

        // Settled as delivered, the second events are claimable, once each.
        for delivery in taken {
            try await stores[0].settleWebhookDelivery(
                eventID: delivery.eventID, endpointID: delivery.endpointID, deliveredAt: Self.t0, status: 204, error: nil,
                retryAt: Self.t0)
        }
        let second = await Race.run(Self.claimers) { taker in
            try await stores[taker % Self.instances].claimWebhookDeliveries(
                now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 64
            ).map { Key(event: $0.0.eventID, endpoint: $0.0.endpointID) }
        }
        let secondKeys = second.flatMap { (try? $0.get()) ?? [] }
        #expect(Set(secondKeys).count == secondKeys.count && secondKeys.count == Self.accounts * endpoints.count, "\(secondKeys.count)")
        #expect(secondKeys.allSatisfy { !firsts.contains($0.event) })
    }

    /// A delivery that failed waits its back-off on every instance, then is claimed again (the
    /// claim's UPDATE checks due time, delivery and lease on the row itself, so a claimer whose
    /// read came just before the settle takes nothing either).
    @Test(arguments: TestDatabase.kinds)
    func aDeliveryWaitingItsBackOffIsNotClaimed(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await stores[0].addWebhookEndpoint(endpoint)
        try await stores[0].appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: UUID()))
        let claimed = try await stores[0].claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8)
        #expect(claimed.count == 1)
        let delivery = try #require(claimed.first?.0)
        try await stores[1].settleWebhookDelivery(
            eventID: delivery.eventID, endpointID: delivery.endpointID, deliveredAt: nil, status: nil, error: "connection refused",
            retryAt: Self.t0.addingTimeInterval(5))
        #expect(try await stores[2].claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8).isEmpty)
        #expect(
            try await stores[3].claimWebhookDeliveries(
                endpointID: endpoint.id, now: Self.t0.addingTimeInterval(5), leaseUntil: Self.t0.addingTimeInterval(65), limit: 8
            ).count == 1)
    }
}
