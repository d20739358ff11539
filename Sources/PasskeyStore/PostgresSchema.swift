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
    ]
}
