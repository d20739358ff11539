import Configuration
import Foundation
import PasskeyCore

/// The HTTP edge's settings: cookies, request bodies, connections, CORS, the web UI's folder, the
/// compatibility routes, who may read `/metrics`, and which proxies' `X-Forwarded-For` is believed.
/// The domain's settings are ``ServerConfiguration``'s; both read themselves from one
/// `ConfigReader` (README.md's table lists every setting).
public struct EdgeConfiguration: Sendable {
    public enum SameSite: String, Sendable, CaseIterable {
        case lax = "Lax"
        case strict = "Strict"
    }

    public var cookieName: String
    /// Session cookies carry `Secure` (and the `__Host-` prefix).
    public var cookieSecure: Bool
    public var cookieSameSite: SameSite
    /// Largest request body accepted, in bytes.
    public var maxBodySize: Int
    public var connections: Connections
    /// Origins of single-page apps allowed to call the API from the browser (CORS, with
    /// credentials): serialized origins only, never `*`.
    public var corsOrigins: [String]
    /// Folder of the web UI, served at `/` (nil: no UI).
    public var publicDirectory: String?
    /// Serve `/signup`, `/makeCredential`, `/authenticate` for apps written against the
    /// reference Vapor passkey server (see docs/ios.md, docs/android.md).
    public var compatibilityRoutes: Bool
    /// When set, `/metrics` answers only `Authorization: Bearer <metricsToken>`.
    public var metricsToken: String?
    /// Serve `/metrics` to anyone (behind a proxy that keeps it internal). Without this or a
    /// token, `/metrics` answers 404: closed by default.
    public var metricsPublic: Bool
    /// Addresses of reverse proxies whose `X-Forwarded-For` is believed (the client address for
    /// rate limits and the audit log). Empty: the TCP peer is the client.
    public var trustedProxies: [String]

    /// - Parameter webOrigins: the domain's web origins: cookies are `Secure` unless every one
    ///   of them is plain-http development (`cookieSecure` nil).
    public init(
        webOrigins: [String] = ["http://localhost:8080"], cookieName: String = "passkeyd_session", cookieSecure: Bool? = nil,
        cookieSameSite: SameSite = .lax, maxBodySize: Int = 64 * 1024, connections: Connections = Connections(),
        corsOrigins: [String] = [], publicDirectory: String? = nil, compatibilityRoutes: Bool = true, metricsToken: String? = nil,
        metricsPublic: Bool = false, trustedProxies: [String] = []
    ) {
        self.cookieName = cookieName
        self.cookieSecure = cookieSecure ?? !webOrigins.allSatisfy { $0.hasPrefix("http://") }
        self.cookieSameSite = cookieSameSite
        self.maxBodySize = maxBodySize
        self.connections = connections
        self.corsOrigins = corsOrigins
        self.publicDirectory = publicDirectory
        self.compatibilityRoutes = compatibilityRoutes
        self.metricsToken = metricsToken
        self.metricsPublic = metricsPublic
        self.trustedProxies = trustedProxies
    }

    /// Reads every edge setting from `reader`, checking each range and format.
    /// - Parameters:
    ///   - webOrigins: the domain's web origins (the cookies' default `Secure`).
    ///   - defaultPublicDirectory: the web UI's folder when `publicDirectory` is not set.
    public init(reader: ConfigReader, webOrigins: [String], defaultPublicDirectory: String? = nil) throws(ConfigurationError) {
        let metricsToken = try reader.text("metricsToken", env: "PASSKEYD_METRICS_TOKEN", secret: true)
        if let metricsToken, metricsToken.count < 16 {
            throw ConfigurationError(setting: "metricsToken", problem: "use at least 16 characters")
        }
        self.init(
            webOrigins: webOrigins,
            cookieName: try reader.text("cookieName", env: "PASSKEYD_COOKIE_NAME") ?? "passkeyd_session",
            cookieSecure: try reader.flag("cookieSecure", env: "PASSKEYD_COOKIE_SECURE"),
            cookieSameSite: try reader.choice("cookieSameSite", env: "PASSKEYD_COOKIE_SAMESITE", as: SameSite.self) ?? .lax,
            maxBodySize: try reader.number("maxBodySize", env: "PASSKEYD_MAX_BODY_SIZE", in: 4096...16_777_216) ?? 64 * 1024,
            connections: try Connections(reader: reader),
            corsOrigins: try reader.list("corsOrigins", env: "PASSKEYD_CORS_ORIGINS") ?? [],
            publicDirectory: try reader.text("publicDirectory", env: "PASSKEYD_PUBLIC_DIRECTORY") ?? defaultPublicDirectory,
            compatibilityRoutes: try reader.flag("compatibilityRoutes", env: "PASSKEYD_COMPATIBILITY_ROUTES") ?? true,
            metricsToken: metricsToken,
            metricsPublic: try reader.flag("metricsPublic", env: "PASSKEYD_METRICS_PUBLIC") ?? false,
            trustedProxies: try reader.list("trustedProxies", env: "PASSKEYD_TRUSTED_PROXIES") ?? [])
        try validate()
    }

    /// The formats no range can say: the cookie's name, the CORS origins.
    public func validate() throws(ConfigurationError) {
        guard !cookieName.isEmpty, cookieName.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
            throw ConfigurationError(setting: "cookieName", problem: "must be letters, digits, _ or -")
        }
        for origin in corsOrigins where !ServerConfiguration.isOrigin(origin) {
            throw ConfigurationError(
                setting: "corsOrigins",
                problem:
                    "\"\(origin)\" is not a serialized origin (http(s)://host[:port] in lowercase, as a browser sends it: no wildcard, path, user info, query, fragment or default port; never * or null)"
            )
        }
    }

    /// The session cookie's name: `__Host-<cookieName>` when cookies are `Secure` (the browser
    /// then refuses it unless it is Secure, host-only and for `/`), else `cookieName`.
    public var sessionCookieName: String { cookieSecure ? "__Host-" + cookieName : cookieName }

    /// The console session cookie's name: `__Host-passkeyd_admin` when cookies are `Secure`.
    public var consoleCookieName: String { cookieSecure ? "__Host-passkeyd_admin" : "passkeyd_admin" }

    /// Origins whose browser requests may change state or sign in: the domain's web and related
    /// origins, and the CORS origins.
    public func allowedRequestOrigins(_ domain: ServerConfiguration) -> Set<String> {
        Set(domain.webOrigins + domain.relatedOrigins + corsOrigins)
    }

    /// Connection limits of the HTTP listener (docs/security.md).
    public struct Connections: Sendable, Hashable, Codable {
        /// Connections open at once, in all.
        public var maxConnections: Int
        /// Connections open at once from one address (trusted proxies are exempt).
        public var maxConnectionsPerAddress: Int
        /// A request's head must arrive within this many seconds of the connection opening.
        public var headerTimeoutSeconds: Int
        /// A request's body must arrive within this many seconds of its head.
        public var bodyTimeoutSeconds: Int
        /// A kept-alive connection with no request in progress is closed after this many seconds.
        public var idleTimeoutSeconds: Int
        public init(
            maxConnections: Int = 4096, maxConnectionsPerAddress: Int = 64, headerTimeoutSeconds: Int = 10,
            bodyTimeoutSeconds: Int = 30, idleTimeoutSeconds: Int = 60
        ) {
            self.maxConnections = maxConnections
            self.maxConnectionsPerAddress = maxConnectionsPerAddress
            self.headerTimeoutSeconds = headerTimeoutSeconds
            self.bodyTimeoutSeconds = bodyTimeoutSeconds
            self.idleTimeoutSeconds = idleTimeoutSeconds
        }
    }

}

extension EdgeConfiguration.Connections {
    /// `connections.*` and `PASSKEYD_*CONNECTIONS*`, `PASSKEYD_*_TIMEOUT`.
    public init(reader: ConfigReader) throws(ConfigurationError) {
        let defaults = Self()
        self.init(
            maxConnections: try reader.number("connections.maxConnections", env: "PASSKEYD_MAX_CONNECTIONS", in: 1...1_000_000)
                ?? defaults.maxConnections,
            maxConnectionsPerAddress: try reader.number(
                "connections.maxConnectionsPerAddress", env: "PASSKEYD_MAX_CONNECTIONS_PER_ADDRESS", in: 1...1_000_000)
                ?? defaults.maxConnectionsPerAddress,
            headerTimeoutSeconds: try reader.number("connections.headerTimeoutSeconds", env: "PASSKEYD_HEADER_TIMEOUT", in: 1...3600)
                ?? defaults.headerTimeoutSeconds,
            bodyTimeoutSeconds: try reader.number("connections.bodyTimeoutSeconds", env: "PASSKEYD_BODY_TIMEOUT", in: 1...3600)
                ?? defaults.bodyTimeoutSeconds,
            idleTimeoutSeconds: try reader.number("connections.idleTimeoutSeconds", env: "PASSKEYD_IDLE_TIMEOUT", in: 1...86_400)
                ?? defaults.idleTimeoutSeconds)
    }
}
