/// The SQLite schema, as numbered migrations. The PostgreSQL schema has the same versions and
/// the same columns in its own dialect.
enum SQLiteSchema {
    struct Migration {
        let version: Int
        let statements: [String]
    }

    static let migrations: [Migration] = [
        Migration(
            version: 1,
            statements: [
                """
                CREATE TABLE accounts (
                    id TEXT PRIMARY KEY,
                    username TEXT NOT NULL,
                    username_key TEXT NOT NULL UNIQUE,
                    display_name TEXT NOT NULL,
                    user_handle BLOB NOT NULL UNIQUE,
                    created_at INTEGER NOT NULL,
                    disabled INTEGER NOT NULL DEFAULT 0
                )
                """,
                """
                CREATE TABLE passkeys (
                    credential_id BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    public_key BLOB NOT NULL,
                    sign_count INTEGER NOT NULL,
                    aaguid TEXT NOT NULL,
                    transports TEXT NOT NULL,
                    backup_eligible INTEGER NOT NULL,
                    backed_up INTEGER NOT NULL,
                    user_verified INTEGER NOT NULL,
                    attestation_format TEXT NOT NULL,
                    attestation_trusted INTEGER NOT NULL,
                    name TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    last_used_at INTEGER,
                    counter_anomalies INTEGER NOT NULL DEFAULT 0
                )
                """,
                "CREATE INDEX passkeys_account ON passkeys(account_id)",
                """
                CREATE TABLE challenges (
                    challenge_hash BLOB PRIMARY KEY,
                    challenge BLOB NOT NULL,
                    ceremony TEXT NOT NULL,
                    account_id TEXT REFERENCES accounts(id) ON DELETE CASCADE,
                    pending_username TEXT,
                    pending_display_name TEXT,
                    pending_user_handle BLOB,
                    unknown_user INTEGER NOT NULL DEFAULT 0,
                    api TEXT NOT NULL,
                    user_verification TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                )
                """,
                "CREATE INDEX challenges_expiry ON challenges(expires_at)",
                """
                CREATE TABLE sessions (
                    token_hash BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    user_agent TEXT,
                    ip_address TEXT
                )
                """,
                "CREATE INDEX sessions_account ON sessions(account_id)",
                "CREATE INDEX sessions_expiry ON sessions(expires_at)",
                """
                CREATE TABLE audit_events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    time INTEGER NOT NULL,
                    kind TEXT NOT NULL,
                    account_id TEXT,
                    credential_id BLOB,
                    ip_address TEXT,
                    user_agent TEXT,
                    detail TEXT
                )
                """,
                "CREATE INDEX audit_account ON audit_events(account_id, id)",
                "CREATE TABLE settings (name TEXT PRIMARY KEY, value BLOB NOT NULL)",
            ]),
        Migration(
            version: 2,
            statements: [
                "ALTER TABLE challenges ADD COLUMN pending_account_id TEXT"
            ]),
        Migration(
            version: 3,
            statements: [
                "ALTER TABLE accounts ADD COLUMN last_sign_in_at INTEGER",
                """
                CREATE TABLE rate_limits (
                    key TEXT NOT NULL,
                    window_start INTEGER NOT NULL,
                    hits INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    PRIMARY KEY (key, window_start)
                )
                """,
                "CREATE INDEX rate_limits_expiry ON rate_limits(expires_at)",
                "CREATE INDEX audit_time ON audit_events(time)",
            ]),
        Migration(
            version: 4,
            statements: [
                "ALTER TABLE accounts ADD COLUMN password_hash TEXT",
                "ALTER TABLE challenges ADD COLUMN conditional INTEGER NOT NULL DEFAULT 0",
                """
                CREATE TABLE recovery_codes (
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    code_hash BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    used_at INTEGER,
                    PRIMARY KEY (account_id, code_hash)
                )
                """,
                """
                CREATE TABLE recovery_tokens (
                    token_hash BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                )
                """,
            ]),
        Migration(
            version: 5,
            statements: [
                // Sessions remember how they were made, so deleting a passkey ends its sessions.
                "ALTER TABLE sessions ADD COLUMN method TEXT NOT NULL DEFAULT 'unknown'",
                "ALTER TABLE sessions ADD COLUMN credential_id BLOB",
                "CREATE INDEX sessions_credential ON sessions(credential_id)",
            ]),
        Migration(
            version: 6,
            statements: [
                // The ceremony's state as the WebAuthn library made it, kept opaquely.
                "ALTER TABLE challenges ADD COLUMN state BLOB"
            ]),
        Migration(
            version: 7,
            statements: [
                // Apps that trust passkeyd: their own user id on an account, signing keys for
                // access tokens, API keys for servers, webhooks with a durable outbox.
                "ALTER TABLE accounts ADD COLUMN external_id TEXT",
                "CREATE UNIQUE INDEX accounts_external_id ON accounts(external_id) WHERE external_id IS NOT NULL",
                "ALTER TABLE sessions ADD COLUMN last_seen_at INTEGER",
                """
                CREATE TABLE signing_keys (
                    kid TEXT PRIMARY KEY,
                    algorithm TEXT NOT NULL,
                    private_key BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    activates_at INTEGER NOT NULL,
                    retires_at INTEGER
                )
                """,
                """
                CREATE TABLE api_keys (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    key_hash BLOB NOT NULL UNIQUE,
                    scopes TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    last_used_at INTEGER,
                    revoked_at INTEGER
                )
                """,
                """
                CREATE TABLE registration_tokens (
                    token_hash BLOB PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                )
                """,
                """
                CREATE TABLE webhook_endpoints (
                    id TEXT PRIMARY KEY,
                    url TEXT NOT NULL,
                    secret BLOB NOT NULL,
                    events TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    disabled INTEGER NOT NULL DEFAULT 0
                )
                """,
                """
                CREATE TABLE webhook_deliveries (
                    event_id INTEGER NOT NULL REFERENCES audit_events(id) ON DELETE CASCADE,
                    endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints(id) ON DELETE CASCADE,
                    account_id TEXT,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    next_attempt_at INTEGER NOT NULL,
                    delivered_at INTEGER,
                    last_status INTEGER,
                    last_error TEXT,
                    lease_until INTEGER,
                    lease_token TEXT,
                    PRIMARY KEY (event_id, endpoint_id)
                )
                """,
                "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(delivered_at, next_attempt_at)",
                "CREATE INDEX webhook_deliveries_order ON webhook_deliveries(endpoint_id, account_id, event_id)",
                // The outbox is filled in the same transaction as the audit line (and so as the
                // change it records): one delivery per enabled endpoint that wants the kind.
                """
                CREATE TRIGGER audit_events_outbox AFTER INSERT ON audit_events
                BEGIN
                    INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, next_attempt_at)
                    SELECT NEW.id, e.id, NEW.account_id, NEW.time FROM webhook_endpoints e
                    WHERE e.disabled = 0 AND ((e.events = '*' AND NEW.kind <> 'api_key_used') OR instr(',' || e.events || ',', ',' || NEW.kind || ',') > 0);
                END
                """,
            ]),
        Migration(
            version: 8,
            statements: [
                // OpenID Connect: clients, authorization requests waiting for a sign-in or
                // consent, codes, refresh tokens (rotated, in families), consents.
                """
                CREATE TABLE oauth_clients (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    secret_hash BLOB,
                    redirect_uris TEXT NOT NULL,
                    post_logout_uris TEXT NOT NULL,
                    first_party INTEGER NOT NULL DEFAULT 0,
                    allow_sign_up INTEGER NOT NULL DEFAULT 0,
                    id_token_algorithm TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                )
                """,
                """
                CREATE TABLE oauth_requests (
                    id_hash BLOB PRIMARY KEY,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    request BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL
                )
                """,
                """
                CREATE TABLE oauth_codes (
                    code_hash BLOB PRIMARY KEY,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    grant_data BLOB NOT NULL,
                    family TEXT,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    used_at INTEGER
                )
                """,
                """
                CREATE TABLE oauth_refresh_tokens (
                    token_hash BLOB PRIMARY KEY,
                    family TEXT NOT NULL,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    grant_data BLOB NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    used_at INTEGER,
                    revoked_at INTEGER
                )
                """,
                "CREATE INDEX oauth_refresh_family ON oauth_refresh_tokens(family)",
                """
                CREATE TABLE oauth_consents (
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    client_id TEXT NOT NULL REFERENCES oauth_clients(id) ON DELETE CASCADE,
                    scope TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (account_id, client_id)
                )
                """,
            ]),
        Migration(
            version: 9,
            statements: [
                // The FIDO metadata BLOB (MDS3) last imported, as downloaded (its signature is
                // checked again whenever it is read); one row.
                """
                CREATE TABLE fido_metadata (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    number INTEGER NOT NULL,
                    next_update TEXT NOT NULL,
                    blob TEXT NOT NULL,
                    imported_at INTEGER NOT NULL
                )
                """
            ]),
        Migration(
            version: 10,
            statements: [
                // Fewer pages written per sign-in (each is a 4 KB WAL frame). Ceremonies and
                // sessions are found by a hash: as rowid tables they kept that key in a second
                // B-tree, one more page per insert and per delete. WITHOUT ROWID tables keep the
                // rows in key order. audit_time served no query.
                "DROP INDEX audit_time",
                """
                CREATE TABLE challenges_v10 (
                    challenge_hash BLOB NOT NULL PRIMARY KEY,
                    challenge BLOB NOT NULL,
                    ceremony TEXT NOT NULL,
                    account_id TEXT REFERENCES accounts(id) ON DELETE CASCADE,
                    pending_username TEXT,
                    pending_display_name TEXT,
                    pending_user_handle BLOB,
                    unknown_user INTEGER NOT NULL DEFAULT 0,
                    api TEXT NOT NULL,
                    user_verification TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    pending_account_id TEXT,
                    conditional INTEGER NOT NULL DEFAULT 0,
                    state BLOB
                ) WITHOUT ROWID
                """,
                """
                INSERT INTO challenges_v10 (challenge_hash, challenge, ceremony, account_id, pending_username, pending_display_name,
                                            pending_user_handle, unknown_user, api, user_verification, created_at, expires_at,
                                            pending_account_id, conditional, state)
                SELECT challenge_hash, challenge, ceremony, account_id, pending_username, pending_display_name, pending_user_handle,
                       unknown_user, api, user_verification, created_at, expires_at, pending_account_id, conditional, state
                FROM challenges WHERE challenge_hash IS NOT NULL
                """,
                "DROP TABLE challenges",
                "ALTER TABLE challenges_v10 RENAME TO challenges",
                "CREATE INDEX challenges_expiry ON challenges(expires_at)",
                """
                CREATE TABLE sessions_v10 (
                    token_hash BLOB NOT NULL PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    user_agent TEXT,
                    ip_address TEXT,
                    method TEXT NOT NULL DEFAULT 'unknown',
                    credential_id BLOB,
                    last_seen_at INTEGER
                ) WITHOUT ROWID
                """,
                """
                INSERT INTO sessions_v10 (token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id,
                                          last_seen_at)
                SELECT token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id, last_seen_at
                FROM sessions WHERE token_hash IS NOT NULL
                """,
                "DROP TABLE sessions",
                "ALTER TABLE sessions_v10 RENAME TO sessions",
                "CREATE INDEX sessions_account ON sessions(account_id)",
                "CREATE INDEX sessions_expiry ON sessions(expires_at)",
                "CREATE INDEX sessions_credential ON sessions(credential_id)",
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
                "ALTER TABLE passkeys ADD COLUMN discoverable INTEGER",
                "ALTER TABLE passkeys ADD COLUMN prf_enabled INTEGER",
                "ALTER TABLE passkeys ADD COLUMN cred_protect INTEGER",
                "ALTER TABLE passkeys ADD COLUMN large_blob INTEGER",
                "ALTER TABLE passkeys ADD COLUMN min_pin_length INTEGER",
                "ALTER TABLE passkeys ADD COLUMN prf_salt BLOB",
            ]),
        .init(
            version: 13,
            statements: [
                // The operator's console (issue 36). Audit lines carry the adoption metric they
                // count for and the request's traceparent; indexes let the console search the log
                // by kind, address and time; display names and external ids get search keys
                // (folded by passkeyd on every write; the backfill below uses lower(), ASCII
                // only on SQLite: `rekeyUsernames()` brings old rows to passkeyd's folding).
                "ALTER TABLE audit_events ADD COLUMN metric TEXT",
                "ALTER TABLE audit_events ADD COLUMN trace_parent TEXT",
                // Rollups and today's live counts read (time, metric) from the index alone.
                "CREATE INDEX audit_time ON audit_events(time, metric)",
                "CREATE INDEX audit_kind ON audit_events(kind, id)",
                "CREATE INDEX audit_address ON audit_events(ip_address, id)",
                "ALTER TABLE webhook_deliveries ADD COLUMN latency_ms INTEGER",
                "ALTER TABLE accounts ADD COLUMN display_name_key TEXT",
                "ALTER TABLE accounts ADD COLUMN external_id_key TEXT",
                "UPDATE accounts SET display_name_key = lower(display_name), external_id_key = lower(external_id)",
                "CREATE INDEX accounts_display_name_key ON accounts(display_name_key, id)",
                "CREATE INDEX accounts_external_id_key ON accounts(external_id_key, id) WHERE external_id_key IS NOT NULL",
                "CREATE INDEX passkeys_aaguid ON passkeys(aaguid)",
                """
                CREATE TABLE admin_roles (
                    account_id TEXT PRIMARY KEY REFERENCES accounts(id) ON DELETE CASCADE,
                    role TEXT NOT NULL,
                    granted_at INTEGER NOT NULL,
                    granted_by TEXT NOT NULL
                )
                """,
                """
                CREATE TABLE admin_bootstrap (
                    token_hash BLOB NOT NULL PRIMARY KEY,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    used_at INTEGER,
                    used_by TEXT
                ) WITHOUT ROWID
                """,
                """
                CREATE TABLE admin_sessions (
                    token_hash BLOB NOT NULL PRIMARY KEY,
                    account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                    created_at INTEGER NOT NULL,
                    expires_at INTEGER NOT NULL,
                    idle_expires_at INTEGER NOT NULL,
                    verified_at INTEGER NOT NULL,
                    csrf_hash BLOB NOT NULL,
                    ip_address TEXT,
                    user_agent TEXT
                ) WITHOUT ROWID
                """,
                "CREATE INDEX admin_sessions_account ON admin_sessions(account_id)",
                """
                CREATE TABLE daily_metrics (
                    day INTEGER NOT NULL,
                    metric TEXT NOT NULL,
                    n INTEGER NOT NULL,
                    PRIMARY KEY (day, metric)
                ) WITHOUT ROWID
                """,
                // The first day not rolled up yet (one row).
                "CREATE TABLE metrics_rollup (id INTEGER PRIMARY KEY CHECK (id = 1), next_day INTEGER NOT NULL)",
                // A database with accounts: what they had at this moment, as baselines on the day
                // before (zero counts are not written), and rollups start today (older days have
                // no metrics: they are unknown, not zero). An empty database writes neither:
                // its rollups start on the day of its first metric.
                """
                INSERT INTO daily_metrics (day, metric, n)
                SELECT day, metric, n FROM (
                    SELECT CAST(strftime('%s', 'now') AS INTEGER) / 86400 * 86400000 - 86400000 AS day, 'baseline_with_passkey' AS metric,
                           (SELECT COUNT(*) FROM accounts a WHERE EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id)) AS n
                    UNION ALL
                    SELECT CAST(strftime('%s', 'now') AS INTEGER) / 86400 * 86400000 - 86400000, 'baseline_password_only',
                           (SELECT COUNT(*) FROM accounts a WHERE a.password_hash IS NOT NULL
                                AND NOT EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id))
                    UNION ALL
                    SELECT CAST(strftime('%s', 'now') AS INTEGER) / 86400 * 86400000 - 86400000, 'baseline_empty',
                           (SELECT COUNT(*) FROM accounts a WHERE a.password_hash IS NULL
                                AND NOT EXISTS (SELECT 1 FROM passkeys p WHERE p.account_id = a.id))
                ) WHERE n > 0
                """,
                """
                INSERT INTO metrics_rollup (id, next_day)
                SELECT 1, CAST(strftime('%s', 'now') AS INTEGER) / 86400 * 86400000 WHERE EXISTS (SELECT 1 FROM accounts)
                """,
            ]),
        migration14,
        migration15,
        migration16,
        // PostgreSQL's row-level security (its migration 17); SQLite has none, and keeps the
        // same numbers.
        Migration(version: 17, statements: []),
        PostgresSchema.migration18,
    ]
}
