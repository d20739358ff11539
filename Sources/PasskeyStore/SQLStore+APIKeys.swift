import Foundation

/// API keys for the admin API: stored under the hash of the key, listed, revoked, touched.
extension SQLStore {
    public func createAPIKey(_ key: APIKey, audit: [AuditEvent]) async throws {
        try await transaction { [self] db in
            try await db.execute(
                """
                INSERT INTO api_keys (tenant_id, id, name, key_hash, scopes, created_at)
                VALUES (\(tenant), \(key.id), \(key.name), \(key.keyHash), \(StoreValues.encodeList(key.scopes)), \(key.createdAt))
                """)
            for event in audit { try await db.execute(insert(event)) }
        }
    }

    public func apiKey(hash: [UInt8]) async throws -> APIKey? {
        try await reader.first("SELECT * FROM api_keys WHERE tenant_id = \(tenant) AND key_hash = \(hash)").map { try APIKey(row: $0) }
    }

    public func apiKeys() async throws -> [APIKey] {
        try await reader.rows("SELECT * FROM api_keys WHERE tenant_id = \(tenant) ORDER BY created_at, id").map { try APIKey(row: $0) }
    }

    public func revokeAPIKey(id: UUID, at time: Date, audit: [AuditEvent]) async throws -> Bool {
        try await transaction { [self] db in
            guard
                try await db.run(
                    "UPDATE api_keys SET revoked_at = \(time) WHERE tenant_id = \(tenant) AND id = \(id) AND revoked_at IS NULL RETURNING 1"
                ) == 1
            else { return false }
            for event in audit { try await db.execute(insert(event)) }
            return true
        }
    }

    public func touchAPIKey(id: UUID, at time: Date) async throws {
        try await writer.run(
            """
            UPDATE api_keys SET last_used_at = \(time)
            WHERE tenant_id = \(tenant) AND id = \(id) AND (last_used_at IS NULL OR last_used_at < \(time.addingTimeInterval(-60)))
            """)
    }
}
