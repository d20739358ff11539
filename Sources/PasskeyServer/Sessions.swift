import HTTPTypes
import Hummingbird
import PasskeyCore
import WebAuthn

/// Finds the signed-in account of a request: `Authorization: Bearer <token>` (apps) or the
/// session cookie (web). Cookie-authenticated requests that change state must carry an Origin
/// header naming one of the relying party's web origins (CSRF defence; SameSite is the second).
struct SessionResolver: Sendable {
    let service: PasskeyService
    let trustedOrigins: Set<String>
    /// The session cookie's name.
    let cookieName: String

    init(service: PasskeyService, edge: EdgeConfiguration) {
        self.service = service
        trustedOrigins = edge.allowedRequestOrigins(service.configuration)
        cookieName = edge.sessionCookieName
    }

    /// The session, or nil when the request carries none. A bearer token that is not a live
    /// session is an error (the app must sign in again), not an anonymous request.
    func optional(_ request: Request) async throws -> PasskeyService.SignedIn? {
        // Other schemes (a proxy's Basic auth, say) are not ours to judge: treated as absent.
        if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            guard parts.count == 2 else { throw PasskeyServiceError.notSignedIn }
            guard let signedIn = try await service.signedIn(token: String(parts[1]).trimmingCharacters(in: .whitespaces)) else {
                throw PasskeyServiceError.notSignedIn
            }
            return signedIn
        }
        guard let cookie = request.cookies[cookieName], !cookie.value.isEmpty,
            let signedIn = try await service.signedIn(token: cookie.value)
        else { return nil }
        if request.method != .get && request.method != .head {
            guard let origin = request.headers[.origin], trustedOrigins.contains(origin) else { throw APIError.csrf }
        }
        return signedIn
    }
}
