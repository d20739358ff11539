import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import PasskeyStore
import WebAuthn

/// passkeyd as an OpenID Provider (OpenID Connect Core 1.0, the authorization code flow with
/// PKCE, per the OAuth 2.0 Security BCP, RFC 9700). Signing in *is* a passkey: the authorization
/// endpoint sends the browser to the web UI's sign-in page (AutoFill included), which comes
/// back here once the person is signed in and has consented. docs/oidc.md.
struct OpenIDProvider: Sendable {
    let service: PasskeyService
    var store: any PasskeyStore { service.store }
    var issuer: String { service.configuration.issuer }
    static let scopes = ["openid", "profile", "email", "offline_access"]
    /// Authorization codes live 60 s (RFC 9700 §4.5: short-lived, single use).
    static let codeLifetime: TimeInterval = 60
    /// A pending authorization request waits this long for its sign-in.
    static let requestLifetime: TimeInterval = 600

    // MARK: Values kept between requests

    /// An authorization request waiting for a sign-in or consent.
    struct AuthorizationRequest: Codable, Sendable {
        var clientID: String
        var redirectURI: String
        var scope: [String]
        var state: String?
        var nonce: String?
        var codeChallenge: String?
        var prompt: [String]
        var maxAge: Int?
        var loginHint: String?
        var createdAt: Date
    }

    /// What a code or refresh token grants (stored opaquely with it).
    struct Grant: Codable, Sendable {
        var redirectURI: String
        var codeChallenge: String?
        var nonce: String?
        var scope: [String]
        /// The passkeyd session it stands on: sign out there, and the grant ends too.
        var sessionHash: [UInt8]
        var authTime: Int
        var method: String
    }

    struct IDTokenClaims: JWTPayload {
        var iss: IssuerClaim
        var sub: SubjectClaim
        var aud: AudienceClaim
        var exp: ExpirationClaim
        var iat: IssuedAtClaim
        var auth_time: Int
        var nonce: String?
        var amr: [String]
        var acr: String
        var sid: String
        var azp: String
        var preferred_username: String?
        var name: String?
        var email: String?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// An OAuth error (RFC 6749 §4.1.2.1 / §5.2): on the redirect when the redirect URI is known
    /// good, else on a page.
    struct OAuthError: Error {
        let code: String
        let description: String
        var status: HTTPResponse.Status = .badRequest
    }

    // MARK: Routes

    var routes: RouteCollection<PasskeyRequestContext> {
        let collection = RouteCollection(context: PasskeyRequestContext.self)
        let sessions = SessionResolver(service: service)
        collection.get(".well-known/openid-configuration") { _, _ in try discovery() }
        // Budgets of their own, never the sign-in routes' (OpenIDRateLimitMiddleware).
        collection.group().add(middleware: OpenIDRateLimitMiddleware(service: service, budget: .authorize, navigation: true))
            .get("oauth2/authorize") { request, context in try await authorize(request, context, sessions: sessions) }
        let pending = collection.group().add(middleware: OpenIDRateLimitMiddleware(service: service, budget: .authorize, navigation: false))
        pending.get("oauth2/authorize/requests/:id") { request, context in try await requestInfo(request, context, sessions: sessions) }
        pending.group().add(middleware: JSONRequestMiddleware())
            .post("oauth2/authorize/requests/:id") { request, context in try await decide(request, context, sessions: sessions) }
        let clients = collection.group().add(middleware: OpenIDRateLimitMiddleware(service: service, budget: .client, navigation: false))
        clients.post("oauth2/token") { request, context in try await token(request, context) }
        clients.post("oauth2/revoke") { request, _ in try await revoke(request) }
        clients.post("oauth2/introspect") { request, _ in try await introspect(request) }
        collection.get("oauth2/userinfo") { request, _ in try await userinfo(request) }
        collection.post("oauth2/userinfo") { request, _ in try await userinfo(request) }
        collection.get("oauth2/logout") { request, _ in try await logout(request, sessions: sessions) }
        return collection
    }

    // MARK: Discovery

    func discovery() throws -> Response {
        let document: [String: JSONValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/oauth2/authorize"),
            "token_endpoint": .string(issuer + "/oauth2/token"),
            "userinfo_endpoint": .string(issuer + "/oauth2/userinfo"),
            "jwks_uri": .string(issuer + "/.well-known/jwks.json"),
            "revocation_endpoint": .string(issuer + "/oauth2/revoke"),
            "introspection_endpoint": .string(issuer + "/oauth2/introspect"),
            "end_session_endpoint": .string(issuer + "/oauth2/logout"),
            "response_types_supported": .array([.string("code")]),
            "response_modes_supported": .array([.string("query")]),
            "grant_types_supported": .array([.string("authorization_code"), .string("refresh_token")]),
            "subject_types_supported": .array([.string("public")]),
            "id_token_signing_alg_values_supported": .array([.string("RS256"), .string("ES256")]),
            "scopes_supported": .array(Self.scopes.map(JSONValue.string)),
            "token_endpoint_auth_methods_supported": .array(["client_secret_basic", "client_secret_post", "none"].map(JSONValue.string)),
            "revocation_endpoint_auth_methods_supported": .array(
                ["client_secret_basic", "client_secret_post", "none"].map(JSONValue.string)),
            "introspection_endpoint_auth_methods_supported": .array(
                ["client_secret_basic", "client_secret_post", "none"].map(JSONValue.string)),
            "code_challenge_methods_supported": .array([.string("S256")]),
            "claims_supported": .array(
                [
                    "iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "amr", "acr", "sid", "azp", "preferred_username", "name",
                    "email",
                ]
                .map(JSONValue.string)),
            "prompt_values_supported": .array(["none", "login", "consent", "create"].map(JSONValue.string)),
            "acr_values_supported": .array([.string("phr"), .string("0")]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "request_parameter_supported": .bool(false),
            "request_uri_parameter_supported": .bool(false),
            "claims_parameter_supported": .bool(false),
        ]
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "public, max-age=3600"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Self.jsonBytes(.object(document)))))
    }

    // MARK: Authorization endpoint

    /// `GET /oauth2/authorize`.
    func authorize(_ request: Request, _ context: PasskeyRequestContext, sessions: SessionResolver) async throws -> Response {
        // Every parameter is bounded (parameterLimits) before anything is looked up or stored.
        let rawQuery = request.uri.query ?? ""
        guard rawQuery.utf8.count <= Self.maxQueryBytes else {
            return Self.errorPage("Request too long", "The application sent you here with a request too long to read.")
        }
        let query = Self.fields(rawQuery)
        func value(_ name: String) -> String? { query[name] }
        let oversized = Self.oversized(query)
        // Without a known client and one of its exact redirect URIs, nothing is redirected.
        guard oversized != "client_id", let clientID = value("client_id"), let client = try await store.oauthClient(id: clientID) else {
            return Self.errorPage("Unknown client", "The application that sent you here is not registered with this sign-in service.")
        }
        guard let redirectURI = value("redirect_uri"), client.redirectURIs.contains(redirectURI) else {
            return Self.errorPage("Invalid redirect", "The application sent you here with an address it did not register (redirect_uri).")
        }
        // A state too long to send back is not sent back: the error goes on a page.
        guard oversized != "state" else {
            return Self.errorPage(
                "Request too long", "The application sent you here with a state longer than \(Self.parameterLimits["state"] ?? 0) bytes.")
        }
        let state = value("state")
        func fail(_ code: String, _ description: String) -> Response {
            Self.redirect(redirectURI, ["error": code, "error_description": description, "state": state, "iss": issuer])
        }
        if let oversized {
            return fail("invalid_request", "\(oversized) is longer than \(Self.parameterLimits[oversized] ?? 0) bytes.")
        }
        guard value("response_type") == "code" else { return fail("unsupported_response_type", "Only response_type=code is supported.") }
        let scope = (value("scope") ?? "").split(separator: " ").map { String($0) }
        guard scope.contains("openid") else { return fail("invalid_scope", "The openid scope is required.") }
        let challenge = value("code_challenge")
        switch value("code_challenge_method") {
        case nil where challenge == nil, "S256": break
        case nil: return fail("invalid_request", "code_challenge_method must be S256.")
        default: return fail("invalid_request", "code_challenge_method must be S256 (plain is refused).")
        }
        if let challenge {
            guard (43...128).contains(challenge.utf8.count), Base64URLBytes(encoded: challenge) != nil else {
                return fail("invalid_request", "code_challenge is not a base64url S256 challenge.")
            }
        } else if client.isPublic {
            return fail("invalid_request", "PKCE (code_challenge with S256) is required for this client.")
        }
        let prompt = (value("prompt") ?? "").split(separator: " ").map { String($0) }
        guard prompt.allSatisfy(["none", "login", "consent", "create"].contains), !(prompt.contains("none") && prompt.count > 1) else {
            return fail("invalid_request", "prompt must be none, or any of login, consent, create.")
        }
        var maxAge: Int?
        if let text = value("max_age") {
            guard let number = Int(text), number >= 0 else { return fail("invalid_request", "max_age must be a whole number of seconds.") }
            maxAge = number
        }
        let pending = AuthorizationRequest(
            clientID: client.id, redirectURI: redirectURI, scope: scope.filter(Self.scopes.contains), state: state,
            nonce: value("nonce"), codeChallenge: challenge, prompt: prompt, maxAge: maxAge, loginHint: value("login_hint"),
            createdAt: service.now())

        let signedIn = try? await sessions.optional(request)
        if let signedIn, !prompt.contains("login"), !prompt.contains("create"), fresh(signedIn, for: pending) {
            let consented = try await hasConsent(signedIn.account, client: client, scope: pending.scope)
            if consented && !prompt.contains("consent") {
                return try await issueCode(pending, client: client, signedIn: signedIn)
            }
            if prompt.contains("none") { return fail("consent_required", "The person has not consented to this application.") }
        } else if prompt.contains("none") {
            return fail("login_required", "The person is not signed in.")
        }
        // The web UI signs the person in (and asks consent), then comes back with the request:
        // stored, so at most pendingRequestsPerAddress per address per requestLifetime.
        guard try await admitPendingRequest(service.client(request, context)) else {
            return fail("temporarily_unavailable", "Too many sign-in requests from this network; try again in a few minutes.")
        }
        let id = RelyingParty.randomBytes(32)
        try await store.saveOAuthRequest(
            hash: Array(SHA256.hash(data: id)), clientID: client.id, request: Array(try JSONEncoder().encode(pending)),
            createdAt: pending.createdAt, expiresAt: pending.createdAt.addingTimeInterval(Self.requestLifetime))
        var headers = HTTPFields()
        headers[.location] = "/#authorize=" + Base64URLBytes(id).base64URL
        headers[.cacheControl] = "no-store"
        return Response(status: .found, headers: headers)
    }

    /// The session satisfies the request's `prompt=login` (made after the request) and `max_age`.
    func fresh(_ signedIn: PasskeyService.SignedIn, for pending: AuthorizationRequest) -> Bool {
        if pending.prompt.contains("login") && signedIn.session.createdAt < pending.createdAt { return false }
        if let maxAge = pending.maxAge, service.now().timeIntervalSince(signedIn.session.createdAt) > Double(maxAge) { return false }
        return true
    }

    func hasConsent(_ account: Account, client: OAuthClient, scope: [String]) async throws -> Bool {
        if client.firstParty { return true }
        guard let granted = try await store.consent(accountID: account.id, clientID: client.id) else { return false }
        return Set(scope).isSubset(of: Set(granted.split(separator: " ").map { String($0) }))
    }

    func pendingRequest(_ context: PasskeyRequestContext) async throws -> (
        hash: [UInt8], request: AuthorizationRequest, client: OAuthClient
    ) {
        guard let text = context.parameters.get("id"), let id = Base64URLBytes(encoded: text)?.bytes, id.count == 32,
            let stored = try await store.oauthRequest(hash: Array(SHA256.hash(data: id)), now: service.now()),
            let pending = try? JSONDecoder().decode(AuthorizationRequest.self, from: Data(stored.request)),
            let client = try await store.oauthClient(id: stored.clientID)
        else {
            throw PasskeyServiceError.invalid(
                .invalidAuthorizationRequest, "This sign-in request is unknown or expired; start again from the app.")
        }
        return (Array(SHA256.hash(data: id)), pending, client)
    }

    struct RequestInfoJSON: Encodable {
        struct Client: Encodable {
            let id: String
            let name: String
        }
        let client: Client
        let scopes: [String]
        let signedIn: Bool
        /// Sign in (again) first: nobody is signed in, or the app asked for a fresh sign-in.
        let signInNeeded: Bool
        let consentNeeded: Bool
        let allowSignUp: Bool
        let create: Bool
        let loginHint: String?
    }

    /// `GET /oauth2/authorize/requests/{id}`: what the web UI shows for a pending request.
    func requestInfo(_ request: Request, _ context: PasskeyRequestContext, sessions: SessionResolver) async throws -> Response {
        let (_, pending, client) = try await pendingRequest(context)
        let signedIn = try? await sessions.optional(request)
        let ready = signedIn.map { fresh($0, for: pending) } ?? false
        var consent = client.firstParty
        if let signedIn { consent = try await hasConsent(signedIn.account, client: client, scope: pending.scope) }
        return try HTTP.json(
            RequestInfoJSON(
                client: .init(id: client.id, name: client.name), scopes: pending.scope, signedIn: signedIn != nil, signInNeeded: !ready,
                consentNeeded: !consent || pending.prompt.contains("consent"), allowSignUp: client.allowSignUp,
                create: pending.prompt.contains("create") && client.allowSignUp, loginHint: pending.loginHint))
    }

    struct DecisionBody: APIRequestBody {
        var approve: Bool?
        init(json: JSONObject) throws { approve = try json.optionalBool("approve") }
    }

    struct RedirectJSON: Encodable { let redirect: String }

    /// `POST /oauth2/authorize/requests/{id}` `{approve}`: the signed-in person's answer.
    func decide(_ request: Request, _ context: PasskeyRequestContext, sessions: SessionResolver) async throws -> Response {
        let (hash, pending, client) = try await pendingRequest(context)
        let body = try await request.decode(DecisionBody.self, limit: service.configuration.maxBodySize)
        guard let signedIn = try await sessions.optional(request) else { throw PasskeyServiceError.notSignedIn }
        if body.approve == false {
            try await store.deleteOAuthRequest(hash: hash)
            return try HTTP.json(
                RedirectJSON(
                    redirect: Self.location(
                        pending.redirectURI,
                        ["error": "access_denied", "error_description": "The person declined.", "state": pending.state, "iss": issuer])))
        }
        guard fresh(signedIn, for: pending) else { throw PasskeyServiceError.reauthenticationRequired }
        // An account made during this request (sign-up) only for a client that allows it.
        if !client.allowSignUp && signedIn.account.createdAt > pending.createdAt {
            throw PasskeyServiceError.invalid(.signUpNotAllowed, "\(client.name) does not let new accounts be created while signing in.")
        }
        let consented = try await hasConsent(signedIn.account, client: client, scope: pending.scope)
        if !consented || pending.prompt.contains("consent") {
            guard body.approve == true else {
                throw PasskeyServiceError.invalid(.consentRequired, "Approve or decline this application first.")
            }
            try await store.saveConsent(
                accountID: signedIn.account.id, clientID: client.id, scope: pending.scope.joined(separator: " "), at: service.now())
        }
        try await store.deleteOAuthRequest(hash: hash)
        let response = try await issueCode(pending, client: client, signedIn: signedIn)
        return try HTTP.json(RedirectJSON(redirect: response.headers[.location] ?? pending.redirectURI))
    }

    /// Issues a single-use code bound to the client, redirect URI, PKCE challenge, nonce and
    /// session, and redirects with it (and `iss`, RFC 9207).
    func issueCode(_ pending: AuthorizationRequest, client: OAuthClient, signedIn: PasskeyService.SignedIn) async throws -> Response {
        let code = RelyingParty.randomBytes(32)
        let time = service.now()
        let grant = Grant(
            redirectURI: pending.redirectURI, codeChallenge: pending.codeChallenge, nonce: pending.nonce, scope: pending.scope,
            sessionHash: signedIn.session.tokenHash, authTime: Int(signedIn.session.createdAt.timeIntervalSince1970),
            method: signedIn.session.method)
        try await store.saveOAuthCode(
            hash: Array(SHA256.hash(data: code)),
            grant: OAuthGrant(
                clientID: client.id, accountID: signedIn.account.id, grant: Array(try JSONEncoder().encode(grant)), family: nil,
                expiresAt: time.addingTimeInterval(Self.codeLifetime)), createdAt: time)
        await service.audit(.oidcAuthorized, accountID: signedIn.account.id, client: PasskeyService.Client(), detail: client.id)
        return Self.redirect(pending.redirectURI, ["code": Base64URLBytes(code).base64URL, "state": pending.state, "iss": issuer])
    }

    // MARK: Answers

    static func jsonBytes(_ value: JSONValue) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }

    static func location(_ base: String, _ parameters: [String: String?]) -> String {
        var components = URLComponents(string: base) ?? URLComponents()
        var items = components.queryItems ?? []
        for (name, value) in parameters.sorted(by: { $0.key < $1.key }) {
            if let value { items.append(URLQueryItem(name: name, value: value)) }
        }
        components.queryItems = items.isEmpty ? nil : items
        // `+` in a query value reads as a space to most servers: encode it.
        components.percentEncodedQuery = components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B")
        return components.string ?? base
    }

    static func redirect(_ base: String, _ parameters: [String: String?]) -> Response {
        var headers = HTTPFields()
        headers[.location] = location(base, parameters)
        headers[.cacheControl] = "no-store"
        return Response(status: .found, headers: headers)
    }

    static func tokenError(_ error: OAuthError) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        if error.status == .unauthorized { headers[.wwwAuthenticate] = #"Basic realm="passkeyd""# }
        let body: JSONValue = .object(["error": .string(error.code), "error_description": .string(error.description)])
        return Response(status: error.status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: jsonBytes(body))))
    }

    static func errorPage(_ title: String, _ text: String) -> Response { page(title, text, status: .badRequest) }

    static func page(_ title: String, _ text: String, status: HTTPResponse.Status, headers extra: HTTPFields = [:]) -> Response {
        func escaped(_ value: String) -> String {
            value.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(
                of: ">", with: "&gt;")
        }
        let html = """
            <!doctype html><html lang="en"><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(escaped(title))</title><link rel="stylesheet" href="/app.css">
            <main><section class="card"><h1>\(escaped(title))</h1><p>\(escaped(text))</p></section></main></html>
            """
        var headers = extra
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html)))
    }
}

/// Access-token claims for a session (shared by the sign-in answers and the token endpoint).
enum AccessTokenClaimsFactory {
    static func claims(tokens: AccessTokens, account: Account, session: SessionRecord, audiences: [String], lifetime: Int, now: Date)
        -> AccessTokenClaims
    {
        let issued = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let expires = min(issued.addingTimeInterval(Double(lifetime)), session.expiresAt)
        return AccessTokenClaims(
            iss: IssuerClaim(value: tokens.issuer), sub: SubjectClaim(value: account.id.uuidString.lowercased()),
            aud: AudienceClaim(value: audiences), iat: IssuedAtClaim(value: issued), nbf: NotBeforeClaim(value: issued),
            exp: ExpirationClaim(value: expires), jti: IDClaim(value: UUID.random().uuidString.lowercased()),
            sid: AccessTokens.sessionID(session),
            amr: AccessTokens.amr(method: session.method), auth_time: Int(session.createdAt.timeIntervalSince1970.rounded(.down)),
            username: account.username, externalId: account.externalID)
    }
}
