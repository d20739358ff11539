import Configuration
import Foundation
import WebAuthn
import X509

/// The domain's settings, each read once here: its key in `passkeyd.json`, its `PASSKEYD_*`
/// variable, its range and default. The edge's own settings (cookies, body size, connections,
/// CORS…) are read by `EdgeConfiguration` in PasskeyServer; README.md's table lists them all.
extension ServerConfiguration {
    /// Reads every domain setting from `reader`, checking each range.
    /// - Parameters:
    ///   - defaultOrigin: the web origin when none is set (the listener's own, in development).
    ///   - readFile: reads the PEM files some settings name (trust anchors, the MDS root).
    public init(
        reader: ConfigReader, defaultOrigin: String = "http://localhost:8080",
        readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(ConfigurationError) {
        let mdsRootPath = try reader.text("mdsRootCertificate", env: "PASSKEYD_MDS_ROOT_CERTIFICATE")
        self.init(
            rpID: try reader.text("rpID", env: "PASSKEYD_RP_ID") ?? "localhost",
            rpName: try reader.text("rpName", env: "PASSKEYD_RP_NAME") ?? "passkeyd",
            webOrigins: try reader.list("origins", env: "PASSKEYD_ORIGINS") ?? [defaultOrigin],
            androidApps: try Self.androidApps(reader),
            appleAppIDs: try reader.list("appleAppIDs", env: "PASSKEYD_APPLE_APP_IDS") ?? [],
            relatedOrigins: try reader.list("relatedOrigins", env: "PASSKEYD_RELATED_ORIGINS") ?? [],
            userVerification: try reader.choice("userVerification", env: "PASSKEYD_USER_VERIFICATION", as: UserVerificationRequirement.self)
                ?? .required,
            attestation: try reader.choice("attestation", env: "PASSKEYD_ATTESTATION", as: AttestationConveyancePreference.self)
                ?? .none,
            attestationPolicy: try Self.attestationPolicy(reader, hasMetadataRoot: mdsRootPath != nil, readFile: readFile),
            signCountPolicy: try reader.choice("signCountPolicy", env: "PASSKEYD_SIGN_COUNT_POLICY", as: SignCountPolicy.self) ?? .reject,
            challengeLifetime: try reader.seconds("challengeLifetimeSeconds", env: "PASSKEYD_CHALLENGE_LIFETIME", in: 10...86_400)
                ?? .seconds(300),
            sessionLifetime: try reader.seconds("sessionLifetimeSeconds", env: "PASSKEYD_SESSION_LIFETIME", in: 60...31_536_000)
                ?? .seconds(14 * 86_400),
            maxOpenChallenges: try reader.number("maxOpenChallenges", env: "PASSKEYD_MAX_OPEN_CHALLENGES", in: 10...100_000_000)
                ?? 100_000,
            enrollURL: try reader.text("enrollURL", env: "PASSKEYD_ENROLL_URL"),
            manageURL: try reader.text("manageURL", env: "PASSKEYD_MANAGE_URL"),
            rateLimits: try RateLimits(reader: reader),
            reauthenticationWindow: try reader.seconds("reauthenticationSeconds", env: "PASSKEYD_REAUTHENTICATION_SECONDS", in: 10...86_400)
                ?? .seconds(300),
            passwordHashConcurrency: try reader.number(
                "passwordHashConcurrency", env: "PASSKEYD_PASSWORD_HASH_CONCURRENCY", in: 1...64),
            hints: try reader.list("hints", env: "PASSKEYD_HINTS") ?? [],
            passwordScryptCost: try reader.number("passwordScryptCost", env: "PASSKEYD_PASSWORD_SCRYPT_COST", in: 10...20) ?? 17)
        // The bcrypt cost of versions before scrypt: accepted and ignored, so files that set it
        // still load (new hashes are scrypt at `passwordScryptCost`).
        _ = try reader.number("passwordHashCost", env: nil, in: 4...31)
        registrationUserVerification = try reader.choice(
            "registrationUserVerification", env: "PASSKEYD_REGISTRATION_USER_VERIFICATION", as: UserVerificationRequirement.self)
        authenticationUserVerification = try reader.choice(
            "authenticationUserVerification", env: "PASSKEYD_AUTHENTICATION_USER_VERIFICATION", as: UserVerificationRequirement.self)
        extensions = try Extensions(reader: reader)
        console = try Console(reader: reader)
        tokens = try Tokens(reader: reader)
        email = try Email(reader: reader, readFile: readFile)
        webhooks = try reader.decoded("webhooks", env: nil, secret: true, as: [Webhook].self) ?? []
        webhookAllowPrivateAddresses = try reader.flag("webhookAllowPrivateAddresses", env: "PASSKEYD_WEBHOOK_ALLOW_PRIVATE") ?? false
        apiKeyRequestsPerWindow =
            try reader.number("apiKeyRequestsPerWindow", env: "PASSKEYD_API_KEY_REQUESTS_PER_WINDOW", in: 1...100_000_000) ?? 6000
        oidcRefreshTokenSeconds =
            try reader.number("oidcRefreshTokenSeconds", env: "PASSKEYD_OIDC_REFRESH_TOKEN_SECONDS", in: 60...31_536_000) ?? 30 * 86_400
        if let mdsRootPath { mdsRootCertificates = try Self.mdsRoots(path: mdsRootPath, readFile: readFile) }
        // The formats no range can say (app IDs, fingerprints, origins, hints, webhooks).
        _ = try relyingParty()
    }

    /// `androidApps`: a list of `{packageName, sha256CertFingerprints}` in the file, or
    /// `package=AA:BB:…|CC:DD:…;other.package=…` in `PASSKEYD_ANDROID_APPS`.
    static func androidApps(_ reader: ConfigReader) throws(ConfigurationError) -> [AndroidApp] {
        guard let bytes = try reader.structured("androidApps", env: "PASSKEYD_ANDROID_APPS") else { return [] }
        let text = String(decoding: bytes, as: UTF8.self)
        if text.trimmingCharacters(in: .whitespaces).hasPrefix("[") {
            return try reader.decoded("androidApps", env: "PASSKEYD_ANDROID_APPS", as: [AndroidApp].self) ?? []
        }
        var apps: [AndroidApp] = []
        for entry in text.split(separator: ";") {
            let parts = entry.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else {
                throw ConfigurationError(
                    setting: "androidApps (PASSKEYD_ANDROID_APPS)", problem: "use package=AA:BB:…|CC:DD:…;other.package=…")
            }
            apps.append(
                AndroidApp(
                    packageName: parts[0].trimmingCharacters(in: .whitespaces),
                    sha256CertFingerprints: parts[1].split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }))
        }
        return apps
    }

    /// Attestation trust and the authenticator policy (docs/policy.md).
    static func attestationPolicy(_ reader: ConfigReader, hasMetadataRoot: Bool, readFile: (String) -> Data?)
        throws(ConfigurationError) -> AttestationPolicy
    {
        var policy = AttestationPolicy()
        for path in try reader.list("attestationTrustAnchors", env: "PASSKEYD_ATTESTATION_TRUST_ANCHORS") ?? [] {
            guard let pem = readFile(path) else {
                throw ConfigurationError(setting: "attestationTrustAnchors", problem: "cannot read \(path)")
            }
            do {
                policy.trustAnchors += try AttestationPolicy.certificates(pem: String(decoding: pem, as: UTF8.self))
            } catch {
                throw ConfigurationError(setting: "attestationTrustAnchors", problem: "\(path): \(error.reason)")
            }
        }
        policy.requireTrustedAttestation =
            try reader.flag("requireTrustedAttestation", env: "PASSKEYD_REQUIRE_TRUSTED_ATTESTATION") ?? false
        // FIDO metadata brings trust anchors of its own (each entry's attestation roots).
        if policy.requireTrustedAttestation && policy.trustAnchors.isEmpty && !hasMetadataRoot {
            throw ConfigurationError(setting: "requireTrustedAttestation", problem: "needs attestationTrustAnchors or mdsRootCertificate")
        }
        policy.allowSHA1Attestation = try reader.flag("allowSHA1Attestation", env: "PASSKEYD_ALLOW_SHA1_ATTESTATION") ?? true
        policy.requireSafetyNetCTSProfileMatch =
            try reader.flag("requireSafetyNetCTSProfileMatch", env: "PASSKEYD_REQUIRE_SAFETYNET_CTS_PROFILE_MATCH") ?? true
        policy.requireDeviceBound = try reader.flag("requireDeviceBound", env: "PASSKEYD_REQUIRE_DEVICE_BOUND") ?? false
        func aaguids(_ key: String, _ environment: String) throws(ConfigurationError) -> Set<AAGUID>? {
            guard let texts = try reader.list(key, env: environment) else { return nil }
            var out: Set<AAGUID> = []
            for text in texts {
                guard let aaguid = AAGUID(text) else {
                    throw ConfigurationError(setting: key, problem: "\"\(text)\" is not an AAGUID (8-4-4-4-12 hexadecimal)")
                }
                out.insert(aaguid)
            }
            return out
        }
        policy.allowedAAGUIDs = try aaguids("allowedAAGUIDs", "PASSKEYD_ALLOWED_AAGUIDS")
        policy.deniedAAGUIDs = try aaguids("deniedAAGUIDs", "PASSKEYD_DENIED_AAGUIDS") ?? []
        if policy.allowedAAGUIDs?.isEmpty == true {
            throw ConfigurationError(
                setting: "allowedAAGUIDs", problem: "is empty: nobody could register (leave it out to allow every model)")
        }
        return policy
    }

    /// The FIDO Metadata Service root(s) in a PEM file (`mdsRootCertificate`, `passkeyd mds --root`).
    public static func mdsRoots(
        path: String, readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(ConfigurationError) -> [Certificate] {
        guard let pem = readFile(path) else {
            throw ConfigurationError(setting: "mdsRootCertificate", problem: "cannot read \(path)")
        }
        do throws(WebAuthnError) {
            let roots = try AttestationPolicy.certificates(pem: String(decoding: pem, as: UTF8.self))
            guard !roots.isEmpty else { throw WebAuthnError(.invalidConfiguration, "no certificate in it") }
            return roots
        } catch {
            throw ConfigurationError(setting: "mdsRootCertificate", problem: "\(path): \(error.reason)")
        }
    }
}

extension ServerConfiguration.RateLimits {
    /// `rateLimits.*` and `PASSKEYD_RATE_LIMIT*`.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        let defaults = Self()
        self.init(
            enabled: try reader.flag("rateLimits.enabled", env: "PASSKEYD_RATE_LIMITS") ?? defaults.enabled,
            windowSeconds: try reader.number("rateLimits.windowSeconds", env: "PASSKEYD_RATE_LIMIT_WINDOW", in: 1...86_400)
                ?? defaults.windowSeconds,
            perIP: try reader.number("rateLimits.perIP", env: "PASSKEYD_RATE_LIMIT_PER_IP", in: 1...100_000_000) ?? defaults.perIP,
            perAccount: try reader.number("rateLimits.perAccount", env: "PASSKEYD_RATE_LIMIT_PER_ACCOUNT", in: 1...10_000_000)
                ?? defaults.perAccount,
            perAccountTotal: try reader.number(
                "rateLimits.perAccountTotal", env: "PASSKEYD_RATE_LIMIT_PER_ACCOUNT_TOTAL", in: 1...10_000_000)
                ?? defaults.perAccountTotal,
            slowdownSeconds: try reader.number("rateLimits.slowdownSeconds", env: "PASSKEYD_RATE_LIMIT_SLOWDOWN", in: 0...60)
                ?? defaults.slowdownSeconds,
            maxKeys: try reader.number("rateLimits.maxKeys", env: "PASSKEYD_RATE_LIMIT_MAX_KEYS", in: 1000...100_000_000)
                ?? defaults.maxKeys,
            refusalHoldMilliseconds: try reader.number(
                "rateLimits.refusalHoldMilliseconds", env: "PASSKEYD_RATE_LIMIT_REFUSAL_HOLD_MS", in: 0...10_000)
                ?? defaults.refusalHoldMilliseconds)
    }
}

extension ServerConfiguration.Extensions {
    /// `extensions.*` and `PASSKEYD_PRF`, `PASSKEYD_CREDENTIAL_PROTECTION…`,
    /// `PASSKEYD_MIN_PIN_LENGTH`, `PASSKEYD_LARGE_BLOB_MAX_BYTES`.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        let defaults = Self()
        // credProtect by level (1, 2, 3), by policy name, or `none`.
        var protection: CredentialProtectionPolicy?
        if let raw = try reader.text("extensions.credentialProtection", env: "PASSKEYD_CREDENTIAL_PROTECTION"), raw != "none" {
            guard let policy = Int(raw).flatMap(CredentialProtectionPolicy.init(level:)) ?? CredentialProtectionPolicy(rawValue: raw) else {
                throw ConfigurationError(
                    setting: "extensions.credentialProtection",
                    problem:
                        "\"\(raw)\" is not none, 1, 2, 3, \(CredentialProtectionPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            protection = policy
        }
        var scope = defaults.credentialProtectionRequiredFor
        switch try reader.text("extensions.credentialProtectionRequiredFor", env: "PASSKEYD_CREDENTIAL_PROTECTION_REQUIRED_FOR") {
        case nil: break
        case "none"?: scope = .none
        case "device-bound"?, "deviceBound"?: scope = .deviceBound
        case "all"?: scope = .all
        case let other?:
            throw ConfigurationError(
                setting: "extensions.credentialProtectionRequiredFor", problem: "\"\(other)\" is not none, device-bound or all")
        }
        self.init(
            prf: try reader.flag("extensions.prf", env: "PASSKEYD_PRF") ?? defaults.prf, credentialProtection: protection,
            credentialProtectionRequiredFor: scope,
            minPinLength: try reader.flag("extensions.minPinLength", env: "PASSKEYD_MIN_PIN_LENGTH") ?? defaults.minPinLength,
            largeBlobMaxBytes: try reader.number("extensions.largeBlobMaxBytes", env: "PASSKEYD_LARGE_BLOB_MAX_BYTES", in: 1...65_536)
                ?? defaults.largeBlobMaxBytes)
    }
}

extension ServerConfiguration.Console {
    /// `console.*` and `PASSKEYD_ADMIN_*` (seconds).
    public init(reader: ConfigReader) throws(ConfigurationError) {
        let defaults = Self()
        self.init(
            enabled: try reader.flag("console.enabled", env: "PASSKEYD_ADMIN_CONSOLE") ?? defaults.enabled,
            idleTimeout: try reader.seconds("console.idleTimeoutSeconds", env: "PASSKEYD_ADMIN_IDLE_TIMEOUT", in: 60...86_400)
                ?? defaults.idleTimeout,
            sessionLifetime: try reader.seconds(
                "console.sessionLifetimeSeconds", env: "PASSKEYD_ADMIN_SESSION_LIFETIME", in: 300...604_800) ?? defaults.sessionLifetime,
            stepUpWindow: try reader.seconds("console.stepUpSeconds", env: "PASSKEYD_ADMIN_STEP_UP", in: 10...3600)
                ?? defaults.stepUpWindow,
            bootstrapLifetime: try reader.seconds("console.bootstrapSeconds", env: "PASSKEYD_ADMIN_BOOTSTRAP_TTL", in: 60...604_800)
                ?? defaults.bootstrapLifetime,
            requestsPerWindow: try reader.number("console.requestsPerWindow", env: "PASSKEYD_ADMIN_RATE_LIMIT", in: 1...1_000_000)
                ?? defaults.requestsPerWindow)
    }
}

extension ServerConfiguration.Tokens {
    /// `tokens.*` and `PASSKEYD_TOKEN_*`, `PASSKEYD_REGISTRATION_TOKEN_SECONDS`.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        let defaults = Self()
        self.init(
            issuer: try reader.text("tokens.issuer", env: "PASSKEYD_TOKEN_ISSUER"),
            audiences: try reader.list("tokens.audiences", env: "PASSKEYD_TOKEN_AUDIENCES") ?? [],
            lifetimeSeconds: try reader.number("tokens.lifetimeSeconds", env: "PASSKEYD_TOKEN_LIFETIME", in: 30...3600)
                ?? defaults.lifetimeSeconds,
            algorithm: try reader.choice("tokens.algorithm", env: "PASSKEYD_TOKEN_ALGORITHM", as: Algorithm.self)?.rawValue
                ?? defaults.algorithm,
            publishSeconds: try reader.number("tokens.publishSeconds", env: "PASSKEYD_TOKEN_PUBLISH_SECONDS", in: 0...86_400)
                ?? defaults.publishSeconds,
            registrationTokenSeconds: try reader.number(
                "tokens.registrationTokenSeconds", env: "PASSKEYD_REGISTRATION_TOKEN_SECONDS", in: 60...86_400)
                ?? defaults.registrationTokenSeconds)
    }

    /// The signing algorithms of new keys.
    enum Algorithm: String, CaseIterable {
        case es256 = "ES256"
        case eddsa = "EdDSA"
        case rs256 = "RS256"
    }
}
