/// Migration 14 of the SQLite schema (issue 42, item 21): the webhook outbox's heads, in a file
/// of its own so that neither schema file passes 500 lines.
extension SQLiteSchema {
    static let migration14 = Migration(
        version: 14,
        statements: [
            // The outbox's heads (issue 42, item 21; PostgresSchema says more): only the
            // oldest undelivered delivery of each (endpoint, account) is claimed, read from
            // webhook_deliveries_heads; a delivered head passes the mark on, by the trigger
            // below, whichever release's settle delivered it.
            "ALTER TABLE webhook_deliveries ADD COLUMN head INTEGER NOT NULL DEFAULT 0",
            // The backlog's heads, by one grouping pass (a GROUP BY puts the account-less
            // rows of an endpoint in one group), each then found by its primary key.
            """
            UPDATE webhook_deliveries SET head = 1
            WHERE (endpoint_id, event_id) IN (
                SELECT endpoint_id, MIN(event_id) FROM webhook_deliveries WHERE delivered_at IS NULL GROUP BY endpoint_id, account_id)
            """,
            "CREATE INDEX webhook_deliveries_heads ON webhook_deliveries(endpoint_id, next_attempt_at) WHERE head AND delivered_at IS NULL",
            "CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(endpoint_id, account_id, event_id) WHERE delivered_at IS NULL",
            // A new delivery is a head when its account has nothing undelivered at that
            // endpoint (SQLite has one writer: nothing settles meanwhile).
            "DROP TRIGGER audit_events_outbox",
            """
            CREATE TRIGGER audit_events_outbox AFTER INSERT ON audit_events
            BEGIN
                INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, next_attempt_at, head)
                SELECT NEW.id, e.id, NEW.account_id, NEW.time,
                       NOT EXISTS (SELECT 1 FROM webhook_deliveries p WHERE p.endpoint_id = e.id AND p.account_id IS NEW.account_id
                                   AND p.delivered_at IS NULL)
                FROM webhook_endpoints e
                WHERE e.disabled = 0 AND ((e.events = '*' AND NEW.kind <> 'api_key_used') OR instr(',' || e.events || ',', ',' || NEW.kind || ',') > 0);
            END
            """,
            // A delivery marked delivered, by whatever UPDATE, gives up its mark and marks
            // the oldest undelivered delivery of its account at its endpoint, within that
            // UPDATE.
            """
            CREATE TRIGGER webhook_deliveries_pass_head AFTER UPDATE OF delivered_at ON webhook_deliveries
            WHEN OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL
            BEGIN
                UPDATE webhook_deliveries SET head = 0 WHERE event_id = NEW.event_id AND endpoint_id = NEW.endpoint_id AND head;
                UPDATE webhook_deliveries SET head = 1 WHERE endpoint_id = NEW.endpoint_id AND NOT head AND event_id = (
                    SELECT MIN(event_id) FROM webhook_deliveries WHERE endpoint_id = NEW.endpoint_id AND account_id IS NEW.account_id
                    AND delivered_at IS NULL);
            END
            """,
        ])
}
