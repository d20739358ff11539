import Foundation

// Addresses and the tokens mails carry (issue 43). Tokens are taken by one UPDATE whose
// `used_at IS NULL` condition is re-checked under the row's lock: of racing takers one gets the
// row back, the others nothing.
extension SQLStore {
    public func accountEmail(accountID: UUID) async throws -> AccountEmail? {
        try await reader.first(
            """
            SELECT email, email_verified_at, email_recovery_closed, email_language FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID)
            """
        ).map {
            AccountEmail(
                address: try $0.optionalText("email"), verifiedAt: try $0.optionalDate("email_verified_at"),
                recoveryClosed: try $0.flag("email_recovery_closed"), language: try $0.optionalText("email_language"))
        }
    }

    public func account(verifiedEmailKey key: String) async throws -> Account? {
        try await reader.first(
            "SELECT \(sql: Self.accountColumns) FROM accounts WHERE tenant_id = \(tenant) AND email_key = \(key) AND email_verified_at IS NOT NULL"
        ).map { try Account(row: $0) }
    }

    public func accounts(unverifiedEmailKey key: String, limit: Int) async throws -> [Account] {
        try await reader.rows(
            """
            SELECT \(sql: Self.accountColumns) FROM accounts WHERE tenant_id = \(tenant) AND email_key = \(key) AND email_verified_at IS NULL
            ORDER BY created_at LIMIT \(limit)
            """
        ).map { try Account(row: $0) }
    }

    public func setUnverifiedEmail(accountID: UUID, address: String?, key: String?, language: String?) async throws -> Bool {
        try await transaction { [self] db in
            let changed = try await db.run(
                """
                UPDATE accounts SET email = \(address), email_key = \(key), email_verified_at = NULL,
                       email_language = COALESCE(\(language), email_language)
                WHERE tenant_id = \(tenant) AND id = \(accountID) AND email_verified_at IS NULL RETURNING 1
                """)
            guard changed == 1 else { return false }
            try await db.execute(
                "DELETE FROM email_tokens WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND purpose = 'verify' AND used_at IS NULL"
            )
            return true
        }
    }

    public func verifyEmail(accountID: UUID, address: String, key: String, at time: Date, audit: [AuditEvent]) async throws {
        try await transaction { [self] db in
            // The unique index on verified keys refuses a second account (`conflict`).
            try await db.execute(
                """
                UPDATE accounts SET email = \(address), email_key = \(key), email_verified_at = \(time) WHERE tenant_id = \(tenant) AND id = \(accountID)
                """)
            try await db.execute(
                "DELETE FROM email_tokens WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND purpose = 'verify' AND used_at IS NULL"
            )
            for event in audit { try await db.execute(insert(event)) }
        }
    }

    public func restoreEmail(accountID: UUID, address: String?, key: String?, verifiedAt: Date?) async throws {
        try await writer.run(
            """
            UPDATE accounts SET email = \(address), email_key = \(key), email_verified_at = \(verifiedAt) WHERE tenant_id = \(tenant) AND id = \(accountID)
            """)
    }

    public func setEmailRecoveryClosed(accountID: UUID, closed: Bool) async throws {
        try await writer.run("UPDATE accounts SET email_recovery_closed = \(closed) WHERE tenant_id = \(tenant) AND id = \(accountID)")
    }

    public func setEmailLanguage(accountID: UUID, language: String) async throws {
        try await writer.run("UPDATE accounts SET email_language = \(language) WHERE tenant_id = \(tenant) AND id = \(accountID)")
    }

    public func queueMail(_ mail: QueuedMail, token: EmailToken?, audit: [AuditEvent]) async throws {
        try await transaction { [self] db in
            if let token { try await insertToken(db, token) }
            try await db.execute(
                """
                INSERT INTO mail_outbox (tenant_id, account_id, kind, recipient, sender, message, attempts, created_at, next_attempt_at)
                VALUES (\(tenant), \(mail.accountID), \(mail.kind), \(mail.recipient), \(mail.sender), \(mail.message), 0, \(mail.createdAt),
                        \(mail.nextAttemptAt))
                """)
            for event in audit { try await db.execute(insert(event)) }
        }
    }

    public func saveEmailToken(_ token: EmailToken) async throws {
        try await transaction { [self] db in try await insertToken(db, token) }
    }

    /// Only the newest token of a purpose counts (a code can't be guessed across many); undo
    /// tokens stand side by side, one per notice.
    func insertToken(_ db: any SQLConnection, _ token: EmailToken) async throws {
        if token.purpose != .undo {
            try await db.execute(
                """
                DELETE FROM email_tokens WHERE tenant_id = \(tenant) AND account_id = \(token.accountID) AND purpose = \(token.purpose.rawValue) AND used_at IS NULL
                """)
        }
        try await db.execute(
            """
            INSERT INTO email_tokens (tenant_id, id, account_id, purpose, address, link_hash, code_hash, tries, detail, created_at, expires_at)
            VALUES (\(tenant), \(token.id), \(token.accountID), \(token.purpose.rawValue), \(token.address), \(token.linkHash), \(token.codeHash),
                    0, \(token.detail), \(token.createdAt), \(token.expiresAt))
            """)
    }

    static let emailTokenColumns = SQLFragment(
        text: "id, account_id, purpose, address, link_hash, code_hash, tries, detail, created_at, expires_at, used_at")

    public func takeEmailToken(linkHash: [UInt8], purpose: EmailToken.Purpose, now: Date) async throws -> EmailToken? {
        try await writer.first(
            """
            UPDATE email_tokens SET used_at = \(now)
            WHERE tenant_id = \(tenant) AND link_hash = \(linkHash) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now)
            RETURNING \(sql: Self.emailTokenColumns)
            """
        ).map { try EmailToken(row: $0) }
    }

    public func attemptEmailCode(accountID: UUID, purpose: EmailToken.Purpose, codeHash: [UInt8], now: Date) async throws
        -> EmailCodeAttempt
    {
        // One statement: the try is counted and, when the HMAC matches, the token taken. A try
        // past the last finds no row (`tries < maxTries`), and a taken token none either.
        guard
            let row = try await writer.first(
                """
                UPDATE email_tokens SET tries = tries + 1, used_at = CASE WHEN code_hash = \(codeHash) THEN \(now) ELSE NULL END
                WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND purpose = \(purpose.rawValue) AND used_at IS NULL AND expires_at > \(now)
                  AND code_hash IS NOT NULL AND tries < \(EmailToken.maxTries)
                RETURNING \(sql: Self.emailTokenColumns)
                """)
        else { return .none }
        let token = try EmailToken(row: row)
        if token.usedAt != nil { return .taken(token) }
        return .wrong(triesLeft: max(0, EmailToken.maxTries - token.tries))
    }

    public func endEmailTokens(accountID: UUID, purpose: EmailToken.Purpose, now: Date) async throws {
        try await writer.run(
            """
            UPDATE email_tokens SET used_at = \(now) WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND purpose = \(purpose.rawValue) AND used_at IS NULL
            """)
    }

    // MARK: The outbox

    static let mailColumns = SQLFragment(
        text: "id, account_id, kind, recipient, sender, message, attempts, created_at, next_attempt_at")

    // The outbox's claims and settles are upkeep: one dispatcher sends every tenant's mail (each
    // rendered, with its tenant's sender, when it was queued), by the row's own id.

    public func claimMail(now: Date, leaseUntil: Date, leaseToken: [UInt8], limit: Int) async throws -> [QueuedMail] {
        // PostgreSQL: rows another claim holds are skipped, never waited on (two instances
        // claim disjoint mails); SQLite has one writer.
        let skipLocked = SQLFragment(text: dialect == .postgres ? " FOR UPDATE SKIP LOCKED" : "")
        return try await upkeepWriter.rows(
            """
            UPDATE mail_outbox SET lease_until = \(leaseUntil), lease_token = \(leaseToken), attempts = attempts + 1
            WHERE id IN (
                SELECT id FROM mail_outbox
                WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= \(now) AND (lease_until IS NULL OR lease_until <= \(now))
                ORDER BY next_attempt_at, id LIMIT \(limit)\(sql: skipLocked))
            RETURNING \(sql: Self.mailColumns)
            """
        ).map { try QueuedMail(row: $0) }.sorted { $0.id < $1.id }
    }

    public func markMailSent(id: Int64, leaseToken: [UInt8], at time: Date) async throws -> Bool {
        try await upkeepWriter.run(
            """
            UPDATE mail_outbox SET sent_at = \(time), message = NULL, lease_until = NULL, last_error = NULL
            WHERE id = \(id) AND lease_token = \(leaseToken) AND sent_at IS NULL RETURNING 1
            """) == 1
    }

    public func markMailFailed(id: Int64, leaseToken: [UInt8], error: String, retryAt: Date?, at time: Date) async throws -> Bool {
        let message = String(error.prefix(500))
        if let retryAt {
            return try await upkeepWriter.run(
                """
                UPDATE mail_outbox SET next_attempt_at = \(retryAt), lease_until = NULL, last_error = \(message)
                WHERE id = \(id) AND lease_token = \(leaseToken) AND sent_at IS NULL RETURNING 1
                """) == 1
        }
        // Given up: the message (which may hold a link) goes.
        return try await upkeepWriter.run(
            """
            UPDATE mail_outbox SET failed_at = \(time), message = NULL, lease_until = NULL, last_error = \(message)
            WHERE id = \(id) AND lease_token = \(leaseToken) AND sent_at IS NULL RETURNING 1
            """) == 1
    }

    public func mailStatistics(now: Date) async throws -> MailStatistics {
        let dayAgo = now.addingTimeInterval(-86_400)
        var stats = MailStatistics()
        guard
            let row = try await reader.first(
                """
                SELECT (SELECT COUNT(*) FROM mail_outbox WHERE tenant_id = \(tenant) AND sent_at IS NULL AND failed_at IS NULL AND last_error IS NULL) AS queued,
                       (SELECT COUNT(*) FROM mail_outbox WHERE tenant_id = \(tenant) AND sent_at IS NULL AND failed_at IS NULL AND last_error IS NOT NULL) AS failing,
                       (SELECT COUNT(*) FROM mail_outbox WHERE tenant_id = \(tenant) AND sent_at >= \(dayAgo)) AS sent,
                       (SELECT COUNT(*) FROM mail_outbox WHERE tenant_id = \(tenant) AND failed_at >= \(dayAgo)) AS failed,
                       (SELECT MIN(created_at) FROM mail_outbox WHERE tenant_id = \(tenant) AND sent_at IS NULL AND failed_at IS NULL) AS oldest
                """)
        else { return stats }
        stats.queued = Int(try row.integer("queued"))
        stats.failing = Int(try row.integer("failing"))
        stats.sentLastDay = Int(try row.integer("sent"))
        stats.failedLastDay = Int(try row.integer("failed"))
        if let oldest = try row.optionalDate("oldest") { stats.oldestQueuedSeconds = max(0, Int(now.timeIntervalSince(oldest))) }
        return stats
    }

    public func emailRecoveryFigures(since: Date) async throws -> EmailRecoveryFigures {
        var figures = EmailRecoveryFigures()
        for row in try await reader.rows(
            """
            SELECT kind, COUNT(*) AS n FROM audit_events
            WHERE tenant_id = \(tenant) AND time >= \(since) AND (kind IN ('email_recovery_requested', 'email_undo')
                                        OR (kind = 'recovery_sign_in' AND detail = 'email_recovery'))
            GROUP BY kind
            """)
        {
            let count = Int(try row.integer("n"))
            switch try row.text("kind") {
            case "email_recovery_requested": figures.requested = count
            case "email_undo": figures.undone = count
            default: figures.completed = count
            }
        }
        return figures
    }

    public func sweepMail(now: Date) async throws -> Int {
        let week = now.addingTimeInterval(-7 * 86_400)
        let month = now.addingTimeInterval(-30 * 86_400)
        let day = now.addingTimeInterval(-86_400)
        return try await upkeepTransaction { [self] db in
            var removed = try await db.run("DELETE FROM mail_outbox WHERE sent_at <= \(week) RETURNING 1")
            removed += try await db.run("DELETE FROM mail_outbox WHERE failed_at <= \(month) RETURNING 1")
            removed += try await db.run("DELETE FROM email_tokens WHERE expires_at <= \(day) RETURNING 1")
            return removed
        }
    }
}

extension EmailToken {
    init(row: some StoreRow) throws {
        self.init(
            id: try row.id("id"), accountID: try row.id("account_id"), purpose: Purpose(rawValue: try row.text("purpose")) ?? .undo,
            address: try row.text("address"), linkHash: try row.bytes("link_hash"), codeHash: try row.optionalBytes("code_hash"),
            tries: Int(try row.integer("tries")), detail: try row.optionalText("detail"), createdAt: try row.date("created_at"),
            expiresAt: try row.date("expires_at"), usedAt: try row.optionalDate("used_at"))
    }
}

extension QueuedMail {
    init(row: some StoreRow) throws {
        self.init(
            id: try row.integer("id"), accountID: try row.optionalID("account_id"), kind: try row.text("kind"),
            recipient: try row.text("recipient"), sender: try row.text("sender"), message: try row.optionalBytes("message") ?? [],
            attempts: Int(try row.integer("attempts")), createdAt: try row.date("created_at"),
            nextAttemptAt: try row.date("next_attempt_at"))
    }
}
