import Crypto
import Foundation
import PasskeyStore
import WebAuthn

/// The limits on server API callers (the key itself is checked by the edge's middleware).
extension PasskeyService {
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
