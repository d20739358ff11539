import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore

/// The OpenID provider's routes count against budgets of their own, never the sign-in routes'
/// (`ip:`): the browser-facing ones (`/oauth2/authorize` and the pending request the web UI
/// reads and answers) against `authorize:`, the client-facing ones (token, revocation,
/// introspection) against `oauth_client:`, each `rateLimits.perIP` a window per address
/// (`/oauth2/userinfo` spends `oauth_client:` on failures only: ``OpenIDFailureBudget``).
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
            return HTMLPage.response(
                OpenIDPage("Not here", "This address is for signing in to an application, in the browser's own window."),
                status: .badRequest)
        }
        let limits = service.configuration.rateLimits
        if limits.enabled, let ip = context.client.ipAddress {
            // Past the budget, 429; held a moment for an address refused already (as the
            // ceremony routes' budget: a flood of one tenant's token endpoint is its neighbours'
            // noisy neighbour too).
            try await service.limitAddress(ip, budget: budget.rawValue, limit: limits.perIP)
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

/// The client budget (`oauth_client:`) of a request's address, spent by failures only: where
/// `/oauth2/userinfo` counts. An app's backend fetching userinfo at every sign-in spends
/// nothing; guessing access tokens stops after `rateLimits.perIP` wrong ones a window. Every
/// request is checked first, so past the budget no token is looked at (a 200 among the 429s
/// would still tell a token from a guess).
struct OpenIDFailureBudget {
    let service: PasskeyService
    let key: String

    /// Nil when limits are off or the address is unknown.
    init?(_ request: Request, _ context: PasskeyRequestContext, service: PasskeyService) {
        guard service.configuration.rateLimits.enabled,
            let ip = context.client.ipAddress
        else { return nil }
        self.service = service
        key = "\(OpenIDRateLimitMiddleware.Budget.client.rawValue):\(ip)"
    }

    /// Counts this request before its token is looked at: the seconds to wait when that spent
    /// the budget (then nothing else is done), else nil. Counting first bounds concurrent
    /// guesses too: a check before the lookup and a count after it let every request in flight
    /// pass the same check. A request whose token turns out good gives its count back
    /// (``refund(at:)``), so an app fetching userinfo at every sign-in spends nothing.
    func admit(at now: Date) async throws -> Int? {
        guard
            case .limited(let retryAfter) = try await service.limiter.hit(
                key, limit: service.configuration.rateLimits.perIP, now: now)
        else { return nil }
        service.metrics.rateLimited(scope: OpenIDRateLimitMiddleware.Budget.client.rawValue)
        return retryAfter
    }

    /// Gives back the count of an admitted request whose token was good (`now`: its admission's).
    func refund(at now: Date) async throws {
        try await service.limiter.refund(key, now: now)
    }
}

extension HTTPField.Name {
    static let secFetchMode = HTTPField.Name("Sec-Fetch-Mode")!
    static let secFetchDest = HTTPField.Name("Sec-Fetch-Dest")!
}
