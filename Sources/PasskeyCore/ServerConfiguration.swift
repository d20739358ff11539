import Foundation
import WebAuthn
import X509

/// Everything `passkeyd serve` needs, validated. Built by the executable from `passkeyd.json`
/// and the environment; libraries never read either.
public struct ServerConfiguration: Sendable {
    /// An Android app allowed to use the relying party: its package name and the SHA-256
    /// fingerprints of its signing certificates, in the `AA:BB:…` form `keytool -list -v` prints.
    public struct AndroidApp: Sendable, Hashable, Codable {
        public var packageName: String
        public var sha256CertFingerprints: [String]
        public init(packageName: String, sha256CertFingerprints: [String]) {
            self.packageName = packageName
            self.sha256CertFingerprints = sha256CertFingerprints
        }
    }

    public enum SameSite: String, Sendable, Codable {
        case lax = "Lax"
        case strict = "Strict"
    }

    /// A webhook endpoint named in the configuration file (others are added with
    /// `passkeyd admin webhooks add`).
    public struct Webhook: Sendable, Hashable, Codable {
        public var url: String
        /// The signing secret (`whsec_…` base64, or any text of 24 bytes or more).
        public var secret: String
        /// Audit kinds to deliver; empty or `["*"]`: all.
        public var events: [String]
        public init(url: String, secret: String, events: [String] = ["*"]) {
            self.url = url
            self.secret = secret
            self.events = events
        }
    }

    public var tokens = Tokens()
    /// Origins of single-page apps allowed to call the API from the browser (CORS, with
    /// credentials). Never `*`.
    public var corsOrigins: [String] = []
    public var webhooks: [Webhook] = []
    /// Lets webhooks reach loopback, private, link-local and other inside addresses, and use plain
    /// `http` (`webhookAllowPrivateAddresses`, `PASSKEYD_WEBHOOK_ALLOW_PRIVATE=1`): for local
    /// development, tests, and receivers on the operator's own network. Off: only https to
    /// public addresses (docs/security.md, "Webhooks").
    public var webhookAllowPrivateAddresses = false
    /// The rule every outgoing request is held to.
    public var webhookPolicy: OutboundURLPolicy { OutboundURLPolicy(allowsPrivateAddresses: webhookAllowPrivateAddresses) }
    /// Requests per API key per rate-limit window.
    public var apiKeyRequestsPerWindow = 6000
    /// How long an OpenID Connect refresh token lives (never past the session it stands on).
    public var oidcRefreshTokenSeconds = 30 * 86_400
    /// Roots a FIDO metadata BLOB (MDS3) must chain to (`mdsRootCertificate`): the stored BLOB
    /// is verified against them when loaded. Empty: no metadata is used.
    public var mdsRootCertificates: [Certificate] = []

    /// `iss` of access tokens.
    public var issuer: String { tokens.issuer ?? webOrigins.first ?? "http://localhost:8080" }

    /// Origins whose browser requests may change state or sign in: the web origins, related
    /// origins and CORS origins.
    public var allowedRequestOrigins: Set<String> { Set(webOrigins + relatedOrigins + corsOrigins) }

    public var rpID: String
    public var rpName: String
    /// Web origins allowed in clientDataJSON (Android app origins are derived from `androidApps`).
    public var webOrigins: [String]
    public var androidApps: [AndroidApp]
    /// `TEAMID.bundle.id` of iOS apps, for apple-app-site-association.
    public var appleAppIDs: [String]
    /// Origins served in `/.well-known/webauthn` (WebAuthn related origin requests).
    public var relatedOrigins: [String]
    public var userVerification: UserVerificationRequirement
    /// What a person whose authenticator the policy refused is told: which ones are accepted.
    public var acceptedAuthenticatorsMessage: String {
        let policy = attestationPolicy
        var parts: [String] = []
        if let allowed = policy.allowedAAGUIDs {
            let names = allowed.map { $0.providerName ?? $0.description }.sorted()
            parts.append("This site accepts passkeys from: \(names.joined(separator: ", ")).")
        } else {
            parts.append("This kind of authenticator is not accepted here.")
        }
        if policy.requireDeviceBound {
            parts.append("Only passkeys that stay on one device (such as a security key) are accepted; synced passkeys are not.")
        }
        return parts.joined(separator: " ")
    }

    /// The user verification registration asks for; `nil`: ``userVerification``.
    public var registrationUserVerification: UserVerificationRequirement?
    /// The user verification sign-in asks for; `nil`: ``userVerification``.
    public var authenticationUserVerification: UserVerificationRequirement?
    public var attestation: AttestationConveyancePreference
    public var attestationPolicy: AttestationPolicy
    public var signCountPolicy: SignCountPolicy
    public var challengeLifetime: Duration
    public var sessionLifetime: Duration
    public var cookieName: String
    public var cookieSecure: Bool
    public var cookieSameSite: SameSite
    /// Largest request body accepted, in bytes.
    public var maxBodySize: Int
    /// Most ceremonies open at once; past it, new options requests get 503 until some expire.
    public var maxOpenChallenges: Int
    /// `/.well-known/passkey-endpoints`: where people enroll and manage passkeys.
    public var enrollURL: String?
    public var manageURL: String?
    /// Folder of the web UI, served at `/` (nil: no UI).
    public var publicDirectory: String?
    /// Serve `/signup`, `/makeCredential`, `/authenticate` for apps written against the
    /// reference Vapor passkey server (see docs/ios.md, docs/android.md).
    public var compatibilityRoutes: Bool
    public var rateLimits: RateLimits
    /// Addresses of reverse proxies whose `X-Forwarded-For` is believed (the client address for
    /// rate limits and the audit log). Empty: the TCP peer is the client.
    public var trustedProxies: [String]
    /// When set, `/metrics` answers only `Authorization: Bearer <metricsToken>`.
    public var metricsToken: String?
    /// Serve `/metrics` to anyone (behind a proxy that keeps it internal). Without this or a
    /// token, `/metrics` answers 404: closed by default.
    public var metricsPublic: Bool
    public var connections: Connections
    /// Adding a passkey, removing the last-but-one way in, new recovery codes and a password
    /// change need a sign-in at most this long ago (else 403 `reauthentication_required`).
    public var reauthenticationWindow: Duration
    /// `hints` sent in every options answer (§5.8.7: `security-key`, `client-device`, `hybrid`,
    /// most preferred first), unless a request names its own.
    public var hints: [String]
    /// Password checks and hashes run at most this many at once, off the request threads; up to
    /// 64 more wait, past that a password request answers 503 `busy`.
    public var passwordHashConcurrency: Int
    /// scrypt's cost for new password hashes: log2 of N (r = 8, p = 1). 17 (OWASP's
    /// recommendation) takes 128 MiB and ~0.2–0.5 s per hash; each step up doubles both. Stored
    /// hashes keep their own parameters and are rehashed at their next sign-in when weaker.
    /// Unknown usernames check a decoy hash at this cost, so they take as long as real ones.
    public var passwordScryptCost: Int

    /// The WebAuthn extensions asked for by default, and their limits.
    public var extensions = Extensions()

    /// The operator's console at `/admin` (docs/admin.md).
    public var console = Console()

    /// The operator's console: its sessions, the step-up window of its changes, the bootstrap
    /// link's life and its rate limit.
    public struct Console: Sendable, Hashable {
        /// Serve `/admin/api` (the console's static pages are files of the public directory).
        public var enabled: Bool
        /// A console session ends after this long without a request.
        public var idleTimeout: Duration
        /// … and this long after its sign-in, whatever its use.
        public var sessionLifetime: Duration
        /// Every change needs a passkey verification at most this long ago.
        public var stepUpWindow: Duration
        /// How long a bootstrap link printed at start stays usable.
        public var bootstrapLifetime: Duration
        /// Console requests per administrator, and per address, in each rate-limit window.
        public var requestsPerWindow: Int

        public init(
            enabled: Bool = true, idleTimeout: Duration = .seconds(900), sessionLifetime: Duration = .seconds(8 * 3600),
            stepUpWindow: Duration = .seconds(300), bootstrapLifetime: Duration = .seconds(3600), requestsPerWindow: Int = 600
        ) {
            self.enabled = enabled
            self.idleTimeout = idleTimeout
            self.sessionLifetime = sessionLifetime
            self.stepUpWindow = stepUpWindow
            self.bootstrapLifetime = bootstrapLifetime
            self.requestsPerWindow = requestsPerWindow
        }
    }

    /// The console session cookie's name: `__Host-passkeyd_admin` when cookies are `Secure`.
    public var consoleCookieName: String { cookieSecure ? "__Host-passkeyd_admin" : "passkeyd_admin" }

    /// The scrypt parameters of new password hashes.
    package var passwordScrypt: PasswordHash.Scrypt.Parameters { .init(logN: passwordScryptCost) }

    public init(
        rpID: String = "localhost", rpName: String = "passkeyd", webOrigins: [String] = ["http://localhost:8080"],
        androidApps: [AndroidApp] = [], appleAppIDs: [String] = [], relatedOrigins: [String] = [],
        userVerification: UserVerificationRequirement = .required, attestation: AttestationConveyancePreference = .none,
        attestationPolicy: AttestationPolicy = AttestationPolicy(), signCountPolicy: SignCountPolicy = .reject,
        challengeLifetime: Duration = .seconds(300), sessionLifetime: Duration = .seconds(14 * 24 * 3600),
        cookieName: String = "passkeyd_session", cookieSecure: Bool? = nil, cookieSameSite: SameSite = .lax,
        maxBodySize: Int = 64 * 1024, maxOpenChallenges: Int = 100_000, enrollURL: String? = nil, manageURL: String? = nil,
        publicDirectory: String? = nil, compatibilityRoutes: Bool = true, rateLimits: RateLimits = RateLimits(),
        trustedProxies: [String] = [], metricsToken: String? = nil, metricsPublic: Bool = false,
        connections: Connections = Connections(), reauthenticationWindow: Duration = .seconds(300),
        passwordHashConcurrency: Int? = nil, hints: [String] = [], passwordScryptCost: Int = 17
    ) {
        self.passwordScryptCost = passwordScryptCost
        self.rpID = rpID
        self.rpName = rpName
        self.webOrigins = webOrigins
        self.androidApps = androidApps
        self.appleAppIDs = appleAppIDs
        self.relatedOrigins = relatedOrigins
        self.userVerification = userVerification
        self.attestation = attestation
        self.attestationPolicy = attestationPolicy
        self.signCountPolicy = signCountPolicy
        self.challengeLifetime = challengeLifetime
        self.sessionLifetime = sessionLifetime
        self.cookieName = cookieName
        // Secure cookies unless every web origin is plain-http development.
        self.cookieSecure = cookieSecure ?? !webOrigins.allSatisfy { $0.hasPrefix("http://") }
        self.cookieSameSite = cookieSameSite
        self.maxBodySize = maxBodySize
        self.maxOpenChallenges = maxOpenChallenges
        self.enrollURL = enrollURL
        self.manageURL = manageURL
        self.publicDirectory = publicDirectory
        self.compatibilityRoutes = compatibilityRoutes
        self.rateLimits = rateLimits
        self.trustedProxies = trustedProxies
        self.metricsToken = metricsToken
        self.metricsPublic = metricsPublic
        self.connections = connections
        self.reauthenticationWindow = reauthenticationWindow
        self.passwordHashConcurrency = passwordHashConcurrency ?? max(1, ProcessInfo.processInfo.activeProcessorCount / 2)
        self.hints = hints
    }

    /// A serialized origin, as a browser sends it in `Origin` (HTML's ASCII serialization):
    /// `http://` or `https://`, a valid host (``URLAuthority``: no wildcard, no user info), a port
    /// other than the scheme's default or none, all in lowercase, and nothing after it (no path,
    /// query or fragment). Never `null`, which sandboxed and file pages send.
    package static func isOrigin(_ text: String) -> Bool {
        guard let scheme = ["https", "http"].first(where: { text.hasPrefix($0 + "://") }), text == text.lowercased() else { return false }
        let authority = text.dropFirst(scheme.count + 3)
        guard !authority.contains(where: { "/?#@\\".contains($0) }), let parsed = URLAuthority(authority) else { return false }
        return parsed.port != (scheme == "https" ? 443 : 80)
    }

    /// The hint values of WebAuthn Level 3 §5.8.7.
    public static let knownHints: Set<String> = ["security-key", "client-device", "hybrid"]

    /// The session cookie's name: `__Host-<cookieName>` when cookies are `Secure` (the browser
    /// then refuses it unless it is Secure, host-only and for `/`), else `cookieName`.
    public var sessionCookieName: String { cookieSecure ? "__Host-" + cookieName : cookieName }

    /// `android:apk-key-hash:<base64url SHA-256>` for every configured fingerprint.
    public func androidOrigins() throws(ConfigurationError) -> [String] {
        var origins: [String] = []
        for app in androidApps {
            for fingerprint in app.sha256CertFingerprints {
                origins.append(
                    "android:apk-key-hash:" + Base64URLBytes(try Self.fingerprintBytes(fingerprint, app: app.packageName)).base64URL)
            }
        }
        return origins
    }

    /// Parses `AB:CD:…` (32 bytes; colons optional, either case).
    public static func fingerprintBytes(_ text: String, app: String) throws(ConfigurationError) -> [UInt8] {
        let hex = text.replacingOccurrences(of: ":", with: "")
        var bytes: [UInt8] = []
        var iterator = hex.makeIterator()
        while let high = iterator.next() {
            guard let low = iterator.next(), let h = high.hexDigitValue, let l = low.hexDigitValue else {
                throw ConfigurationError(setting: "androidApps[\(app)].sha256CertFingerprints", problem: "\"\(text)\" is not hexadecimal")
            }
            bytes.append(UInt8(h << 4 | l))
        }
        guard bytes.count == 32 else {
            throw ConfigurationError(
                setting: "androidApps[\(app)].sha256CertFingerprints",
                problem: "\"\(text)\" is not a SHA-256 fingerprint (32 bytes, AA:BB:… as keytool prints it)")
        }
        return bytes
    }

    /// The relying party this configuration describes, validated.
    public func relyingParty() throws(ConfigurationError) -> RelyingParty {
        for appID in appleAppIDs {
            let parts = appID.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, parts[0].count == 10, parts[0].allSatisfy({ $0.isUppercase || $0.isNumber }) else {
                throw ConfigurationError(
                    setting: "appleAppIDs", problem: "\"\(appID)\" is not TEAMID.bundle.id (a 10-character team ID, a dot, the bundle ID)")
            }
        }
        for app in androidApps where app.packageName.isEmpty || app.sha256CertFingerprints.isEmpty {
            throw ConfigurationError(
                setting: "androidApps", problem: "each app needs a packageName and at least one sha256CertFingerprints entry")
        }
        guard sessionLifetime >= .seconds(60) else {
            throw ConfigurationError(setting: "sessionLifetime", problem: "must be at least 60 seconds")
        }
        guard maxBodySize >= 4096, maxBodySize <= 16 * 1024 * 1024 else {
            throw ConfigurationError(setting: "maxBodySize", problem: "must be between 4096 and 16777216 bytes")
        }
        guard (30...3600).contains(tokens.lifetimeSeconds) else {
            throw ConfigurationError(setting: "tokens.lifetimeSeconds", problem: "must be 30...3600")
        }
        guard ["ES256", "EdDSA", "RS256"].contains(tokens.algorithm) else {
            throw ConfigurationError(setting: "tokens.algorithm", problem: "must be ES256, EdDSA or RS256")
        }
        guard (0...86_400).contains(tokens.publishSeconds), (60...86_400).contains(tokens.registrationTokenSeconds) else {
            throw ConfigurationError(setting: "tokens", problem: "publishSeconds must be 0...86400, registrationTokenSeconds 60...86400")
        }
        for origin in corsOrigins where !Self.isOrigin(origin) {
            throw ConfigurationError(
                setting: "corsOrigins",
                problem:
                    "\"\(origin)\" is not a serialized origin (http(s)://host[:port] in lowercase, as a browser sends it: no wildcard, path, user info, query, fragment or default port; never * or null)"
            )
        }
        for hook in webhooks {
            do {
                _ = try webhookPolicy.check(url: hook.url)
            } catch {
                throw ConfigurationError(setting: "webhooks", problem: "\"\(hook.url)\": \(error.description)")
            }
            guard hook.secret.utf8.count >= 24 else {
                throw ConfigurationError(setting: "webhooks", problem: "the secret of \(hook.url) must have at least 24 bytes")
            }
        }
        guard apiKeyRequestsPerWindow >= 1 else {
            throw ConfigurationError(setting: "apiKeyRequestsPerWindow", problem: "must be at least 1")
        }
        guard (10...20).contains(passwordScryptCost) else {
            throw ConfigurationError(setting: "passwordScryptCost", problem: "must be 10...20")
        }
        guard (1...65_536).contains(extensions.largeBlobMaxBytes) else {
            throw ConfigurationError(setting: "extensions.largeBlobMaxBytes", problem: "must be 1...65536")
        }
        guard rateLimits.windowSeconds >= 1, rateLimits.perIP >= 1, rateLimits.perAccount >= 1, rateLimits.perAccountTotal >= 1,
            rateLimits.slowdownSeconds >= 0, rateLimits.slowdownSeconds <= 60, rateLimits.maxKeys >= 1000,
            rateLimits.perIP <= 100_000_000
        else {
            throw ConfigurationError(
                setting: "rateLimits",
                problem:
                    "windowSeconds, perIP, perAccount and perAccountTotal must be at least 1 (perIP at most 100000000), slowdownSeconds 0...60, maxKeys at least 1000"
            )
        }

        guard connections.maxConnections >= 1, connections.maxConnectionsPerAddress >= 1, connections.headerTimeoutSeconds >= 1,
            connections.bodyTimeoutSeconds >= 1, connections.idleTimeoutSeconds >= 1
        else {
            throw ConfigurationError(setting: "connections", problem: "every limit and timeout must be at least 1")
        }
        guard reauthenticationWindow >= .seconds(10) else {
            throw ConfigurationError(setting: "reauthenticationSeconds", problem: "must be at least 10 seconds")
        }
        if let hint = hints.first(where: { !Self.knownHints.contains($0) }) ?? (Set(hints).count == hints.count ? nil : "a repeated hint") {
            throw ConfigurationError(
                setting: "hints", problem: "\"\(hint)\" is not security-key, client-device or hybrid (each at most once)")
        }
        guard (1...64).contains(passwordHashConcurrency) else {
            throw ConfigurationError(setting: "passwordHashConcurrency", problem: "must be 1...64")
        }
        guard !cookieName.isEmpty, cookieName.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
            throw ConfigurationError(setting: "cookieName", problem: "must be letters, digits, _ or -")
        }
        let origins = webOrigins + relatedOrigins.filter { !webOrigins.contains($0) } + (try androidOrigins())
        do {
            return try RelyingParty(
                .init(
                    rpID: rpID, rpName: rpName, origins: origins, userVerification: userVerification,
                    attestation: attestation, attestationPolicy: attestationPolicy, timeout: challengeLifetime,
                    signCountPolicy: signCountPolicy))
        } catch {
            let setting =
                error.reason.hasPrefix("rpID")
                ? "rpID"
                : error.reason.hasPrefix("origin") ? "origins" : error.reason.hasPrefix("timeout") ? "challengeLifetime" : "relying party"
            throw ConfigurationError(setting: setting, problem: error.reason)
        }
    }
}

/// A configuration value that cannot be used: names the setting and what is wrong.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    public let setting: String
    public let problem: String
    public init(setting: String, problem: String) {
        self.setting = setting
        self.problem = problem
    }
    public var description: String { "configuration error: \(setting): \(problem)" }
}
