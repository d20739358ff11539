import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyModels
import WebAuthn

/// A server calling passkeyd with an API key (`Authorization: Bearer pkd_…`).
public struct APIKeyCaller: Sendable {
    public let key: APIKey
}

/// Admits requests with a live API key holding `scope` (``PasskeyService/admitAPIKey``): 401
/// `invalid_api_key` without one, 403 `insufficient_scope` with a key that lacks it, 429 past
/// `apiKeyRequestsPerWindow` for the key.
struct APIKeyMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let service: PasskeyService
    let scope: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let key = try await service.admitAPIKey(
            authorization: request.headers[.authorization], scope: scope, client: context.client,
            action: "\(request.method) \(request.uri.path)")
        var context = context
        context.apiKey = APIKeyCaller(key: key)
        return try await next(request, context)
    }
}
