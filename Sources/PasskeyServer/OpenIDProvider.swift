import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyCore
import WebAuthn

/// The OpenID Provider's HTTP edge (docs/oidc.md): each route parses its request, calls one
/// ``OpenIDService`` method (the rules and the store live there), and writes the value it
/// returns, or the ``OAuthError`` it throws, as OAuth answers are written: a redirect, a page,
/// or JSON that is never cached.
struct OpenIDProvider: Sendable {
    let service: PasskeyService
    let edge: EdgeConfiguration
    let openID: OpenIDService
    let sessions: SessionResolver

    init(service: PasskeyService, edge: EdgeConfiguration) {
        self.service = service
        self.edge = edge
        openID = OpenIDService(service: service)
        sessions = SessionResolver(service: service, edge: edge)
    }

    // MARK: Routes

    /// Each route's guards are its group's middleware. The session is resolved once, by
    /// ``SessionMiddleware``, into `context.signedIn`: leniently on the browser's GETs
    /// (authorize, the pending request, logout: a missing, expired or unknown session is nobody
    /// signed in, never an error), as `optional` on the person's answer (a write: a cookie
    /// without an allowed Origin is refused, a Bearer token that is no live session is 401).
    /// Either way a database failure is 503, never "nobody signed in".
    var routes: RouteCollection<PasskeyRequestContext> {
        let collection = RouteCollection(context: PasskeyRequestContext.self)
        collection.get(".well-known/openid-configuration") { _, _ in discovery() }
        // Budgets of their own, never the sign-in routes' (OpenIDRateLimitMiddleware).
        collection.group()
            .add(middleware: OpenIDRateLimitMiddleware(service: service, budget: .authorize, navigation: true))
            .add(middleware: SessionMiddleware(sessions: sessions, mode: .lenient))
            .get("oauth2/authorize") { request, context in try await authorize(request, context) }
        // Counted by the GET it is sent on to.
        collection.post("oauth2/authorize") { request, _ in try await formAsQuery(request, "/oauth2/authorize") }
        let pending = collection.group().add(middleware: OpenIDRateLimitMiddleware(service: service, budget: .authorize, navigation: false))
        pending.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .lenient))
            .get("oauth2/authorize/requests/:id") { _, context in try await prompt(context) }
        pending.group()
            .add(middleware: JSONRequestMiddleware())
            .add(middleware: SessionMiddleware(sessions: sessions, mode: .optional))
            .post("oauth2/authorize/requests/:id") { request, context in try await decide(request, context) }
        let clients = collection.group().add(middleware: OpenIDRateLimitMiddleware(service: service, budget: .client, navigation: false))
        clients.post("oauth2/token") { request, _ in try await token(request) }
        clients.post("oauth2/revoke") { request, _ in try await revoke(request) }
        clients.post("oauth2/introspect") { request, _ in try await introspect(request) }
        collection.get("oauth2/userinfo") { request, context in try await userinfo(request, context) }
        collection.post("oauth2/userinfo") { request, context in try await userinfo(request, context) }
        collection.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .lenient))
            .get("oauth2/logout") { request, context in try await logout(request, context) }
        collection.post("oauth2/logout") { request, _ in try await formAsQuery(request, "/oauth2/logout") }
        return collection
    }

    /// `GET /.well-known/openid-configuration`.
    func discovery() -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "public, max-age=3600"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Self.jsonBytes(openID.discovery))))
    }

    // MARK: Authorization

    /// `GET /oauth2/authorize`.
    func authorize(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let query = request.uri.query ?? ""
        let fields = FormFields(query)
        let outcome = try await openID.authorize(
            fields.values, repeated: fields.repeatedNames, queryBytes: query.utf8.count, signedIn: context.signedIn,
            from: context.client)
        switch outcome {
        case .code(let location), .error(_, let location): return Self.redirect(location)
        // The web UI signs the person in and asks consent, then answers the pending request.
        case .interaction(let id): return Self.redirect("/#authorize=" + id)
        case .page(let page): return HTMLPage.response(page, status: .badRequest)
        }
    }

    struct PromptJSON: Encodable {
        struct Client: Encodable {
            let id: String
            let name: String
        }
        let client: Client
        let scopes: [String]
        let signedIn: Bool
        let signInNeeded: Bool
        let consentNeeded: Bool
        let allowSignUp: Bool
        let create: Bool
        let loginHint: String?
    }

    /// `GET /oauth2/authorize/requests/{id}`: what the web UI shows for a pending request.
    func prompt(_ context: PasskeyRequestContext) async throws -> Response {
        let prompt = try await openID.prompt(requestID: context.parameters.get("id") ?? "", signedIn: context.signedIn)
        return try HTTP.json(
            PromptJSON(
                client: .init(id: prompt.clientID, name: prompt.clientName), scopes: prompt.scopes, signedIn: prompt.signedIn,
                signInNeeded: prompt.signInNeeded, consentNeeded: prompt.consentNeeded, allowSignUp: prompt.allowSignUp,
                create: prompt.create, loginHint: prompt.loginHint))
    }

    struct DecisionBody: APIRequestBody {
        var approve: Bool?
        init(json: JSONObject) throws { approve = try json.optionalBool("approve") }
    }

    struct RedirectJSON: Encodable { let redirect: String }

    /// `POST /oauth2/authorize/requests/{id}` `{approve}`: the signed-in person's answer.
    func decide(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(DecisionBody.self, limit: edge.maxBodySize)
        let location = try await openID.decide(
            requestID: context.parameters.get("id") ?? "", approve: body.approve, signedIn: context.signedIn)
        return try HTTP.json(RedirectJSON(redirect: location))
    }

    // MARK: Logout

    /// `GET /oauth2/logout` (RP-Initiated Logout 1.0). A repeated parameter (RFC 6749 §3.1: it
    /// must not be) gets an error page: no sign-out, no redirect.
    func logout(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let query = FormFields(request.uri.query ?? "")
        guard query.repeated == nil else {
            return HTMLPage.response(
                OpenIDPage("Invalid sign-out request", "The application sent a parameter more than once."), status: .badRequest)
        }
        let outcome = try await openID.logout(
            .init(
                idTokenHint: query["id_token_hint"], clientID: query["client_id"], postLogoutRedirectURI: query["post_logout_redirect_uri"],
                state: query["state"]),
            signedIn: context.signedIn)
        switch outcome {
        case .refused(let page): return HTMLPage.response(page, status: .badRequest)
        case .confirm(let page): return HTMLPage.response(page, status: .ok)
        case .signedOut(let redirect):
            var headers = HTTPFields()
            headers[.setCookie] = HTTP.sessionCookie(edge, token: nil, maxAge: 0)
            headers[.cacheControl] = "no-store"
            guard let redirect else {
                return HTMLPage.response(OpenIDPage("Signed out", "You are signed out."), status: .ok, headers: headers)
            }
            headers[.location] = redirect
            return Response(status: .found, headers: headers)
        }
    }

    // MARK: POST

    /// `POST /oauth2/authorize` and `POST /oauth2/logout`: OpenID Connect Core §3.1.2.1 and
    /// RP-Initiated Logout 1.0 §2 have the provider take the request's parameters as a form
    /// (`application/x-www-form-urlencoded`) as well as in the query. The form's fields go on,
    /// as they were sent, to the same endpoint's GET with a 303: one handler checks them (a
    /// repeated or oversized parameter is refused there as in a GET), and the browser sends the
    /// session cookie with that top-level GET, which it does not with another site's POST
    /// (SameSite=Lax). A form with parameters in the address too, that is not a form, or whose
    /// text is not a query's (a `#`, a space, a control or non-ASCII byte) gets an error page.
    func formAsQuery(_ request: Request, _ path: String) async throws -> Response {
        let invalid = path.hasSuffix("logout") ? "Invalid sign-out request" : "Invalid authorization request"
        guard request.uri.query?.isEmpty ?? true else {
            return HTMLPage.response(
                OpenIDPage(invalid, "The application sent parameters both in the address and in a form."), status: .badRequest)
        }
        guard Self.isForm(request.headers[.contentType]) else {
            return HTMLPage.response(OpenIDPage(invalid, "The application's request is not a form."), status: .badRequest)
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: edge.maxBodySize)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.bodyTooLarge
        } catch is NIOTooManyBytesError {
            throw APIError.bodyTooLarge
        }
        let form = Array(body.readableBytesView)
        guard form.allSatisfy(Self.isQueryByte) else {
            return HTMLPage.response(OpenIDPage(invalid, "The application's form is not URL-encoded."), status: .badRequest)
        }
        var headers = HTTPFields()
        headers[.location] = form.isEmpty ? path : path + "?" + String(decoding: form, as: UTF8.self)
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    /// `application/x-www-form-urlencoded`, with parameters and in any case.
    static func isForm(_ contentType: String?) -> Bool {
        guard let type = contentType?.split(separator: ";", maxSplits: 1).first else { return false }
        return type.trimmingCharacters(in: .whitespaces).lowercased() == "application/x-www-form-urlencoded"
    }

    /// A byte a query may hold as it is (RFC 3986 §3.4: unreserved, sub-delims, `:`, `@`, `/`,
    /// `?`, and `%` of an escape).
    static func isQueryByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"): true
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"): true
        case UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="): true
        case UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"): true
        default: false
        }
    }

    // MARK: Answers

    /// JSON with sorted keys and plain slashes (discovery, userinfo, token errors).
    static func jsonBytes(_ value: JSONValue) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(value)) ?? Data("{}".utf8))
    }

    static func redirect(_ location: String) -> Response {
        var headers = HTTPFields()
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .found, headers: headers)
    }

    /// `application/x-www-form-urlencoded` fields of a query or body (the server API's
    /// introspection reads its form with it too).
    static func fields(_ text: String) -> [String: String] { FormFields(text).values }
}
