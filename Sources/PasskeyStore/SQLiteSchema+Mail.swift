/// Migration 15 of the SQLite schema (issue 43): each account's address, the tokens mails carry
/// and the mail outbox (PostgresSchema+Mail.swift is the same in PostgreSQL's words).
extension SQLiteSchema {
    static let migration15 = Migration(
        version: 15,
        statements: [
            "ALTER TABLE accounts ADD COLUMN email TEXT",
            "ALTER TABLE accounts ADD COLUMN email_key TEXT",
            "ALTER TABLE accounts ADD COLUMN email_verified_at INTEGER",
            "ALTER TABLE accounts ADD COLUMN email_recovery_closed INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE accounts ADD COLUMN email_language TEXT",
            // A verified address belongs to one account; an unverified one proves nothing and
            // keeps nobody out (issue 43 item 4: no pre-account takeover).
            "CREATE UNIQUE INDEX accounts_verified_email ON accounts(email_key) WHERE email_verified_at IS NOT NULL",
            // Recovery requests look up accounts by an address nobody verified (a claim mail).
            "CREATE INDEX accounts_email ON accounts(email_key) WHERE email_key IS NOT NULL AND email_verified_at IS NULL",
            "ALTER TABLE challenges ADD COLUMN pending_email TEXT",
            """
            CREATE TABLE email_tokens (
                id TEXT PRIMARY KEY,
                account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                purpose TEXT NOT NULL,
                address TEXT NOT NULL,
                link_hash BLOB NOT NULL UNIQUE,
                code_hash BLOB,
                tries INTEGER NOT NULL DEFAULT 0,
                detail TEXT,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                used_at INTEGER
            )
            """,
            "CREATE INDEX email_tokens_account ON email_tokens(account_id, purpose)",
            "CREATE INDEX email_tokens_expiry ON email_tokens(expires_at)",
            """
            CREATE TABLE mail_outbox (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                account_id TEXT,
                kind TEXT NOT NULL,
                recipient TEXT NOT NULL,
                sender TEXT NOT NULL,
                message BLOB,
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at INTEGER NOT NULL,
                next_attempt_at INTEGER NOT NULL,
                lease_until INTEGER,
                lease_token BLOB,
                sent_at INTEGER,
                failed_at INTEGER,
                last_error TEXT
            )
            """,
            "CREATE INDEX mail_outbox_due ON mail_outbox(next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL",
            "CREATE INDEX mail_outbox_done ON mail_outbox(sent_at, failed_at)",
        ])
}
