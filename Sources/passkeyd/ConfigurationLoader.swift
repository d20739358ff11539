import Foundation
import PasskeyCore
import PasskeyServer
import WebAuthn
import X509

/// Reads `passkeyd.json` (when present) and `PASSKEYD_*` environment variables (which win) into
/// a validated ``ServerConfiguration``. Every bad value stops the start with the setting's name.
struct ConfigurationLoader {
    /// The settings file, all keys optional.
    struct File: Decodable {
        var rpID: String?
        var rpName: String?
        var origins: [String]?
        var appleAppIDs: [String]?
        var androidApps: [ServerConfiguration.AndroidApp]?
        var relatedOrigins: [String]?
        var userVerification: String?
        var attestation: String?
        var attestationTrustAnchors: [String]?
        var requireTrustedAttestation: Bool?
        var allowSHA1Attestation: Bool?
        var requireSafetyNetCTSProfileMatch: Bool?
        var allowedAAGUIDs: [String]?
        var deniedAAGUIDs: [String]?
        var requireDeviceBound: Bool?
        var registrationUserVerification: String?
        var authenticationUserVerification: String?
        var signCountPolicy: String?
        var challengeLifetimeSeconds: Int?
        var sessionLifetimeSeconds: Int?
        var databaseURL: String?
        var listen: String?
        var cookieName: String?
        var cookieSecure: Bool?
        var cookieSameSite: String?
        var maxBodySize: Int?
        var maxOpenChallenges: Int?
        var enrollURL: String?
        var manageURL: String?
        var publicDirectory: String?
        var compatibilityRoutes: Bool?
        var rateLimits: RateLimitsFile?
        var trustedProxies: [String]?
        var metricsToken: String?
        var metricsPublic: Bool?
        var logFormat: String?
        /// The bcrypt cost of versions before scrypt: accepted and ignored, so files that set
        /// it still load (new hashes are scrypt at `passwordScryptCost`).
        var passwordHashCost: Int?
        var passwordScryptCost: Int?
        var passwordHashConcurrency: Int?
        var reauthenticationSeconds: Int?
        var hints: [String]?
        var connections: ConnectionsFile?
        var tokens: TokensFile?
        var corsOrigins: [String]?
        var webhooks: [ServerConfiguration.Webhook]?
        var webhookAllowPrivateAddresses: Bool?
        var apiKeyRequestsPerWindow: Int?
        var oidcRefreshTokenSeconds: Int?
        var mdsRootCertificate: String?
        var extensions: ExtensionsFile?
        var console: ConsoleFile?
    }

    struct ConsoleFile: Decodable {
        var enabled: Bool?
        var idleTimeoutSeconds: Int?
        var sessionLifetimeSeconds: Int?
        var stepUpSeconds: Int?
        var bootstrapSeconds: Int?
        var requestsPerWindow: Int?
    }

    struct ExtensionsFile: Decodable {
        var prf: Bool?
        var credentialProtection: String?
        var credentialProtectionRequiredFor: String?
        var minPinLength: Bool?
        var largeBlobMaxBytes: Int?
    }

    struct TokensFile: Decodable {
        var issuer: String?
        var audiences: [String]?
        var lifetimeSeconds: Int?
        var algorithm: String?
        var publishSeconds: Int?
        var registrationTokenSeconds: Int?
    }

    struct ConnectionsFile: Decodable {
        var maxConnections: Int?
        var maxConnectionsPerAddress: Int?
        var headerTimeoutSeconds: Int?
        var bodyTimeoutSeconds: Int?
        var idleTimeoutSeconds: Int?
    }

    struct RateLimitsFile: Decodable {
        var enabled: Bool?
        var windowSeconds: Int?
        var perIP: Int?
        var perAccount: Int?
        var perAccountTotal: Int?
        var slowdownSeconds: Int?
        var maxKeys: Int?
    }

    struct Loaded {
        var server: ServerConfiguration
        var databaseURL: String
        var host: String
        var port: Int
        var logFormat: LogFormat?
    }

    var environment: [String: String] = ProcessInfo.processInfo.environment

    func load(path: String?) throws(ConfigurationError) -> Loaded {
        var file = File()
        // An empty PASSKEYD_CONFIG counts as unset.
        let named = environment["PASSKEYD_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let candidate = path ?? named ?? "passkeyd.json"
        if let data = FileManager.default.contents(atPath: candidate) {
            do {
                file = try JSONDecoder().decode(File.self, from: data)
            } catch let error as DecodingError {
                throw ConfigurationError(setting: candidate, problem: Self.describe(error))
            } catch {
                throw ConfigurationError(setting: candidate, problem: "not valid JSON")
            }
        } else if path != nil || named != nil {
            throw ConfigurationError(setting: "config", problem: "cannot read \(candidate)")
        }
        return try resolve(file)
    }

    /// Attestation trust and the authenticator policy (docs/policy.md).
    private func attestationPolicy(_ file: File, hasMetadataRoot: Bool) throws(ConfigurationError) -> AttestationPolicy {
        var policy = AttestationPolicy()
        for path in list("PASSKEYD_ATTESTATION_TRUST_ANCHORS", file.attestationTrustAnchors) ?? [] {
            guard let pem = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(setting: "attestationTrustAnchors", problem: "cannot read \(path)")
            }
            do {
                policy.trustAnchors += try AttestationPolicy.certificates(pem: String(decoding: pem, as: UTF8.self))
            } catch {
                throw ConfigurationError(setting: "attestationTrustAnchors", problem: "\(path): \(error.reason)")
            }
        }
        policy.requireTrustedAttestation = try bool("PASSKEYD_REQUIRE_TRUSTED_ATTESTATION", file.requireTrustedAttestation) ?? false
        // FIDO metadata brings trust anchors of its own (each entry's attestation roots).
        if policy.requireTrustedAttestation && policy.trustAnchors.isEmpty && !hasMetadataRoot {
            throw ConfigurationError(setting: "requireTrustedAttestation", problem: "needs attestationTrustAnchors or mdsRootCertificate")
        }
        policy.allowSHA1Attestation = try bool("PASSKEYD_ALLOW_SHA1_ATTESTATION", file.allowSHA1Attestation) ?? true
        policy.requireSafetyNetCTSProfileMatch =
            try bool("PASSKEYD_REQUIRE_SAFETYNET_CTS_PROFILE_MATCH", file.requireSafetyNetCTSProfileMatch) ?? true
        policy.requireDeviceBound = try bool("PASSKEYD_REQUIRE_DEVICE_BOUND", file.requireDeviceBound) ?? false
        func aaguids(_ key: String, _ value: [String]?, setting: String) throws(ConfigurationError) -> Set<AAGUID>? {
            // An empty environment variable (a template's blank) reads as unset, not as an empty list.
            let blank = environment[key].map { $0.trimmingCharacters(in: .whitespaces).isEmpty } ?? false
            guard let texts = blank ? value : list(key, value) else { return nil }
            var out: Set<AAGUID> = []
            for text in texts {
                guard let aaguid = AAGUID(text) else {
                    throw ConfigurationError(setting: setting, problem: "\"\(text)\" is not an AAGUID (8-4-4-4-12 hexadecimal)")
                }
                out.insert(aaguid)
            }
            return out
        }
        policy.allowedAAGUIDs = try aaguids("PASSKEYD_ALLOWED_AAGUIDS", file.allowedAAGUIDs, setting: "allowedAAGUIDs")
        policy.deniedAAGUIDs = try aaguids("PASSKEYD_DENIED_AAGUIDS", file.deniedAAGUIDs, setting: "deniedAAGUIDs") ?? []
        if policy.allowedAAGUIDs?.isEmpty == true {
            throw ConfigurationError(
                setting: "allowedAAGUIDs", problem: "is empty: nobody could register (leave it out to allow every model)")
        }
        return policy
    }

    private func string(_ key: String, _ fileValue: String?) -> String? { environment[key] ?? fileValue }

    private func list(_ key: String, _ fileValue: [String]?) -> [String]? {
        guard let raw = environment[key] else { return fileValue }
        return raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    private func bool(_ key: String, _ fileValue: Bool?) throws(ConfigurationError) -> Bool? {
        guard let raw = environment[key] else { return fileValue }
        switch raw.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigurationError(setting: key, problem: "\"\(raw)\" is not true or false")
        }
    }

    private func int(_ key: String, _ fileValue: Int?, range: ClosedRange<Int>, setting: String) throws(ConfigurationError) -> Int? {
        var value = fileValue
        if let raw = environment[key] {
            guard let parsed = Int(raw) else { throw ConfigurationError(setting: key, problem: "\"\(raw)\" is not a whole number") }
            value = parsed
        }
        if let value, !range.contains(value) {
            throw ConfigurationError(setting: setting, problem: "\(value) is outside \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    private func choice<T: RawRepresentable & CaseIterable>(_ key: String, _ fileValue: String?, setting: String, as: T.Type)
        throws(ConfigurationError) -> T? where T.RawValue == String
    {
        guard let raw = string(key, fileValue) else { return nil }
        guard let value = T(rawValue: raw) else {
            throw ConfigurationError(
                setting: setting, problem: "\"\(raw)\" is not one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    func resolve(_ file: File) throws(ConfigurationError) -> Loaded {
        var androidApps = file.androidApps ?? []
        if let raw = environment["PASSKEYD_ANDROID_APPS"] {
            // package=FP1|FP2;package2=FP3
            androidApps = []
            for entry in raw.split(separator: ";") {
                let parts = entry.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else {
                    throw ConfigurationError(setting: "PASSKEYD_ANDROID_APPS", problem: "use package=AA:BB:…|CC:DD:…;other.package=…")
                }
                androidApps.append(
                    .init(
                        packageName: parts[0].trimmingCharacters(in: .whitespaces),
                        sha256CertFingerprints: parts[1].split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }))
            }
        }
        let mdsRoot = string("PASSKEYD_MDS_ROOT_CERTIFICATE", file.mdsRootCertificate).flatMap { $0.isEmpty ? nil : $0 }
        let policy = try attestationPolicy(file, hasMetadataRoot: mdsRoot != nil)

        let listen = string("PASSKEYD_LISTEN", file.listen) ?? "127.0.0.1:8080"
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port),
            colon != listen.startIndex
        else {
            throw ConfigurationError(setting: "listen", problem: "\"\(listen)\" is not host:port (e.g. 127.0.0.1:8080)")
        }
        let host = String(listen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let webOrigins = list("PASSKEYD_ORIGINS", file.origins) ?? ["http://localhost:\(port == 0 ? 8080 : port)"]
        let sameSite =
            try choice("PASSKEYD_COOKIE_SAMESITE", file.cookieSameSite, setting: "cookieSameSite", as: SameSiteChoice.self) ?? .lax

        let rateLimits = try rateLimits(file.rateLimits ?? RateLimitsFile())
        let connections = try connections(file.connections ?? ConnectionsFile())
        let metricsToken = string("PASSKEYD_METRICS_TOKEN", file.metricsToken)
        if let metricsToken, metricsToken.count < 16 {
            throw ConfigurationError(setting: "metricsToken", problem: "use at least 16 characters")
        }

        var configuration = ServerConfiguration(
            rpID: string("PASSKEYD_RP_ID", file.rpID) ?? "localhost",
            rpName: string("PASSKEYD_RP_NAME", file.rpName) ?? "passkeyd",
            webOrigins: webOrigins,
            androidApps: androidApps,
            appleAppIDs: list("PASSKEYD_APPLE_APP_IDS", file.appleAppIDs) ?? [],
            relatedOrigins: list("PASSKEYD_RELATED_ORIGINS", file.relatedOrigins) ?? [],
            userVerification: try choice(
                "PASSKEYD_USER_VERIFICATION", file.userVerification, setting: "userVerification", as: UserVerificationRequirement.self)
                ?? .required,
            attestation: try choice(
                "PASSKEYD_ATTESTATION", file.attestation, setting: "attestation", as: AttestationConveyancePreference.self) ?? .none,
            attestationPolicy: policy,
            signCountPolicy: try choice(
                "PASSKEYD_SIGN_COUNT_POLICY", file.signCountPolicy, setting: "signCountPolicy", as: SignCountPolicy.self) ?? .reject,
            challengeLifetime: .seconds(
                try int(
                    "PASSKEYD_CHALLENGE_LIFETIME", file.challengeLifetimeSeconds, range: 10...86_400, setting: "challengeLifetimeSeconds")
                    ?? 300),
            sessionLifetime: .seconds(
                try int("PASSKEYD_SESSION_LIFETIME", file.sessionLifetimeSeconds, range: 60...31_536_000, setting: "sessionLifetimeSeconds")
                    ?? 14 * 86_400),
            cookieName: string("PASSKEYD_COOKIE_NAME", file.cookieName) ?? "passkeyd_session",
            cookieSecure: try bool("PASSKEYD_COOKIE_SECURE", file.cookieSecure),
            cookieSameSite: sameSite == .strict ? .strict : .lax,
            maxBodySize: try int("PASSKEYD_MAX_BODY_SIZE", file.maxBodySize, range: 4096...16_777_216, setting: "maxBodySize") ?? 64 * 1024,
            maxOpenChallenges: try int(
                "PASSKEYD_MAX_OPEN_CHALLENGES", file.maxOpenChallenges, range: 10...100_000_000, setting: "maxOpenChallenges") ?? 100_000,
            enrollURL: string("PASSKEYD_ENROLL_URL", file.enrollURL),
            manageURL: string("PASSKEYD_MANAGE_URL", file.manageURL),
            publicDirectory: string("PASSKEYD_PUBLIC_DIRECTORY", file.publicDirectory) ?? Self.defaultPublicDirectory(),
            compatibilityRoutes: try bool("PASSKEYD_COMPATIBILITY_ROUTES", file.compatibilityRoutes) ?? true,
            rateLimits: rateLimits,
            trustedProxies: list("PASSKEYD_TRUSTED_PROXIES", file.trustedProxies) ?? [],
            metricsToken: metricsToken,
            metricsPublic: try bool("PASSKEYD_METRICS_PUBLIC", file.metricsPublic) ?? false,
            connections: connections,
            reauthenticationWindow: .seconds(
                try int(
                    "PASSKEYD_REAUTHENTICATION_SECONDS", file.reauthenticationSeconds, range: 10...86_400,
                    setting: "reauthenticationSeconds") ?? 300),
            passwordHashConcurrency: try int(
                "PASSKEYD_PASSWORD_HASH_CONCURRENCY", file.passwordHashConcurrency, range: 1...64,
                setting: "passwordHashConcurrency"),
            hints: list("PASSKEYD_HINTS", file.hints) ?? [],
            passwordScryptCost: try int(
                "PASSKEYD_PASSWORD_SCRYPT_COST", file.passwordScryptCost, range: 10...20, setting: "passwordScryptCost") ?? 17)
        configuration.extensions = try extensions(file.extensions ?? ExtensionsFile())
        configuration.console = try console(file.console ?? ConsoleFile())
        let tokens = file.tokens ?? TokensFile()
        let defaults = ServerConfiguration.Tokens()
        configuration.tokens = ServerConfiguration.Tokens(
            issuer: string("PASSKEYD_TOKEN_ISSUER", tokens.issuer),
            audiences: list("PASSKEYD_TOKEN_AUDIENCES", tokens.audiences) ?? [],
            lifetimeSeconds: try int("PASSKEYD_TOKEN_LIFETIME", tokens.lifetimeSeconds, range: 30...3600, setting: "tokens.lifetimeSeconds")
                ?? defaults.lifetimeSeconds,
            algorithm: string("PASSKEYD_TOKEN_ALGORITHM", tokens.algorithm) ?? defaults.algorithm,
            publishSeconds: try int(
                "PASSKEYD_TOKEN_PUBLISH_SECONDS", tokens.publishSeconds, range: 0...86_400, setting: "tokens.publishSeconds")
                ?? defaults.publishSeconds,
            registrationTokenSeconds: try int(
                "PASSKEYD_REGISTRATION_TOKEN_SECONDS", tokens.registrationTokenSeconds, range: 60...86_400,
                setting: "tokens.registrationTokenSeconds") ?? defaults.registrationTokenSeconds)
        configuration.registrationUserVerification = try choice(
            "PASSKEYD_REGISTRATION_USER_VERIFICATION", file.registrationUserVerification, setting: "registrationUserVerification",
            as: UserVerificationRequirement.self)
        configuration.authenticationUserVerification = try choice(
            "PASSKEYD_AUTHENTICATION_USER_VERIFICATION", file.authenticationUserVerification, setting: "authenticationUserVerification",
            as: UserVerificationRequirement.self)
        configuration.corsOrigins = list("PASSKEYD_CORS_ORIGINS", file.corsOrigins) ?? []
        configuration.webhooks = file.webhooks ?? []
        configuration.webhookAllowPrivateAddresses =
            try bool("PASSKEYD_WEBHOOK_ALLOW_PRIVATE", file.webhookAllowPrivateAddresses) ?? false
        configuration.apiKeyRequestsPerWindow =
            try int(
                "PASSKEYD_API_KEY_REQUESTS_PER_WINDOW", file.apiKeyRequestsPerWindow, range: 1...100_000_000,
                setting: "apiKeyRequestsPerWindow")
            ?? configuration.apiKeyRequestsPerWindow
        if let seconds = file.oidcRefreshTokenSeconds {
            guard (60...31_536_000).contains(seconds) else {
                throw ConfigurationError(setting: "oidcRefreshTokenSeconds", problem: "must be 60...31536000")
            }
            configuration.oidcRefreshTokenSeconds = seconds
        }
        if let mdsRoot { configuration.mdsRootCertificates = try Self.mdsRoots(path: mdsRoot) }
        _ = try configuration.relyingParty()
        let databaseURL = string("PASSKEYD_DATABASE_URL", file.databaseURL) ?? "sqlite://passkeyd.sqlite"
        let logFormat = try choice("PASSKEYD_LOG_FORMAT", file.logFormat, setting: "logFormat", as: LogFormat.self)
        return Loaded(server: configuration, databaseURL: databaseURL, host: host, port: port, logFormat: logFormat)
    }

    /// The FIDO Metadata Service root(s) in a PEM file (`mdsRootCertificate`, `--root`).
    static func mdsRoots(path: String) throws(ConfigurationError) -> [Certificate] {
        guard let pem = FileManager.default.contents(atPath: path) else {
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

    /// `rateLimits` (file) and `PASSKEYD_RATE_LIMIT*` (environment).
    private func rateLimits(_ file: RateLimitsFile) throws(ConfigurationError) -> ServerConfiguration.RateLimits {
        let defaults = ServerConfiguration.RateLimits()
        return ServerConfiguration.RateLimits(
            enabled: try bool("PASSKEYD_RATE_LIMITS", file.enabled) ?? defaults.enabled,
            windowSeconds: try int(
                "PASSKEYD_RATE_LIMIT_WINDOW", file.windowSeconds, range: 1...86_400, setting: "rateLimits.windowSeconds")
                ?? defaults.windowSeconds,
            perIP: try int("PASSKEYD_RATE_LIMIT_PER_IP", file.perIP, range: 1...10_000_000, setting: "rateLimits.perIP")
                ?? defaults.perIP,
            perAccount: try int(
                "PASSKEYD_RATE_LIMIT_PER_ACCOUNT", file.perAccount, range: 1...10_000_000, setting: "rateLimits.perAccount")
                ?? defaults.perAccount,
            perAccountTotal: try int(
                "PASSKEYD_RATE_LIMIT_PER_ACCOUNT_TOTAL", file.perAccountTotal, range: 1...10_000_000,
                setting: "rateLimits.perAccountTotal") ?? defaults.perAccountTotal,
            slowdownSeconds: try int(
                "PASSKEYD_RATE_LIMIT_SLOWDOWN", file.slowdownSeconds, range: 0...60, setting: "rateLimits.slowdownSeconds")
                ?? defaults.slowdownSeconds,
            maxKeys: try int("PASSKEYD_RATE_LIMIT_MAX_KEYS", file.maxKeys, range: 1000...100_000_000, setting: "rateLimits.maxKeys")
                ?? defaults.maxKeys)
    }

    /// `extensions` (file) and `PASSKEYD_PRF`, `PASSKEYD_CREDENTIAL_PROTECTION`,
    /// `PASSKEYD_CREDENTIAL_PROTECTION_REQUIRED_FOR`, `PASSKEYD_MIN_PIN_LENGTH`,
    /// `PASSKEYD_LARGE_BLOB_MAX_BYTES` (environment).
    private func extensions(_ file: ExtensionsFile) throws(ConfigurationError) -> ServerConfiguration.Extensions {
        let defaults = ServerConfiguration.Extensions()
        // credProtect by level (1, 2, 3), by policy name, or `none`.
        var protection: CredentialProtectionPolicy?
        if let raw = string("PASSKEYD_CREDENTIAL_PROTECTION", file.credentialProtection), raw != "none" {
            guard let policy = Int(raw).flatMap(CredentialProtectionPolicy.init(level:)) ?? CredentialProtectionPolicy(rawValue: raw) else {
                throw ConfigurationError(
                    setting: "extensions.credentialProtection",
                    problem:
                        "\"\(raw)\" is not none, 1, 2, 3, userVerificationOptional, userVerificationOptionalWithCredentialIDList or userVerificationRequired"
                )
            }
            protection = policy
        }
        var scope = defaults.credentialProtectionRequiredFor
        switch string("PASSKEYD_CREDENTIAL_PROTECTION_REQUIRED_FOR", file.credentialProtectionRequiredFor) {
        case nil: break
        case "none"?: scope = .none
        case "device-bound"?, "deviceBound"?: scope = .deviceBound
        case "all"?: scope = .all
        case let other?:
            throw ConfigurationError(
                setting: "extensions.credentialProtectionRequiredFor", problem: "\"\(other)\" is not none, device-bound or all")
        }
        return ServerConfiguration.Extensions(
            prf: try bool("PASSKEYD_PRF", file.prf) ?? defaults.prf, credentialProtection: protection,
            credentialProtectionRequiredFor: scope,
            minPinLength: try bool("PASSKEYD_MIN_PIN_LENGTH", file.minPinLength) ?? defaults.minPinLength,
            largeBlobMaxBytes: try int(
                "PASSKEYD_LARGE_BLOB_MAX_BYTES", file.largeBlobMaxBytes, range: 1...65_536, setting: "extensions.largeBlobMaxBytes")
                ?? defaults.largeBlobMaxBytes)
    }

    /// `console` (file) and `PASSKEYD_ADMIN_CONSOLE`, `PASSKEYD_ADMIN_IDLE_TIMEOUT`,
    /// `PASSKEYD_ADMIN_SESSION_LIFETIME`, `PASSKEYD_ADMIN_STEP_UP`, `PASSKEYD_ADMIN_BOOTSTRAP_TTL`
    /// (seconds) and `PASSKEYD_ADMIN_RATE_LIMIT` (environment).
    private func console(_ file: ConsoleFile) throws(ConfigurationError) -> ServerConfiguration.Console {
        let defaults = ServerConfiguration.Console()
        func seconds(_ key: String, _ value: Int?, _ range: ClosedRange<Int>, _ setting: String, _ fallback: Duration)
            throws(ConfigurationError) -> Duration
        {
            try int(key, value, range: range, setting: "console." + setting).map { .seconds($0) } ?? fallback
        }
        return ServerConfiguration.Console(
            enabled: try bool("PASSKEYD_ADMIN_CONSOLE", file.enabled) ?? defaults.enabled,
            idleTimeout: try seconds(
                "PASSKEYD_ADMIN_IDLE_TIMEOUT", file.idleTimeoutSeconds, 60...86_400, "idleTimeoutSeconds", defaults.idleTimeout),
            sessionLifetime: try seconds(
                "PASSKEYD_ADMIN_SESSION_LIFETIME", file.sessionLifetimeSeconds, 300...604_800, "sessionLifetimeSeconds",
                defaults.sessionLifetime),
            stepUpWindow: try seconds("PASSKEYD_ADMIN_STEP_UP", file.stepUpSeconds, 10...3600, "stepUpSeconds", defaults.stepUpWindow),
            bootstrapLifetime: try seconds(
                "PASSKEYD_ADMIN_BOOTSTRAP_TTL", file.bootstrapSeconds, 60...604_800, "bootstrapSeconds", defaults.bootstrapLifetime),
            requestsPerWindow: try int(
                "PASSKEYD_ADMIN_RATE_LIMIT", file.requestsPerWindow, range: 1...1_000_000, setting: "console.requestsPerWindow")
                ?? defaults.requestsPerWindow)
    }

    /// `connections` (file) and `PASSKEYD_*CONNECTIONS*` / `*_TIMEOUT` (environment).
    private func connections(_ file: ConnectionsFile) throws(ConfigurationError) -> ServerConfiguration.Connections {
        let connectionDefaults = ServerConfiguration.Connections()
        return ServerConfiguration.Connections(
            maxConnections: try int(
                "PASSKEYD_MAX_CONNECTIONS", file.maxConnections, range: 1...1_000_000,
                setting: "connections.maxConnections") ?? connectionDefaults.maxConnections,
            maxConnectionsPerAddress: try int(
                "PASSKEYD_MAX_CONNECTIONS_PER_ADDRESS", file.maxConnectionsPerAddress, range: 1...1_000_000,
                setting: "connections.maxConnectionsPerAddress") ?? connectionDefaults.maxConnectionsPerAddress,
            headerTimeoutSeconds: try int(
                "PASSKEYD_HEADER_TIMEOUT", file.headerTimeoutSeconds, range: 1...3600,
                setting: "connections.headerTimeoutSeconds") ?? connectionDefaults.headerTimeoutSeconds,
            bodyTimeoutSeconds: try int(
                "PASSKEYD_BODY_TIMEOUT", file.bodyTimeoutSeconds, range: 1...3600,
                setting: "connections.bodyTimeoutSeconds") ?? connectionDefaults.bodyTimeoutSeconds,
            idleTimeoutSeconds: try int(
                "PASSKEYD_IDLE_TIMEOUT", file.idleTimeoutSeconds, range: 1...86_400,
                setting: "connections.idleTimeoutSeconds") ?? connectionDefaults.idleTimeoutSeconds)
    }

    enum SameSiteChoice: String, CaseIterable {
        case lax = "Lax"
        case strict = "Strict"
    }

    /// `Public/` next to the working directory (a source checkout), when present.
    static func defaultPublicDirectory() -> String? {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: "Public", isDirectory: &isDirectory) && isDirectory.boolValue ? "Public" : nil
    }

    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type"
        case .keyNotFound(let key, _):
            return "\(key.stringValue) is missing"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "not valid JSON" : "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        @unknown default:
            return "invalid"
        }
    }
}
