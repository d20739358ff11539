import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyStore
import WebAuthn

/// A server calling passkeyd with an API key (`Authorization: Bearer pkd_…`).
public struct APIKeyCaller: Sendable {
    public let key: APIKey
}

/// Admits requests with a live API key holding `scope`: 401 `invalid_api_key` without one (each
/// failure counted against the address, so keys cannot be guessed in bulk), 403
/// `insufficient_scope` with a key that lacks it, 429 past `apiKeyRequestsPerWindow` for the key.
/// Every use is audited (`api_key_used`).
struct APIKeyMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let service: PasskeyService
    let scope: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let client = service.client(request, context)
        guard let key = try await Self.key(request, service: service) else {
            try await service.limitFailedAPIKey(client)
            throw PasskeyServiceError.invalidAPIKey
        }
        guard key.scopes.contains(scope) else { throw PasskeyServiceError.insufficientScope(scope) }
        try await service.limitAPIKey(key)
        var context = context
        context.apiKey = APIKeyCaller(key: key)
        await service.audit(
            .apiKeyUsed, client: client, detail: "\(key.name) (\(key.id.uuidString.lowercased())) \(request.method) \(request.uri.path)")
        try? await service.store.touchAPIKey(id: key.id, at: service.now())
        return try await next(request, context)
    }

    static func key(_ request: Request, service: PasskeyService) async throws -> APIKey? {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") else { return nil }
        let value = authorization.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard value.hasPrefix("pkd_"), value.utf8.count <= 128 else { return nil }
        guard let key = try await service.store.apiKey(hash: Array(SHA256.hash(data: Array(value.utf8)))), key.revokedAt == nil else {
            return nil
        }
        return key
    }
}

extension PasskeyService {
    /// Wrong or unknown API keys from one address: `perAccount` a window, then 429.
    func limitFailedAPIKey(_ client: Client) async throws {
        let limits = configuration.rateLimits
        guard limits.enabled else { return }
        if case .limited(let retryAfter) = try await limiter.hit(
            "apikey-fail:\(client.ipAddress ?? "-")", limit: limits.perAccount, now: now())
        {
            metrics.rateLimited(scope: "api_key_failures")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }

    /// Requests per API key per window.
    func limitAPIKey(_ key: APIKey) async throws {
        guard configuration.rateLimits.enabled else { return }
        if case .limited(let retryAfter) = try await limiter.hit(
            "apikey:\(key.id)", limit: configuration.apiKeyRequestsPerWindow, now: now())
        {
            metrics.rateLimited(scope: "api_key")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }
}

// MARK: Introspection (RFC 7662)

/// `POST /api/auth/introspect` and `POST /oauth2/introspect`: is this token (an access token or
/// a session token) active, and what does it say.
struct IntrospectionJSON: Encodable {
    let active: Bool
    var token_type: String?
    var iss: String?
    var sub: String?
    var aud: [String]?
    var iat: Int?
    var nbf: Int?
    var exp: Int?
    var jti: String?
    var sid: String?
    var amr: [String]?
    var auth_time: Int?
    var username: String?
    var externalId: String?
    /// A client's access token: the client and the scopes granted (RFC 7662 §2.2).
    var client_id: String?
    var scope: String?

    static let inactive = IntrospectionJSON(active: false)
}

extension PasskeyService {
    /// Who introspects (RFC 7662 §2.1: the endpoint "MUST require some form of authorization").
    enum Introspector: Sendable, Equatable {
        /// An API key with the `introspect` scope (the operator's resource servers): every
        /// token passkeyd issued.
        case apiKey
        /// An OAuth client authenticated as at the token endpoint: its own access tokens only.
        case client(String)
    }

    /// RFC 7662 §2.2: `active` only for a live token of an enabled account (a client's token
    /// also needs its grant unrevoked) that the caller may see; nothing else is said of an
    /// inactive one, nor of a token the caller may not see (§4: no more than it needs).
    func introspect(_ token: String, by introspector: Introspector = .apiKey) async throws -> IntrospectionJSON {
        let token = token.trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty, token.utf8.count <= 8192 else { return .inactive }
        if token.split(separator: ".", omittingEmptySubsequences: false).count == 3 {
            // Any audience: a client's access token names the client as its audience.
            guard let claims = try await tokens.verify(token, anyAudience: true),
                let hash = Base64URLBytes(encoded: claims.sid)?.bytes,
                let (_, account) = try await store.session(tokenHash: hash, now: now()),
                account.id.uuidString.lowercased() == claims.sub.value
            else { return .inactive }
            if let clientID = claims.client_id {
                if case .client(let asking) = introspector, asking != clientID { return .inactive }
                if let grant = claims.grant_id, try await store.oauthGrantRevoked(family: grant) { return .inactive }
                // What the token itself says: a client's token carries what its scopes allow.
                return IntrospectionJSON(
                    active: true, token_type: "access_token", iss: claims.iss.value, sub: claims.sub.value, aud: claims.aud.value,
                    iat: Int(claims.iat.value.timeIntervalSince1970), nbf: Int(claims.nbf.value.timeIntervalSince1970),
                    exp: Int(claims.exp.value.timeIntervalSince1970), jti: claims.jti.value, sid: claims.sid, amr: claims.amr,
                    auth_time: claims.auth_time, username: claims.username, externalId: nil, client_id: clientID, scope: claims.scope)
            }
            // A session's own access token: for API keys, and only for passkeyd's own audiences.
            guard introspector == .apiKey, claims.aud.value.contains(where: tokens.audiences.contains) else { return .inactive }
            return IntrospectionJSON(
                active: true, token_type: "access_token", iss: claims.iss.value, sub: claims.sub.value, aud: claims.aud.value,
                iat: Int(claims.iat.value.timeIntervalSince1970), nbf: Int(claims.nbf.value.timeIntervalSince1970),
                exp: Int(claims.exp.value.timeIntervalSince1970), jti: claims.jti.value, sid: claims.sid, amr: claims.amr,
                auth_time: claims.auth_time, username: account.username, externalId: account.externalID)
        }
        guard introspector == .apiKey, let signedIn = try await signedIn(token: token) else { return .inactive }
        let session = signedIn.session
        return IntrospectionJSON(
            active: true, token_type: "session", iss: configuration.issuer, sub: signedIn.account.id.uuidString.lowercased(),
            aud: tokens.audiences, iat: Int(session.createdAt.timeIntervalSince1970), nbf: nil,
            exp: Int(session.expiresAt.timeIntervalSince1970), jti: nil, sid: AccessTokens.sessionID(session),
            amr: AccessTokens.amr(method: session.method), auth_time: Int(session.createdAt.timeIntervalSince1970),
            username: signedIn.account.username, externalId: signedIn.account.externalID)
    }
}

/// The token of an introspection request: `application/x-www-form-urlencoded` (`token=…`, as
/// RFC 7662 §2.1 says) or a JSON object with `token`.
func introspectionToken(_ request: Request, limit: Int) async throws -> String {
    let type = request.headers[.contentType]?.lowercased() ?? ""
    if type.hasPrefix("application/x-www-form-urlencoded") {
        let buffer = try await request.body.collect(upTo: limit)
        guard let token = OpenIDProvider.fields(String(buffer: buffer))["token"] else {
            throw PasskeyServiceError.invalid(.malformedJSON, "token is missing")
        }
        return token
    }
    guard JSONRequestMiddleware.isJSON(request.headers[.contentType]) else { throw APIError.unsupportedMediaType }
    let json = try await HTTP.jsonBody(request, limit: limit)
    do {
        return try json.string("token")
    } catch {
        throw PasskeyServiceError.invalid(.malformedJSON, "token is missing")
    }
}

// MARK: The server API

/// `/api/admin/…`: what an app's server does for the people it already has (docs/integration.md).
/// Each route needs an API key with its scope; the verbs are `AdminService`'s, the ones
/// `passkeyd admin` runs.
struct ServerAPI: Sendable {
    let service: PasskeyService
    var admin: AdminService { AdminService(store: service.store, now: service.now, webhookPolicy: service.configuration.webhookPolicy) }
    var limit: Int { service.configuration.maxBodySize }

    var routes: RouteCollection<PasskeyRequestContext> {
        let api = RouteCollection(context: PasskeyRequestContext.self)
        let read = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "users:read"))
        let write = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "users:write"))
            .add(middleware: JSONRequestMiddleware())
        let hooks = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "webhooks"))
            .add(middleware: JSONRequestMiddleware())
        let clients = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "clients"))
            .add(middleware: JSONRequestMiddleware())

        clients.get("clients") { _, _ in
            try HTTP.json(ClientListJSON(clients: try await service.store.oauthClients().map { ClientJSON($0) }))
        }
        clients.post("clients") { request, context in
            let body = try await request.decode(AddClientBody.self, limit: limit)
            let added = try await admin.addClient(
                name: body.name, redirectURIs: body.redirectURIs, postLogoutURIs: body.postLogoutURIs, isPublic: body.isPublic,
                firstParty: body.firstParty, allowSignUp: body.allowSignUp, idTokenAlgorithm: body.idTokenAlgorithm, by: caller(context)
            )
            return try HTTP.json(ClientJSON(added.client, secret: added.secret), status: .created)
        }
        clients.delete("clients/:id") { _, context in
            try await admin.removeClient(context.parameters.get("id") ?? "", by: caller(context))
            return HTTP.noContent()
        }

        read.get("users") { request, _ in try await findUser(request) }
        read.get("users/:id") { _, context in try HTTP.json(AdminUserJSON(try await account(context))) }
        read.get("users/:id/passkeys") { _, context in
            let account = try await account(context)
            return try HTTP.json(
                PasskeyListJSON(
                    passkeys: try await service.store.passkeys(accountID: account.id).map {
                        PasskeyJSON($0, metadata: service.fidoMetadata)
                    }))
        }
        read.get("users/:id/sessions") { _, context in
            let account = try await account(context)
            let sessions = try await service.store.sessions(accountID: account.id, now: service.now())
            return try HTTP.json(SessionListJSON(sessions: sessions.map { SessionListJSON.Item($0, current: false) }))
        }

        write.post("users") { request, context in try await createUser(request, context) }
        write.patch("users/:id/passkeys/:passkey") { request, context in
            let account = try await account(context)
            let body = try await request.decode(RenamePasskeyBody.self, limit: limit)
            let passkey = try await admin.renamePasskey(try passkeyID(context), of: account, to: body.name, by: caller(context))
            return try HTTP.json(PasskeyJSON(passkey, metadata: service.fidoMetadata))
        }
        write.delete("users/:id/passkeys/:passkey") { _, context in
            let account = try await account(context)
            _ = try await admin.revokePasskey(try passkeyID(context), of: account, by: caller(context))
            return HTTP.noContent()
        }
        write.delete("users/:id/sessions") { _, context in
            let account = try await account(context)
            return try HTTP.json(["revoked": try await admin.revokeSessions(of: account, by: caller(context))])
        }
        write.delete("users/:id/sessions/:session") { _, context in
            let account = try await account(context)
            guard let text = context.parameters.get("session"), let hash = Base64URLBytes(encoded: text)?.bytes, hash.count == 32 else {
                throw PasskeyServiceError.sessionNotFound
            }
            try await admin.revokeSession(hash, of: account, by: caller(context))
            return HTTP.noContent()
        }
        write.post("users/:id/disable") { _, context in
            let account = try await account(context)
            return try HTTP.json(["revokedSessions": try await admin.disable(account, by: caller(context))])
        }
        write.post("users/:id/enable") { _, context in
            try await admin.enable(try await account(context), by: caller(context))
            return HTTP.noContent()
        }
        write.post("users/:id/registration-token") { _, context in
            let account = try await account(context)
            let issued = try await admin.registrationToken(
                for: account, lifetime: Double(service.configuration.tokens.registrationTokenSeconds), by: caller(context))
            return try HTTP.json(RegistrationTokenJSON(registrationToken: issued.token, expiresAt: issued.expiresAt), status: .created)
        }
        write.post("users/:id/recovery-link") { _, context in
            let account = try await account(context)
            let lifetime: TimeInterval = 24 * 3600
            let token = try await service.issueRecoveryLink(for: account, lifetime: lifetime, issuer: caller(context))
            let base = service.configuration.webOrigins.first ?? service.configuration.issuer
            return try HTTP.json(
                RecoveryLinkJSON(url: "\(base)/#recover=\(token)", token: token, expiresAt: service.now().addingTimeInterval(lifetime)),
                status: .created)
        }

        hooks.get("webhooks") { _, _ in
            try HTTP.json(WebhookListJSON(endpoints: try await service.store.webhookEndpoints().map { WebhookJSON($0) }))
        }
        hooks.post("webhooks") { request, _ in
            let body = try await request.decode(AddWebhookBody.self, limit: limit)
            let added = try await admin.addWebhook(url: body.url, events: body.events ?? ["*"])
            return try HTTP.json(WebhookJSON(added.endpoint, secret: added.secret), status: .created)
        }
        hooks.delete("webhooks/:id") { _, context in
            guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else { throw APIError.notFound }
            try await admin.removeWebhook(id)
            return HTTP.noContent()
        }
        hooks.get("webhooks/deliveries") { _, _ in
            try HTTP.json(
                WebhookDeliveryListJSON(
                    deliveries: try await service.store.webhookDeliveries(endpointID: nil, limit: 100).map(WebhookDeliveryJSON.init)))
        }
        return api
    }

    func caller(_ context: PasskeyRequestContext) -> String {
        guard let key = context.apiKey?.key else { return "server API" }
        return "api key \(key.name) (\(key.id.uuidString.lowercased()))"
    }

    func account(_ context: PasskeyRequestContext) async throws -> Account {
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text),
            let account = try await service.store.account(id: id)
        else { throw PasskeyServiceError.accountNotFound }
        return account
    }

    func passkeyID(_ context: PasskeyRequestContext) throws -> [UInt8] {
        guard let text = context.parameters.get("passkey"), let id = Base64URLBytes(encoded: text)?.bytes, !id.isEmpty else {
            throw PasskeyServiceError.passkeyNotFound
        }
        return id
    }

    func findUser(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        let found: Account?
        if let externalID = query.get("externalId") {
            found = try await service.store.account(externalID: String(externalID))
        } else if let username = query.get("username") {
            found = try await service.store.account(username: String(username))
        } else {
            throw PasskeyServiceError.invalid(.malformedJSON, "give externalId or username")
        }
        guard let found else { throw PasskeyServiceError.accountNotFound }
        return try HTTP.json(AdminUserJSON(found))
    }

    func createUser(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(CreateUserBody.self, limit: limit)
        let result = try await admin.findOrCreate(
            username: body.username, displayName: body.displayName, externalID: body.externalId, by: caller(context))
        // An account that already holds the externalId is a conflict on a unique field; only a
        // key that may read accounts is shown it (a users:write-only key learns nothing more).
        guard result.created || context.apiKey?.key.scopes.contains("users:read") == true else {
            throw APIError(.conflict, "conflict", "An account holds this externalId; reading it needs an API key with users:read.")
        }
        return try HTTP.json(AdminUserJSON(result.account), status: result.created ? .created : .ok)
    }
}

struct AdminUserJSON: Encodable {
    let id: String
    let username: String
    let displayName: String
    let externalId: String?
    let createdAt: Date
    let disabled: Bool
    let lastSignInAt: Date?
    let hasPassword: Bool
    init(_ account: Account) {
        id = account.id.uuidString.lowercased()
        username = account.username
        displayName = account.displayName
        externalId = account.externalID
        createdAt = account.createdAt
        disabled = account.disabled
        lastSignInAt = account.lastSignInAt
        hasPassword = account.passwordHash != nil
    }
}

struct RegistrationTokenJSON: Encodable {
    let registrationToken: String
    let expiresAt: Date
}

struct RecoveryLinkJSON: Encodable {
    let url: String
    let token: String
    let expiresAt: Date
}

struct WebhookJSON: Encodable {
    let id: String
    let url: String
    let events: [String]
    let createdAt: Date
    let disabled: Bool
    /// Only in the answer that added it.
    let secret: String?
    init(_ endpoint: WebhookEndpoint, secret: String? = nil) {
        id = endpoint.id.uuidString.lowercased()
        url = endpoint.url
        events = endpoint.events
        createdAt = endpoint.createdAt
        disabled = endpoint.disabled
        self.secret = secret
    }
}

struct WebhookListJSON: Encodable { let endpoints: [WebhookJSON] }

struct WebhookDeliveryJSON: Encodable {
    let eventId: String
    let endpointId: String
    let attempts: Int
    let deliveredAt: Date?
    let nextAttemptAt: Date
    let lastStatus: Int?
    let lastError: String?
    init(_ delivery: WebhookDelivery) {
        eventId = "evt_\(delivery.eventID)"
        endpointId = delivery.endpointID.uuidString.lowercased()
        attempts = delivery.attempts
        deliveredAt = delivery.deliveredAt
        nextAttemptAt = delivery.nextAttemptAt
        lastStatus = delivery.lastStatus
        lastError = delivery.lastError
    }
}

struct WebhookDeliveryListJSON: Encodable { let deliveries: [WebhookDeliveryJSON] }

/// `POST /api/admin/users`.
struct CreateUserBody: APIRequestBody {
    var username: String
    var displayName: String?
    var externalId: String?
    init(json: JSONObject) throws {
        username = try json.string("username")
        displayName = try json.optionalString("displayName")
        externalId = try json.optionalString("externalId")
    }
}

/// `POST /api/admin/webhooks`.
struct AddWebhookBody: APIRequestBody {
    var url: String
    var events: [String]?
    init(json: JSONObject) throws {
        url = try json.string("url")
        events = try json.optionalStringArray("events")
    }
}

// MARK: CORS

/// Cross-origin requests from the single-page apps in `corsOrigins`: preflights answered (the
/// methods and headers the API uses, cached 10 minutes), every answer to a listed origin
/// carries `Access-Control-Allow-Origin: <that origin>` with credentials, and every answer says
/// `Vary: Origin`. Nothing is ever allowed to `*`; unlisted origins get no CORS headers (the
/// browser then withholds the answer), and their state-changing requests are refused by the
/// Origin check.
struct CORSMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let origins: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let origin = request.headers[.origin].flatMap { origins.contains($0) ? $0 : nil }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            var headers = HTTPFields()
            headers[.vary] = "Origin"
            if let origin {
                headers[.accessControlAllowOrigin] = origin
                headers[.accessControlAllowCredentials] = "true"
                headers[.accessControlAllowMethods] = "GET, POST, PATCH, DELETE, OPTIONS"
                headers[.accessControlAllowHeaders] = "Authorization, Content-Type"
                headers[.accessControlMaxAge] = "600"
            }
            return Response(status: .noContent, headers: headers)
        }
        var response = try await next(request, context)
        response.headers[.vary] = "Origin"
        if let origin {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlAllowCredentials] = "true"
            response.headers[.accessControlExposeHeaders] = "Retry-After"
        }
        return response
    }
}

struct ClientJSON: Encodable {
    let clientId: String
    let name: String
    let redirectUris: [String]
    let postLogoutRedirectUris: [String]
    let isPublic: Bool
    let firstParty: Bool
    let allowSignUp: Bool
    let idTokenAlgorithm: String
    let createdAt: Date
    /// Only in the answer that registered a confidential client.
    let clientSecret: String?
    init(_ client: OAuthClient, secret: String? = nil) {
        clientId = client.id
        name = client.name
        redirectUris = client.redirectURIs
        postLogoutRedirectUris = client.postLogoutURIs
        isPublic = client.isPublic
        firstParty = client.firstParty
        allowSignUp = client.allowSignUp
        idTokenAlgorithm = client.idTokenAlgorithm
        createdAt = client.createdAt
        clientSecret = secret
    }
}

struct ClientListJSON: Encodable { let clients: [ClientJSON] }

/// `POST /api/admin/clients`.
struct AddClientBody: APIRequestBody {
    var name: String
    var redirectURIs: [String]
    var postLogoutURIs: [String]
    var isPublic: Bool
    var firstParty: Bool
    var allowSignUp: Bool
    var idTokenAlgorithm: String
    init(json: JSONObject) throws {
        name = try json.string("name")
        redirectURIs = try json.optionalStringArray("redirectUris") ?? []
        postLogoutURIs = try json.optionalStringArray("postLogoutRedirectUris") ?? []
        isPublic = try json.optionalBool("isPublic") ?? false
        firstParty = try json.optionalBool("firstParty") ?? false
        allowSignUp = try json.optionalBool("allowSignUp") ?? false
        idTokenAlgorithm = try json.optionalString("idTokenAlgorithm") ?? "RS256"
    }
}
