import Crypto
import Foundation
import JWTKit
import PasskeyStore
import WebAuthn

extension OpenIDService {
    // MARK: Client authentication

    /// What a client presented at the token, revocation or introspection endpoint (RFC 6749
    /// §2.3.1): from `client_secret_basic` (the edge reads the header), `client_secret_post`,
    /// or only a `client_id` (`none`, a public client).
    public struct ClientCredentials: Sendable {
        public var id: String?
        public var secret: String?

        public init(id: String?, secret: String?) {
            self.id = id
            self.secret = secret
        }
    }

    /// The client the credentials name, when they are its: a confidential client's secret must
    /// match; a public client has none. Else `invalid_client`.
    public func authenticateClient(_ credentials: ClientCredentials) async throws -> OAuthClient {
        guard let id = credentials.id, let client = try await store.oauthClient(id: id) else {
            throw OAuthError(.invalidClient, "Unknown client.")
        }
        if let expected = client.secretHash {
            // The secret's SHA-256 digest against the stored one, in constant time: every byte
            // is compared, without an early exit at the first difference.
            guard let secret = credentials.secret, ConstantTime.equals(Array(SHA256.hash(data: Array(secret.utf8))), expected) else {
                throw OAuthError(.invalidClient, "Wrong client credentials.")
            }
        }
        return client
    }

    // MARK: Token endpoint

    /// A successful token response (RFC 6749 §5.1, OIDC Core §3.1.3.3).
    public struct TokenResponse: Sendable, Equatable {
        public let accessToken: String
        /// Seconds the access token lives.
        public let expiresIn: Int
        public let idToken: String
        /// Only with `offline_access`: the next refresh token (rotated at each use).
        public let refreshToken: String?
        public let scope: String
    }

    /// `POST /oauth2/token` with the form's fields: `authorization_code` or `refresh_token`.
    public func token(_ form: [String: String], credentials: ClientCredentials) async throws -> TokenResponse {
        let client = try await authenticateClient(credentials)
        switch form["grant_type"] {
        case "authorization_code": return try await exchangeCode(form, client: client)
        case "refresh_token": return try await refresh(form, client: client)
        case nil: throw OAuthError(.invalidRequest, "grant_type is required.")
        default: throw OAuthError(.unsupportedGrantType, "authorization_code and refresh_token are supported.")
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

    func exchangeCode(_ form: [String: String], client: OAuthClient) async throws -> TokenResponse {
        guard let text = form["code"], let code = Base64URLBytes(encoded: text)?.bytes, code.count == 32 else {
            throw OAuthError(.invalidGrant, "Unknown code.")
        }
        let hash = Array(SHA256.hash(data: code))
        let time = service.now()
        // RFC 6749 §4.1.3: "ensure that the authorization code was issued to the authenticated
        // confidential client, or if the client is public, ensure that the code was issued to
        // "client_id" in the request". The code is looked up as this client's: another client's
        // code is unknown here, and nothing about it changes.
        guard let peek = try await store.oauthCode(hash: hash, clientID: client.id),
            let grant = try? JSONDecoder().decode(Grant.self, from: Data(peek.grant))
        else { throw OAuthError(.invalidGrant, "Unknown code.") }
        // §4.1.3: "ensure that the "redirect_uri" parameter is present … and that their values
        // are identical". RFC 7636 §4.6: the verifier must match the challenge. Both before the
        // code is taken: without them (a public client's identity is no secret) nobody spends it.
        guard form["redirect_uri"] == grant.redirectURI else {
            throw OAuthError(.invalidGrant, "redirect_uri differs from the authorization request's.")
        }
        if let challenge = grant.codeChallenge {
            guard let verifier = form["code_verifier"], (43...128).contains(verifier.utf8.count),
                Base64URLBytes(Array(SHA256.hash(data: Array(verifier.utf8)))).base64URL == challenge
            else { throw OAuthError(.invalidGrant, "code_verifier does not match the code_challenge.") }
        } else if form["code_verifier"] != nil {
            throw OAuthError(.invalidGrant, "The authorization request had no code_challenge.")
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
            throw OAuthError(.invalidGrant, "This code was already used; what it issued is revoked.")
        case .expired:
            throw OAuthError(.invalidGrant, "This code expired.")
        case .revoked, .unknown:
            throw OAuthError(.invalidGrant, "Unknown code.")
        }
    }

    func refresh(_ form: [String: String], client: OAuthClient) async throws -> TokenResponse {
        guard let text = form["refresh_token"], let token = Self.refreshTokenBytes(text) else {
            throw OAuthError(.invalidGrant, "Unknown refresh token.")
        }
        let time = service.now()
        // RFC 6749 §6: "validate the refresh token and ensure that it was issued to the
        // authenticated client": the client is part of the statement that takes the token.
        switch try await store.useRefreshToken(hash: Array(SHA256.hash(data: token)), clientID: client.id, at: time) {
        case .taken(let stored):
            guard let grant = try? JSONDecoder().decode(Grant.self, from: Data(stored.grant)) else {
                throw OAuthError(.invalidGrant, "Unknown or revoked refresh token.")
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
            throw OAuthError(.invalidGrant, "This refresh token was already used; the whole grant is revoked.")
        case .expired:
            throw OAuthError(.invalidGrant, "This refresh token expired.")
        case .revoked, .unknown:
            throw OAuthError(.invalidGrant, "Unknown or revoked refresh token.")
        }
    }

    /// The 32 bytes of an `rt_…` refresh token, or nil for anything else.
    static func refreshTokenBytes(_ text: String) -> [UInt8]? {
        guard text.hasPrefix("rt_"), let bytes = Base64URLBytes(encoded: String(text.dropFirst(3)))?.bytes, bytes.count == 32 else {
            return nil
        }
        return bytes
    }

    /// The ID token's claims (OIDC Core §2, §5.1).
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
        var email_verified: Bool?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// Access token (a JWT for the client), ID token, and with `offline_access` a rotated
    /// refresh token. The grant's session must still be live and its account enabled.
    func issueTokens(_ grant: Grant, client: OAuthClient, accountID: UUID, family: String) async throws -> TokenResponse {
        guard let (session, account) = try await store.session(tokenHash: grant.sessionHash, now: service.now()), account.id == accountID
        else {
            throw OAuthError(.invalidGrant, "The sign-in behind this grant has ended.")
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
        let emailClaim = grant.scope.contains("email") ? try await emailClaim(account) : nil
        let idClaims = IDTokenClaims(
            iss: IssuerClaim(value: issuer), sub: SubjectClaim(value: account.id.uuidString.lowercased()),
            aud: AudienceClaim(value: [client.id]),
            exp: ExpirationClaim(value: issued.addingTimeInterval(Double(lifetime))), iat: IssuedAtClaim(value: issued),
            auth_time: grant.authTime, nonce: grant.nonce, amr: AccessTokens.amr(method: grant.method),
            acr: ["passkey", "sign_up"].contains(grant.method) ? "phr" : "0", sid: AccessTokens.sessionID(session), azp: client.id,
            preferred_username: grant.scope.contains("profile") ? account.username : nil,
            name: grant.scope.contains("profile") ? account.displayName : nil,
            email: emailClaim?.0, email_verified: emailClaim?.1)
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
        return TokenResponse(
            accessToken: accessToken, expiresIn: Int(access.exp.value.timeIntervalSince(issued)), idToken: idToken,
            refreshToken: refreshToken, scope: grant.scope.joined(separator: " "))
    }

    // MARK: Userinfo and revocation

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

    /// `GET|POST /oauth2/userinfo` (OIDC Core §5.3): the claims for a live access token from the
    /// token endpoint, as far as its scopes allow; nil for any other token (`invalid_token`).
    public func userinfo(accessToken: String) async throws -> [String: JSONValue]? {
        guard let (claims, account) = try await liveClientToken(accessToken) else { return nil }
        let scope = (claims.scope ?? "").split(separator: " ").map { String($0) }
        var info: [String: JSONValue] = ["sub": .string(claims.sub.value)]
        if scope.contains("profile") {
            info["preferred_username"] = .string(account.username)
            info["name"] = .string(account.displayName)
        }
        if scope.contains("email"), let (email, verified) = try await emailClaim(account) {
            info["email"] = .string(email)
            info["email_verified"] = .bool(verified)
        }
        return info
    }

    /// The `email` claim and its `email_verified` (OpenID Connect Core §5.1), the same in the ID
    /// token and at userinfo: the account's verified address, else a username that looks like
    /// one, marked unverified (a relying party must never merge accounts on it: issue 43 item 4).
    func emailClaim(_ account: Account) async throws -> (String, Bool)? {
        if let email = try await store.accountEmail(accountID: account.id), email.verified, let address = email.address {
            return (address, true)
        }
        return account.username.contains("@") ? (account.username, false) : nil
    }

    /// `POST /oauth2/revoke` (RFC 7009). A refresh token ends its whole grant, and so does an
    /// access token (§2.1: the server "MAY revoke the respective refresh token as well"): its
    /// refresh tokens and every access token issued under it. §2.1: the server "verifies whether
    /// the token was issued to the client making the revocation request": a token of another
    /// client, or one unknown, changes nothing, and the answer is the same either way (§2.2).
    public func revoke(token: String?, credentials: ClientCredentials) async throws {
        let client = try await authenticateClient(credentials)
        let time = service.now()
        if let token, let bytes = Self.refreshTokenBytes(token) {
            // Whether a family was revoked is not said (§2.2: the same answer either way).
            _ = try await store.revokeRefreshToken(
                hash: Array(SHA256.hash(data: bytes)), clientID: client.id, at: time, until: time.addingTimeInterval(revocationMemory))
        } else if let token, let claims = try await service.tokens.verify(token, anyAudience: true),
            claims.client_id == client.id, let grant = claims.grant_id, let accountID = UUID(uuidString: claims.sub.value)
        {
            try await revokeGrant(grant, clientID: client.id, accountID: accountID, at: time)
        }
    }
}
