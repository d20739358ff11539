import Crypto
import Foundation
import PasskeyStore
import WebAuthn

/// Server API callers: the key a request presents, its scope and its limits.
extension PasskeyService {
    /// Admits a server API request: a live key (`pkd_…` from `Authorization: Bearer`) holding
    /// `scope`, within its requests per window. Each failure counts against the address (keys
    /// cannot be guessed in bulk); each use is audited (`api_key_used`, `action` its detail) and
    /// marks the key's last use.
    /// - Throws: `invalid_api_key` (401), `insufficient_scope` (403), `rate_limited` (429).
    package func admitAPIKey(authorization: String?, scope: String, client: Client, action: String) async throws -> APIKey {
        guard let key = try await apiKey(authorization: authorization) else {
            try await limitFailedAPIKey(client)
            throw PasskeyServiceError.invalidAPIKey
        }
        guard key.scopes.contains(scope) else { throw PasskeyServiceError.insufficientScope(scope) }
        try await limitAPIKey(key)
        await audit(.apiKeyUsed, client: client, detail: "\(key.name) (\(key.id.uuidString.lowercased())) \(action)")
        try? await store.touchAPIKey(id: key.id, at: now())
        return key
    }

    /// The live key an `Authorization: Bearer pkd_…` header names, or nil.
    package func apiKey(authorization: String?) async throws -> APIKey? {
        guard let authorization, authorization.lowercased().hasPrefix("bearer ") else { return nil }
        let value = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard value.hasPrefix("pkd_"), value.utf8.count <= 128 else { return nil }
        guard let key = try await store.apiKey(hash: Array(SHA256.hash(data: Array(value.utf8)))), key.revokedAt == nil else {
            return nil
        }
        return key
    }

    /// Wrong or unknown API keys from one address: `perAccount` a window, then 429.
    package func limitFailedAPIKey(_ client: Client) async throws {
        let limits = configuration.rateLimits
        guard limits.enabled else { return }
        if case .limited(let retryAfter) = try await limiter.hit(
            "apikey-fail:\(client.ipAddress ?? "-")", limit: limits.perAccount, now: now())
        {
            metrics.rateLimited(scope: "api_key_failures")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }

    /// Requests per API key per window.
    package func limitAPIKey(_ key: APIKey) async throws {
        guard configuration.rateLimits.enabled else { return }
        if case .limited(let retryAfter) = try await limiter.hit(
            "apikey:\(key.id)", limit: configuration.apiKeyRequestsPerWindow, now: now())
        {
            metrics.rateLimited(scope: "api_key")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }
}
