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
        let limited = collection.group().add(middleware: ClientRateLimitMiddleware(service: service))
        limited.get("oauth2/authorize") { request, _ in try await authorize(request, sessions: sessions) }
        limited.get("oauth2/authorize/requests/:id") { request, context in try await requestInfo(request, context, sessions: sessions) }
        limited.group().add(middleware: JSONRequestMiddleware())
            .post("oauth2/authorize/requests/:id") { request, context in try await decide(request, context, sessions: sessions) }
        limited.post("oauth2/token") { request, context in try await token(request, context) }
        limited.post("oauth2/revoke") { request, _ in try await revoke(request) }
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
    func authorize(_ request: Request, sessions: SessionResolver) async throws -> Response {
        let query = Self.fields(request.uri.query ?? "")
        func value(_ name: String) -> String? { query[name] }
        // Without a known client and one of its exact redirect URIs, nothing is redirected.
        guard let clientID = value("client_id"), let client = try await store.oauthClient(id: clientID) else {
            return Self.errorPage("Unknown client", "The application that sent you here is not registered with this sign-in service.")
        }
        guard let redirectURI = value("redirect_uri"), client.redirectURIs.contains(redirectURI) else {
            return Self.errorPage("Invalid redirect", "The application sent you here with an address it did not register (redirect_uri).")
        }
        let state = value("state")
        func fail(_ code: String, _ description: String) -> Response {
            Self.redirect(redirectURI, ["error": code, "error_description": description, "state": state, "iss": issuer])
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
            nonce: value("nonce").map { String($0.prefix(512)) }, codeChallenge: challenge, prompt: prompt, maxAge: maxAge,
            loginHint: value("login_hint").map { String($0.prefix(256)) }, createdAt: service.now())

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
        // The web UI signs the person in (and asks consent), then comes back with the request.
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

    // MARK: Token endpoint

    /// The client of a token or revocation request (RFC 6749 §2.3.1): `client_secret_basic`,
    /// `client_secret_post`, or `none` for a public client.
    func authenticateClient(_ request: Request, form: [String: String]) async throws -> OAuthClient {
        var id = form["client_id"]
        var secret = form["client_secret"]
        if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("basic ") {
            guard let decoded = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
                let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
            else { throw OAuthError(code: "invalid_client", description: "Malformed Basic credentials.", status: .unauthorized) }
            id = String(text[..<colon]).removingPercentEncoding
            secret = String(text[text.index(after: colon)...]).removingPercentEncoding
        }
        guard let id, let client = try await store.oauthClient(id: id) else {
            throw OAuthError(code: "invalid_client", description: "Unknown client.", status: .unauthorized)
        }
        if let expected = client.secretHash {
            // Digests compare in constant time.
            guard let secret, Array(SHA256.hash(data: Array(secret.utf8))) == expected else {
                throw OAuthError(code: "invalid_client", description: "Wrong client credentials.", status: .unauthorized)
            }
        }
        return client
    }

    static func form(_ request: Request, limit: Int) async throws -> [String: String] {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/x-www-form-urlencoded") else {
            throw OAuthError(code: "invalid_request", description: "Send the parameters as application/x-www-form-urlencoded.")
        }
        let buffer = try await request.body.collect(upTo: limit)
        var repeated: String?
        let result = fields(String(buffer: buffer), repeated: &repeated)
        // RFC 6749 §3.2: parameters must not be repeated.
        if let repeated { throw OAuthError(code: "invalid_request", description: "\(repeated) is repeated.") }
        return result
    }

    /// `application/x-www-form-urlencoded` fields (a form body, or a query: `+` is a space).
    static func fields(_ text: String) -> [String: String] {
        var repeated: String?
        return fields(text, repeated: &repeated)
    }

    static func fields(_ text: String, repeated: inout String?) -> [String: String] {
        var result: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ") }
            guard let name = parts.first?.removingPercentEncoding else { continue }
            guard result[name] == nil else {
                repeated = repeated ?? name
                continue
            }
            result[name] = parts.count > 1 ? (parts[1].removingPercentEncoding ?? parts[1]) : ""
        }
        return result
    }

    struct TokenJSON: Encodable {
        let access_token: String
        let token_type = "Bearer"
        let expires_in: Int
        let id_token: String
        let refresh_token: String?
        let scope: String
    }

    /// `POST /oauth2/token`.
    func token(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        do {
            let form = try await Self.form(request, limit: service.configuration.maxBodySize)
            let client = try await authenticateClient(request, form: form)
            switch form["grant_type"] {
            case "authorization_code": return try await exchangeCode(form, client: client)
            case "refresh_token": return try await refresh(form, client: client)
            case nil: throw OAuthError(code: "invalid_request", description: "grant_type is required.")
            default: throw OAuthError(code: "unsupported_grant_type", description: "authorization_code and refresh_token are supported.")
            }
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
    }

    func exchangeCode(_ form: [String: String], client: OAuthClient) async throws -> Response {
        guard let text = form["code"], let code = Base64URLBytes(encoded: text)?.bytes, code.count == 32 else {
            throw OAuthError(code: "invalid_grant", description: "Unknown code.")
        }
        let time = service.now()
        let family = UUID.random().uuidString.lowercased()
        guard let stored = try await store.useOAuthCode(hash: Array(SHA256.hash(data: code)), family: family, at: time) else {
            throw OAuthError(code: "invalid_grant", description: "Unknown code.")
        }
        if stored.usedAt != nil {
            // A code used twice: whatever its first exchange issued is revoked (RFC 9700 §4.5).
            if let first = stored.family { try await store.revokeRefreshFamily(first, at: time) }
            await service.audit(.oidcGrantReused, accountID: stored.accountID, client: PasskeyService.Client(), detail: "code \(client.id)")
            throw OAuthError(code: "invalid_grant", description: "This code was already used.")
        }
        guard stored.expiresAt > time else { throw OAuthError(code: "invalid_grant", description: "This code expired.") }
        guard stored.clientID == client.id, let grant = try? JSONDecoder().decode(Grant.self, from: Data(stored.grant)) else {
            throw OAuthError(code: "invalid_grant", description: "This code was issued to another client.")
        }
        guard form["redirect_uri"] == grant.redirectURI else {
            throw OAuthError(code: "invalid_grant", description: "redirect_uri differs from the authorization request's.")
        }
        if let challenge = grant.codeChallenge {
            guard let verifier = form["code_verifier"], (43...128).contains(verifier.utf8.count),
                Base64URLBytes(Array(SHA256.hash(data: Array(verifier.utf8)))).base64URL == challenge
            else { throw OAuthError(code: "invalid_grant", description: "code_verifier does not match the code_challenge.") }
        } else if form["code_verifier"] != nil {
            throw OAuthError(code: "invalid_grant", description: "The authorization request had no code_challenge.")
        }
        return try await issueTokens(grant, client: client, accountID: stored.accountID, family: family)
    }

    func refresh(_ form: [String: String], client: OAuthClient) async throws -> Response {
        guard let text = form["refresh_token"], let token = Self.refreshTokenBytes(text) else {
            throw OAuthError(code: "invalid_grant", description: "Unknown refresh token.")
        }
        let time = service.now()
        guard let stored = try await store.useRefreshToken(hash: Array(SHA256.hash(data: token)), at: time), stored.revokedAt == nil else {
            throw OAuthError(code: "invalid_grant", description: "Unknown or revoked refresh token.")
        }
        guard stored.clientID == client.id else {
            throw OAuthError(code: "invalid_grant", description: "This refresh token belongs to another client.")
        }
        if stored.usedAt != nil {
            // Reuse of a rotated token: someone else holds the family. End it (RFC 9700 §4.14.2).
            if let family = stored.family { try await store.revokeRefreshFamily(family, at: time) }
            await service.audit(
                .oidcGrantReused, accountID: stored.accountID, client: PasskeyService.Client(), detail: "refresh \(client.id)")
            throw OAuthError(code: "invalid_grant", description: "This refresh token was already used; the whole grant is revoked.")
        }
        guard stored.expiresAt > time, let grant = try? JSONDecoder().decode(Grant.self, from: Data(stored.grant)) else {
            throw OAuthError(code: "invalid_grant", description: "This refresh token expired.")
        }
        return try await issueTokens(grant, client: client, accountID: stored.accountID, family: stored.family ?? UUID.random().uuidString)
    }

    static func refreshTokenBytes(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("rt_"), let bytes = Base64URLBytes(encoded: String(text.dropFirst(3)))?.bytes, bytes.count == 32 else {
            return nil
        }
        return bytes
    }

    /// Access token (a JWT for the client), ID token, and with `offline_access` a rotated
    /// refresh token. The grant's session must still be live and its account enabled.
    func issueTokens(_ grant: Grant, client: OAuthClient, accountID: UUID, family: String) async throws -> Response {
        guard let (session, account) = try await store.session(tokenHash: grant.sessionHash, now: service.now()), account.id == accountID
        else {
            throw OAuthError(code: "invalid_grant", description: "The sign-in behind this grant has ended.")
        }
        let time = service.now()
        let lifetime = service.configuration.tokens.lifetimeSeconds
        var access = AccessTokenClaimsFactory.claims(
            tokens: service.tokens, account: account, session: session, audiences: [client.id], lifetime: lifetime, now: time)
        access.client_id = client.id
        access.scope = grant.scope.joined(separator: " ")
        let accessToken = try await service.tokens.sign(access, type: "at+jwt")
        let issued = Date(timeIntervalSince1970: time.timeIntervalSince1970.rounded(.down))
        let idClaims = IDTokenClaims(
            iss: IssuerClaim(value: issuer), sub: SubjectClaim(value: account.id.uuidString.lowercased()),
            aud: AudienceClaim(value: [client.id]),
            exp: ExpirationClaim(value: issued.addingTimeInterval(Double(lifetime))), iat: IssuedAtClaim(value: issued),
            auth_time: grant.authTime, nonce: grant.nonce, amr: AccessTokens.amr(method: grant.method),
            acr: ["passkey", "sign_up"].contains(grant.method) ? "phr" : "0", sid: AccessTokens.sessionID(session), azp: client.id,
            preferred_username: grant.scope.contains("profile") ? account.username : nil,
            name: grant.scope.contains("profile") ? account.displayName : nil,
            email: grant.scope.contains("email") && account.username.contains("@") ? account.username : nil)
        let idToken = try await service.tokens.sign(idClaims, algorithm: client.idTokenAlgorithm)
        var refreshToken: String?
        if grant.scope.contains("offline_access") {
            let bytes = RelyingParty.randomBytes(32)
            try await store.saveRefreshToken(
                hash: Array(SHA256.hash(data: bytes)),
                grant: OAuthGrant(
                    clientID: client.id, accountID: account.id, grant: Array(try JSONEncoder().encode(grant)), family: family,
                    expiresAt: min(time.addingTimeInterval(Double(service.configuration.oidcRefreshTokenSeconds)), session.expiresAt)),
                createdAt: time)
            refreshToken = "rt_" + Base64URLBytes(bytes).base64URL
        }
        await service.audit(.oidcTokenIssued, accountID: account.id, client: PasskeyService.Client(), detail: client.id)
        var headers = HTTPFields()
        headers[HTTPField.Name("Pragma")!] = "no-cache"
        return try HTTP.json(
            TokenJSON(
                access_token: accessToken, expires_in: Int(access.exp.value.timeIntervalSince(issued)), id_token: idToken,
                refresh_token: refreshToken, scope: grant.scope.joined(separator: " ")), headers: headers)
    }

    // MARK: Userinfo, revocation, logout

    /// `GET|POST /oauth2/userinfo` (OIDC Core §5.3) with an access token from the token endpoint.
    func userinfo(_ request: Request) async throws -> Response {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer "),
            let claims = try await service.tokens.verify(
                String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces), anyAudience: true),
            let clientID = claims.client_id,
            let hash = Base64URLBytes(encoded: claims.sid)?.bytes,
            let (_, account) = try await store.session(tokenHash: hash, now: service.now()),
            account.id.uuidString.lowercased() == claims.sub.value
        else {
            var headers = HTTPFields()
            headers[.wwwAuthenticate] = #"Bearer error="invalid_token""#
            headers[.cacheControl] = "no-store"
            return Response(status: .unauthorized, headers: headers)
        }
        let scope = (claims.scope ?? "").split(separator: " ").map { String($0) }
        var info: [String: JSONValue] = ["sub": .string(claims.sub.value)]
        if scope.contains("profile") {
            info["preferred_username"] = .string(account.username)
            info["name"] = .string(account.displayName)
        }
        if scope.contains("email"), account.username.contains("@") {
            info["email"] = .string(account.username)
            info["email_verified"] = .bool(false)
        }
        _ = clientID
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Self.jsonBytes(.object(info)))))
    }

    /// `POST /oauth2/revoke` (RFC 7009): a refresh token ends its whole grant; an access token is
    /// short-lived and stays valid until it expires (the answer is 200 either way, §2.2).
    func revoke(_ request: Request) async throws -> Response {
        do {
            let form = try await Self.form(request, limit: service.configuration.maxBodySize)
            let client = try await authenticateClient(request, form: form)
            if let text = form["token"], let bytes = Self.refreshTokenBytes(text) {
                let hash = Array(SHA256.hash(data: bytes))
                if let family = try await store.refreshFamily(hash: hash),
                    let stored = try await store.useRefreshToken(hash: hash, at: service.now()),
                    stored.clientID == client.id
                {
                    try await store.revokeRefreshFamily(family, at: service.now())
                }
            }
            var headers = HTTPFields()
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
    }

    /// `GET /oauth2/logout` (RP-Initiated Logout 1.0): ends the browser's passkeyd session and
    /// returns to a `post_logout_redirect_uri` registered for the client. Only an `id_token_hint`
    /// passkeyd signed for the signed-in person ends the session: anything else (a link on
    /// another site, an image) asks the person instead (§2: the OP should confirm), so nobody
    /// can be signed out from elsewhere.
    func logout(_ request: Request, sessions: SessionResolver) async throws -> Response {
        let query = Self.fields(request.uri.query ?? "")
        var clientID = query["client_id"]
        var hinted: (audience: String, subject: String)?
        if let hint = query["id_token_hint"] { hinted = try? await service.tokens.audienceOfOwnToken(hint) }
        if clientID == nil { clientID = hinted?.audience }
        var redirect: String?
        if let target = query["post_logout_redirect_uri"] {
            guard let clientID, let client = try await store.oauthClient(id: clientID), client.postLogoutURIs.contains(target) else {
                return Self.errorPage("Invalid sign-out address", "The application asked to return to an address it did not register.")
            }
            redirect = Self.location(target, ["state": query["state"]])
        }
        var headers = HTTPFields()
        if let signedIn = try? await sessions.optional(request) {
            guard hinted?.subject == signedIn.account.id.uuidString.lowercased() else {
                return Self.page(
                    "Sign out?",
                    "An application asked to sign you out of passkeyd. To sign out, use the Sign out button on your account page.",
                    status: .ok)
            }
            try await store.revokeSession(tokenHash: signedIn.session.tokenHash)
            await service.audit(.sessionRevoked, accountID: signedIn.account.id, client: PasskeyService.Client(), detail: "oidc_logout")
        }
        headers[.setCookie] = HTTP.sessionCookie(service.configuration, token: nil, maxAge: 0)
        headers[.cacheControl] = "no-store"
        if let redirect {
            headers[.location] = redirect
            return Response(status: .found, headers: headers)
        }
        return Self.page("Signed out", "You are signed out.", status: .ok, headers: headers)
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
