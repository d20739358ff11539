import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// The outboxes across tenants (issue 44): an audit line fans out to its own tenant's webhook
/// endpoints only (the schema's trigger), and the upkeep that spans tenants (metrics rollup)
/// counts each tenant's lines into its own days.
@Suite("Tenant outboxes (SQLite and PostgreSQL)")
struct TenantOutboxTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(arguments: TestDatabase.kinds)
    func anAuditLineFansOutToItsOwnTenantsEndpointsOnly(_ kind: TestDatabase.Kind) async throws {
        let a = try await TestDatabase.makeStore(kind)
        defer { (a as? PostgresStore)?.close() }
        let b = a.scoped(to: "tenant-b")
        let hookA = WebhookEndpoint(url: "https://a.example.com/hook", secret: [1], events: ["*"], createdAt: Self.t0)
        let hookB = WebhookEndpoint(url: "https://b.example.com/hook", secret: [2], events: ["*"], createdAt: Self.t0)
        try await a.addWebhookEndpoint(hookA)
        try await b.addWebhookEndpoint(hookB)
        try await a.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: UUID()))
        try await b.appendAudit(AuditEvent(time: Self.t0, kind: "sign_up", accountID: UUID()))
        try await b.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: nil))
        #expect(try await a.webhookDeliveries(endpointID: nil, limit: 10).map(\.endpointID) == [hookA.id])
        #expect(try await b.webhookDeliveries(endpointID: nil, limit: 10).map(\.endpointID) == [hookB.id, hookB.id])
        #expect(try await a.webhookBacklog(now: Self.t0) == 1)
        #expect(try await b.webhookBacklog(now: Self.t0) == 2)
        // The endpoints the dispatcher works, each with its tenant.
        let all = try await a.allWebhookEndpoints()
        #expect(
            Set(all.map { "\($0.tenant)/\($0.endpoint.url)" }) == [
                "default/https://a.example.com/hook", "tenant-b/https://b.example.com/hook",
            ])
        // Claims on one tenant's store take its deliveries only, even for another's endpoint id.
        #expect(try await a.claimWebhookDeliveries(endpointID: hookB.id, now: Self.t0, leaseUntil: Self.t0 + 60, limit: 10).isEmpty)
        let claimed = try await b.claimWebhookDeliveries(endpointID: nil, now: Self.t0, leaseUntil: Self.t0 + 60, limit: 10)
        #expect(claimed.allSatisfy { $0.0.endpointID == hookB.id } && claimed.count == 2, "\(claimed.map(\.0.endpointID))")
    }

    @Test(arguments: TestDatabase.kinds)
    func theRollupCountsEachTenantsLinesIntoItsOwnDays(_ kind: TestDatabase.Kind) async throws {
        let a = try await TestDatabase.makeStore(kind)
        defer { (a as? PostgresStore)?.close() }
        let b = a.scoped(to: "tenant-b")
        // The rollup works the tenants the registry holds.
        try await a.addTenant(TenantRecord(id: "tenant-b", hosts: ["b.example"], settings: "{}", createdAt: Self.t0, updatedAt: Self.t0))
        let day = Self.t0.addingTimeInterval(-86_400 * 2)
        for _ in 0..<3 { try await a.appendAudit(AuditEvent(time: day, kind: "sign_in", accountID: UUID(), metric: "signin_passkey")) }
        try await b.appendAudit(AuditEvent(time: day, kind: "sign_in", accountID: UUID(), metric: "signin_passkey"))
        #expect(try await a.rollUpMetrics(before: Self.t0) >= 1)
        #expect(try await a.metricTotals(before: Self.t0)["signin_passkey"] == 3)
        #expect(try await b.metricTotals(before: Self.t0)["signin_passkey"] == 1)
        #expect(try await a.scoped(to: "tenant-c").metricTotals(before: Self.t0).isEmpty)
    }
}
