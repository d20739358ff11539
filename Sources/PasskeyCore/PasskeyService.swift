import Crypto
import Foundation
import Logging
import PasskeyStore
import Synchronization
import WebAuthn

/// The passkey ceremonies and account rules, between HTTP and the store: what the routes call.
/// It decides; the routes only translate JSON and HTTP.
public struct PasskeyService: Sendable {
    public let configuration: ServerConfiguration
    public let relyingParty: RelyingParty
    public let store: any PasskeyStore
    public let metrics: ServerMetrics
    package let limiter: RateLimiter
    /// Pending OpenID authorization requests stored per address, in windows as long as such a
    /// request lives (``openIDRequestLifetime``).
    package let pendingAuthorizations: RateLimiter
    package let capacity: CeremonyCapacity
    /// Per-address refusals held before they are sent; one for the process, like ``passwordWork``.
    package let refusalHold: RefusalHold
    package let passwordWork: BoundedWorkPool
    package let secret: CachedSecret
    package let now: @Sendable () -> Date
    package let logger: Logger
    /// Signing keys and access tokens.
    public let tokens: AccessTokens
    /// The FIDO metadata in force, and the relying party registrations are verified with.
    package let metadataState: MetadataState
    /// Mails asked for per address and per client address, in hour-long windows.
    package let mailLimiter: RateLimiter
    /// Mailed codes tried per account, in day-long windows.
    package let codeLimiter: RateLimiter
    /// Recovery requests being looked up after their answer went out (bounded).
    package let mailRequests: DetachedWork

    /// - Parameters:
    ///   - sharedLimits: keep rate-limit counts in the store (several instances on one
    ///     PostgreSQL) rather than in this process.
    ///   - metrics: the server's metrics, when this is a tenant's service (one `/metrics` for all).
    public init(
        configuration: ServerConfiguration, store: any PasskeyStore, logger: Logger = Logger(label: "passkeyd"),
        sharedLimits: Bool = false, metrics: ServerMetrics? = nil, now: @escaping @Sendable () -> Date = { Date() },
        sharingPoolsWith process: PasskeyService? = nil
    ) throws(ConfigurationError) {
        self.configuration = configuration
        self.relyingParty = try configuration.relyingParty()
        self.store = store
        self.logger = logger
        self.now = now
        self.metrics = metrics ?? ServerMetrics()
        limiter = RateLimiter(
            window: .seconds(configuration.rateLimits.windowSeconds), store: sharedLimits ? store : nil,
            maxKeys: configuration.rateLimits.maxKeys)
        pendingAuthorizations = RateLimiter(
            window: .seconds(Int64(Self.openIDRequestLifetime)), store: sharedLimits ? store : nil,
            maxKeys: configuration.rateLimits.maxKeys)
        capacity = CeremonyCapacity()
        // One password pool per process: a tenant's service shares the default one's (`process`),
        // so `passwordHashConcurrency` bounds the whole server's hashing (each scrypt hash holds
        // 128 MiB at the default cost), however many tenants a flood spreads over.
        passwordWork = process?.passwordWork ?? BoundedWorkPool(width: configuration.passwordHashConcurrency, maxWaiting: 64)
        refusalHold = process?.refusalHold ?? RefusalHold(duration: .milliseconds(configuration.rateLimits.refusalHoldMilliseconds))
        secret = CachedSecret()
        tokens = AccessTokens(store: store, configuration: configuration.tokens, issuer: configuration.issuer, now: now)
        metadataState = MetadataState(relyingParty: relyingParty)
        mailLimiter = RateLimiter(window: .seconds(3600), store: sharedLimits ? store : nil, maxKeys: configuration.rateLimits.maxKeys)
        codeLimiter = RateLimiter(window: .seconds(86_400), store: sharedLimits ? store : nil, maxKeys: configuration.rateLimits.maxKeys)
        mailRequests = DetachedWork(limit: 256)
    }

    /// How long an OpenID authorization request waits for its consent (10 minutes).
    public static let openIDRequestLifetime: TimeInterval = 600

    /// Who sent a request, for the audit log, rate limits and metrics.
    public struct Client: Sendable {
        public var ipAddress: String?
        public var userAgent: String?
        /// The W3C `traceparent` of the request's span when tracing is on: the audit lines the
        /// request writes keep it, and their webhook deliveries carry it.
        public var traceParent: String?
        /// The request's `Accept-Language` (at most 64 characters): the language of the mails
        /// it causes.
        public var language: String?
        public init(ipAddress: String? = nil, userAgent: String? = nil, traceParent: String? = nil, language: String? = nil) {
            self.ipAddress = ipAddress
            self.userAgent = userAgent
            self.traceParent = traceParent
            self.language = language.map { String($0.prefix(64)) }
        }
        package var kind: ServerMetrics.ClientKind { .classify(origin: nil, userAgent: userAgent) }
    }

    /// The address a request comes from: the TCP peer, or when the peer is a trusted proxy, the
    /// right-most `X-Forwarded-For` hop that is not one.
    public static func clientAddress(peer: String?, forwardedFor: String?, trustedProxies: [String]) -> String? {
        guard let peer, trustedProxies.contains(peer), let forwardedFor else { return peer }
        let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        for hop in hops.reversed() where !trustedProxies.contains(hop) {
            return String(hop.prefix(64))
        }
        return peer
    }

    /// `/readyz`: ready when the database answers.
    package func ready() async -> Bool {
        (try? await store.ping()) != nil
    }

    // MARK: Abuse limits

    /// The per-IP limit of the ceremony endpoints: every request counts; 429 past the limit,
    /// held a moment (``RefusalHold``) when the address was refused already in this window.
    public func limitClient(_ client: Client) async throws {
        let limits = configuration.rateLimits
        guard limits.enabled, let ip = client.ipAddress else { return }
        try await limitAddress(ip, budget: "ip", limit: limits.perIP)
    }

    /// Counts one request of the address `ip` against its `budget` (`ip`, `authorize`,
    /// `oauth_client`: each a counter of its own, `limit` a window): 429 `rate_limited` past the
    /// limit. An address refused already in this window asked again without waiting as
    /// Retry-After told it: its refusal waits ``RefusalHold/duration`` before it is sent, and
    /// its Retry-After counts the wait.
    package func limitAddress(_ ip: String, budget: String, limit: Int) async throws {
        let (decision, repeated) = try await limiter.hitNotingRepeats("\(budget):\(ip)", limit: limit, now: now())
        guard case .limited(let retryAfter) = decision else { return }
        metrics.rateLimited(scope: budget)
        guard repeated, refusalHold.duration > .zero else { throw PasskeyServiceError.rateLimited(retryAfter: retryAfter) }
        let held = await refusalHold.hold(address: ip)
        metrics.refusalHeld(held)
        let waited = held ? Int(refusalHold.duration.components.seconds) : 0
        throw PasskeyServiceError.rateLimited(retryAfter: max(1, retryAfter - waited))
    }

    /// Before a password or recovery-code check on the account `key` (its username comparison
    /// key, known or not): 429 when this address has failed too often on it; past the
    /// account-wide ceiling, a delay instead of a refusal, so the person can still get in.
    ///
    /// Every attempt is counted before the check, atomically, and handed back
    /// (``settleSecretAttempt(_:succeeded:)``) when it succeeds: so many attempts sent at once
    /// cannot all pass the limit before any failure is counted, and a person's own successful
    /// sign-ins never count against them.
    package func reserveSecretAttempt(accountKey key: String, client: Client) async throws -> SecretAttempt? {
        let limits = configuration.rateLimits
        guard limits.enabled else { return nil }
        let attempt = SecretAttempt(pair: "fail:\(key)|\(client.ipAddress ?? "-")", account: "fail:\(key)", time: now())
        if case .limited(let retryAfter) = try await limiter.hit(attempt.pair, limit: limits.perAccount, now: attempt.time) {
            metrics.rateLimited(scope: "account_address")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
        if case .limited = try await limiter.hit(attempt.account, limit: limits.perAccountTotal, now: attempt.time),
            limits.slowdownSeconds > 0
        {
            metrics.rateLimited(scope: "account_slowdown")
            try await Task.sleep(for: .seconds(limits.slowdownSeconds))
        }
        return attempt
    }

    /// A password or recovery-code attempt counted by ``reserveSecretAttempt(accountKey:client:)``.
    package struct SecretAttempt: Sendable {
        package let pair: String
        package let account: String
        package let time: Date
    }

    /// A successful attempt is handed back; a failed one stays counted.
    package func settleSecretAttempt(_ attempt: SecretAttempt?, succeeded: Bool) async {
        guard let attempt, succeeded else { return }
        do {
            try await limiter.refund(attempt.pair, now: attempt.time)
            try await limiter.refund(attempt.account, now: attempt.time)
        } catch {
            logger.warning("attempt count not handed back", metadata: ["error": "\(error)"])
        }
    }

    /// A request's signed-in account.
    public struct SignedIn: Sendable {
        public let account: Account
        public let session: SessionRecord
    }

}
