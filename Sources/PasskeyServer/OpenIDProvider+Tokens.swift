import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import WebAuthn

/// The client-facing endpoints: form bodies in, JSON out (RFC 6749 §5), never cached.
extension OpenIDProvider {
    // MARK: Reading the request

    /// The form of a token, revocation or introspection request; `invalid_request` when the
    /// body is not a form or repeats a parameter (RFC 6749 §3.2).
    func form(_ request: Request) async throws -> [String: String] {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/x-www-form-urlencoded") else {
            throw OAuthError(.invalidRequest, "Send the parameters as application/x-www-form-urlencoded.")
        }
        let buffer = try await request.body.collect(upTo: edge.maxBodySize)
        let fields = FormFields(String(buffer: buffer))
        if let repeated = fields.repeated { throw OAuthError(.invalidRequest, "\(repeated) is repeated.") }
        return fields.values
    }

    /// The client's credentials (RFC 6749 §2.3.1): `client_secret_basic` when the request has
    /// Basic credentials, else `client_secret_post` (or only `client_id`: a public client).
    func credentials(_ request: Request, form: [String: String]) throws -> OpenIDService.ClientCredentials {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("basic ") else {
            return .init(id: form["client_id"], secret: form["client_secret"])
        }
        guard let decoded = Data(base64Encoded: String(authorization.dropFirst(6)).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { throw OAuthError(.invalidClient, "Malformed Basic credentials.") }
        // §2.3.1: the id and secret were encoded before they were joined.
        return .init(
            id: String(text[..<colon]).removingPercentEncoding, secret: String(text[text.index(after: colon)...]).removingPercentEncoding)
    }

    // MARK: Endpoints

    struct TokenJSON: Encodable {
        let access_token: String
        let token_type = "Bearer"
        let expires_in: Int
        let id_token: String
        let refresh_token: String?
        let scope: String
    }

    /// `POST /oauth2/token`.
    func token(_ request: Request) async throws -> Response {
        do {
            let form = try await form(request)
            let tokens = try await openID.token(form, credentials: try credentials(request, form: form))
            var headers = HTTPFields()
            headers[HTTPField.Name("Pragma")!] = "no-cache"
            return try HTTP.json(
                TokenJSON(
                    access_token: tokens.accessToken, expires_in: tokens.expiresIn, id_token: tokens.idToken,
                    refresh_token: tokens.refreshToken, scope: tokens.scope), headers: headers)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
    }

    /// `POST /oauth2/revoke` (RFC 7009): 200 whether or not the token was this client's (§2.2).
    func revoke(_ request: Request) async throws -> Response {
        do {
            let form = try await form(request)
            try await openID.revoke(token: form["token"], credentials: try credentials(request, form: form))
            var headers = HTTPFields()
            headers[.cacheControl] = "no-store"
            return Response(status: .ok, headers: headers)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
    }

    /// `POST /oauth2/introspect` (RFC 7662) for a client, authenticated as at the token
    /// endpoint (§2.1): it may introspect its own access tokens; any other token is inactive
    /// to it. (An API key with the `introspect` scope sees every token passkeyd issued, at
    /// `POST /api/auth/introspect`.)
    func introspect(_ request: Request) async throws -> Response {
        do {
            let form = try await form(request)
            let client = try await openID.authenticateClient(try credentials(request, form: form))
            guard let token = form["token"] else { throw OAuthError(.invalidRequest, "token is required.") }
            var headers = HTTPFields()
            headers[.cacheControl] = "no-store"
            return try HTTP.json(try await service.introspect(token, by: .client(client.id)), headers: headers)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
    }

    /// `GET|POST /oauth2/userinfo` (OIDC Core §5.3) with an access token from the token endpoint
    /// (RFC 6750 §3.1: `invalid_token` for anything else). Each 401 spends the address's client
    /// budget (counted before the token is looked at, given back when it is good); past it, 429
    /// (``OpenIDFailureBudget``).
    func userinfo(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let budget = OpenIDFailureBudget(request, context, service: service)
        let admitted = service.now()
        if let retryAfter = try await budget?.admit(at: admitted) {
            return Self.oauthError(
                .tooManyRequests, "rate_limited", "Too many requests with invalid access tokens from this address.",
                retryAfter: retryAfter)
        }
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer "),
            let info = try await openID.userinfo(accessToken: String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces))
        else {
            var headers = HTTPFields()
            headers[.wwwAuthenticate] = #"Bearer error="invalid_token""#
            headers[.cacheControl] = "no-store"
            return Response(status: .unauthorized, headers: headers)
        }
        try await budget?.refund(at: admitted)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Self.jsonBytes(.object(info)))))
    }

    /// RFC 6749 §5.2: the error as JSON; `invalid_client` is 401 with the scheme to use (Basic),
    /// every other code 400.
    static func tokenError(_ error: OAuthError) -> Response {
        let status: HTTPResponse.Status = error.code == .invalidClient ? .unauthorized : .badRequest
        var response = oauthError(status, error.code.rawValue, error.description)
        if status == .unauthorized { response.headers[.wwwAuthenticate] = #"Basic realm="passkeyd""# }
        return response
    }

    /// `{"error", "error_description"}` (RFC 6749 §5.2's shape), never cached; `Retry-After` when given.
    static func oauthError(_ status: HTTPResponse.Status, _ code: String, _ description: String, retryAfter: Int? = nil) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        let body: JSONValue = .object(["error": .string(code), "error_description": .string(description)])
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: jsonBytes(body))))
    }
}
