/// Migration 15 of the PostgreSQL schema (issue 43): each account's address, the tokens mails carry
/// and the mail outbox (SQLiteSchema+Mail.swift is the same in SQLite's words).
extension PostgresSchema {
    static let migration15 = SQLiteSchema.Migration(
        version: 15,
        statements: [
            "ALTER TABLE accounts ADD COLUMN email TEXT",
            "ALTER TABLE accounts ADD COLUMN email_key TEXT",
            "ALTER TABLE accounts ADD COLUMN email_verified_at BIGINT",
            "ALTER TABLE accounts ADD COLUMN email_recovery_closed BOOLEAN NOT NULL DEFAULT FALSE",
            "ALTER TABLE accounts ADD COLUMN email_language TEXT",
            // A verified address belongs to one account; an unverified one proves nothing and
            // keeps nobody out (issue 43 item 4: no pre-account takeover).
            "CREATE UNIQUE INDEX accounts_verified_email ON accounts(email_key) WHERE email_verified_at IS NOT NULL",
            // Recovery requests look up accounts by an address nobody verified (a claim mail).
            "CREATE INDEX accounts_email ON accounts(email_key) WHERE email_key IS NOT NULL AND email_verified_at IS NULL",
            "ALTER TABLE challenges ADD COLUMN pending_email TEXT",
            """
            CREATE TABLE email_tokens (
                id UUID PRIMARY KEY,
                account_id UUID NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
                purpose TEXT NOT NULL,
                address TEXT NOT NULL,
                link_hash BYTEA NOT NULL UNIQUE,
                code_hash BYTEA,
                tries INTEGER NOT NULL DEFAULT 0,
                detail TEXT,
                created_at BIGINT NOT NULL,
                expires_at BIGINT NOT NULL,
                used_at BIGINT
            )
            """,
            "CREATE INDEX email_tokens_account ON email_tokens(account_id, purpose)",
            "CREATE INDEX email_tokens_expiry ON email_tokens(expires_at)",
            """
            CREATE TABLE mail_outbox (
                id BIGSERIAL PRIMARY KEY,
                account_id UUID,
                kind TEXT NOT NULL,
                recipient TEXT NOT NULL,
                sender TEXT NOT NULL,
                message BYTEA,
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at BIGINT NOT NULL,
                next_attempt_at BIGINT NOT NULL,
                lease_until BIGINT,
                lease_token BYTEA,
                sent_at BIGINT,
                failed_at BIGINT,
                last_error TEXT
            )
            """,
            "CREATE INDEX mail_outbox_due ON mail_outbox(next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL",
            "CREATE INDEX mail_outbox_done ON mail_outbox(sent_at, failed_at)",
        ])
}
