import Crypto
import Foundation

/// The OpenID provider's rows: clients, pending authorization requests, codes and refresh tokens
/// (each taken once, their families revoked together), consents, and the ID token signing keys.
extension SQLStore {
    public func addOAuthClient(_ client: OAuthClient) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_clients (tenant_id, id, name, secret_hash, redirect_uris, post_logout_uris, first_party, allow_sign_up,
                                       id_token_algorithm, created_at)
            VALUES (\(tenant), \(client.id), \(client.name), \(client.secretHash), \(StoreValues.encodeList(client.redirectURIs)),
                    \(StoreValues.encodeList(client.postLogoutURIs)), \(client.firstParty), \(client.allowSignUp), \(client.idTokenAlgorithm),
                    \(client.createdAt))
            """)
    }

    public func oauthClient(id: String) async throws -> OAuthClient? {
        try await reader.first("SELECT * FROM oauth_clients WHERE tenant_id = \(tenant) AND id = \(id)").map { try OAuthClient(row: $0) }
    }

    public func oauthClients() async throws -> [OAuthClient] {
        try await reader.rows("SELECT * FROM oauth_clients WHERE tenant_id = \(tenant) ORDER BY created_at, id").map {
            try OAuthClient(row: $0)
        }
    }

    public func removeOAuthClient(id: String) async throws -> Bool {
        try await writer.run("DELETE FROM oauth_clients WHERE tenant_id = \(tenant) AND id = \(id) RETURNING 1") == 1
    }

    public func saveOAuthRequest(hash: [UInt8], clientID: String, request: [UInt8], createdAt: Date, expiresAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_requests (tenant_id, id_hash, client_id, request, created_at, expires_at)
            VALUES (\(tenant), \(hash), \(clientID), \(request), \(createdAt), \(expiresAt))
            """)
    }

    public func oauthRequest(hash: [UInt8], now: Date) async throws -> (clientID: String, request: [UInt8])? {
        guard
            let row = try await reader.first(
                "SELECT client_id, request FROM oauth_requests WHERE tenant_id = \(tenant) AND id_hash = \(hash) AND expires_at > \(now)")
        else { return nil }
        return (try row.text("client_id"), try row.bytes("request"))
    }

    public func deleteOAuthRequest(hash: [UInt8]) async throws {
        try await writer.run("DELETE FROM oauth_requests WHERE tenant_id = \(tenant) AND id_hash = \(hash)")
    }

    public func saveOAuthCode(hash: [UInt8], grant: OAuthGrant, createdAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_codes (tenant_id, code_hash, client_id, account_id, grant_data, created_at, expires_at)
            VALUES (\(tenant), \(hash), \(grant.clientID), \(grant.accountID), \(grant.grant), \(createdAt), \(grant.expiresAt))
            """)
    }

    // Single use (issue 33): each code and refresh token is taken by the one UPDATE below whose
    // RETURNING says who won. On PostgreSQL a racing UPDATE waits for the row's lock and then
    // re-checks `used_at IS NULL` on the committed row, so it takes nothing; on SQLite writes
    // are serial. Only then is the row read again, to tell a reuse from an unknown token. The
    // client is in the WHERE: another client's code or token is never touched.

    public func useOAuthCode(hash: [UInt8], clientID: String, family: String, at time: Date) async throws -> OAuthTake {
        try await transaction { [self] db in
            if let row = try await db.first(
                """
                UPDATE oauth_codes SET used_at = \(time), family = \(family)
                WHERE tenant_id = \(tenant) AND code_hash = \(hash) AND client_id = \(clientID) AND used_at IS NULL AND expires_at > \(time)
                RETURNING *
                """)
            {
                return .taken(try OAuthGrant(row: row))
            }
            guard
                let row = try await db.first(
                    "SELECT * FROM oauth_codes WHERE tenant_id = \(tenant) AND code_hash = \(hash) AND client_id = \(clientID)")
            else {
                return .unknown
            }
            let code = try OAuthGrant(row: row)
            return code.usedAt != nil ? .reused(code) : .expired
        }
    }

    public func oauthCode(hash: [UInt8], clientID: String) async throws -> OAuthGrant? {
        try await reader.first("SELECT * FROM oauth_codes WHERE tenant_id = \(tenant) AND code_hash = \(hash) AND client_id = \(clientID)")
            .map {
                try OAuthGrant(row: $0)
            }
    }

    public func saveRefreshToken(hash: [UInt8], grant: OAuthGrant, createdAt: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_refresh_tokens (tenant_id, token_hash, family, client_id, account_id, grant_data, created_at, expires_at)
            VALUES (\(tenant), \(hash), \(grant.family ?? ""), \(grant.clientID), \(grant.accountID), \(grant.grant), \(createdAt), \(grant.expiresAt))
            """)
    }

    public func useRefreshToken(hash: [UInt8], clientID: String, at time: Date) async throws -> OAuthTake {
        try await transaction { [self] db in
            if let row = try await db.first(
                """
                UPDATE oauth_refresh_tokens SET used_at = \(time)
                WHERE tenant_id = \(tenant) AND token_hash = \(hash) AND client_id = \(clientID) AND used_at IS NULL AND revoked_at IS NULL
                  AND expires_at > \(time)
                  AND NOT EXISTS (SELECT 1 FROM oauth_refresh_tokens AS revoked
                                  WHERE revoked.tenant_id = oauth_refresh_tokens.tenant_id AND revoked.family = oauth_refresh_tokens.family
                                    AND revoked.revoked_at IS NOT NULL)
                RETURNING *
                """)
            {
                return .taken(try OAuthGrant(row: row))
            }
            guard
                let row = try await db.first(
                    "SELECT * FROM oauth_refresh_tokens WHERE tenant_id = \(tenant) AND token_hash = \(hash) AND client_id = \(clientID)")
            else { return .unknown }
            let token = try OAuthGrant(row: row)
            if try await grantRevoked(token.family ?? "", on: db) { return .revoked }
            if token.usedAt != nil { return .reused(token) }
            return .expired
        }
    }

    /// The row that marks a family revoked though it may hold no refresh token (a grant without
    /// `offline_access`, or one whose first token is still being written when a reused code
    /// revokes it): keyed by a hash no token can have (tokens are hashed from 32 random bytes,
    /// this from text), used and revoked from the start, kept until `until`.
    static func revocationMarker(_ family: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(("passkeyd revoked grant " + family).utf8)))
    }

    func revokeGrant(
        _ family: String, clientID: String, accountID: UUID, at time: Date, until: Date, on db: any SQLConnection
    ) async throws -> Int {
        let revoked = try await db.run(
            "UPDATE oauth_refresh_tokens SET revoked_at = \(time) WHERE tenant_id = \(tenant) AND family = \(family) AND revoked_at IS NULL RETURNING 1"
        )
        try await db.execute(
            """
            INSERT INTO oauth_refresh_tokens (tenant_id, token_hash, family, client_id, account_id, grant_data, created_at, expires_at, used_at, revoked_at)
            VALUES (\(tenant), \(Self.revocationMarker(family)), \(family), \(clientID), \(accountID), \([UInt8]()), \(time), \(until), \(time), \(time))
            ON CONFLICT (tenant_id, token_hash) DO NOTHING
            """)
        return revoked
    }

    func grantRevoked(_ family: String, on db: any SQLConnection) async throws -> Bool {
        try await db.first(
            "SELECT 1 AS n FROM oauth_refresh_tokens WHERE tenant_id = \(tenant) AND family = \(family) AND revoked_at IS NOT NULL LIMIT 1")
            != nil
    }

    public func revokeOAuthGrant(family: String, clientID: String, accountID: UUID, at time: Date, until: Date) async throws -> Int {
        try await transaction { [self] db in
            try await revokeGrant(family, clientID: clientID, accountID: accountID, at: time, until: until, on: db)
        }
    }

    public func revokeRefreshToken(hash: [UInt8], clientID: String, at time: Date, until: Date) async throws -> Bool {
        try await transaction { [self] db in
            guard
                let row = try await db.first(
                    "SELECT family, account_id FROM oauth_refresh_tokens WHERE tenant_id = \(tenant) AND token_hash = \(hash) AND client_id = \(clientID)"
                )
            else { return false }
            _ = try await revokeGrant(
                try row.text("family"), clientID: clientID, accountID: try row.id("account_id"), at: time, until: until, on: db)
            return true
        }
    }

    public func oauthGrantRevoked(family: String) async throws -> Bool {
        try await grantRevoked(family, on: reader)
    }

    public func revokeRefreshFamily(_ family: String, at time: Date) async throws -> Int {
        try await writer.run(
            "UPDATE oauth_refresh_tokens SET revoked_at = \(time) WHERE tenant_id = \(tenant) AND family = \(family) AND revoked_at IS NULL RETURNING 1"
        )
    }

    public func refreshFamily(hash: [UInt8]) async throws -> String? {
        try await reader.first("SELECT family FROM oauth_refresh_tokens WHERE tenant_id = \(tenant) AND token_hash = \(hash)").map {
            try $0.text("family")
        }
    }

    public func consent(accountID: UUID, clientID: String) async throws -> String? {
        try await reader.first(
            "SELECT scope FROM oauth_consents WHERE tenant_id = \(tenant) AND account_id = \(accountID) AND client_id = \(clientID)"
        ).map {
            try $0.text("scope")
        }
    }

    public func saveConsent(accountID: UUID, clientID: String, scope: String, at time: Date) async throws {
        try await writer.run(
            """
            INSERT INTO oauth_consents (tenant_id, account_id, client_id, scope, created_at)
            VALUES (\(tenant), \(accountID), \(clientID), \(scope), \(time))
            ON CONFLICT (tenant_id, account_id, client_id) DO UPDATE SET scope = \(scope), created_at = \(time)
            """)
    }

    // MARK: Signing keys

    public func signingKeys(now: Date) async throws -> [SigningKey] {
        try await reader.rows(
            "SELECT * FROM signing_keys WHERE tenant_id = \(tenant) AND (retires_at IS NULL OR retires_at > \(now)) ORDER BY activates_at, created_at, kid"
        ).map { try SigningKey(row: $0) }
    }

    func insert(_ key: SigningKey) -> SQL {
        """
        INSERT INTO signing_keys (tenant_id, kid, algorithm, private_key, created_at, activates_at, retires_at)
        VALUES (\(tenant), \(key.kid), \(key.algorithm), \(key.privateKey), \(key.createdAt), \(key.activatesAt), \(key.retiresAt))
        """
    }

    /// The `signing_keys` settings row holds the newest key's id: the keys' version, which
    /// ``signingKeysVersion()`` reads. Written first in both transactions that add a key (the
    /// same order as ``addFirstSigningKey(_:now:)``'s lock on it).
    private func setVersion(_ key: SigningKey) -> SQL {
        """
        INSERT INTO settings (name, value) VALUES (\(signingKeysSetting), \(Array(key.kid.utf8)))
        ON CONFLICT (name) DO UPDATE SET value = excluded.value
        """
    }

    /// The settings row of this tenant's keys' version (the default tenant's is the name it had
    /// before tenants).
    private var signingKeysSetting: String {
        tenant == TenantID.defaultTenant ? "signing_keys" : "signing_keys/" + tenant
    }

    public func signingKeysVersion() async throws -> [UInt8] {
        try await reader.first("SELECT value FROM settings WHERE name = \(signingKeysSetting)").map { try $0.bytes("value") } ?? []
    }

    public func addSigningKey(_ key: SigningKey, retiringOthersAt retirement: Date?) async throws {
        try await transaction { [self] db in
            try await db.execute(setVersion(key))
            if let retirement {
                try await db.execute(
                    "UPDATE signing_keys SET retires_at = \(retirement) WHERE tenant_id = \(tenant) AND retires_at IS NULL AND algorithm = \(key.algorithm)"
                )
            }
            try await db.execute(insert(key))
        }
    }

    public func addFirstSigningKey(_ key: SigningKey, now: Date) async throws -> Bool {
        let forUpdate = dialect.forUpdate
        return try await transaction { [self] db in
            // PostgreSQL: instances starting together queue on the settings row (SQLite has one
            // writer), so exactly one adds the first key.
            try await db.execute(
                "INSERT INTO settings (name, value) VALUES (\(signingKeysSetting), \([UInt8]())) ON CONFLICT (name) DO NOTHING")
            try await db.execute("SELECT 1 FROM settings WHERE name = \(signingKeysSetting)\(sql: forUpdate)")
            let live = try await db.count(
                "SELECT COUNT(*) AS n FROM signing_keys WHERE tenant_id = \(tenant) AND algorithm = \(key.algorithm) AND (retires_at IS NULL OR retires_at > \(now))"
            )
            guard live == 0 else { return false }
            try await db.execute(setVersion(key))
            try await db.execute(insert(key))
            return true
        }
    }
}
