import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JWTKit
import PasskeyStore
import WebAuthn

extension OpenIDProvider {
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

    /// How long a revoked grant is remembered: past the last access token or refresh token it
    /// can have issued (a refresh token being written while the grant is revoked included).
    var revocationMemory: TimeInterval {
        Double(max(service.configuration.tokens.lifetimeSeconds, service.configuration.oidcRefreshTokenSeconds) + 60)
    }

    /// Revokes a grant: its refresh tokens and the access tokens that carry it.
    func revokeGrant(_ family: String, clientID: String, accountID: UUID, at time: Date) async throws {
        try await store.revokeOAuthGrant(
            family: family, clientID: clientID, accountID: accountID, at: time, until: time.addingTimeInterval(revocationMemory))
    }

    func exchangeCode(_ form: [String: String], client: OAuthClient) async throws -> Response {
        guard let text = form["code"], let code = Base64URLBytes(encoded: text)?.bytes, code.count == 32 else {
            throw OAuthError(code: "invalid_grant", description: "Unknown code.")
        }
        let hash = Array(SHA256.hash(data: code))
        let time = service.now()
        // RFC 6749 §4.1.3: "ensure that the authorization code was issued to the authenticated
        // confidential client, or if the client is public, ensure that the code was issued to
        // "client_id" in the request". The code is looked up as this client's: another client's
        // code is unknown here, and nothing about it changes.
        guard let peek = try await store.oauthCode(hash: hash, clientID: client.id),
            let grant = try? JSONDecoder().decode(Grant.self, from: Data(peek.grant))
        else { throw OAuthError(code: "invalid_grant", description: "Unknown code.") }
        // §4.1.3: "ensure that the "redirect_uri" parameter is present … and that their values
        // are identical". RFC 7636 §4.6: the verifier must match the challenge. Both before the
        // code is taken: without them (a public client's identity is no secret) nobody spends it.
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
        // The one statement that takes the code decides (of exchanges racing, one wins).
        let family = UUID.random().uuidString.lowercased()
        switch try await store.useOAuthCode(hash: hash, clientID: client.id, family: family, at: time) {
        case .taken(let stored):
            return try await issueTokens(grant, client: client, accountID: stored.accountID, family: family)
        case .reused(let stored):
            // RFC 6749 §4.1.2: "If an authorization code is used more than once, the
            // authorization server MUST deny the request and SHOULD revoke (when possible) all
            // tokens previously issued based on that authorization code" (RFC 9700 §4.5).
            service.metrics.singleUseRefused("oauth_code")
            if let first = stored.family { try await revokeGrant(first, clientID: client.id, accountID: stored.accountID, at: time) }
            await service.audit(.oidcGrantReused, accountID: stored.accountID, client: PasskeyService.Client(), detail: "code \(client.id)")
            throw OAuthError(code: "invalid_grant", description: "This code was already used; what it issued is revoked.")
        case .expired:
            throw OAuthError(code: "invalid_grant", description: "This code expired.")
        case .revoked, .unknown:
            throw OAuthError(code: "invalid_grant", description: "Unknown code.")
        }
    }

    func refresh(_ form: [String: String], client: OAuthClient) async throws -> Response {
        guard let text = form["refresh_token"], let token = Self.refreshTokenBytes(text) else {
            throw OAuthError(code: "invalid_grant", description: "Unknown refresh token.")
        }
        let time = service.now()
        // RFC 6749 §6: "validate the refresh token and ensure that it was issued to the
        // authenticated client": the client is part of the statement that takes the token.
        switch try await store.useRefreshToken(hash: Array(SHA256.hash(data: token)), clientID: client.id, at: time) {
        case .taken(let stored):
            guard let grant = try? JSONDecoder().decode(Grant.self, from: Data(stored.grant)) else {
                throw OAuthError(code: "invalid_grant", description: "Unknown or revoked refresh token.")
            }
            return try await issueTokens(grant, client: client, accountID: stored.accountID, family: stored.family ?? "")
        case .reused(let stored):
            // RFC 9700 §4.14.2: a rotated refresh token used again means two parties hold the
            // grant; the server cannot tell which is legitimate, so the whole grant ends.
            service.metrics.singleUseRefused("refresh_token")
            if let family = stored.family {
                try await revokeGrant(family, clientID: client.id, accountID: stored.accountID, at: time)
            }
            await service.audit(
                .oidcGrantReused, accountID: stored.accountID, client: PasskeyService.Client(), detail: "refresh \(client.id)")
            throw OAuthError(code: "invalid_grant", description: "This refresh token was already used; the whole grant is revoked.")
        case .expired:
            throw OAuthError(code: "invalid_grant", description: "This refresh token expired.")
        case .revoked, .unknown:
            throw OAuthError(code: "invalid_grant", description: "Unknown or revoked refresh token.")
        }
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
        access.grant_id = family
        // OIDC Core §5.4: the claims a client sees follow the scopes granted (the username is
        // `preferred_username` of `profile`); the operator's externalId is never a client's.
        access.username = grant.scope.contains("profile") ? account.username : nil
        access.externalId = nil
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

    // MARK: Userinfo, revocation, introspection, logout

    /// The claims of a client's access token that is live: signed by passkeyd, its session live
    /// and its account's, its grant not revoked. Nil for anything else (session tokens too).
    func liveClientToken(_ token: String) async throws -> (claims: AccessTokenClaims, account: Account)? {
        guard let claims = try await service.tokens.verify(token, anyAudience: true), claims.client_id != nil,
            let hash = Base64URLBytes(encoded: claims.sid)?.bytes,
            let (_, account) = try await store.session(tokenHash: hash, now: service.now()),
            account.id.uuidString.lowercased() == claims.sub.value
        else { return nil }
        if let grant = claims.grant_id, try await store.oauthGrantRevoked(family: grant) { return nil }
        return (claims, account)
    }

    /// `GET|POST /oauth2/userinfo` (OIDC Core §5.3) with an access token from the token endpoint.
    func userinfo(_ request: Request) async throws -> Response {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer "),
            let (claims, account) = try await liveClientToken(String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces))
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
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Self.jsonBytes(.object(info)))))
    }

    /// `POST /oauth2/revoke` (RFC 7009). A refresh token ends its whole grant, and so does an
    /// access token (§2.1: the server "MAY revoke the respective refresh token as well"): its
    /// refresh tokens and every access token issued under it. §2.1: the server "verifies whether
    /// the token was issued to the client making the revocation request": a token of another
    /// client, or one unknown, changes nothing, and the answer is 200 either way (§2.2).
    func revoke(_ request: Request) async throws -> Response {
        do {
            let form = try await Self.form(request, limit: service.configuration.maxBodySize)
            let client = try await authenticateClient(request, form: form)
            let time = service.now()
            if let text = form["token"], let bytes = Self.refreshTokenBytes(text) {
                try await store.revokeRefreshToken(
                    hash: Array(SHA256.hash(data: bytes)), clientID: client.id, at: time, until: time.addingTimeInterval(revocationMemory))
            } else if let text = form["token"], let claims = try await service.tokens.verify(text, anyAudience: true),
                claims.client_id == client.id, let grant = claims.grant_id, let accountID = UUID(uuidString: claims.sub.value)
            {
                try await revokeGrant(grant, clientID: client.id, accountID: accountID, at: time)
            }
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
            let form = try await Self.form(request, limit: service.configuration.maxBodySize)
            let client = try await authenticateClient(request, form: form)
            guard let token = form["token"] else { throw OAuthError(code: "invalid_request", description: "token is required.") }
            var headers = HTTPFields()
            headers[.cacheControl] = "no-store"
            return try HTTP.json(try await service.introspect(token, by: .client(client.id)), headers: headers)
        } catch let error as OAuthError {
            return Self.tokenError(error)
        }
    }

    /// `GET /oauth2/logout` (RP-Initiated Logout 1.0): ends the browser's passkeyd session and
    /// returns to a `post_logout_redirect_uri` registered for the client. Only an `id_token_hint`
    /// that is an ID token passkeyd issued to the signed-in person ends the session: anything
    /// else (a link on another site, an image) asks the person instead (§2: the OP should
    /// confirm), so nobody can be signed out from elsewhere.
    func logout(_ request: Request, sessions: SessionResolver) async throws -> Response {
        let query = Self.fields(request.uri.query ?? "")
        var hinted: (audience: String, subject: String)?
        if let hint = query["id_token_hint"] {
            // §2: "When an id_token_hint parameter is present, the OP MUST validate that it was
            // the issuer of the ID Token." An access token, or a token of another issuer, is not one.
            guard let own = try await service.tokens.idTokenHint(hint) else {
                return Self.errorPage("Invalid sign-out request", "The application sent a sign-out hint that is not an ID token from here.")
            }
            hinted = own
        }
        // §2: "When both client_id and id_token_hint are present, the OP MUST verify that the
        // Client Identifier matches the one used when issuing the ID Token."
        if let given = query["client_id"], let hinted, given != hinted.audience {
            return Self.errorPage("Invalid sign-out request", "The application named in the sign-out request did not receive its hint.")
        }
        let clientID = query["client_id"] ?? hinted?.audience
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
}
