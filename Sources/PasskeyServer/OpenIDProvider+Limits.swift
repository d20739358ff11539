import Foundation
import HTTPTypes
import Hummingbird
import PasskeyStore

/// The OpenID provider's own abuse limits (docs/security.md), apart from the sign-in routes':
/// a page on another site that makes its visitors' browsers load `/oauth2/authorize` must not
/// spend their own address's sign-in budget, nor fill the database with pending requests.
extension OpenIDProvider {
    /// The longest value, in bytes, of each authorization request parameter passkeyd reads.
    /// A larger one is refused before anything is looked up or stored.
    static let parameterLimits: [String: Int] = [
        "client_id": 256, "redirect_uri": 2048, "state": 512, "nonce": 512, "scope": 256, "login_hint": 256,
        "code_challenge": 128, "code_challenge_method": 16, "response_type": 32, "prompt": 64, "max_age": 10, "ui_locales": 128,
    ]
    /// The whole query of an authorization request, every parameter (read or ignored) included.
    static let maxQueryBytes = 8192
    /// New pending authorization requests (waiting for a sign-in or consent) one address may
    /// make per ``requestLifetime``: as each lives one such window, at most twice this many
    /// are alive for an address at once.
    static let pendingRequestsPerAddress = 100

    /// The first parameter longer than its limit, if any.
    static func oversized(_ query: [String: String]) -> String? {
        parameterLimits.keys.sorted().first { name in query[name].map { $0.utf8.count > parameterLimits[name] ?? 0 } ?? false }
    }

    /// Counts one more pending request for the address; false past the cap.
    func admitPendingRequest(_ client: PasskeyService.Client) async throws -> Bool {
        guard service.configuration.rateLimits.enabled, let ip = client.ipAddress else { return true }
        let decision = try await service.pendingAuthorizations.hit(
            "pending:\(ip)", limit: Self.pendingRequestsPerAddress, now: service.now())
        guard decision == .allowed else {
            service.metrics.rateLimited(scope: "oidc_pending")
            return false
        }
        return true
    }
}

/// The OpenID provider's routes count against budgets of their own, never the sign-in routes'
/// (`ip:`): the browser-facing ones (`/oauth2/authorize` and the pending request the web UI
/// reads and answers) against `authorize:`, the client-facing ones (token, revocation,
/// introspection) against `oauth_client:`, each `rateLimits.perIP` a window per address.
///
/// A browser's cross-site subresource load (an `<img>`, a script, a `fetch` from another site)
/// of these routes is refused before it is counted or does anything: an authorization request
/// is a navigation (`Sec-Fetch-Mode: navigate`, RFC 6749 §3.1: the user-agent is redirected
/// there), and the pending-request routes are the web UI's own same-site calls.
struct OpenIDRateLimitMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    enum Budget: String, Sendable {
        case authorize
        case client = "oauth_client"
    }

    let service: PasskeyService
    let budget: Budget
    /// Only navigations (the authorization endpoint), else only same-site requests.
    let navigation: Bool

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if budget == .authorize, Self.isCrossSiteSubresource(request, navigation: navigation) {
            return OpenIDProvider.page(
                "Not here", "This address is for signing in to an application, in the browser's own window.", status: .badRequest)
        }
        let limits = service.configuration.rateLimits
        if limits.enabled, let ip = service.client(request, context).ipAddress,
            case .limited(let retryAfter) = try await service.limiter.hit(
                "\(budget.rawValue):\(ip)", limit: limits.perIP, now: service.now())
        {
            service.metrics.rateLimited(scope: budget.rawValue)
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
        return try await next(request, context)
    }

    /// Fetch Metadata (W3C): what a browser says about where a request comes from and what it
    /// is for. Requests without these headers (apps, servers, older browsers) pass.
    static func isCrossSiteSubresource(_ request: Request, navigation: Bool) -> Bool {
        let site = request.headers[.secFetchSite]?.lowercased()
        let mode = request.headers[.secFetchMode]?.lowercased()
        let destination = request.headers[.secFetchDest]?.lowercased()
        if navigation {
            if let mode, mode != "navigate" { return true }
            if let destination, !["document", "iframe", "frame"].contains(destination) { return true }
            return false
        }
        return site == "cross-site"
    }
}

extension HTTPField.Name {
    static let secFetchMode = HTTPField.Name("Sec-Fetch-Mode")!
    static let secFetchDest = HTTPField.Name("Sec-Fetch-Dest")!
}
