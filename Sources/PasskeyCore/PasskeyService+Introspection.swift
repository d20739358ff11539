import Crypto
import Foundation
import PasskeyStore
import WebAuthn

/// `POST /api/auth/introspect` and `POST /oauth2/introspect`: is this token (an access token or
/// a session token) active, and what does it say.
package struct IntrospectionJSON: Encodable {
    package let active: Bool
    package var token_type: String?
    package var iss: String?
    package var sub: String?
    package var aud: [String]?
    package var iat: Int?
    package var nbf: Int?
    package var exp: Int?
    package var jti: String?
    package var sid: String?
    package var amr: [String]?
    package var auth_time: Int?
    package var username: String?
    package var externalId: String?
    /// A client's access token: the client and the scopes granted (RFC 7662 §2.2).
    package var client_id: String?
    package var scope: String?

    package static let inactive = IntrospectionJSON(active: false)
}

extension PasskeyService {
    /// Who introspects (RFC 7662 §2.1: the endpoint "MUST require some form of authorization").
    package enum Introspector: Sendable, Equatable {
        /// An API key with the `introspect` scope (the operator's resource servers): every
        /// token passkeyd issued.
        case apiKey
        /// An OAuth client authenticated as at the token endpoint: its own access tokens only.
        case client(String)
    }

    /// RFC 7662 §2.2: `active` only for a live token of an enabled account (a client's token
    /// also needs its grant unrevoked) that the caller may see; nothing else is said of an
    /// inactive one, nor of a token the caller may not see (§4: no more than it needs).
    package func introspect(_ token: String, by introspector: Introspector = .apiKey) async throws -> IntrospectionJSON {
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
