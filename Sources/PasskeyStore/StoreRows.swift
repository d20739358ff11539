import Foundation

/// Conversions shared by the SQL stores: times are integer Unix milliseconds, IDs text,
/// bytes binary, lists JSON text. Both backends store the same values the same way.
enum StoreValues {
    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }

    /// A list as JSON text, as `JSONEncoder` writes it. Lists of printable ASCII with nothing
    /// to escape (`"`, `\\`, and `/`, which `JSONEncoder` escapes) are written here: a new
    /// passkey's transports, ~1% of a sign-up's server CPU through `JSONEncoder`.
    static func encodeList(_ list: [String]) -> String {
        let plain = list.allSatisfy { text in
            text.utf8.allSatisfy {
                $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "/")
            }
        }
        if plain { return "[" + list.map { "\"" + $0 + "\"" }.joined(separator: ",") + "]" }
        return (try? String(decoding: JSONEncoder().encode(list), as: UTF8.self)) ?? "[]"
    }

    static func decodeList(_ text: String?) -> [String] {
        guard let text else { return [] }
        if let list = plainList(text) { return list }
        guard let list = try? JSONDecoder().decode([String].self, from: Data(text.utf8)) else { return [] }
        return list
    }

    /// `["a","b"]` with no escape, space or control character (what ``encodeList(_:)`` writes
    /// for transports), read without Foundation: a passkey's transports are read on every
    /// sign-in. Anything else is nil and goes to `JSONDecoder`.
    static func plainList(_ text: String) -> [String]? {
        var bytes = Array(text.utf8)[...]
        guard bytes.first == UInt8(ascii: "["), bytes.last == UInt8(ascii: "]") else { return nil }
        bytes = bytes.dropFirst().dropLast()
        var list: [String] = []
        while !bytes.isEmpty {
            if !list.isEmpty {
                guard bytes.first == UInt8(ascii: ",") else { return nil }
                bytes = bytes.dropFirst()
            }
            guard bytes.first == UInt8(ascii: "\""),
                let close = bytes.dropFirst().firstIndex(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }),
                bytes[close] == UInt8(ascii: "\"")
            else { return nil }
            list.append(String(decoding: bytes[(bytes.startIndex + 1)..<close], as: UTF8.self))
            bytes = bytes[(close + 1)...]
        }
        return list
    }

    /// Largest values accepted for free-text fields, so a store row never grows unbounded.
    static let maxNameLength = 128
}

/// A row of either database, read by column name: SQLite's rows and postgres-nio's both satisfy
/// it, so each model has one mapper. A value that is missing or of the wrong form throws
/// `corrupt_row` (no store reads a row with invented values).
protocol StoreRow: Sendable {
    func optionalText(_ column: String) throws -> String?
    func optionalInteger(_ column: String) throws -> Int64?
    func optionalBytes(_ column: String) throws -> [UInt8]?
    func optionalFlag(_ column: String) throws -> Bool?
    func optionalID(_ column: String) throws -> UUID?
}

/// The columns of `row` whose names start with `prefix`, under their names without it: one
/// table's columns read apart from another's in a joined row.
struct PrefixedRow: StoreRow {
    let row: any StoreRow
    let prefix: String

    func optionalText(_ column: String) throws -> String? { try row.optionalText(prefix + column) }
    func optionalInteger(_ column: String) throws -> Int64? { try row.optionalInteger(prefix + column) }
    func optionalBytes(_ column: String) throws -> [UInt8]? { try row.optionalBytes(prefix + column) }
    func optionalFlag(_ column: String) throws -> Bool? { try row.optionalFlag(prefix + column) }
    func optionalID(_ column: String) throws -> UUID? { try row.optionalID(prefix + column) }
}

extension StoreRow {
    private func required<T>(_ value: T?, _ column: String) throws -> T {
        guard let value else { throw StoreError(.corruptRow, "\(column) is missing or malformed") }
        return value
    }

    func text(_ column: String) throws -> String { try required(optionalText(column), column) }
    func integer(_ column: String) throws -> Int64 { try required(optionalInteger(column), column) }
    func bytes(_ column: String) throws -> [UInt8] { try required(optionalBytes(column), column) }
    func flag(_ column: String) throws -> Bool { try required(optionalFlag(column), column) }
    func id(_ column: String) throws -> UUID { try required(optionalID(column), column) }
    func date(_ column: String) throws -> Date { StoreValues.date(try integer(column)) }
    func optionalDate(_ column: String) throws -> Date? { try optionalInteger(column).map(StoreValues.date) }
}

// One mapper per model.

extension Account {
    /// The columns an account is read from (all of `accounts` but `username_key`), for reads
    /// that name them one by one.
    static let columns = [
        "id", "username", "display_name", "user_handle", "created_at", "disabled", "last_sign_in_at", "password_hash", "external_id",
    ]

    init(row: some StoreRow, createdAt: String = "created_at") throws {
        self.init(
            id: try row.id("id"), username: try row.text("username"), displayName: try row.text("display_name"),
            userHandle: try row.bytes("user_handle"), createdAt: try row.date(createdAt), disabled: try row.flag("disabled"),
            lastSignInAt: try row.optionalDate("last_sign_in_at"), passwordHash: try row.optionalText("password_hash"),
            externalID: try row.optionalText("external_id"))
    }
}

extension Passkey {
    /// Every column of the `passkeys` table, for reads that name them one by one.
    static let columns = [
        "credential_id", "account_id", "public_key", "sign_count", "aaguid", "transports", "backup_eligible", "backed_up",
        "user_verified", "attestation_format", "attestation_trusted", "name", "created_at", "last_used_at", "counter_anomalies",
        "discoverable", "prf_enabled", "cred_protect", "large_blob", "min_pin_length", "prf_salt",
    ]
    /// The columns of what registration learned from the extensions, and the PRF salt.
    static let extensionColumns: Set<String> = ["discoverable", "prf_enabled", "cred_protect", "large_blob", "min_pin_length", "prf_salt"]

    init(row: some StoreRow) throws {
        self.init(
            credentialID: try row.bytes("credential_id"), accountID: try row.id("account_id"), publicKey: try row.bytes("public_key"),
            signCount: UInt32(clamping: try row.integer("sign_count")), aaguid: try row.text("aaguid"),
            transports: StoreValues.decodeList(try row.optionalText("transports")), backupEligible: try row.flag("backup_eligible"),
            backedUp: try row.flag("backed_up"), userVerified: try row.flag("user_verified"),
            attestationFormat: try row.text("attestation_format"), attestationTrusted: try row.flag("attestation_trusted"),
            name: try row.text("name"), createdAt: try row.date("created_at"), lastUsedAt: try row.optionalDate("last_used_at"),
            counterAnomalies: Int(try row.integer("counter_anomalies")),
            extensions: PasskeyExtensions(
                discoverable: try row.optionalFlag("discoverable"), prfEnabled: try row.optionalFlag("prf_enabled"),
                credProtect: try row.optionalInteger("cred_protect").map { Int(clamping: $0) },
                largeBlob: try row.optionalFlag("large_blob"),
                minPinLength: try row.optionalInteger("min_pin_length").map { Int(clamping: $0) }),
            prfSalt: try row.optionalBytes("prf_salt"))
    }
}

extension SessionRecord {
    /// `prefix`: the column names of a join that renamed them (`session_created`, …).
    init(
        row: some StoreRow, accountIDColumn: String = "account_id", createdAtColumn: String = "created_at",
        credentialColumn: String = "credential_id"
    ) throws {
        self.init(
            tokenHash: try row.bytes("token_hash"), accountID: try row.id(accountIDColumn), createdAt: try row.date(createdAtColumn),
            expiresAt: try row.date("expires_at"), userAgent: try row.optionalText("user_agent"),
            ipAddress: try row.optionalText("ip_address"), method: try row.optionalText("method") ?? "unknown",
            credentialID: try row.optionalBytes(credentialColumn), lastSeenAt: try row.optionalDate("last_seen_at"))
    }
}

extension ChallengeRecord {
    /// Every column of the `challenges` table (a read that names them one by one).
    static let columns = [
        "challenge_hash", "challenge", "ceremony", "account_id", "pending_username", "pending_display_name", "pending_user_handle",
        "unknown_user", "api", "user_verification", "created_at", "expires_at", "pending_account_id", "conditional", "state",
        "pending_email",
    ]

    init(row: some StoreRow) throws {
        self.init(
            challenge: try row.bytes("challenge"), ceremony: Ceremony(rawValue: try row.text("ceremony")) ?? .authentication,
            accountID: try row.optionalID("account_id"), pendingUsername: try row.optionalText("pending_username"),
            pendingDisplayName: try row.optionalText("pending_display_name"),
            pendingUserHandle: try row.optionalBytes("pending_user_handle"),
            pendingAccountID: try row.optionalID("pending_account_id"), unknownUser: try row.flag("unknown_user"), api: try row.text("api"),
            userVerification: try row.text("user_verification"), conditional: try row.optionalFlag("conditional") ?? false,
            state: try row.optionalBytes("state"), createdAt: try row.date("created_at"), expiresAt: try row.date("expires_at"),
            pendingEmail: try row.optionalText("pending_email"))
    }
}

extension AuditEvent {
    init(row: some StoreRow, idColumn: String = "id", timeColumn: String = "time") throws {
        self.init(
            time: try row.date(timeColumn), kind: try row.text("kind"), accountID: try row.optionalID("account_id"),
            credentialID: try row.optionalBytes("credential_id"), ipAddress: try row.optionalText("ip_address"),
            userAgent: try row.optionalText("user_agent"), detail: try row.optionalText("detail"),
            metric: try row.optionalText("metric"), traceParent: try row.optionalText("trace_parent"))
        id = try row.optionalInteger(idColumn)
    }
}

extension SigningKey {
    init(row: some StoreRow) throws {
        self.init(
            kid: try row.text("kid"), algorithm: try row.text("algorithm"), privateKey: try row.bytes("private_key"),
            createdAt: try row.date("created_at"), activatesAt: try row.date("activates_at"), retiresAt: try row.optionalDate("retires_at"))
    }
}

extension APIKey {
    init(row: some StoreRow) throws {
        self.init(
            id: try row.id("id"), name: try row.text("name"), keyHash: try row.bytes("key_hash"),
            scopes: StoreValues.decodeList(try row.optionalText("scopes")), createdAt: try row.date("created_at"),
            lastUsedAt: try row.optionalDate("last_used_at"), revokedAt: try row.optionalDate("revoked_at"))
    }
}

extension WebhookEndpoint {
    init(row: some StoreRow) throws {
        let events = try row.text("events")
        self.init(
            id: try row.id("id"), url: try row.text("url"), secret: try row.bytes("secret"),
            events: events.split(separator: ",").map(String.init), createdAt: try row.date("created_at"), disabled: try row.flag("disabled")
        )
    }
}

extension WebhookDelivery {
    init(row: some StoreRow) throws {
        self.init(
            eventID: try row.integer("event_id"), endpointID: try row.id("endpoint_id"), accountID: try row.optionalID("account_id"),
            attempts: Int(try row.integer("attempts")), nextAttemptAt: try row.date("next_attempt_at"),
            deliveredAt: try row.optionalDate("delivered_at"), lastStatus: try row.optionalInteger("last_status").map { Int($0) },
            lastError: try row.optionalText("last_error"), latencyMs: try row.optionalInteger("latency_ms").map { Int(clamping: $0) })
    }
}

extension OAuthClient {
    init(row: some StoreRow) throws {
        self.init(
            id: try row.text("id"), name: try row.text("name"), secretHash: try row.optionalBytes("secret_hash"),
            redirectURIs: StoreValues.decodeList(try row.optionalText("redirect_uris")),
            postLogoutURIs: StoreValues.decodeList(try row.optionalText("post_logout_uris")), firstParty: try row.flag("first_party"),
            allowSignUp: try row.flag("allow_sign_up"), idTokenAlgorithm: try row.text("id_token_algorithm"),
            createdAt: try row.date("created_at"))
    }
}

extension OAuthGrant {
    init(row: some StoreRow) throws {
        self.init(
            clientID: try row.text("client_id"), accountID: try row.id("account_id"), grant: try row.bytes("grant_data"),
            family: try row.optionalText("family"), expiresAt: try row.date("expires_at"), usedAt: try row.optionalDate("used_at"),
            revokedAt: try row.optionalDate("revoked_at"))
    }
}
