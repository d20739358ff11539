import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyStore
import WebAuthn

/// A server calling passkeyd with an API key (`Authorization: Bearer pkd_…`).
public struct APIKeyCaller: Sendable {
    public let key: APIKey
}

/// Admits requests with a live API key holding `scope`: 401 `invalid_api_key` without one (each
/// failure counted against the address, so keys cannot be guessed in bulk), 403
/// `insufficient_scope` with a key that lacks it, 429 past `apiKeyRequestsPerWindow` for the key.
/// Every use is audited (`api_key_used`).
struct APIKeyMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let service: PasskeyService
    let scope: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let client = context.client
        guard let key = try await Self.key(request, service: service) else {
            try await service.limitFailedAPIKey(client)
            throw PasskeyServiceError.invalidAPIKey
        }
        guard key.scopes.contains(scope) else { throw PasskeyServiceError.insufficientScope(scope) }
        try await service.limitAPIKey(key)
        var context = context
        context.apiKey = APIKeyCaller(key: key)
        await service.audit(
            .apiKeyUsed, client: client, detail: "\(key.name) (\(key.id.uuidString.lowercased())) \(request.method) \(request.uri.path)")
        try? await service.store.touchAPIKey(id: key.id, at: service.now())
        return try await next(request, context)
    }

    static func key(_ request: Request, service: PasskeyService) async throws -> APIKey? {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") else { return nil }
        let value = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard value.hasPrefix("pkd_"), value.utf8.count <= 128 else { return nil }
        guard let key = try await service.store.apiKey(hash: Array(SHA256.hash(data: Array(value.utf8)))), key.revokedAt == nil else {
            return nil
        }
        return key
    }
}
