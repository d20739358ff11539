/// An OAuth 2.0 / OpenID Connect protocol error: a code from RFC 6749 §4.1.2.1 and §5.2 (or
/// OIDC Core §3.1.2.6) and a description for the client's developer. Equality on the code.
///
/// It knows nothing of HTTP: on the authorization endpoint it goes on the client's redirect
/// URI (``OpenIDService/AuthorizationOutcome/error(_:location:)``); at the token, revocation
/// and introspection endpoints the edge answers it as JSON (`invalid_client` with 401 and
/// `WWW-Authenticate`, every other code with 400).
public struct OAuthError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `error` parameter, as the RFCs spell it.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        // RFC 6749 §4.1.2.1 (authorization endpoint) and §5.2 (token endpoint).
        public static let invalidRequest = Self(rawValue: "invalid_request")
        public static let invalidClient = Self(rawValue: "invalid_client")
        public static let invalidGrant = Self(rawValue: "invalid_grant")
        public static let unauthorizedClient = Self(rawValue: "unauthorized_client")
        public static let unsupportedGrantType = Self(rawValue: "unsupported_grant_type")
        public static let unsupportedResponseType = Self(rawValue: "unsupported_response_type")
        public static let invalidScope = Self(rawValue: "invalid_scope")
        public static let accessDenied = Self(rawValue: "access_denied")
        public static let temporarilyUnavailable = Self(rawValue: "temporarily_unavailable")
        // OIDC Core §3.1.2.6 (`prompt=none`).
        public static let loginRequired = Self(rawValue: "login_required")
        public static let consentRequired = Self(rawValue: "consent_required")
    }

    public let code: Code
    /// `error_description`: for the client's developer, never shown to the person as is.
    public let description: String

    public init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
}
