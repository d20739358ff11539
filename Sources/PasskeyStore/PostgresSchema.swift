/// The PostgreSQL schema: the same numbered migrations as ``SQLiteSchema``, the same tables and
/// columns in PostgreSQL's types (UUID ids, BYTEA bytes, BOOLEAN flags, BIGINT Unix milliseconds).
enum PostgresSchema {
    static let migrations: [SQLiteSchema.Migration] = [
        .init(
            version: 1,
            statements: [
                """
                CREATE TABLE accounts (
                    id UUID PRIMARY KEY,
                    username TEXT NOT NULL,
                    username_key TEXT NOT NULL UNIQUE,
                    display_name TEXT NOT NULL,
                    user_handle BYTEA NOT NULL UNIQUE,
                    created_at BIGINT NOT NULL,
                    disabled BOOLEAN NOT NULL DEFAULT FALSE
                )
                """,
                """
                CREATE TABLE passkeys (
                    credential_id BYTEA PRIMARY KEY,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    public_key BYTEA NOT NULL,
                    sign_count BIGINT NOT NULL,
                    aaguid TEXT NOT NULL,
                    transports TEXT NOT NULL,
                    backup_eligible BOOLEAN NOT NULL,
                    backed_up BOOLEAN NOT NULL,
                    user_verified BOOLEAN NOT NULL,
                    attestation_format TEXT NOT NULL,
                    attestation_trusted BOOLEAN NOT NULL,
                    name TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    last_used_at BIGINT,
                    counter_anomalies BIGINT NOT NULL DEFAULT 0
                )
                """,
                "CREATE INDEX passkeys_account ON passkeys(account_id)",
                """
                CREATE TABLE challenges (
                    challenge_hash BYTEA PRIMARY KEY,
                    challenge BYTEA NOT NULL,
                    ceremony TEXT NOT NULL,
                    account_id UUID REFERENCES accounts(id) ON DELETE CASCADE,
                    pending_username TEXT,
                    pending_display_name TEXT,
                    pending_user_handle BYTEA,
                    unknown_user BOOLEAN NOT NULL DEFAULT FALSE,
                    api TEXT NOT NULL,
                    user_verification TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                "CREATE INDEX challenges_expiry ON challenges(expires_at)",
                """
                CREATE TABLE sessions (
                    token_hash BYTEA PRIMARY KEY,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    user_agent TEXT,
                    ip_address TEXT
                )
                """,
                "CREATE INDEX sessions_account ON sessions(account_id)",
                "CREATE INDEX sessions_expiry ON sessions(expires_at)",
                """
                CREATE TABLE audit_events (
                    id BIGSERIAL PRIMARY KEY,
                    time BIGINT NOT NULL,
                    kind TEXT NOT NULL,
                    account_id UUID,
                    credential_id BYTEA,
                    ip_address TEXT,
                    user_agent TEXT,
                    detail TEXT
                )
                """,
                "CREATE INDEX audit_account ON audit_events(account_id, id)",
                "CREATE TABLE settings (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
            ]),
        .init(
            version: 2,
            statements: [
                "ALTER TABLE challenges ADD COLUMN pending_account_id UUID"
            ]),
        .init(
            version: 3,
            statements: [
                "ALTER TABLE accounts ADD COLUMN last_sign_in_at BIGINT",
                """
                CREATE TABLE rate_limits (
                    key TEXT NOT NULL,
                    window_start BIGINT NOT NULL,
                    hits BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    PRIMARY KEY (key, window_start)
                )
                """,
                "CREATE INDEX rate_limits_expiry ON rate_limits(expires_at)",
                "CREATE INDEX audit_time ON audit_events(time)",
            ]),
        .init(
            version: 4,
            statements: [
                "ALTER TABLE accounts ADD COLUMN password_hash TEXT",
                "ALTER TABLE challenges ADD COLUMN conditional BOOLEAN NOT NULL DEFAULT FALSE",
                """
                CREATE TABLE recovery_codes (
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    code_hash BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    used_at BIGINT,
                    PRIMARY KEY (account_id, code_hash)
                )
                """,
                """
                CREATE TABLE recovery_tokens (
                    token_hash BYTEA PRIMARY KEY,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
            ]),
        .init(
            version: 5,
            statements: [
                // Sessions remember how they were made, so deleting a passkey ends its sessions.
                "ALTER TABLE sessions ADD COLUMN method TEXT NOT NULL DEFAULT 'unknown'",
                "ALTER TABLE sessions ADD COLUMN credential_id BYTEA",
                "CREATE INDEX sessions_credential ON sessions(credential_id)",
            ]),
        .init(
            version: 6,
            statements: [
                // The ceremony's state as the WebAuthn library made it, kept opaquely.
                "ALTER TABLE challenges ADD COLUMN state BYTEA"
            ]),
        .init(
            version: 7,
            statements: [
                // Apps that trust passkeyd: their own user id on an account, signing keys for
                // access tokens, API keys for servers, webhooks with a durable outbox.
                "ALTER TABLE accounts ADD COLUMN external_id TEXT",
                "CREATE UNIQUE INDEX accounts_external_id ON accounts(external_id) WHERE external_id IS NOT NULL",
                "ALTER TABLE sessions ADD COLUMN last_seen_at BIGINT",
                """
                CREATE TABLE signing_keys (
                    kid TEXT PRIMARY KEY,
                    algorithm TEXT NOT NULL,
                    private_key BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    activates_at BIGINT NOT NULL,
                    retires_at BIGINT
                )
                """,
                """
                CREATE TABLE api_keys (
                    id UUID PRIMARY KEY,
                    name TEXT NOT NULL,
                    key_hash BYTEA NOT NULL UNIQUE,
                    scopes TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    last_used_at BIGINT,
                    revoked_at BIGINT
                )
                """,
                """
                CREATE TABLE registration_tokens (
                    token_hash BYTEA PRIMARY KEY,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE webhook_endpoints (
                    id UUID PRIMARY KEY,
                    url TEXT NOT NULL,
                    secret BYTEA NOT NULL,
                    events TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    disabled BOOLEAN NOT NULL DEFAULT FALSE
                )
                """,
                """
                CREATE TABLE webhook_deliveries (
                    event_id BIGINT NOT NULL REFERENCES audit_events(id) ON DELETE CASCADE,
                    endpoint_id UUID NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
                    account_id UUID,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at BIGINT NOT NULL,
                    delivered_at BIGINT,
                    last_status INTEGER,
                    last_error TEXT,
                    lease_until BIGINT,
                    lease_token TEXT,
                    PRIMARY KEY (event_id, endpoint_id)
                )
                """,
                "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(delivered_at, next_attempt_at)",
                "CREATE INDEX webhook_deliveries_order ON webhook_deliveries(endpoint_id, account_id, event_id)",
                // The outbox is filled in the same transaction as the audit line (and so as the
                // change it records): one delivery per enabled endpoint that wants the kind.
                """
                CREATE FUNCTION audit_events_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, next_attempt_at)
                    SELECT NEW.id, e.id, NEW.account_id, NEW.time FROM webhook_endpoints e
                    WHERE NOT e.disabled AND ((e.events = '*' AND NEW.kind <> 'api_key_used') OR position(',' || NEW.kind || ',' IN ',' || e.events || ',') > 0);
                    RETURN NEW;
                END
                $$
                """,
                """
                CREATE TRIGGER audit_events_outbox AFTER INSERT ON audit_events
                FOR EACH ROW EXECUTE FUNCTION audit_events_outbox()
                """,
            ]),
        .init(
            version: 8,
            statements: [
                // OpenID Connect: clients, authorization requests waiting for a sign-in or
                // consent, codes, refresh tokens (rotated, in families), consents.
                """
                CREATE TABLE oauth_clients (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    secret_hash BYTEA,
                    redirect_uris TEXT NOT NULL,
                    post_logout_uris TEXT NOT NULL,
                    first_party BOOLEAN NOT NULL DEFAULT FALSE,
                    allow_sign_up BOOLEAN NOT NULL DEFAULT FALSE,
                    id_token_algorithm TEXT NOT NULL,
                    created_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE oauth_requests (
                    id_hash BYTEA PRIMARY KEY,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    request BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL
                )
                """,
                """
                CREATE TABLE oauth_codes (
                    code_hash BYTEA PRIMARY KEY,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    grant_data BYTEA NOT NULL,
                    family TEXT,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT
                )
                """,
                """
                CREATE TABLE oauth_refresh_tokens (
                    token_hash BYTEA PRIMARY KEY,
                    family TEXT NOT NULL,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    grant_data BYTEA NOT NULL,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT,
                    revoked_at BIGINT
                )
                """,
                "CREATE INDEX oauth_refresh_family ON oauth_refresh_tokens(family)",
                """
                CREATE TABLE oauth_consents (
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    scope TEXT NOT NULL,
                    created_at BIGINT NOT NULL,
                    PRIMARY KEY (account_id, client_id)
                )
                """,
            ]),
        .init(
            version: 9,
            statements: [
                // The FIDO metadata BLOB (MDS3) last imported, as downloaded (its signature is
                // checked again whenever it is read); one row.
                """
                CREATE TABLE fido_metadata (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    number BIGINT NOT NULL,
                    next_update TEXT NOT NULL,
                    blob TEXT NOT NULL,
                    imported_at BIGINT NOT NULL
                )
                """
            ]),
        .init(
            version: 10,
            statements: [
                // One index fewer to maintain per audit line: audit_time served no query. (The
                // SQLite schema also rebuilds two tables as WITHOUT ROWID in this version;
                // PostgreSQL's tables have no rowid.)
                "DROP INDEX IF EXISTS audit_time"
            ]),
        .init(
            version: 11,
            statements: [
                // One index fewer to maintain per sign-in (a page at a random place in it):
                // a passkey's sessions are found through its account's (sessions_account).
                "DROP INDEX IF EXISTS sessions_credential"
            ]),
        .init(
            version: 12,
            statements: [
                // What registration learned from the WebAuthn extensions (NULL: not reported, or a
                // passkey older than this version), and the per-passkey PRF input: public, made
                // at registration or at the first PRF sign-in, rotatable.
                "ALTER TABLE passkeys ADD COLUMN discoverable BOOLEAN",
                "ALTER TABLE passkeys ADD COLUMN prf_enabled BOOLEAN",
                "ALTER TABLE passkeys ADD COLUMN cred_protect BIGINT",
                "ALTER TABLE passkeys ADD COLUMN large_blob BOOLEAN",
                "ALTER TABLE passkeys ADD COLUMN min_pin_length BIGINT",
                "ALTER TABLE passkeys ADD COLUMN prf_salt BYTEA",
            ]),
        .init(
            version: 13,
            statements: [
                // The operator's console (issue 36). Audit lines carry the adoption metric they
                // count for and the request's traceparent; indexes let the console search the log
                // by kind, address and time; display names and external ids get search keys
                // (folded by passkeyd on every write; the backfill below uses lower(), ASCII
                // only on SQLite: `rekeyUsernames()` brings old rows to passkeyd's folding).
                // Prefix searches compare bytes ("C"): a range `>= p AND < p || U+10FFFF` then
                // holds every string starting with p, and the index serves it whatever the
                // database's collation. (Equality, and so uniqueness, is the same in any
                // deterministic collation.)
                "ALTER TABLE audit_events ADD COLUMN metric TEXT",
                "ALTER TABLE audit_events ADD COLUMN trace_parent TEXT",
                "ALTER TABLE audit_events ALTER COLUMN ip_address TYPE TEXT COLLATE \"C\"",
                // Rollups and today's live counts read (time, metric) from the index alone.
                "CREATE INDEX audit_time ON audit_events(time, metric)",
                "CREATE INDEX audit_kind ON audit_events(kind, id)",
                "CREATE INDEX audit_address ON audit_events(ip_address, id)",
                "ALTER TABLE webhook_deliveries ADD COLUMN latency_ms INTEGER",
                "ALTER TABLE accounts ALTER COLUMN username_key TYPE TEXT COLLATE \"C\"",
                "ALTER TABLE accounts ADD COLUMN display_name_key TEXT COLLATE \"C\"",
                "ALTER TABLE accounts ADD COLUMN external_id_key TEXT COLLATE \"C\"",
                "UPDATE accounts SET display_name_key = lower(display_name), external_id_key = lower(external_id)",
                "CREATE INDEX accounts_display_name_key ON accounts(display_name_key, id)",
                "CREATE INDEX accounts_external_id_key ON accounts(external_id_key, id) WHERE external_id_key IS NOT NULL",
                "CREATE INDEX passkeys_aaguid ON passkeys(aaguid)",
                """
                CREATE TABLE admin_roles (
                    account_id UUID PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    role TEXT NOT NULL,
                    granted_at BIGINT NOT NULL,
                    granted_by TEXT NOT NULL
                )
                """,
                """
                CREATE TABLE admin_bootstrap (
                    token_hash BYTEA PRIMARY KEY,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    used_at BIGINT,
                    used_by TEXT
                )
                """,
                """
                CREATE TABLE admin_sessions (
                    token_hash BYTEA PRIMARY KEY,
                    account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at BIGINT NOT NULL,
                    expires_at BIGINT NOT NULL,
                    idle_expires_at BIGINT NOT NULL,
                    verified_at BIGINT NOT NULL,
                    csrf_hash BYTEA NOT NULL,
                    ip_address TEXT,
                    user_agent TEXT
                )
                """,
                "CREATE INDEX admin_sessions_account ON admin_sessions(account_id)",
                """
                CREATE TABLE daily_metrics (
                    day BIGINT NOT NULL,
                    metric TEXT NOT NULL,
                    n BIGINT NOT NULL,
                    PRIMARY KEY (day, metric)
                )
                """,
                // The first day not rolled up yet (one row).
                "CREATE TABLE metrics_rollup (id INTEGER PRIMARY KEY CHECK (id = 1), next_day BIGINT NOT NULL)",
                // A database with accounts: what they had at this moment, as baselines on the day
                // before (zero counts are not written), and rollups start today (older days have
                // no metrics: they are unknown, not zero). An empty database writes neither:
                // its rollups start on the day of its first metric.
                """
                INSERT INTO daily_metrics (day, metric, n)
                SELECT day, metric, n FROM (
                    SELECT floor(extract(epoch FROM now()) / 86400)::bigint * 86400000 - 86400000 AS day,
                           'baseline_with_passkey' AS metric,
                           (SELECT COUNT(*) FROM accounts a WHERE EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id)) AS n
                    UNION ALL
                    SELECT floor(extract(epoch FROM now()) / 86400)::bigint * 86400000 - 86400000, 'baseline_password_only',
                           (SELECT COUNT(*) FROM accounts a WHERE a.password_hash IS NOT NULL
                                AND NOT EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id))
                    UNION ALL
                    SELECT floor(extract(epoch FROM now()) / 86400)::bigint * 86400000 - 86400000, 'baseline_empty',
                           (SELECT COUNT(*) FROM accounts a WHERE a.password_hash IS NULL
                                AND NOT EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id))
                ) b WHERE n > 0
                """,
                """
                INSERT INTO metrics_rollup (id, next_day)
                SELECT 1, floor(extract(epoch FROM now()) / 86400)::bigint * 86400000 WHERE EXISTS (SELECT 1 FROM accounts)
                """,
            ]),
        migration14,
        migration15,
        migration16,
        migration17,
        migration18,
    ]
}
