import Foundation

/// Everything single use that starts or resumes a ceremony: challenges (kept under
/// ``ChallengeHash``, taken with `DELETE … RETURNING`), registration tokens, recovery codes and
/// recovery links.
extension SQLStore {
    public func saveChallenge(_ record: ChallengeRecord) async throws {
        try await writer.run(
            .prepared(
                as: SaveChallenge.self,
                """
                INSERT INTO challenges (tenant_id, challenge_hash, challenge, ceremony, account_id, pending_username, pending_display_name,
                                        pending_user_handle, pending_account_id, unknown_user, api, user_verification, conditional, state,
                                        created_at, expires_at, pending_email)
                VALUES (\(tenant), \(ChallengeHash.of(record.challenge)), \(record.challenge), \(record.ceremony.rawValue), \(record.accountID),
                        \(record.pendingUsername), \(record.pendingDisplayName), \(record.pendingUserHandle), \(record.pendingAccountID),
                        \(record.unknownUser), \(record.api), \(record.userVerification), \(record.conditional), \(record.state),
                        \(record.createdAt), \(record.expiresAt), \(record.pendingEmail))
                """))
    }

    public func takeChallenge(_ challenge: [UInt8]) async throws -> ChallengeRecord? {
        try await writer.first(
            "DELETE FROM challenges WHERE tenant_id = \(tenant) AND challenge_hash = \(ChallengeHash.of(challenge)) RETURNING *"
        ).map {
            try ChallengeRecord(row: $0)
        }
    }

    public func challenge(_ challenge: [UInt8]) async throws -> ChallengeRecord? {
        try await reader.first("SELECT * FROM challenges WHERE tenant_id = \(tenant) AND challenge_hash = \(ChallengeHash.of(challenge))")
            .map {
                try ChallengeRecord(row: $0)
            }
    }

    /// The ceremony's columns, each as `c_<name>`, written once (a sign-in's hot path).
    private static let prefixedChallengeColumns = SQLFragment(
        text: ChallengeRecord.columns.map { "c.\($0) AS c_\($0)" }.joined(separator: ", "))

    public func challengeAndPasskey(_ challenge: [UInt8], credentialID: [UInt8]) async throws -> (ChallengeRecord?, (Passkey, Account)?) {
        // The challenge's columns come back under a `c_` prefix (`PrefixedRow`), apart from
        // the passkey's and the account's; a side that is absent is all NULL. Of the passkey's
        // extension facts, only `prf_enabled` (the sign-in answer's `prfEnabled`).
        guard
            let row = try await reader.first(
                .prepared(
                    as: ChallengeAndPasskey.self,
                    """
                    SELECT \(sql: Self.prefixedChallengeColumns), \(sql: Self.joinedSignInPasskeyColumns), p.prf_enabled,
                        \(sql: Self.joinedAccountColumns)
                    FROM (SELECT 1 AS one) AS one
                    LEFT JOIN challenges c ON c.tenant_id = \(tenant) AND c.challenge_hash = \(ChallengeHash.of(challenge))
                    LEFT JOIN passkeys p ON p.tenant_id = \(tenant) AND p.credential_id = \(credentialID)
                    LEFT JOIN accounts a ON a.tenant_id = p.tenant_id AND a.id = p.account_id
                    """))
        else { return (nil, nil) }
        let prefixed = PrefixedRow(row: row, prefix: "c_")
        let record = try prefixed.optionalBytes("challenge_hash") == nil ? nil : try ChallengeRecord(row: prefixed)
        let passkey =
            try row.optionalBytes("credential_id") == nil || row.optionalID("id") == nil
            ? nil : (try Passkey(row: row), try Account(row: row, createdAt: "account_created_at"))
        return (record, passkey)
    }

    public func openChallengeCount(now: Date) async throws -> Int {
        try await reader.count("SELECT COUNT(*) AS n FROM challenges WHERE tenant_id = \(tenant) AND expires_at > \(now)")
    }

    public func discardOldestChallenges(count: Int) async throws -> Int {
        guard count > 0 else { return 0 }
        return try await writer.run(
            """
            DELETE FROM challenges WHERE tenant_id = \(tenant) AND challenge_hash IN (
                SELECT challenge_hash FROM challenges WHERE tenant_id = \(tenant) ORDER BY expires_at LIMIT \(count))
            RETURNING 1
            """)
    }

    // MARK: Registration tokens

    public func saveRegistrationToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO registration_tokens (tenant_id, token_hash, account_id, created_at, expires_at)
            VALUES (\(tenant), \(hash), \(accountID), \(createdAt), \(expiresAt))
            """)
    }

    public func takeRegistrationToken(hash: [UInt8], now: Date) async throws -> UUID? {
        guard
            let row = try await writer.first(
                "DELETE FROM registration_tokens WHERE tenant_id = \(tenant) AND token_hash = \(hash) RETURNING account_id, expires_at")
        else { return nil }
        guard try row.date("expires_at") > now else { return nil }
        return try row.id("account_id")
    }

    // MARK: Recovery codes and links

    public func replaceRecoveryCodes(accountID: UUID, hashes: [[UInt8]], at time: Date) async throws {
        try await transaction { [self] db in
            try await db.execute("DELETE FROM recovery_codes WHERE tenant_id = \(tenant) AND account_id = \(accountID)")
            for hash in hashes {
                try await db.execute(
                    "INSERT INTO recovery_codes (tenant_id, account_id, code_hash, created_at) VALUES (\(tenant), \(accountID), \(hash), \(time))"
                )
            }
        }
    }

    public func useRecoveryCode(accountID: UUID, hash: [UInt8], at time: Date) async throws -> Bool {
        try await writer.run(
            """
            UPDATE recovery_codes SET used_at = \(time)
            WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND code_hash = \(hash) AND used_at IS NULL RETURNING 1
            """) == 1
    }

    public func recoveryCodesLeft(accountID: UUID) async throws -> Int {
        try await reader.count(
            "SELECT COUNT(*) AS n FROM recovery_codes WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND used_at IS NULL")
    }

    public func saveRecoveryToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws {
        try await writer.run(
            "INSERT INTO recovery_tokens (tenant_id, token_hash, account_id, created_at, expires_at) VALUES (\(tenant), \(hash), \(accountID), \(createdAt), \(expiresAt))"
        )
    }

    public func takeRecoveryToken(hash: [UInt8], now: Date) async throws -> UUID? {
        guard
            let row = try await writer.first(
                "DELETE FROM recovery_tokens WHERE tenant_id = \(tenant) AND token_hash = \(hash) RETURNING account_id, expires_at")
        else { return nil }
        guard try row.date("expires_at") > now else { return nil }
        return try row.id("account_id")
    }
}
