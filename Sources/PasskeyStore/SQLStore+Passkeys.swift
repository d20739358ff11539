import Foundation

/// Passkeys: stored, read (alone or with their account), renamed, deleted (never the last way
/// in) and revoked; and a verified sign-in completed (challenge taken, counter moved by
/// compare-and-set, session and audit lines written) in one transaction or, on PostgreSQL, one
/// statement.
extension SQLStore {
    func insert(_ passkey: Passkey) -> SQL {
        """
        INSERT INTO passkeys (tenant_id, credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                              user_verified, attestation_format, attestation_trusted, name, created_at, last_used_at, counter_anomalies,
                              discoverable, prf_enabled, cred_protect, large_blob, min_pin_length, prf_salt)
        VALUES (\(tenant), \(passkey.credentialID), \(passkey.accountID), \(passkey.publicKey), \(Int64(passkey.signCount)), \(passkey.aaguid),
                \(StoreValues.encodeList(passkey.transports)), \(passkey.backupEligible), \(passkey.backedUp), \(passkey.userVerified),
                \(passkey.attestationFormat), \(passkey.attestationTrusted), \(passkey.name), \(passkey.createdAt), \(passkey.lastUsedAt),
                \(passkey.counterAnomalies), \(passkey.extensions.discoverable), \(passkey.extensions.prfEnabled),
                \(passkey.extensions.credProtect.map(Int64.init)), \(passkey.extensions.largeBlob),
                \(passkey.extensions.minPinLength.map(Int64.init)), \(passkey.prfSalt))
        """
    }

    public func addPasskey(_ passkey: Passkey) async throws {
        try await writer.run(insert(passkey))
    }

    public func passkey(credentialID: [UInt8]) async throws -> Passkey? {
        try await reader.first("SELECT * FROM passkeys WHERE tenant_id = \(tenant) AND credential_id = \(credentialID)").map {
            try Passkey(row: $0)
        }
    }

    public func passkeys(accountID: UUID) async throws -> [Passkey] {
        try await reader.rows(
            .prepared(
                as: PasskeysOfAccount.self,
                "SELECT \(sql: Self.passkeyColumns) FROM passkeys WHERE tenant_id = \(tenant) AND account_id = \(accountID) ORDER BY created_at, credential_id"
            )
        ).map { try Passkey(row: $0) }
    }

    public func passkeyAndAccount(credentialID: [UInt8]) async throws -> (Passkey, Account)? {
        guard
            let row = try await reader.first(
                """
                SELECT \(sql: Self.joinedPasskeyColumns), \(sql: Self.joinedAccountColumns)
                FROM passkeys p JOIN accounts a ON a.tenant_id = p.tenant_id AND a.id = p.account_id
                WHERE p.tenant_id = \(tenant) AND p.credential_id = \(credentialID)
                """)
        else { return nil }
        return (try Passkey(row: row), try Account(row: row, createdAt: "account_created_at"))
    }

    public func completeSignIn(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> SignInCompletion {
        if dialect == .postgres {
            return try await completeSignInInOneStatement(
                challenge: challenge, credentialID: credentialID, previousSignCount: previousSignCount, signCount: signCount,
                backedUp: backedUp, counterAnomaly: counterAnomaly, at: time, session: session, audit: audit)
        }
        return try await transaction { [self] db in
            // The account first, as on PostgreSQL (SQLite has one writer: no lock order to keep).
            guard try await db.run("SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(session.accountID)") == 1 else {
                if let challenge {
                    try await db.execute(
                        "DELETE FROM challenges WHERE tenant_id = \(tenant) AND challenge_hash = \(ChallengeHash.of(challenge))")
                }
                return .credentialGone
            }
            if let refused = try await takeChallengeAndMoveCounter(
                db, challenge: challenge, credentialID: credentialID, previousSignCount: previousSignCount, signCount: signCount,
                backedUp: backedUp, counterAnomaly: counterAnomaly, at: time)
            {
                return refused
            }
            try await db.execute("UPDATE accounts SET last_sign_in_at = \(time) WHERE tenant_id = \(tenant) AND id = \(session.accountID)")
            try await db.execute(insert(session))
            for event in audit { try await db.execute(insert(event)) }
            return .signedIn
        }
    }

    /// The sign-in statement is prepared in two shapes, by its number of audit lines: a
    /// sign-in's one, and a flagged counter's two (others run unnamed).
    private static let signInShapes: [Int: any PreparedStoreStatement.Type] = [1: CompleteSignIn.self, 2: CompleteFlaggedSignIn.self]

    /// PostgreSQL: the whole of ``completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)``
    /// as one statement of data-modifying CTEs (atomic on its own, one round trip instead of a
    /// transaction of seven). The account row is locked first (`held`), before any challenge or
    /// passkey row: the lock order of ``deleteAccount(accountID:audit:)``, which locks the
    /// account, then deletes its passkeys and challenges. In the opposite order a sign-in held
    /// the passkey row while it waited for the account, the deletion held the account while it
    /// waited for the passkey, and PostgreSQL broke the deadlock with an error (issue 42, item
    /// 20). A sign-in that waited for a deletion finds no account and writes nothing but the
    /// challenge's removal (`.credentialGone`). Each later step runs only if the one before it
    /// changed a row: the challenge is deleted (a concurrent answer waits on its row lock, then
    /// finds it gone), the counter moves only from `previousSignCount` (re-checked on the newest
    /// row version under READ COMMITTED), and the session and audit lines are written only if it
    /// moved. Values in SELECT lists carry casts, since a NULL bind has no type of its own.
    private func completeSignInInOneStatement(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> SignInCompletion {
        // `(SELECT COUNT(*) FROM held) >= 0` is always true: it makes `held` (the account's lock)
        // run before the challenge's row is touched, whether or not the account is there.
        var sql: SQL = "WITH held AS (SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(session.accountID) FOR NO KEY UPDATE), "
        sql = sql.appending(
            challenge.map { challenge -> SQL in
                """
                taken AS (
                    DELETE FROM challenges WHERE tenant_id = \(tenant) AND challenge_hash = \(ChallengeHash.of(challenge)) AND (SELECT COUNT(*) FROM held) >= 0
                    RETURNING 1),
                """
            } ?? "taken AS (SELECT 1 WHERE (SELECT COUNT(*) FROM held) >= 0), ")
        sql = sql.appending(
            """
            moved AS (
                UPDATE passkeys SET sign_count = \(Int64(signCount)), backed_up = \(backedUp), last_used_at = \(time),
                       counter_anomalies = counter_anomalies + \(counterAnomaly ? 1 : 0)
                WHERE tenant_id = \(tenant) AND credential_id = \(credentialID) AND sign_count = \(Int64(previousSignCount)) AND EXISTS (SELECT 1 FROM taken)
                  AND EXISTS (SELECT 1 FROM held)
                RETURNING 1),
            signed AS (UPDATE accounts SET last_sign_in_at = \(time) WHERE tenant_id = \(tenant) AND id = \(session.accountID) AND EXISTS (SELECT 1 FROM moved)),
            started AS (
                INSERT INTO sessions (tenant_id, token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id)
                SELECT \(tenant)::text, \(session.tokenHash)::bytea, \(session.accountID)::uuid, \(session.createdAt)::bigint, \(session.expiresAt)::bigint,
                       \(session.userAgent)::text, \(session.ipAddress)::text, \(session.method)::text, \(session.credentialID)::bytea
                WHERE EXISTS (SELECT 1 FROM moved))
            """)
        for (index, event) in audit.enumerated() {
            sql = sql.appending(
                """
                , \(sql: SQLFragment(text: "audit\(index)")) AS (
                    INSERT INTO audit_events (tenant_id, time, kind, account_id, credential_id, ip_address, user_agent, detail, metric, trace_parent)
                    SELECT \(tenant)::text, \(event.time)::bigint, \(event.kind)::text, \(event.accountID)::uuid, \(event.credentialID)::bytea,
                           \(event.ipAddress)::text, \(event.userAgent)::text, \(event.detail)::text, \(event.metric)::text,
                           \(event.traceParent)::text
                    WHERE EXISTS (SELECT 1 FROM moved))
                """)
        }
        sql = sql.appending(
            " SELECT (SELECT COUNT(*) FROM held) AS held, (SELECT COUNT(*) FROM taken) AS taken, (SELECT COUNT(*) FROM moved) AS moved")
        guard let row = try await writer.first(Self.signInShapes[audit.count].map { sql.prepared(as: $0) } ?? sql) else {
            throw StoreError(.unavailable, "no result")
        }
        if try row.optionalInteger("held") != 1 { return .credentialGone }
        if try row.optionalInteger("taken") != 1 { return .challengeTaken }
        if try row.optionalInteger("moved") != 1 { return .counterRaced }
        return .signedIn
    }

    public func renamePasskey(accountID: UUID, credentialID: [UInt8], name: String) async throws -> Bool {
        try await writer.run(
            "UPDATE passkeys SET name = \(name) WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND credential_id = \(credentialID) RETURNING 1"
        ) == 1
    }

    public func ensurePRFSalt(credentialID: [UInt8], salt: [UInt8]) async throws -> [UInt8]? {
        // Of two requests making the first salt at once, one writes; both read the same salt back.
        _ = try await writer.run(
            "UPDATE passkeys SET prf_salt = \(salt) WHERE tenant_id = \(tenant) AND credential_id = \(credentialID) AND prf_salt IS NULL RETURNING 1"
        )
        return try await writer.first("SELECT prf_salt FROM passkeys WHERE tenant_id = \(tenant) AND credential_id = \(credentialID)")?
            .optionalBytes("prf_salt")
    }

    public func setPRFSalt(accountID: UUID, credentialID: [UInt8], salt: [UInt8]) async throws -> Bool {
        try await writer.run(
            "UPDATE passkeys SET prf_salt = \(salt) WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND credential_id = \(credentialID) RETURNING 1"
        ) == 1
    }

    public func deletePasskey(accountID: UUID, credentialID: [UInt8], keepSession: [UInt8]?) async throws -> PasskeyDeletion {
        let forUpdate = dialect.forUpdate
        return try await transaction { [self] db in
            // Hold the account row (PostgreSQL; SQLite has one writer): a concurrent password
            // removal takes the same lock, so the two cannot both remove a way in.
            try await db.execute("SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID)\(sql: forUpdate)")
            let ids = try await db.rows(
                "SELECT credential_id FROM passkeys WHERE tenant_id = \(tenant) AND account_id = \(accountID)\(sql: forUpdate)"
            ).map {
                try $0.bytes("credential_id")
            }
            guard ids.contains(credentialID) else { return .notFound }
            let hasPassword =
                try await db.run("SELECT 1 FROM accounts WHERE tenant_id = \(tenant) AND id = \(accountID) AND password_hash IS NOT NULL")
                == 1
            guard ids.count > 1 || hasPassword else { return .lastPasskey }
            try await db.execute(
                "DELETE FROM passkeys WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND credential_id = \(credentialID)")
            // The sessions this passkey made end with it (but the one deleting it). They are the
            // account's: found through its sessions (no index on the credential to keep up).
            try await db.execute(
                """
                DELETE FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND credential_id = \(credentialID)
                AND token_hash <> \(keepSession ?? [])
                """)
            try await db.execute(
                "UPDATE sessions SET credential_id = NULL WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND credential_id = \(credentialID)"
            )
            return .deleted
        }
    }

    public func revokePasskey(credentialID: [UInt8], audit: [AuditEvent]) async throws -> Bool {
        try await transaction { [self] db in
            guard
                let owner = try await db.first(
                    "DELETE FROM passkeys WHERE tenant_id = \(tenant) AND credential_id = \(credentialID) RETURNING account_id")
            else {
                return false
            }
            let accountID = try owner.id("account_id")
            try await db.execute(
                "DELETE FROM sessions WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND credential_id = \(credentialID)")
            for event in audit { try await db.execute(insert(event)) }
            return true
        }
    }
}
