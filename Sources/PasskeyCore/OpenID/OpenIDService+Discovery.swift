import WebAuthn

extension OpenIDService {
    /// The token endpoint's client authentication methods (and revocation's, introspection's).
    static let clientAuthenticationMethods = ["client_secret_basic", "client_secret_post", "none"]

    /// OpenID Connect Discovery 1.0 §3 (`/.well-known/openid-configuration`): every value the
    /// provider supports, and only those; every endpoint under ``issuer``.
    public var discovery: JSONValue {
        func strings(_ values: [String]) -> JSONValue { .array(values.map(JSONValue.string)) }
        return .object([
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/oauth2/authorize"),
            "token_endpoint": .string(issuer + "/oauth2/token"),
            "userinfo_endpoint": .string(issuer + "/oauth2/userinfo"),
            "jwks_uri": .string(issuer + "/.well-known/jwks.json"),
            "revocation_endpoint": .string(issuer + "/oauth2/revoke"),
            "introspection_endpoint": .string(issuer + "/oauth2/introspect"),
            "end_session_endpoint": .string(issuer + "/oauth2/logout"),
            "response_types_supported": strings(["code"]),
            "response_modes_supported": strings(["query"]),
            "grant_types_supported": strings(["authorization_code", "refresh_token"]),
            "subject_types_supported": strings(["public"]),
            "id_token_signing_alg_values_supported": strings(["RS256", "ES256"]),
            "scopes_supported": strings(Self.scopes),
            "token_endpoint_auth_methods_supported": strings(Self.clientAuthenticationMethods),
            "revocation_endpoint_auth_methods_supported": strings(Self.clientAuthenticationMethods),
            "introspection_endpoint_auth_methods_supported": strings(Self.clientAuthenticationMethods),
            "code_challenge_methods_supported": strings(["S256"]),
            "claims_supported": strings([
                "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "amr", "acr", "sid", "azp", "preferred_username", "name", "email",
            ]),
            "prompt_values_supported": strings(["none", "login", "consent", "create"]),
            "acr_values_supported": strings(["phr", "0"]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "request_parameter_supported": .bool(false),
            "request_uri_parameter_supported": .bool(false),
            "claims_parameter_supported": .bool(false),
        ])
    }
}
