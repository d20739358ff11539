import Foundation
import WebAuthn
import X509

/// The domain's settings: the relying party, its policies, limits, tokens, webhooks and the
/// console. Read from `passkeyd.json` and `PASSKEYD_*` variables with ``init(reader:defaultOrigin:readFile:)``
/// (every range checked there); a configuration built in code is taken as given, apart from the
/// formats ``relyingParty()`` checks. The HTTP edge's own settings (cookies, body size,
/// connections, CORS, files, metrics access, proxies) are PasskeyServer's `EdgeConfiguration`.
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

        /// `events` may be left out: every kind.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            url = try container.decode(String.self, forKey: .url)
            secret = try container.decode(String.self, forKey: .secret)
            events = try container.decodeIfPresent([String].self, forKey: .events) ?? ["*"]
        }
    }

    public var tokens = Tokens()
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
    /// Most ceremonies open at once; past it, new options requests get 503 until some expire.
    public var maxOpenChallenges: Int
    /// `/.well-known/passkey-endpoints`: where people enroll and manage passkeys.
    public var enrollURL: String?
    public var manageURL: String?
    public var rateLimits: RateLimits
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
    /// Mail: addresses, recovery by mail, security notices (docs/email.md).
    public var email = Email()

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

    /// The scrypt parameters of new password hashes.
    package var passwordScrypt: PasswordHash.Scrypt.Parameters { .init(logN: passwordScryptCost) }

    public init(
        rpID: String = "localhost", rpName: String = "passkeyd", webOrigins: [String] = ["http://localhost:8080"],
        androidApps: [AndroidApp] = [], appleAppIDs: [String] = [], relatedOrigins: [String] = [],
        userVerification: UserVerificationRequirement = .required, attestation: AttestationConveyancePreference = .none,
        attestationPolicy: AttestationPolicy = AttestationPolicy(), signCountPolicy: SignCountPolicy = .reject,
        challengeLifetime: Duration = .seconds(300), sessionLifetime: Duration = .seconds(14 * 24 * 3600),
        maxOpenChallenges: Int = 100_000, enrollURL: String? = nil, manageURL: String? = nil,
        rateLimits: RateLimits = RateLimits(), reauthenticationWindow: Duration = .seconds(300),
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
        self.maxOpenChallenges = maxOpenChallenges
        self.enrollURL = enrollURL
        self.manageURL = manageURL
        self.rateLimits = rateLimits
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
        // A browser sends its origin serialized (lowercase, no default port, no path): any other
        // spelling would never match a ceremony's clientDataJSON, so it stops the start instead.
        for origin in webOrigins + relatedOrigins where !Self.isOrigin(origin) {
            throw ConfigurationError(
                setting: webOrigins.contains(origin) ? "origins" : "relatedOrigins",
                problem:
                    "\"\(origin)\" is not a serialized origin (http(s)://host[:port] in lowercase, as a browser sends it: no path, trailing slash, wildcard, user info, query, fragment or default port)"
            )
        }
        for app in androidApps where app.packageName.isEmpty || app.sha256CertFingerprints.isEmpty {
            throw ConfigurationError(
                setting: "androidApps", problem: "each app needs a packageName and at least one sha256CertFingerprints entry")
        }
        guard ["ES256", "EdDSA", "RS256"].contains(tokens.algorithm) else {
            throw ConfigurationError(setting: "tokens.algorithm", problem: "must be ES256, EdDSA or RS256")
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
        if let hint = hints.first(where: { !Self.knownHints.contains($0) }) ?? (Set(hints).count == hints.count ? nil : "a repeated hint") {
            throw ConfigurationError(
                setting: "hints", problem: "\"\(hint)\" is not security-key, client-device or hybrid (each at most once)")
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
