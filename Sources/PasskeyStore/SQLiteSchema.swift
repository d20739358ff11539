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
    ]
}
