import Foundation

/// The OpenID provider's own abuse limits (docs/security.md), apart from the sign-in routes':
/// a page on another site that makes its visitors' browsers load `/oauth2/authorize` must not
/// fill the database with pending requests. (The per-address budgets of its routes are the
/// edge's `OpenIDRateLimitMiddleware`.)
extension OpenIDService {
    /// The longest value, in bytes, of each authorization request parameter passkeyd reads.
    /// A larger one is refused before anything is looked up or stored.
    public static let parameterLimits: [String: Int] = [
        "client_id": 256, "redirect_uri": 2048, "state": 512, "nonce": 512, "scope": 256, "login_hint": 256,
        "code_challenge": 128, "code_challenge_method": 16, "response_type": 32, "prompt": 64, "max_age": 10, "ui_locales": 128,
    ]
    /// The whole query of an authorization request, every parameter (read or ignored) included.
    public static let maxQueryBytes = 8192
    /// New pending authorization requests (waiting for a sign-in or consent) one address may
    /// make per ``requestLifetime``: as each lives one such window, at most twice this many
    /// are alive for an address at once.
    public static let pendingRequestsPerAddress = 100

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
