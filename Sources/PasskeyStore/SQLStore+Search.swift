import Foundation

/// The console's searches: accounts by a prefix of one field, and the audit log by any of its
/// filters. Every account search is an index range scan `key >= p AND key < p || U+10FFFF` in
/// byte order (SQLite's BINARY collation; PostgreSQL's columns are `COLLATE "C"`), paged by
/// keyset (the last row's key and id), so a page costs the same on page 1 and page 10,000.
extension SQLStore {
    public func searchAccounts(field: AccountSearchField, prefix: String, after cursor: String?, limit: Int) async throws -> (
        accounts: [Account], next: String?
    ) {
        guard (1...AccountSearch.maximumPrefixBytes).contains(prefix.utf8.count) else {
            throw StoreError(.invalidQuery, "a search prefix has 1 to \(AccountSearch.maximumPrefixBytes) bytes")
        }
        guard (1...AccountSearch.maximumLimit).contains(limit) else {
            throw StoreError(.invalidQuery, "a search returns 1 to \(AccountSearch.maximumLimit) accounts")
        }
        let after = try cursor.map { try AccountSearch.Cursor(decoding: $0, field: field) }
        switch field {
        case .username:
            return try await searchByKey(column: "username_key", key: Username.key(prefix), after: after, limit: limit, field: field)
        case .displayName:
            return try await searchByKey(
                column: "display_name_key", key: AccountSearch.key(prefix), after: after, limit: limit, field: field)
        case .externalID:
            return try await searchByKey(
                column: "external_id_key", key: AccountSearch.key(prefix), after: after, limit: limit, field: field)
        case .id:
            guard let (low, high) = AccountSearch.idRange(prefix) else { return ([], nil) }
            var sql: SQL = "SELECT \(sql: Self.accountColumns) FROM accounts WHERE tenant_id = \(tenant) AND id >= \(low) AND id <= \(high)"
            if let after { sql = sql.appending(" AND id > \(after.id)") }
            let rows = try await reader.rows(sql.appending(" ORDER BY id LIMIT \(limit + 1)"))
            let accounts = try rows.prefix(limit).map { try Account(row: $0) }
            let next = rows.count > limit ? accounts.last.map { AccountSearch.Cursor(field: field, key: "", id: $0.id).text } : nil
            return (accounts, next)
        case .credentialID:
            return try await searchByCredential(prefix: prefix, after: after, limit: limit)
        }
    }

    /// Accounts whose `column` (a folded key, unique or not) starts with `key`, ordered by
    /// (key, id).
    private func searchByKey(column: String, key: String, after: AccountSearch.Cursor?, limit: Int, field: AccountSearchField)
        async throws -> (accounts: [Account], next: String?)
    {
        let name = SQLFragment(text: column)
        var sql: SQL = """
            SELECT \(sql: Self.accountColumns), \(sql: name) AS search_key FROM accounts
            WHERE tenant_id = \(tenant) AND \(sql: name) >= \(key) AND \(sql: name) < \(key + AccountSearch.highest)
            """
        // The username key is unique: its own order. Display names and external ids may share a
        // key: (key, id), compared as a row value (an index range on both engines).
        let unique = field == .username
        if let after {
            sql = sql.appending(unique ? " AND \(sql: name) > \(after.key)" : " AND (\(sql: name), id) > (\(after.key), \(after.id))")
        }
        let order = SQLFragment(text: unique ? column : "\(column), id")
        let rows = try await reader.rows(sql.appending(" ORDER BY \(sql: order) LIMIT \(limit + 1)"))
        var accounts: [Account] = []
        var last: AccountSearch.Cursor?
        for row in rows.prefix(limit) {
            let account = try Account(row: row)
            accounts.append(account)
            last = AccountSearch.Cursor(field: field, key: try row.text("search_key"), id: account.id)
        }
        return (accounts, rows.count > limit ? last?.text : nil)
    }

    /// Accounts owning a passkey whose credential id's base64url starts with `prefix`: a byte
    /// range of `passkeys`' primary key (a few bits wider than the prefix), checked exactly
    /// here. An account with several matching passkeys is listed once per page.
    private func searchByCredential(prefix: String, after: AccountSearch.Cursor?, limit: Int) async throws -> (
        accounts: [Account], next: String?
    ) {
        guard let range = AccountSearch.credentialRange(prefix) else { return ([], nil) }
        var position = try after.map { cursor -> [UInt8] in
            guard let bytes = AccountSearch.base64URLDecode(cursor.key) else { throw StoreError(.invalidQuery, "not a search cursor") }
            return bytes
        }
        var accounts: [Account] = []
        var seen = Set<UUID>()
        // Rows outside the exact prefix are few (the range's last byte is a few bits wide), so
        // a page fills in one read or two; bounded all the same.
        for _ in 0..<8 {
            var sql: SQL = """
                SELECT p.credential_id AS p_credential_id, \(sql: Self.sessionAccountColumns)
                FROM passkeys p JOIN accounts a ON a.tenant_id = p.tenant_id AND a.id = p.account_id
                WHERE p.tenant_id = \(tenant) AND p.credential_id >= \(range.low)
                """
            if let upper = range.upper { sql = sql.appending(" AND p.credential_id < \(upper)") }
            if let position { sql = sql.appending(" AND p.credential_id > \(position)") }
            let batch = limit + 1
            let rows = try await reader.rows(sql.appending(" ORDER BY p.credential_id LIMIT \(batch)"))
            for row in rows {
                let credential = try row.bytes("p_credential_id")
                guard AccountSearch.base64URL(credential).hasPrefix(range.normalized) else {
                    position = credential
                    continue
                }
                let account = try Account(row: row)
                if seen.contains(account.id) {
                    position = credential
                    continue
                }
                if accounts.count == limit {
                    // One more match exists: this page ends before it.
                    return (
                        accounts, AccountSearch.Cursor(field: .credentialID, key: AccountSearch.base64URL(position ?? []), id: UUID()).text
                    )
                }
                seen.insert(account.id)
                accounts.append(account)
                position = credential
            }
            if rows.count < batch { return (accounts, nil) }
        }
        return (accounts, position.map { AccountSearch.Cursor(field: .credentialID, key: AccountSearch.base64URL($0), id: UUID()).text })
    }

    public func searchAudit(_ query: AuditQuery) async throws -> [AuditEvent] {
        guard (1...10_000).contains(query.limit) else { throw StoreError(.invalidQuery, "an audit search returns 1 to 10,000 lines") }
        var sql: SQL = "SELECT * FROM audit_events WHERE tenant_id = \(tenant)"
        if let accountID = query.accountID { sql = sql.appending(" AND account_id = \(accountID)") }
        if let kind = query.kind { sql = sql.appending(" AND kind = \(kind)") }
        if let address = query.addressPrefix, !address.isEmpty {
            guard address.utf8.count <= AccountSearch.maximumPrefixBytes else {
                throw StoreError(.invalidQuery, "an address prefix has at most \(AccountSearch.maximumPrefixBytes) bytes")
            }
            sql = sql.appending(" AND ip_address >= \(address) AND ip_address < \(address + AccountSearch.highest)")
        }
        if let from = query.from { sql = sql.appending(" AND time >= \(from)") }
        if let to = query.to { sql = sql.appending(" AND time < \(to)") }
        if let beforeID = query.beforeID { sql = sql.appending(" AND id < \(beforeID)") }
        return try await reader.rows(sql.appending(" ORDER BY id DESC LIMIT \(query.limit)")).map { try AuditEvent(row: $0) }
    }
}

/// The pieces of the account search: input bounds, folding, the cursor, and the id and
/// credential ranges.
enum AccountSearch {
    static let maximumPrefixBytes = 128
    static let maximumLimit = 100
    /// The greatest code point: `p + highest` is above every string that starts with `p`.
    static let highest = "\u{10FFFF}"

    /// The search key of a display name or external id (and of a prefix of one): folded like a
    /// username key (width-mapped, trimmed, lower-cased, NFC).
    static func key(_ text: String) -> String { Username.key(text) }

    /// Where a page ended: the field it belongs to, the last row's key and id. Opaque to
    /// callers (base64url of `field␟key␟id`); one made for another field is refused.
    struct Cursor {
        let field: AccountSearchField
        let key: String
        let id: UUID

        init(field: AccountSearchField, key: String, id: UUID) {
            self.field = field
            self.key = key
            self.id = id
        }

        init(decoding text: String, field: AccountSearchField) throws {
            guard text.utf8.count <= 1024, let bytes = AccountSearch.base64URLDecode(text) else {
                throw StoreError(.invalidQuery, "not a search cursor")
            }
            let parts = String(decoding: bytes, as: UTF8.self).split(separator: "\u{1F}", omittingEmptySubsequences: false)
            guard parts.count == 3, parts[0] == field.rawValue, let id = UUID(uuidString: String(parts[2])) else {
                throw StoreError(.invalidQuery, "not a search cursor")
            }
            self.init(field: field, key: String(parts[1]), id: id)
        }

        var text: String { AccountSearch.base64URL(Array("\(field.rawValue)\u{1F}\(key)\u{1F}\(id.uuidString)".utf8)) }
    }

    /// The ids whose lower-case text starts with `prefix` (dashes in it optional), as the lowest
    /// and highest such UUID; nil when the prefix holds anything but hex digits and dashes.
    static func idRange(_ prefix: String) -> (UUID, UUID)? {
        let hex = prefix.lowercased().filter { $0 != "-" }
        guard !hex.isEmpty, hex.count <= 32, hex.allSatisfy({ $0.isHexDigit && $0.isASCII }) else { return nil }
        func uuid(_ padding: Character) -> UUID? {
            let digits = Array(hex + String(repeating: padding, count: 32 - hex.count))
            let text = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(digits[$0]) }.joined(separator: "-")
            return UUID(uuidString: text)
        }
        guard let low = uuid("0"), let high = uuid("f") else { return nil }
        return (low, high)
    }

    /// The credential ids whose base64url starts with `prefix` (standard base64's `+` and `/`
    /// read as `-` and `_`, `=` dropped) lie in `low ..< upper` (no upper bound when nil): the
    /// prefix's whole bytes, its last partial byte's bits padded with zeros (low) and ones
    /// (high). Trailing zero bytes are dropped from the low bound, so a credential whose whole
    /// encoding is the prefix is inside too. nil when the prefix holds another character.
    static func credentialRange(_ prefix: String) -> (low: [UInt8], upper: [UInt8]?, normalized: String)? {
        let normalized = String(prefix.filter { $0 != "=" }.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        var bits: [UInt8] = []
        for character in normalized.utf8 {
            guard let value = sextet(character) else { return nil }
            for shift in stride(from: 5, through: 0, by: -1) { bits.append((value >> UInt8(shift)) & 1) }
        }
        guard !bits.isEmpty else { return nil }
        func bytes(padding: UInt8) -> [UInt8] {
            var padded = bits
            while padded.count % 8 != 0 { padded.append(padding) }
            return stride(from: 0, to: padded.count, by: 8).map { start in padded[start..<start + 8].reduce(0) { $0 << 1 | $1 } }
        }
        var low = bytes(padding: 0)
        while low.last == 0 { low.removeLast() }
        // The successor of every string starting with `high`: its last byte below 0xFF, plus one.
        var upper: [UInt8]? = bytes(padding: 1)
        while upper?.last == 0xFF { upper?.removeLast() }
        if var bound = upper, !bound.isEmpty {
            bound[bound.count - 1] += 1
            upper = bound
        } else {
            upper = nil
        }
        return (low, upper, normalized)
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Unpadded base64url.
    static func base64URL(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << UInt32(16 - 8 * $1.offset) }
            for position in 0...chunk.count { out.append(alphabet[Int((value >> UInt32(18 - 6 * position)) & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Unpadded base64url back to bytes; nil for anything else.
    static func base64URLDecode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for character in text.utf8 {
            guard let value = sextet(character) else { return nil }
            values.append(value)
        }
        guard values.count % 4 != 1 else { return nil }
        var bytes: [UInt8] = []
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << UInt32(18 - 6 * $1.offset) }
            for position in 0..<(chunk.count - 1) { bytes.append(UInt8((value >> UInt32(16 - 8 * position)) & 0xFF)) }
            index += 4
        }
        return bytes
    }
}
