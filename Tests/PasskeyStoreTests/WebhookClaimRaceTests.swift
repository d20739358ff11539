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

    /// Delivered rows are swept once past their retention (issue 42, item 21): they used to stay
    /// forever. The undelivered stay however old, and a younger delivered one stays.
    @Test(arguments: TestDatabase.kinds)
    func deliveredDeliveriesAreSweptAfterTheirRetention(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(endpoint)
        let longAgo = Self.t0.addingTimeInterval(-30 * 86_400)
        for _ in 0..<3 { try await store.appendAudit(AuditEvent(time: longAgo, kind: "sign_in", accountID: UUID())) }
        let claimed = try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8)
            .map(\.0).sorted { $0.eventID < $1.eventID }
        try #require(claimed.count == 3)
        let retention = SQLStore.deliveredWebhookRetention
        for (delivery, age) in zip(claimed.prefix(2), [retention + 3600, retention - 3600]) {
            try await store.settleWebhookDelivery(
                eventID: delivery.eventID, endpointID: endpoint.id, deliveredAt: Self.t0.addingTimeInterval(-age), status: 204, error: nil,
                retryAt: Self.t0)
        }
        try await store.settleWebhookDelivery(
            eventID: claimed[2].eventID, endpointID: endpoint.id, deliveredAt: nil, status: 503, error: "down", retryAt: Self.t0)
        #expect(try await store.sweepExpired(now: Self.t0) == 1)
        let left = try await store.webhookDeliveries(endpointID: endpoint.id, limit: 10).map(\.eventID).sorted()
        #expect(left == [claimed[1].eventID, claimed[2].eventID])
        // The audit line of the swept delivery stays: it is the history.
        #expect(try await store.auditEvents(accountID: nil, limit: 10).count == 3)
    }

    /// The settle of the release before migration 14, word for word (1c4a1c5): one UPDATE that
    /// knows nothing of heads. During a rolling upgrade old instances settle with it.
    static func previousReleaseSettle(_ store: SQLStore, eventID: Int64, endpointID: UUID, deliveredAt: Date?) async throws {
        let status: Int? = deliveredAt == nil ? 503 : 204
        let error: String? = deliveredAt == nil ? "down" : nil
        let latencyMs: Int? = 12
        let retryAt = t0.addingTimeInterval(5)
        try await store.writer.run(
            """
            UPDATE webhook_deliveries
            SET attempts = attempts + 1, delivered_at = \(deliveredAt), last_status = \(status), last_error = \(error),
                latency_ms = \(latencyMs), next_attempt_at = \(retryAt), lease_until = NULL
            WHERE event_id = \(eventID) AND endpoint_id = \(endpointID)
            """)
    }

    /// A delivery settled by the previous release's UPDATE (a rolling upgrade) passes its head
    /// on all the same: the schema's trigger does it within that UPDATE, so the account's next
    /// delivery is claimed at once, for an account and for the account-less group alike. A
    /// failed settle of that release keeps the head where it is.
    @Test(arguments: TestDatabase.kinds)
    func aPreviousReleasesSettlePassesTheHeadOn(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(endpoint)
        for account in [UUID(), nil] {
            for _ in 0..<3 { try await store.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: account)) }
        }
        // Events 1…3 of an account, 4…6 of none.
        let first = try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
        #expect(first.map(\.0.eventID).sorted() == [1, 4])
        for eventID: Int64 in [1, 4] {
            try await Self.previousReleaseSettle(store, eventID: eventID, endpointID: endpoint.id, deliveredAt: Self.t0)
        }
        let second = try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
        #expect(second.map(\.0.eventID).sorted() == [2, 5], "\(second.map(\.0.eventID))")
        // Failed on the old release: still the head, due again after its back-off, then delivered.
        for eventID: Int64 in [2, 5] {
            try await Self.previousReleaseSettle(store, eventID: eventID, endpointID: endpoint.id, deliveredAt: nil)
        }
        let later = Self.t0.addingTimeInterval(5)
        let retried = try await store.claimWebhookDeliveries(now: later, leaseUntil: later.addingTimeInterval(60), limit: 10)
        #expect(retried.map(\.0.eventID).sorted() == [2, 5], "\(retried.map(\.0.eventID))")
        for eventID: Int64 in [2, 5] {
            try await Self.previousReleaseSettle(store, eventID: eventID, endpointID: endpoint.id, deliveredAt: later)
        }
        let third = try await store.claimWebhookDeliveries(now: later, leaseUntil: later.addingTimeInterval(60), limit: 10)
        #expect(third.map(\.0.eventID).sorted() == [3, 6], "\(third.map(\.0.eventID))")
        // A delivered row keeps no mark.
        let marked = try await store.reader.rows("SELECT event_id FROM webhook_deliveries WHERE head ORDER BY event_id").map {
            try $0.integer("event_id")
        }
        #expect(marked == [3, 6], "\(marked)")
    }

    /// A delivery settling as delivered while a new event of its account is written, released
    /// together, 40 rounds on two store instances (for an account, and for none): whichever
    /// commits first, the new delivery ends up its account's head and is claimed next, never
    /// left unmarked.
    @Test(arguments: TestDatabase.kinds)
    func aSettleRacingANewEventOfItsAccountLeavesOneHead(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await stores[0].addWebhookEndpoint(endpoint)
        for round in 0..<40 {
            let account: UUID? = round % 2 == 0 ? UUID() : nil
            try await stores[0].appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: account))
            let claimed = try await stores[0].claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
            let head = try #require(claimed.first?.0)
            #expect(claimed.count == 1, "round \(round): \(claimed.map(\.0.eventID))")
            let results = await Race.run(2) { taker in
                if taker == 0 {
                    try await stores[1].settleWebhookDelivery(
                        eventID: head.eventID, endpointID: endpoint.id, deliveredAt: Self.t0, status: 204, error: nil, retryAt: Self.t0)
                } else {
                    try await stores[2].appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: account))
                }
            }
            #expect(results.allSatisfy { (try? $0.get()) != nil }, "round \(round): \(results)")
            let next = try await stores[3].claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
            #expect(next.map(\.0.eventID) == [head.eventID + 1], "round \(round): \(next.map(\.0.eventID))")
            for (delivery, _) in next {
                try await stores[0].settleWebhookDelivery(
                    eventID: delivery.eventID, endpointID: endpoint.id, deliveredAt: Self.t0, status: 204, error: nil, retryAt: Self.t0)
            }
        }
        let marked = try #require(stores[0] as? SQLStore).reader
        #expect(try await marked.rows("SELECT event_id FROM webhook_deliveries WHERE head AND delivered_at IS NULL").isEmpty)
    }

    /// A delivered row that still carries the mark (as the previous release's settle left its
    /// heads before the trigger passed them on) is never a claim's candidate: ten of them, due
    /// before the one undelivered head, do not fill a claim of one.
    @Test(arguments: TestDatabase.kinds)
    func aDeliveredHeadIsNeverACandidate(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(endpoint)
        for _ in 0..<10 { try await store.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: UUID())) }
        try await store.writer.run("UPDATE webhook_deliveries SET delivered_at = \(Self.t0)")
        try await store.writer.run("UPDATE webhook_deliveries SET head = \(true)")
        let waiting = Self.t0.addingTimeInterval(1)
        try await store.appendAudit(AuditEvent(time: waiting, kind: "sign_in", accountID: UUID()))
        let later = Self.t0.addingTimeInterval(2)
        let claimed = try await store.claimWebhookDeliveries(now: later, leaseUntil: later.addingTimeInterval(60), limit: 1)
        #expect(claimed.map(\.0.eventID) == [11], "\(claimed.map(\.0.eventID))")
    }

    /// A settle that failed, arriving after another instance delivered the same delivery (its
    /// lease ran out meanwhile), does not take the delivery back: it stays delivered, is not
    /// claimed again, and its account's next delivery keeps the mark.
    @Test(arguments: TestDatabase.kinds)
    func aLateFailedSettleDoesNotUndoADelivery(_ kind: TestDatabase.Kind) async throws {
        let stores = try await Self.instances(kind)
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await stores[0].addWebhookEndpoint(endpoint)
        let account = UUID()
        for _ in 0..<2 { try await stores[0].appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: account)) }
        let claimed = try await stores[0].claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
        let delivery = try #require(claimed.first?.0)
        #expect(claimed.count == 1)
        try await stores[1].settleWebhookDelivery(
            eventID: delivery.eventID, endpointID: endpoint.id, deliveredAt: Self.t0, status: 204, error: nil, retryAt: Self.t0)
        try await stores[2].settleWebhookDelivery(
            eventID: delivery.eventID, endpointID: endpoint.id, deliveredAt: nil, status: nil, error: "timed out",
            retryAt: Self.t0.addingTimeInterval(5))
        let rows = try await stores[3].webhookDeliveries(endpointID: endpoint.id, limit: 10)
        let settled = try #require(rows.first { $0.eventID == delivery.eventID })
        #expect(settled.deliveredAt == Self.t0 && settled.lastStatus == 204 && settled.attempts == 1, "\(settled)")
        let later = Self.t0.addingTimeInterval(10)
        let next = try await stores[3].claimWebhookDeliveries(now: later, leaseUntil: later.addingTimeInterval(60), limit: 10)
        #expect(next.map(\.0.eventID) == [delivery.eventID + 1], "\(next.map(\.0.eventID))")
    }

    /// The sweep deletes delivered rows in bounded batches, each its own statement: 250 past
    /// their retention, batches of 100, at most two a sweep: 200 go, then the other 50; the
    /// undelivered and the recently delivered stay.
    @Test(arguments: TestDatabase.kinds)
    func deliveredDeliveriesAreSweptInBatches(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(endpoint)
        try await store.transaction { db in
            for _ in 0..<260 { try await db.execute(store.insert(AuditEvent(time: Self.t0, kind: "sign_in", accountID: UUID()))) }
        }
        let old = Self.t0.addingTimeInterval(-SQLStore.deliveredWebhookRetention - 60)
        try await store.writer.run("UPDATE webhook_deliveries SET delivered_at = \(old) WHERE event_id <= \(Int64(250))")
        try await store.writer.run("UPDATE webhook_deliveries SET delivered_at = \(Self.t0) WHERE event_id > \(Int64(255))")
        #expect(try await store.sweepDeliveredWebhooks(now: Self.t0, batchSize: 100, batches: 2) == 200)
        #expect(try await store.sweepDeliveredWebhooks(now: Self.t0, batchSize: 100, batches: 2) == 50)
        #expect(try await store.sweepDeliveredWebhooks(now: Self.t0, batchSize: 100, batches: 2) == 0)
        let left = try await store.webhookDeliveries(endpointID: endpoint.id, limit: 100).map(\.eventID).sorted()
        #expect(left == Array(251...260), "\(left)")
    }

    /// On PostgreSQL the outbox trigger looks for an account's head with FOR SHARE, not FOR
    /// UPDATE: account-less audit lines (a failed sign-in of an unknown credential, which anyone
    /// can cause) all share one head, and one written while another's transaction is still open
    /// goes through instead of queueing behind it (with FOR UPDATE it waited until the operation
    /// deadline). Order holds: only the oldest is claimed.
    @Test(arguments: TestDatabase.kinds.filter { $0 == .postgres })
    func accountlessAuditLinesDoNotQueueOnTheirHead(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? PostgresStore)
        defer { store.close() }
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(endpoint)
        try await store.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in_failed", accountID: nil))
        try await store.engine.transaction(tenant: TenantID.defaultTenant, timeout: nil) { db in
            try await db.execute(store.insert(AuditEvent(time: Self.t0, kind: "sign_in_failed", accountID: nil)))
            // Another connection, while this transaction holds its look at the head.
            try await store.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in_failed", accountID: nil))
        }
        let claimed = try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
        #expect(claimed.map(\.0.eventID) == [1], "\(claimed.map(\.0.eventID))")
    }

    /// A dead endpoint's backlog is not read by a claim (issue 42, item 21): 3,000 deliveries
    /// wait for it, each account's oldest in its back-off. A claim used to group every
    /// undelivered row of the endpoint to find each account's oldest, once a second per endpoint;
    /// it now reads the due heads from webhook_deliveries_heads and finds none. Checked on the
    /// query plan (SQLite) and by the rows PostgreSQL's executor read (`EXPLAIN ANALYZE`). A
    /// live endpoint beside it still gets each account's events one at a time, in order.
    @Test(arguments: TestDatabase.kinds)
    func aDeadEndpointsBacklogIsNotReadByAClaim(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let dead = WebhookEndpoint(url: "https://dead.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        let live = WebhookEndpoint(url: "https://live.example.com/hook", secret: [2], events: ["sign_in"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(dead)
        try await store.addWebhookEndpoint(live)
        let accounts = (0..<300).map { _ in UUID() }
        let signingIn = Array(accounts.prefix(3))
        try await store.transaction { db in
            for round in 0..<10 {
                for account in accounts {
                    let eventKind = round < 3 && signingIn.contains(account) ? "sign_in" : "sign_up"
                    try await db.execute(store.insert(AuditEvent(time: Self.t0, kind: eventKind, accountID: account)))
                }
            }
        }
        #expect(try await store.webhookBacklog(now: Self.t0) == 3000 + 9)
        // Every head of the dead endpoint fails once and waits an hour.
        var failed = 0
        while true {
            let claimed = try await store.claimWebhookDeliveries(
                endpointID: dead.id, now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 64)
            if claimed.isEmpty { break }
            for (delivery, _) in claimed {
                try await store.settleWebhookDelivery(
                    eventID: delivery.eventID, endpointID: dead.id, deliveredAt: nil, status: nil, error: "connection refused",
                    retryAt: Self.t0.addingTimeInterval(3600))
            }
            failed += claimed.count
        }
        #expect(failed == accounts.count)

        let later = Self.t0.addingTimeInterval(60)
        #expect(try await store.claimWebhookDeliveries(endpointID: dead.id, now: later, leaseUntil: later, limit: 8).isEmpty)
        let query = store.claimCandidates(endpointID: dead.id, now: later, limit: 8)
        switch kind {
        case .sqlite:
            let plan = try await store.reader.rows(SQL(stringLiteral: "EXPLAIN QUERY PLAN ").appending(query)).map { try $0.text("detail") }
                .joined(separator: "\n")
            #expect(plan.contains("INDEX webhook_deliveries_heads (endpoint_id=? AND next_attempt_at<?)"), "\(plan)")
            #expect(!plan.contains("SCAN"), "\(plan)")
        case .postgres:
            let plan = try await store.engine.transaction(tenant: TenantID.defaultTenant, timeout: nil) { db in
                try await db.execute("SET LOCAL enable_seqscan = off")
                return try await db.rows(SQL(stringLiteral: "EXPLAIN (ANALYZE, TIMING OFF) ").appending(query)).map {
                    try $0.text("QUERY PLAN")
                }
            }
            let examined = Self.rowsRead(plan, table: "webhook_deliveries")
            #expect(examined < 10, "\(examined) rows read: \(plan.joined(separator: "\n"))")
            #expect(plan.joined().contains("webhook_deliveries_heads"), "\(plan.joined(separator: "\n"))")
        }

        // The live endpoint: each account's three sign-ins, one at a time and in order.
        var received: [UUID: [Int64]] = [:]
        for _ in 0..<3 {
            let claimed = try await store.claimWebhookDeliveries(endpointID: live.id, now: later, leaseUntil: later, limit: 64)
            #expect(Set(claimed.compactMap(\.0.accountID)) == Set(signingIn) && claimed.count == signingIn.count)
            for (delivery, _) in claimed {
                received[try #require(delivery.accountID), default: []].append(delivery.eventID)
                try await store.settleWebhookDelivery(
                    eventID: delivery.eventID, endpointID: live.id, deliveredAt: later, status: 204, error: nil, retryAt: later)
            }
        }
        #expect(received.count == 3 && received.values.allSatisfy { $0.count == 3 && $0 == $0.sorted() }, "\(received)")
        #expect(try await store.claimWebhookDeliveries(endpointID: live.id, now: later, leaseUntil: later, limit: 64).isEmpty)
    }

    /// Migration 14 marks the heads of a backlog written before it: per (endpoint, account,
    /// none too) the oldest undelivered delivery, whatever was delivered before it.
    @Test(arguments: TestDatabase.kinds)
    func migrationFourteenMarksEachAccountsOldestUndeliveredDelivery(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeUnmigratedStore(kind)
        defer { (store as? PostgresStore)?.close() }
        #expect(try await store.migrate(through: 13) == Array(1...13))
        let endpoint = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        // As version 13 wrote them (no tenant).
        try await store.writer.run(
            """
            INSERT INTO webhook_endpoints (id, url, secret, events, created_at, disabled)
            VALUES (\(endpoint.id), \(endpoint.url), \(endpoint.secret), \("*"), \(endpoint.createdAt), \(false))
            """)
        let ada = UUID(), bob = UUID()
        for account in [ada, bob, nil, ada, bob, nil, ada] {
            try await store.writer.run(
                "INSERT INTO audit_events (time, kind, account_id) VALUES (\(Self.t0), \("sign_in"), \(account))")
        }
        // Events 1…7; ada's first (1) was delivered before the upgrade.
        try await store.writer.run("UPDATE webhook_deliveries SET delivered_at = \(Self.t0) WHERE event_id = \(Int64(1))")
        #expect(try await store.migrate(through: 14) == [14])
        // Migration 16 carries the heads over into the default tenant.
        #expect(try await store.migrate() == [15, 16, 17, 18])
        let claimed = try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 10)
        #expect(claimed.map(\.0.eventID).sorted() == [2, 3, 4], "\(claimed.map(\.0.eventID))")
    }

    /// The rows an `EXPLAIN ANALYZE` plan's scans of `table` read: each scan node's rows, and
    /// those its filter removed, times its loops.
    static func rowsRead(_ plan: [String], table: String) -> Int {
        var total = 0
        var loops = 0
        func number(after label: String, in line: String) -> Int? {
            guard let range = line.range(of: label) else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        for line in plan {
            if let actual = line.range(of: "(actual") {
                loops = line.contains(" on \(table) ") ? (number(after: "loops=", in: line) ?? 1) : 0
                total += loops * (number(after: "rows=", in: String(line[actual.lowerBound...])) ?? 0)
            } else if let removed = number(after: "Rows Removed by Filter: ", in: line)
                ?? number(after: "Rows Removed by Index Recheck: ", in: line)
            {
                total += loops * removed
            }
        }
        return total
    }
}
