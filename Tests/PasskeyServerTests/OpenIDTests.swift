import Crypto
import Foundation
import HTTPTypes
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// The OpenID provider where a clock or many cases are needed (the whole flow with a real OIDC
/// client is e2e/test_oidc.py). Run on SQLite and again on PostgreSQL.
@Suite("OpenID Connect: codes, prompts, tokens")
struct OpenIDTests {
    static let redirect = "https://app.example.com/callback"

    static func client(_ harness: ServerHarness, firstParty: Bool = true, algorithm: String = "RS256") async throws -> (OAuthClient, String)
    {
        let added = try await AdminService(store: harness.store, now: { harness.clock.now }).addClient(
            name: "App", redirectURIs: [redirect], postLogoutURIs: ["https://app.example.com/bye"], isPublic: false, firstParty: firstParty,
            idTokenAlgorithm: algorithm, by: "test")
        return (added.client, added.secret ?? "")
    }

    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = Base64URLBytes(RelyingParty.randomBytes(40)).base64URL
        return (verifier, Base64URLBytes(Array(SHA256.hash(data: Array(verifier.utf8)))).base64URL)
    }

    static func authorize(_ api: APIClient, client: OAuthClient, challenge: String, token: String?, extra: String = "") async throws
        -> APIResponse
    {
        let query =
            "client_id=\(client.id)&redirect_uri=\(redirect.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)&response_type=code&scope=openid+profile+offline_access&state=s1&nonce=n1&code_challenge=\(challenge)&code_challenge_method=S256\(extra)"
        return try await api.request(.get, "/oauth2/authorize?" + query, token: token, origin: nil)
    }

    static func parameters(_ response: APIResponse) -> [String: String] {
        guard let location = response.headers[.location], let components = URLComponents(string: location) else { return [:] }
        return Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { a, _ in a })
    }

    static func exchange(_ api: APIClient, client: OAuthClient, secret: String, form: [String: String]) async throws -> APIResponse {
        let body = form.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)" }.joined(separator: "&")
        let basic = Data("\(client.id):\(secret)".utf8).base64EncodedString()
        return try await api.request(
            .post, "/oauth2/token", body: Array(body.utf8), origin: nil,
            headers: [.contentType: "application/x-www-form-urlencoded", .authorization: "Basic \(basic)"])
    }

    @Test func aCodeIsBoundToItsClientAndExpiresInAMinute() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oidc-code".utf8))
            let (session, _, _) = try await api.signUp("oda", authenticator: &authenticator)
            let (client, secret) = try await Self.client(harness)
            let (other, otherSecret) = try await Self.client(harness)
            let (verifier, challenge) = Self.pkce()

            let first = try await Self.authorize(api, client: client, challenge: challenge, token: session)
            #expect(first.status == .found)
            let query = Self.parameters(first)
            #expect(query["state"] == "s1" && query["iss"] == ServerHarness.origin)
            let code = try #require(query["code"])
            let form = ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirect, "code_verifier": verifier]
            // Another client can neither redeem it nor spend it (OpenIDAttackTests); its own
            // client redeems it once.
            #expect(try await Self.exchange(api, client: other, secret: otherSecret, form: form).string("error") == "invalid_grant")
            #expect(try await Self.exchange(api, client: client, secret: secret, form: form).status == .ok)
            #expect(try await Self.exchange(api, client: client, secret: secret, form: form).string("error") == "invalid_grant")

            let late = Self.parameters(try await Self.authorize(api, client: client, challenge: challenge, token: session))["code"]
            harness.clock.advance(61)
            let expired = try await Self.exchange(api, client: client, secret: secret, form: form.merging(["code": late ?? ""]) { $1 })
            #expect(expired.string("error") == "invalid_grant" && expired.string("error_description")?.contains("expired") == true)

            // A fresh code: tokens; ID token RS256 with the nonce and amr.
            let fresh = Self.parameters(try await Self.authorize(api, client: client, challenge: challenge, token: session))["code"]
            let tokens = try await Self.exchange(api, client: client, secret: secret, form: form.merging(["code": fresh ?? ""]) { $1 })
            #expect(tokens.status == .ok && tokens.headers[.cacheControl] == "no-store", "\(tokens.json)")
            let id = try IntegrationTests.JWT(try #require(tokens.string("id_token")))
            #expect(id.header["alg"] == .string("RS256") && id.string("nonce") == "n1" && id.claims["amr"] == .array([.string("webauthn")]))
            #expect(id.string("acr") == "phr" && id.string("azp") == client.id && id.string("preferred_username") == "oda")
            let access = try IntegrationTests.JWT(try #require(tokens.string("access_token")))
            #expect(access.header["typ"] == .string("at+jwt") && access.string("client_id") == client.id)
            let info = try await api.request(.get, "/oauth2/userinfo", token: tokens.string("access_token"), origin: nil)
            #expect(info.string("sub") == id.string("sub") && info.string("preferred_username") == "oda")

            // The sign-in behind the grant ends: no more refresh, no more userinfo.
            #expect(try await api.request(.delete, "/api/auth/session", token: session).status == .noContent)
            let refresh = try await Self.exchange(
                api, client: client, secret: secret,
                form: ["grant_type": "refresh_token", "refresh_token": tokens.string("refresh_token") ?? ""])
            #expect(refresh.string("error") == "invalid_grant")
            #expect(
                try await api.request(.get, "/oauth2/userinfo", token: tokens.string("access_token"), origin: nil).status == .unauthorized)
        }
    }

    @Test func promptsMaxAgeAndConsent() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oidc-prompt".utf8))
            let (session, _, _) = try await api.signUp("pia", authenticator: &authenticator)
            let (firstParty, _) = try await Self.client(harness)
            let (thirdParty, _) = try await Self.client(harness, firstParty: false)
            let (_, challenge) = Self.pkce()

            let anonymous = try await Self.authorize(api, client: firstParty, challenge: challenge, token: nil, extra: "&prompt=none")
            #expect(Self.parameters(anonymous)["error"] == "login_required")
            let noConsent = try await Self.authorize(api, client: thirdParty, challenge: challenge, token: session, extra: "&prompt=none")
            #expect(Self.parameters(noConsent)["error"] == "consent_required" && Self.parameters(noConsent)["state"] == "s1")
            // prompt=login, and a sign-in older than max_age: to the sign-in page, not back with a code.
            for extra in ["&prompt=login", "&max_age=10"] {
                harness.clock.advance(11)
                let again = try await Self.authorize(api, client: firstParty, challenge: challenge, token: session, extra: extra)
                #expect(again.status == .found && again.headers[.location]?.hasPrefix("/#authorize=") == true, "\(extra)")
            }
            // The consent screen's answer.
            let pending = try await Self.authorize(api, client: thirdParty, challenge: challenge, token: session)
            let id = String(try #require(pending.headers[.location]).dropFirst("/#authorize=".count))
            let info = try await api.request(.get, "/oauth2/authorize/requests/\(id)", token: session)
            #expect(info.json["consentNeeded"] == .bool(true) && info.json["signInNeeded"] == .bool(false))
            let declined = try await api.post("/oauth2/authorize/requests/\(id)", ["approve": false], token: session)
            #expect(declined.string("redirect")?.contains("error=access_denied") == true)
            #expect(
                try await api.request(.get, "/oauth2/authorize/requests/\(id)", token: session).errorCode == "invalid_authorization_request"
            )
            // Approved once: straight back the next time.
            let second = try await Self.authorize(api, client: thirdParty, challenge: challenge, token: session)
            let secondID = String(try #require(second.headers[.location]).dropFirst("/#authorize=".count))
            let approved = try await api.post("/oauth2/authorize/requests/\(secondID)", ["approve": true], token: session)
            #expect(approved.string("redirect")?.hasPrefix(Self.redirect + "?code=") == true, "\(approved.json)")
            let direct = try await Self.authorize(api, client: thirdParty, challenge: challenge, token: session)
            #expect(Self.parameters(direct)["code"] != nil)
            #expect(
                try await harness.store.consent(
                    accountID: try #require(try await harness.store.account(username: "pia")).id, clientID: thirdParty.id) != nil)

            // Signing up in the middle of a request, for a client that does not allow sign-up.
            let (_, noSignUpChallenge) = Self.pkce()
            let request = try await Self.authorize(api, client: thirdParty, challenge: noSignUpChallenge, token: nil)
            let pendingID = String(try #require(request.headers[.location]).dropFirst("/#authorize=".count))
            harness.clock.advance(1)
            var newcomer = SoftwareAuthenticator(seed: Array("oidc-newcomer".utf8))
            let (newSession, _, _) = try await api.signUp("neo", authenticator: &newcomer)
            let refused = try await api.post("/oauth2/authorize/requests/\(pendingID)", ["approve": true], token: newSession)
            #expect(refused.status == .forbidden && refused.errorCode == "sign_up_not_allowed")
        }
    }

    @Test func es256IDTokensAndTheDiscoveryDocument() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oidc-es256".utf8))
            let (session, _, _) = try await api.signUp("eli", authenticator: &authenticator)
            let (client, secret) = try await Self.client(harness, algorithm: "ES256")
            let (verifier, challenge) = Self.pkce()
            let code = Self.parameters(try await Self.authorize(api, client: client, challenge: challenge, token: session))["code"] ?? ""
            let tokens = try await Self.exchange(
                api, client: client, secret: secret,
                form: ["grant_type": "authorization_code", "code": code, "redirect_uri": Self.redirect, "code_verifier": verifier])
            let jwks = try await api.request(.get, "/.well-known/jwks.json")
            let idToken = try #require(tokens.string("id_token"))
            #expect(try IntegrationTests.JWT(idToken).header["alg"] == .string("ES256"))
            #expect(try IntegrationTests.verifiedWithJWKS(idToken, jwks: jwks))

            let discovery = try await api.request(.get, "/.well-known/openid-configuration")
            #expect(discovery.string("issuer") == ServerHarness.origin)
            for key in [
                "authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri", "revocation_endpoint", "end_session_endpoint",
            ] {
                let url = try #require(discovery.string(key))
                let path = String(url.dropFirst(ServerHarness.origin.count))
                let answer = try await api.request(path.contains("token") || path.contains("revoke") ? .post : .get, path, origin: nil)
                #expect(answer.status != .notFound && answer.status != .methodNotAllowed, "\(key)")
            }
            // Logout returns only to a registered address.
            let bad = try await api.request(
                .get, "/oauth2/logout?client_id=\(client.id)&post_logout_redirect_uri=https%3A%2F%2Fevil.example%2F", token: session,
                origin: nil)
            #expect(bad.status == .badRequest && bad.headers[.location] == nil)
            // Without an ID token hint for this person (a link or an image elsewhere), nobody is signed out.
            let unhinted = try await api.request(.get, "/oauth2/logout", token: session, origin: nil)
            #expect(unhinted.status == .ok && unhinted.headers[.location] == nil)
            #expect(try await api.request(.get, "/api/auth/session", token: session).status == .ok)
            let good = try await api.request(
                .get, "/oauth2/logout?id_token_hint=\(idToken)&post_logout_redirect_uri=https%3A%2F%2Fapp.example.com%2Fbye&state=z",
                token: session,
                origin: nil)
            #expect(good.status == .found && good.headers[.location] == "https://app.example.com/bye?state=z")
            #expect(try await api.request(.get, "/api/auth/session", token: session).status == .unauthorized)
        }
    }
}
