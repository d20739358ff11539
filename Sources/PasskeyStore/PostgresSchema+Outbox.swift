/// Migration 14 of the PostgreSQL schema (issue 42, item 21): the webhook outbox's heads, in a
/// file of its own so that neither schema file passes 500 lines.
extension PostgresSchema {
    static let migration14 = SQLiteSchema.Migration(
        version: 14,
        statements: [
            // The outbox's heads (issue 42, item 21): per (endpoint, account) the oldest
            // undelivered delivery is marked `head`, and only heads are claimed. A claim reads
            // the due heads of its endpoint from webhook_deliveries_heads, never the rows
            // waiting behind them, so a dead endpoint's backlog (every head in its back-off)
            // costs a claim nothing. A delivered head passes the mark to the next undelivered
            // delivery of its account (webhook_deliveries_pending) in the database, by the
            // trigger below, so a settle of any release, this one's or the previous one's
            // during a rolling upgrade, passes it on in its own UPDATE.
            "ALTER TABLE webhook_deliveries ADD COLUMN head BOOLEAN NOT NULL DEFAULT FALSE",
            // The backlog's heads, by one grouping pass (a GROUP BY puts the account-less
            // rows of an endpoint in one group): a hash join, not a nested anti-join.
            """
            UPDATE webhook_deliveries d SET head = TRUE
            FROM (SELECT endpoint_id, MIN(event_id) AS first FROM webhook_deliveries WHERE delivered_at IS NULL
                  GROUP BY endpoint_id, account_id) f
            WHERE d.endpoint_id = f.endpoint_id AND d.event_id = f.first
            """,
            "CREATE INDEX webhook_deliveries_heads ON webhook_deliveries(endpoint_id, next_attempt_at) WHERE head AND delivered_at IS NULL",
            "CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(endpoint_id, account_id, event_id) WHERE delivered_at IS NULL",
            // A new delivery is a head when its account has nothing undelivered at that
            // endpoint. The oldest undelivered one (the head) is locked FOR SHARE to look:
            // that conflicts with the UPDATE that settles it (and with a claim's), not with
            // another insert's look, so the many account-less audit lines anyone can cause
            // (sign_in_failed for an unknown credential) do not queue on each other. A
            // delivery of the head settling at the same moment either commits first (the
            // look then skips it, delivered, and finds the head it passed the mark to, or
            // none) or waits for this transaction, and its trigger's statement, run after
            // the wait with a snapshot of its own, then passes the mark to this delivery.
            // Two new deliveries of one account made at once may both be heads; a claim
            // takes a head only when nothing older of its account waits, so order holds.
            """
            CREATE OR REPLACE FUNCTION audit_events_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
                endpoint UUID;
            BEGIN
                FOR endpoint IN
                    SELECT e.id FROM webhook_endpoints e
                    WHERE NOT e.disabled AND ((e.events = '*' AND NEW.kind <> 'api_key_used') OR position(',' || NEW.kind || ',' IN ',' || e.events || ',') > 0)
                    ORDER BY e.id
                LOOP
                    IF NEW.account_id IS NULL THEN
                        PERFORM 1 FROM webhook_deliveries WHERE endpoint_id = endpoint AND account_id IS NULL AND delivered_at IS NULL
                        ORDER BY event_id LIMIT 1 FOR SHARE;
                    ELSE
                        PERFORM 1 FROM webhook_deliveries WHERE endpoint_id = endpoint AND account_id = NEW.account_id AND delivered_at IS NULL
                        ORDER BY event_id LIMIT 1 FOR SHARE;
                    END IF;
                    INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, next_attempt_at, head)
                    VALUES (NEW.id, endpoint, NEW.account_id, NEW.time, NOT FOUND);
                END LOOP;
                RETURN NEW;
            END
            $$
            """,
            // A delivery marked delivered, by whatever UPDATE, gives up its mark and marks
            // the oldest undelivered delivery of its account at its endpoint, in the same
            // statement and transaction. The row is locked by that UPDATE; the trigger's
            // statement sees every delivery committed before it runs (READ COMMITTED).
            """
            CREATE FUNCTION webhook_deliveries_pass_head() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.head := FALSE;
                IF NEW.account_id IS NULL THEN
                    UPDATE webhook_deliveries SET head = TRUE WHERE endpoint_id = NEW.endpoint_id AND NOT head AND event_id = (
                        SELECT MIN(event_id) FROM webhook_deliveries WHERE endpoint_id = NEW.endpoint_id AND account_id IS NULL
                        AND delivered_at IS NULL AND event_id <> NEW.event_id);
                ELSE
                    UPDATE webhook_deliveries SET head = TRUE WHERE endpoint_id = NEW.endpoint_id AND NOT head AND event_id = (
                        SELECT MIN(event_id) FROM webhook_deliveries WHERE endpoint_id = NEW.endpoint_id AND account_id = NEW.account_id
                        AND delivered_at IS NULL AND event_id <> NEW.event_id);
                END IF;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE TRIGGER webhook_deliveries_pass_head BEFORE UPDATE OF delivered_at ON webhook_deliveries
            FOR EACH ROW WHEN (OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL) EXECUTE FUNCTION webhook_deliveries_pass_head()
            """,
        ])
}
