import Foundation

/// Webhooks: endpoints, and the outbox of deliveries (claimed under a lease by one instance at a
/// time, in order per account, then settled).
extension SQLStore {
    public func addWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws {
        try await writer.run(
            """
            INSERT INTO webhook_endpoints (tenant_id, id, url, secret, events, created_at, disabled)
            VALUES (\(tenant), \(endpoint.id), \(endpoint.url), \(endpoint.secret), \(endpoint.events.joined(separator: ",")), \(endpoint.createdAt),
                    \(endpoint.disabled))
            """)
    }

    public func webhookEndpoints() async throws -> [WebhookEndpoint] {
        try await reader.rows("SELECT * FROM webhook_endpoints WHERE tenant_id = \(tenant) ORDER BY created_at, id").map {
            try WebhookEndpoint(row: $0)
        }
    }

    public func allWebhookEndpoints() async throws -> [(tenant: String, endpoint: WebhookEndpoint)] {
        try await upkeepReader.rows("SELECT * FROM webhook_endpoints ORDER BY tenant_id, created_at, id").map {
            (try $0.text("tenant_id"), try WebhookEndpoint(row: $0))
        }
    }

    public func removeWebhookEndpoint(id: UUID) async throws -> Bool {
        try await writer.run("DELETE FROM webhook_endpoints WHERE tenant_id = \(tenant) AND id = \(id) RETURNING 1") == 1
    }

    /// A claim's candidates: per (endpoint, account) the oldest undelivered delivery (its
    /// `head`; events of one account reach an endpoint in order), when it is due and not leased.
    /// Read from webhook_deliveries_heads, the due heads alone (of one endpoint, or all), soonest
    /// due first: what waits behind a head, and a head in its back-off, is not read, so a dead
    /// endpoint's backlog costs a claim nothing. Two heads of one account (made at the same
    /// moment on PostgreSQL) never both go: a head is taken only when nothing older of its
    /// account waits at its endpoint. A paused endpoint's (`disabled`) deliveries wait,
    /// unclaimed, until it is resumed.
    func claimCandidates(endpointID: UUID?, now: Date, limit: Int) -> SQL {
        let endpointFilter: SQL = endpointID.map { id -> SQL in " AND d.endpoint_id = \(id)" } ?? ""
        let rest: SQL = """
             AND (d.lease_until IS NULL OR d.lease_until <= \(now))
              AND NOT EXISTS (
                SELECT 1 FROM webhook_deliveries p WHERE p.tenant_id = \(tenant) AND p.endpoint_id = d.endpoint_id AND p.account_id = d.account_id
                AND p.delivered_at IS NULL AND p.event_id < d.event_id)
              AND (d.account_id IS NOT NULL OR NOT EXISTS (
                SELECT 1 FROM webhook_deliveries p WHERE p.tenant_id = \(tenant) AND p.endpoint_id = d.endpoint_id AND p.account_id IS NULL
                AND p.delivered_at IS NULL AND p.event_id < d.event_id))
              AND NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.tenant_id = \(tenant) AND e.id = d.endpoint_id AND e.disabled = \(true))
            ORDER BY d.next_attempt_at, d.event_id LIMIT \(limit)
            """
        let select: SQL =
            "SELECT d.event_id, d.endpoint_id FROM webhook_deliveries d WHERE d.tenant_id = \(tenant) AND d.head AND d.delivered_at IS NULL AND d.next_attempt_at <= \(now)"
        return select.appending(endpointFilter).appending(rest)
    }

    public func claimWebhookDeliveries(endpointID: UUID?, now: Date, leaseUntil: Date, limit: Int) async throws -> [(
        WebhookDelivery, AuditEvent
    )] {
        let candidates = try await reader.rows(claimCandidates(endpointID: endpointID, now: now, limit: limit))
        guard !candidates.isEmpty else { return [] }
        // One short write takes the leases, marked with this claim's token. The row conditions
        // are checked again by the UPDATE itself: of several instances claiming the same row at
        // once, PostgreSQL lets one update it and re-evaluates the others' WHERE on the row it
        // left (leased: not taken), and SQLite has one writer; a row settled since the read
        // (delivered, or failed and waiting its back-off) is not taken either.
        let token = UUID.random().uuidString.lowercased()
        var rows: SQL = "("
        for (index, row) in candidates.enumerated() {
            let eventID = try row.integer("event_id"), endpointID = try row.id("endpoint_id")
            rows = rows.appending(index == 0 ? "" : " OR ").appending("(event_id = \(eventID) AND endpoint_id = \(endpointID))")
        }
        rows = rows.appending(")")
        let due: SQL = "delivered_at IS NULL AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until <= \(now))"
        let update: SQL
        if dialect == .postgres {
            // PostgreSQL: the rows are locked in one order and a row another claim holds is
            // skipped, so racing claims never wait on each other (an UPDATE locking its OR-list in
            // scan order could deadlock with another claim's: 40P01 in a PostgreSQL race test).
            update = SQL(
                "WITH picked AS (SELECT event_id, endpoint_id FROM webhook_deliveries WHERE tenant_id = \(tenant) AND "
            ).appending(due).appending(" AND ").appending(rows).appending(
                " ORDER BY event_id, endpoint_id FOR UPDATE SKIP LOCKED) UPDATE webhook_deliveries d SET lease_until = \(leaseUntil), lease_token = \(token) FROM picked p WHERE d.tenant_id = \(tenant) AND d.event_id = p.event_id AND d.endpoint_id = p.endpoint_id RETURNING 1"
            )
        } else {
            update = SQL(
                "UPDATE webhook_deliveries SET lease_until = \(leaseUntil), lease_token = \(token) WHERE tenant_id = \(tenant) AND "
            ).appending(due)
                .appending(" AND ").appending(rows).appending(" RETURNING 1")
        }
        guard try await writer.run(update) > 0 else { return [] }
        return try await reader.rows(
            """
            SELECT d.*, a.id AS audit_id, a.time, a.kind, a.credential_id, a.ip_address, a.user_agent, a.detail, a.metric, a.trace_parent
            FROM webhook_deliveries d JOIN audit_events a ON a.tenant_id = d.tenant_id AND a.id = d.event_id
            WHERE d.tenant_id = \(tenant) AND d.lease_token = \(token) AND d.delivered_at IS NULL
            ORDER BY d.event_id
            """
        ).map { (try WebhookDelivery(row: $0), try AuditEvent(row: $0, idColumn: "audit_id")) }
    }

    public func settleWebhookDelivery(
        eventID: Int64, endpointID: UUID, deliveredAt: Date?, status: Int?, error: String?, latencyMs: Int?, retryAt: Date
    ) async throws {
        // Only an undelivered delivery is settled: a late settle (its lease ran out and another
        // instance delivered it meanwhile) changes nothing, and a failed one never takes a
        // delivery back. A delivered head passes its mark to the next undelivered delivery of
        // its account in this same UPDATE, by the schema's webhook_deliveries_pass_head trigger
        // (migration 14), as it does for a settle of the previous release.
        try await writer.run(
            """
            UPDATE webhook_deliveries
            SET attempts = attempts + 1, delivered_at = \(deliveredAt), last_status = \(status), last_error = \(error),
                latency_ms = \(latencyMs), next_attempt_at = \(retryAt), lease_until = NULL
            WHERE tenant_id = \(tenant) AND event_id = \(eventID) AND endpoint_id = \(endpointID) AND delivered_at IS NULL
            """)
    }

    public func webhookDeliveries(endpointID: UUID?, limit: Int) async throws -> [WebhookDelivery] {
        // Each with its event's kind (a delivery goes with its audit line: ON DELETE CASCADE).
        let sql: SQL =
            if let endpointID {
                """
                SELECT d.*, e.kind AS event_kind FROM webhook_deliveries d JOIN audit_events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id
                WHERE d.tenant_id = \(tenant) AND d.endpoint_id = \(endpointID) ORDER BY d.event_id DESC LIMIT \(limit)
                """
            } else {
                """
                SELECT d.*, e.kind AS event_kind FROM webhook_deliveries d JOIN audit_events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id
                WHERE d.tenant_id = \(tenant) ORDER BY d.event_id DESC LIMIT \(limit)
                """
            }
        return try await reader.rows(sql).map { row in
            var delivery = try WebhookDelivery(row: row)
            delivery.kind = try row.optionalText("event_kind")
            return delivery
        }
    }
}
