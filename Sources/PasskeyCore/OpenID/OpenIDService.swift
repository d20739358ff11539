import Crypto
import Foundation
import JWTKit
import PasskeyStore
import WebAuthn

/// passkeyd as an OpenID Provider (OpenID Connect Core 1.0, the authorization code flow with
/// PKCE, per the OAuth 2.0 Security BCP, RFC 9700): its rules and every store call they make.
/// Signing in *is* a passkey: an authorization request that needs a sign-in or consent waits
/// in the store while the web UI signs the person in, then comes back here. docs/oidc.md.
///
/// It takes plain values (the request's parameters, the signed-in session or nil, the client's
/// credentials) and returns values (an ``AuthorizationOutcome``, a ``TokenResponse``, userinfo
/// claims, the discovery document); protocol refusals are ``OAuthError``s. The HTTP edge
/// (`OpenIDProvider` in PasskeyServer) parses requests and writes the answers.
///
/// ```swift
/// let openID = OpenIDService(service: service)
/// switch try await openID.authorize(query, queryBytes: raw.utf8.count, signedIn: nil, from: client) {
/// case .code(let location), .error(_, let location): redirect(to: location)
/// case .interaction(let id): showSignIn(id)
/// case .page(let page): show(page)
/// }
/// ```
public struct OpenIDService: Sendable {
    public let service: PasskeyService
    var store: any PasskeyStore { service.store }
    public var issuer: String { service.configuration.issuer }
    public static let scopes = ["openid", "profile", "email", "offline_access"]
    /// Authorization codes live 60 s (RFC 9700 §4.5: short-lived, single use).
    public static let codeLifetime: TimeInterval = 60
    /// A pending authorization request waits this long for its sign-in.
    public static let requestLifetime = PasskeyService.openIDRequestLifetime

    public init(service: PasskeyService) {
        self.service = service
    }

    // MARK: Values kept between requests

    /// An authorization request waiting for a sign-in or consent (stored as JSON with these
    /// names: renaming a field forgets the pending requests of an upgrade).
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

    /// What a code or refresh token grants (stored opaquely with it, as JSON with these names).
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

    // MARK: Answers

    /// What `GET /oauth2/authorize` answers.
    public enum AuthorizationOutcome: Sendable, Equatable {
        /// Back to the client with a code: its redirect URI with `code`, `state` and `iss`.
        case code(location: String)
        /// Back to the client with an error (RFC 6749 §4.1.2.1): the redirect URI is registered.
        case error(OAuthError, location: String)
        /// The person signs in and/or consents first: the web UI reads and answers the pending
        /// request by this id (base64url).
        case interaction(requestID: String)
        /// An error page, no redirect: the client or its redirect URI cannot be trusted with one.
        case page(OpenIDPage)
    }

    /// What the web UI shows for a pending request.
    public struct AuthorizationPrompt: Sendable, Equatable {
        public let clientID: String
        public let clientName: String
        public let scopes: [String]
        public let signedIn: Bool
        /// Sign in (again) first: nobody is signed in, or the app asked for a fresh sign-in.
        public let signInNeeded: Bool
        public let consentNeeded: Bool
        public let allowSignUp: Bool
        public let create: Bool
        public let loginHint: String?
    }

    // MARK: Authorization endpoint

    /// `GET /oauth2/authorize` with the query's fields (`queryBytes`: the whole query's length;
    /// `repeated`: the names that came more than once, each read first-wins in `query`).
    /// Every parameter is bounded (``parameterLimits``) before anything is looked up or stored.
    public func authorize(
        _ query: [String: String], repeated: Set<String> = [], queryBytes: Int, signedIn: PasskeyService.SignedIn?,
        from requester: PasskeyService.Client
    ) async throws -> AuthorizationOutcome {
        guard queryBytes <= Self.maxQueryBytes else { return .page(.requestTooLong) }
        // RFC 6749 §3.1: "Request and response parameters MUST NOT be included more than once."
        // Which of two clients or redirect URIs was meant is unknown: nothing is redirected.
        if let name = ["client_id", "redirect_uri"].first(where: repeated.contains) { return .page(.repeated(name)) }
        let oversized = Self.oversized(query)
        // Without a known client and one of its exact redirect URIs, nothing is redirected.
        guard oversized != "client_id", let clientID = query["client_id"], let client = try await store.oauthClient(id: clientID) else {
            return .page(.unknownClient)
        }
        guard let redirectURI = query["redirect_uri"], client.redirectURIs.contains(redirectURI) else { return .page(.invalidRedirect) }
        // A state too long to send back is not sent back: the error goes on a page.
        guard oversized != "state" else { return .page(.stateTooLong(limit: Self.parameterLimits["state"] ?? 0)) }
        // Nor is a state that could be sent back two ways.
        guard !repeated.contains("state") else { return .page(.repeated("state")) }
        let state = query["state"]
        func fail(_ code: OAuthError.Code, _ description: String) -> AuthorizationOutcome {
            .error(
                OAuthError(code, description),
                location: Self.location(
                    redirectURI, ["error": code.rawValue, "error_description": description, "state": state, "iss": issuer]))
        }
        if let oversized {
            return fail(.invalidRequest, "\(oversized) is longer than \(Self.parameterLimits[oversized] ?? 0) bytes.")
        }
        if let name = repeated.sorted().first {
            // Only a name passkeyd reads goes back in the description, never arbitrary text.
            return fail(.invalidRequest, "\(Self.parameterLimits[name] == nil ? "A parameter" : name) is repeated (RFC 6749 §3.1).")
        }
        guard query["response_type"] == "code" else { return fail(.unsupportedResponseType, "Only response_type=code is supported.") }
        let scope = (query["scope"] ?? "").split(separator: " ").map { String($0) }
        guard scope.contains("openid") else { return fail(.invalidScope, "The openid scope is required.") }
        let challenge = query["code_challenge"]
        switch query["code_challenge_method"] {
        case nil where challenge == nil, "S256": break
        case nil: return fail(.invalidRequest, "code_challenge_method must be S256.")
        default: return fail(.invalidRequest, "code_challenge_method must be S256 (plain is refused).")
        }
        if let challenge {
            guard (43...128).contains(challenge.utf8.count), Base64URLBytes(encoded: challenge) != nil else {
                return fail(.invalidRequest, "code_challenge is not a base64url S256 challenge.")
            }
        } else if client.isPublic {
            return fail(.invalidRequest, "PKCE (code_challenge with S256) is required for this client.")
        }
        let prompt = (query["prompt"] ?? "").split(separator: " ").map { String($0) }
        guard prompt.allSatisfy(["none", "login", "consent", "create"].contains), !(prompt.contains("none") && prompt.count > 1) else {
            return fail(.invalidRequest, "prompt must be none, or any of login, consent, create.")
        }
        var maxAge: Int?
        if let text = query["max_age"] {
            guard let number = Int(text), number >= 0 else { return fail(.invalidRequest, "max_age must be a whole number of seconds.") }
            maxAge = number
        }
        let pending = AuthorizationRequest(
            clientID: client.id, redirectURI: redirectURI, scope: scope.filter(Self.scopes.contains), state: state,
            nonce: query["nonce"], codeChallenge: challenge, prompt: prompt, maxAge: maxAge, loginHint: query["login_hint"],
            createdAt: service.now())

        if let signedIn, !prompt.contains("login"), !prompt.contains("create"), fresh(signedIn, for: pending) {
            let consented = try await hasConsent(signedIn.account, client: client, scope: pending.scope)
            if consented && !prompt.contains("consent") {
                return .code(location: try await issueCode(pending, client: client, signedIn: signedIn))
            }
            if prompt.contains("none") { return fail(.consentRequired, "The person has not consented to this application.") }
        } else if prompt.contains("none") {
            return fail(.loginRequired, "The person is not signed in.")
        }
        // The web UI signs the person in (and asks consent), then comes back with the request:
        // stored, so at most pendingRequestsPerAddress per address per requestLifetime.
        guard try await admitPendingRequest(requester) else {
            return fail(.temporarilyUnavailable, "Too many sign-in requests from this network; try again in a few minutes.")
        }
        let id = RelyingParty.randomBytes(32)
        try await store.saveOAuthRequest(
            hash: Array(SHA256.hash(data: id)), clientID: client.id, request: Array(try JSONEncoder().encode(pending)),
            createdAt: pending.createdAt, expiresAt: pending.createdAt.addingTimeInterval(Self.requestLifetime))
        return .interaction(requestID: Base64URLBytes(id).base64URL)
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

    /// The pending request `id` (base64url, as ``AuthorizationOutcome/interaction(requestID:)``
    /// gave it), or `invalid_authorization_request`.
    func pendingRequest(_ id: String) async throws -> (hash: [UInt8], request: AuthorizationRequest, client: OAuthClient) {
        guard let id = Base64URLBytes(encoded: id)?.bytes, id.count == 32,
            let stored = try await store.oauthRequest(hash: Array(SHA256.hash(data: id)), now: service.now()),
            let pending = try? JSONDecoder().decode(AuthorizationRequest.self, from: Data(stored.request)),
            let client = try await store.oauthClient(id: stored.clientID)
        else {
            throw PasskeyServiceError.invalid(
                .invalidAuthorizationRequest, "This sign-in request is unknown or expired; start again from the app.")
        }
        return (Array(SHA256.hash(data: id)), pending, client)
    }

    /// `GET /oauth2/authorize/requests/{id}`: what the web UI shows for a pending request.
    public func prompt(requestID: String, signedIn: PasskeyService.SignedIn?) async throws -> AuthorizationPrompt {
        let (_, pending, client) = try await pendingRequest(requestID)
        let ready = signedIn.map { fresh($0, for: pending) } ?? false
        var consent = client.firstParty
        if let signedIn { consent = try await hasConsent(signedIn.account, client: client, scope: pending.scope) }
        return AuthorizationPrompt(
            clientID: client.id, clientName: client.name, scopes: pending.scope, signedIn: signedIn != nil, signInNeeded: !ready,
            consentNeeded: !consent || pending.prompt.contains("consent"), allowSignUp: client.allowSignUp,
            create: pending.prompt.contains("create") && client.allowSignUp, loginHint: pending.loginHint)
    }

    /// `POST /oauth2/authorize/requests/{id}` `{approve}`: the signed-in person's answer. The
    /// address to send the browser to: the client's redirect URI with a code, or with
    /// `access_denied` when the person declined.
    public func decide(requestID: String, approve: Bool?, signedIn: PasskeyService.SignedIn?) async throws -> String {
        let (hash, pending, client) = try await pendingRequest(requestID)
        guard let signedIn else { throw PasskeyServiceError.notSignedIn }
        if approve == false {
            try await store.deleteOAuthRequest(hash: hash)
            return Self.location(
                pending.redirectURI,
                [
                    "error": OAuthError.Code.accessDenied.rawValue, "error_description": "The person declined.", "state": pending.state,
                    "iss": issuer,
                ])
        }
        guard fresh(signedIn, for: pending) else { throw PasskeyServiceError.reauthenticationRequired }
        // An account made during this request (sign-up) only for a client that allows it.
        if !client.allowSignUp && signedIn.account.createdAt > pending.createdAt {
            throw PasskeyServiceError.invalid(.signUpNotAllowed, "\(client.name) does not let new accounts be created while signing in.")
        }
        let consented = try await hasConsent(signedIn.account, client: client, scope: pending.scope)
        if !consented || pending.prompt.contains("consent") {
            guard approve == true else {
                throw PasskeyServiceError.invalid(.consentRequired, "Approve or decline this application first.")
            }
            try await store.saveConsent(
                accountID: signedIn.account.id, clientID: client.id, scope: pending.scope.joined(separator: " "), at: service.now())
        }
        try await store.deleteOAuthRequest(hash: hash)
        return try await issueCode(pending, client: client, signedIn: signedIn)
    }

    /// Issues a single-use code bound to the client, redirect URI, PKCE challenge, nonce and
    /// session: the redirect URI with it (and `state`, and `iss`, RFC 9207).
    func issueCode(_ pending: AuthorizationRequest, client: OAuthClient, signedIn: PasskeyService.SignedIn) async throws -> String {
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
        await service.audit(
            service.auditEvent(.oidcAuthorized, accountID: signedIn.account.id, client: PasskeyService.Client(), detail: client.id)
                .counted(.signInOIDC))
        return Self.location(pending.redirectURI, ["code": Base64URLBytes(code).base64URL, "state": pending.state, "iss": issuer])
    }

    /// `base` with `parameters` added to its query (nil values left out), names sorted.
    public static func location(_ base: String, _ parameters: [String: String?]) -> String {
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
}

/// A page the provider shows the person instead of redirecting: a title and one sentence.
/// The edge renders it (escaped) with a status: 400 for a refusal, 200 otherwise.
public struct OpenIDPage: Sendable, Equatable {
    public let title: String
    public let message: String

    public init(_ title: String, _ message: String) {
        self.title = title
        self.message = message
    }

    static let requestTooLong = Self("Request too long", "The application sent you here with a request too long to read.")
    static let unknownClient = Self(
        "Unknown client", "The application that sent you here is not registered with this sign-in service.")
    static let invalidRedirect = Self(
        "Invalid redirect", "The application sent you here with an address it did not register (redirect_uri).")
    static func stateTooLong(limit: Int) -> Self {
        Self("Request too long", "The application sent you here with a state longer than \(limit) bytes.")
    }
    static func repeated(_ name: String) -> Self {
        Self("Invalid request", "The application sent you here with \(name) more than once.")
    }
}
