import Foundation

/// Where mail goes: one URL (`PASSKEYD_SMTP_URL`).
///
/// - `smtp://user:pass@host:587`: STARTTLS (RFC 3207), required: a server that does not offer
///   it is refused, unless plain SMTP is allowed (a loopback relay, or ``allowPlaintext``). A
///   server that offers it is always asked for it.
/// - `smtps://user:pass@host:465`: implicit TLS (RFC 8314 §3.3), the handshake first.
///
/// The user and password are percent-decoded; both or neither. The password is a secret: it is
/// in no description of this value and in no log line.
public struct SMTPServer: Sendable, Hashable, CustomStringConvertible {
    public enum Security: String, Sendable { case startTLS, implicitTLS }

    public var host: String
    public var port: Int
    public var security: Security
    public var username: String?
    public var password: String?
    /// Plain SMTP (no STARTTLS offered) is accepted from this server even when it is not on a
    /// loopback address (`PASSKEYD_SMTP_ALLOW_PLAINTEXT=1`).
    public var allowPlaintext: Bool
    /// PEM certificates trusted for this server instead of the system's (a private CA).
    public var trustedCertificatesPEM: [UInt8]?
    /// The name given in EHLO (RFC 5321 §4.1.4: the client's own domain).
    public var heloName: String

    public init(
        host: String, port: Int, security: Security, username: String? = nil, password: String? = nil, allowPlaintext: Bool = false,
        trustedCertificatesPEM: [UInt8]? = nil, heloName: String = "localhost"
    ) {
        self.host = host
        self.port = port
        self.security = security
        self.username = username
        self.password = password
        self.allowPlaintext = allowPlaintext
        self.trustedCertificatesPEM = trustedCertificatesPEM
        self.heloName = heloName
        isLoopback = Self.loopback(host)
    }

    /// Why an SMTP URL cannot be used.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Parses `smtp://…` or `smtps://…`.
    public init(url text: String, allowPlaintext: Bool = false, trustedCertificatesPEM: [UInt8]? = nil, heloName: String = "localhost")
        throws(Invalid)
    {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw Invalid(reason: "not a URL (smtp://user:password@host:587 or smtps://user:password@host:465)")
        }
        let security: Security
        switch scheme {
        case "smtp": security = .startTLS
        case "smtps": security = .implicitTLS
        default: throw Invalid(reason: "the scheme must be smtp (STARTTLS) or smtps (implicit TLS), not \(scheme)")
        }
        guard var host = components.host, !host.isEmpty else { throw Invalid(reason: "the URL names no host") }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil else {
            throw Invalid(reason: "the URL has a path, query or fragment: only smtp://user:password@host:port is read")
        }
        let port = components.port ?? (security == .implicitTLS ? 465 : 587)
        guard (1...65535).contains(port) else { throw Invalid(reason: "the port must be 1-65535") }
        let user = components.percentEncodedUser.map { $0.removingPercentEncoding ?? $0 }
        let password = components.percentEncodedPassword.map { $0.removingPercentEncoding ?? $0 }
        guard (user == nil) == (password == nil) else { throw Invalid(reason: "give both a user and a password, or neither") }
        for value in [user, password].compactMap({ $0 }) where value.unicodeScalars.contains(where: { $0.value < 0x20 }) {
            throw Invalid(reason: "the user or password holds a control character")
        }
        self.init(
            host: host, port: port, security: security, username: user, password: password, allowPlaintext: allowPlaintext,
            trustedCertificatesPEM: trustedCertificatesPEM, heloName: heloName)
    }

    /// The host is a loopback address (`localhost`, 127.0.0.0/8, `::1`): plain SMTP to a relay
    /// on this machine crosses no network. Judged by the name as configured, when the value is
    /// made (a test may clear it to play a remote server on this machine).
    public var isLoopback: Bool

    static func loopback(_ host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" || name == "::1" { return true }
        let parts = name.split(separator: ".")
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }

    /// Plain SMTP may be spoken when the server offers no STARTTLS.
    public var plaintextAllowed: Bool { allowPlaintext || isLoopback }

    /// The URL without its password.
    public var description: String {
        let user = username.map { "\($0):***@" } ?? ""
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "\(security == .implicitTLS ? "smtps" : "smtp")://\(user)\(shownHost):\(port)"
    }
}
