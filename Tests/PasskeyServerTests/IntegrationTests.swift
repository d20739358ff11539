import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import JWTKit
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// Apps that trust passkeyd's sign-ins (issue 17): access tokens checked with nothing but the
/// JWKS, introspection, API keys, the server API, registration tokens, webhooks and CORS. Run on
/// SQLite and again on PostgreSQL by scripts/test.
@Suite("Integration: tokens, JWKS, introspection, server API, webhooks, CORS")
struct IntegrationTests {
    // MARK: Helpers

    /// A JWT's three parts, decoded.
    struct JWT {
        let header: JSONValue
        let claims: JSONValue
        let signingInput: [UInt8]
        let signature: [UInt8]

        init(_ token: String) throws {
            let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard parts.count == 3, let header = Base64URLBytes(encoded: parts[0])?.bytes,
                let claims = Base64URLBytes(encoded: parts[1])?.bytes,
                let signature = Base64URLBytes(encoded: parts[2])?.bytes
            else { throw HarnessError.unexpected(APIResponse(status: .badRequest, headers: [:], bytes: Array(token.utf8))) }
            self.header = try JSONReader.parse(header)
            self.claims = try JSONReader.parse(claims)
            signingInput = Array((parts[0] + "." + parts[1]).utf8)
            self.signature = signature
        }

        func string(_ key: String) -> String? {
            if case .string(let value)? = claims[key] { return value }
            return nil
        }

        func number(_ key: String) -> Double? {
            if case .number(let value)? = claims[key] { return value }
            return nil
        }
    }

    /// Checks an ES256 token against the JWKS document alone (swift-crypto, not jwt-kit): the
    /// way an app's backend does.
    static func verifiedWithJWKS(_ token: String, jwks: APIResponse) throws -> Bool {
        let jwt = try JWT(token)
        guard case .string(let kid)? = jwt.header["kid"], case .array(let keys)? = jwks.json["keys"] else { return false }
        for key in keys where key["kid"] == .string(kid) {
            guard key["kty"] == .string("EC"), key["crv"] == .string("P-256"), case .string(let x)? = key["x"],
                case .string(let y)? = key["y"],
                let xb = Base64URLBytes(encoded: x)?.bytes, let yb = Base64URLBytes(encoded: y)?.bytes
            else { return false }
            let publicKey = try P256.Signing.PublicKey(rawRepresentation: xb + yb)
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: jwt.signature)
            return publicKey.isValidSignature(signature, for: jwt.signingInput)
        }
        return false
    }

    static func apiKey(_ harness: ServerHarness, scopes: [String]) async throws -> String {
        try await AdminService(store: harness.store, now: { harness.clock.now }).createAPIKey(name: "backend", scopes: scopes, by: "test")
            .key
    }

    static func introspect(_ api: APIClient, _ token: String, key: String, form: Bool = true) async throws -> APIResponse {
        if form {
            let body = "token=" + (token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? token)
            return try await api.request(
                .post, "/api/auth/introspect", body: Array(body.utf8), origin: nil,
                headers: [.authorization: "Bearer \(key)", .contentType: "application/x-www-form-urlencoded"])
        }
        return try await api.request(
            .post, "/api/auth/introspect", body: Array(try JSONEncoder().encode(["token": token])), origin: nil,
            headers: [.authorization: "Bearer \(key)"])
    }

    static func active(_ response: APIResponse) -> Bool? {
        if case .bool(let value)? = response.json["active"] { return value }
        return nil
    }

    // MARK: Access tokens and the JWKS

    @Test func everySignInCarriesAnAccessTokenAnAppVerifiesWithTheJWKSAlone() async throws {
        let harness = try await ServerHarness { $0.tokens.audiences = ["https://api.example.com"] }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("jwt".utf8))
            let (token, credential0, signUp) = try await api.signUp("jay", authenticator: &authenticator)
            var credential = credential0
            let jwks = try await api.request(.get, "/.well-known/jwks.json")
            #expect(jwks.status == .ok && jwks.headers[.cacheControl] == "public, max-age=300")
            guard case .object(let signUpUser)? = signUp.json["user"] else {
                Issue.record("no user")
                return
            }
            _ = signUpUser
            #expect(jwks.headers[.contentType] == "application/jwk-set+json")
            let signIn = try await api.signIn(credential: &credential, authenticator: authenticator)
            let exchanged = try await api.request(.post, "/api/auth/token", token: token)
            #expect(exchanged.status == .ok && exchanged.string("tokenType") == "Bearer")
            for (response, amr) in [(signUp, "webauthn"), (signIn, "webauthn"), (exchanged, "webauthn")] {
                let access = try #require(response.string("accessToken"))
                #expect(try Self.verifiedWithJWKS(access, jwks: jwks))
                let jwt = try JWT(access)
                #expect(jwt.header["alg"] == .string("ES256") && jwt.header["typ"] == .string("JWT"))
                #expect(jwt.string("iss") == ServerHarness.origin)
                #expect(jwt.claims["aud"] == .array([.string("https://api.example.com")]) || jwt.string("aud") == "https://api.example.com")
                #expect(jwt.string("sub") == signUp.json["user"]?["id"].flatMap { if case .string(let s) = $0 { s } else { nil } })
                #expect(jwt.string("username") == "jay" && jwt.claims["amr"] == .array([.string(amr)]))
                let iat = try #require(jwt.number("iat")), exp = try #require(jwt.number("exp"))
                #expect(exp - iat == 300 && jwt.number("nbf") == iat && jwt.number("auth_time") != nil)
                #expect(jwt.string("jti") != nil && jwt.string("sid") != nil)
                // The session id is not the session token.
                #expect(jwt.string("sid") != response.string("token") && jwt.string("sid") != token)
            }
            // No session, no token.
            #expect(try await api.request(.post, "/api/auth/token").status == .unauthorized)
        }
    }

    @Test func introspectionSaysActiveOnlyForLiveTokensPasskeydSigned() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("introspect".utf8))
            let (session, _, signUp) = try await api.signUp("ivy", authenticator: &authenticator)
            let access = try #require(signUp.string("accessToken"))
            let key = try await Self.apiKey(harness, scopes: ["introspect"])

            // The endpoint needs an API key with the scope.
            #expect(try await Self.introspect(api, access, key: "pkd_nope").errorCode == "invalid_api_key")
            let reader = try await Self.apiKey(harness, scopes: ["users:read"])
            #expect(try await Self.introspect(api, access, key: reader).errorCode == "insufficient_scope")

            let active = try await Self.introspect(api, access, key: key)
            #expect(Self.active(active) == true && active.string("token_type") == "access_token" && active.string("username") == "ivy")
            #expect(active.headers[.cacheControl] == "no-store")
            let bySession = try await Self.introspect(api, session, key: key, form: false)
            #expect(Self.active(bySession) == true && bySession.string("token_type") == "session")
            #expect(bySession.string("sid") == active.string("sid"))

            // Forgeries, each checked against a token that is otherwise valid.
            let jwt = try JWT(access)
            let parts = access.split(separator: ".").map(String.init)
            func encoded(_ object: [String: Any]) -> String {
                Base64URLBytes(Array(try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))).base64URL
            }
            let kid: String = if case .string(let k)? = jwt.header["kid"] { k } else { "" }
            var tamperedClaims = try JSONSerialization.jsonObject(with: Data(Base64URLBytes(encoded: parts[1])!.bytes)) as! [String: Any]
            tamperedClaims["username"] = "admin"
            let tampered = parts[0] + "." + encoded(tamperedClaims) + "." + parts[2]
            let wrongKid = encoded(["alg": "ES256", "typ": "JWT", "kid": "someone-else"]) + "." + parts[1] + "." + parts[2]
            let none = encoded(["alg": "none", "typ": "JWT", "kid": kid]) + "." + parts[1] + "."
            // HS256 keyed with the public key as published (the classic algorithm confusion).
            let jwks = try await api.request(.get, "/.well-known/jwks.json")
            let hsHeader = encoded(["alg": "HS256", "typ": "JWT", "kid": kid])
            let hsMAC = HMAC<SHA256>.authenticationCode(for: Array((hsHeader + "." + parts[1]).utf8), using: SymmetricKey(data: jwks.bytes))
            let hs256 = hsHeader + "." + parts[1] + "." + Base64URLBytes(Array(hsMAC)).base64URL
            // Signed by passkeyd's own key but for another audience.
            let signingKey = try #require(try await harness.store.signingKeys(now: harness.clock.now).last)
            let keys = JWTKeyCollection()
            await keys.add(
                ecdsa: try ES256PrivateKey(backing: P256.Signing.PrivateKey(derRepresentation: signingKey.privateKey)),
                kid: JWKIdentifier(string: signingKey.kid))
            var otherAudience = try await harness.service.tokens.verify(access)!
            otherAudience.aud = AudienceClaim(value: ["https://elsewhere.example"])
            let wrongAudience = try await keys.sign(otherAudience, kid: JWKIdentifier(string: signingKey.kid))
            for (name, forged) in [
                ("tampered", tampered), ("wrong kid", wrongKid), ("alg none", none), ("HS256 with the public key", hs256),
                ("wrong aud", wrongAudience), ("garbage", "a.b.c"), ("empty", " "),
            ] {
                let answer = try await Self.introspect(api, forged, key: key)
                #expect(answer.status == .ok && Self.active(answer) == false, "\(name)")
                #expect(answer.json == .object(["active": .bool(false)]), "\(name): an inactive answer says nothing else")
            }

            // Revoked: inactive at once, for the access token and the session token alike.
            #expect(try await api.request(.delete, "/api/auth/session", token: session).status == .noContent)
            #expect(Self.active(try await Self.introspect(api, access, key: key)) == false)
            #expect(Self.active(try await Self.introspect(api, session, key: key)) == false)
        }
    }

    @Test func expiredTokensAndDisabledAccountsAreInactive() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("expiry".utf8))
            let (_, _, first) = try await api.signUp("eve", authenticator: &authenticator)
            let key = try await Self.apiKey(harness, scopes: ["introspect"])
            let access = try #require(first.string("accessToken"))
            harness.clock.advance(301)
            #expect(Self.active(try await Self.introspect(api, access, key: key)) == false)

            var other = SoftwareAuthenticator(seed: Array("disabled".utf8))
            let (_, _, second) = try await api.signUp("dot", authenticator: &other)
            let token = try #require(second.string("accessToken"))
            #expect(Self.active(try await Self.introspect(api, token, key: key)) == true)
            let account = try #require(try await harness.store.account(username: "dot"))
            _ = try await harness.store.setDisabled(accountID: account.id, disabled: true)
            #expect(Self.active(try await Self.introspect(api, token, key: key)) == false)
        }
    }

    /// Rotation with two instances on one database: the new key is published first and signs
    /// only after publishSeconds; tokens of the old key stay valid on both until they expire.
    @Test func rotationKeepsOldTokensValidOnEveryInstanceUntilTheyExpire() async throws {
        let harness = try await ServerHarness { $0.tokens.publishSeconds = 120 }
        let second = try PasskeyService(configuration: harness.service.configuration, store: harness.store, now: { harness.clock.now })
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("rotate".utf8))
            let (_, _, signUp) = try await api.signUp("rio", authenticator: &authenticator)
            let old = try #require(signUp.string("accessToken"))
            let oldKid = try JWT(old).header["kid"]
            #expect(try await second.tokens.verify(old) != nil)

            let configuration = harness.service.configuration.tokens
            let rotated = try await AccessTokens.rotate(store: harness.store, configuration: configuration, now: harness.clock.now)
            harness.clock.advance(31)  // both instances reload their keys
            let jwks = try await api.request(.get, "/.well-known/jwks.json")
            guard case .array(let published)? = jwks.json["keys"] else {
                Issue.record("no keys")
                return
            }
            #expect(published.count == 2)
            // Published, not yet signing: tokens still carry the old kid.
            let account = try #require(try await harness.store.account(username: "rio"))
            let session = try #require(try await harness.store.sessions(accountID: account.id, now: harness.clock.now).first)
            let stillOld = try await harness.service.tokens.mint(account: account, session: session)
            #expect(try JWT(stillOld.token).header["kid"] == oldKid)

            harness.clock.advance(Double(configuration.publishSeconds))
            let fresh = try await second.tokens.mint(account: account, session: session)
            #expect(try JWT(fresh.token).header["kid"] == .string(rotated.kid))
            // The old key's last token is valid on both instances until it expires…
            #expect(try await harness.service.tokens.verify(stillOld.token) != nil)
            #expect(try await second.tokens.verify(stillOld.token) != nil)
            #expect(try await harness.service.tokens.verify(fresh.token) != nil)
            // …then the key retires and leaves the JWKS.
            harness.clock.advance(Double(configuration.lifetimeSeconds + 61))
            _ = try await harness.store.sweepExpired(now: harness.clock.now)
            harness.clock.advance(31)
            let after = try await api.request(.get, "/.well-known/jwks.json")
            guard case .array(let remaining)? = after.json["keys"] else {
                Issue.record("no keys")
                return
            }
            #expect(remaining.count == 1 && remaining.first?["kid"] == .string(rotated.kid))
        }
    }

    @Test(arguments: ["EdDSA", "RS256"])
    func otherAlgorithmsSignAndPublishToo(_ algorithm: String) async throws {
        let harness = try await ServerHarness { $0.tokens.algorithm = algorithm }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array(algorithm.utf8))
            let (_, _, signUp) = try await api.signUp("alg", authenticator: &authenticator)
            let access = try #require(signUp.string("accessToken"))
            #expect(try JWT(access).header["alg"] == .string(algorithm))
            #expect(try await harness.service.tokens.verify(access) != nil)
            let jwks = try await api.request(.get, "/.well-known/jwks.json")
            guard case .array(let keys)? = jwks.json["keys"] else {
                Issue.record("no keys")
                return
            }
            #expect(keys.first?["kty"] == .string(algorithm == "EdDSA" ? "OKP" : "RSA"))
            // Nothing private is published.
            for field in ["d", "p", "q", "dp", "dq", "qi"] { #expect(keys.first?[field] == nil, "\(field)") }
        }
    }

    // MARK: API keys and the server API

    @Test func apiKeysAreCheckedScopedRevocableAndCannotBeGuessedInBulk() async throws {
        let harness = try await ServerHarness { $0.rateLimits.perAccount = 3 }
        try await harness.run(live: true) { api in
            let admin = AdminService(store: harness.store, now: { harness.clock.now })
            let created = try await admin.createAPIKey(name: "shop", scopes: ["users:read"], by: "test")
            #expect(created.key.hasPrefix("pkd_") && created.record.keyHash != Array(created.key.utf8))
            let ok = try await api.request(
                .get, "/api/admin/users?username=nobody", origin: nil, headers: [.authorization: "Bearer \(created.key)"])
            #expect(ok.errorCode == "account_not_found")
            let wrongScope = try await api.request(
                .post, "/api/admin/users", body: Array(#"{"username":"x"}"#.utf8), origin: nil,
                headers: [.authorization: "Bearer \(created.key)"])
            #expect(wrongScope.status == .forbidden && wrongScope.errorCode == "insufficient_scope")
            try await admin.revokeAPIKey(created.record.id, by: "test")
            let revoked = try await api.request(
                .get, "/api/admin/users?username=x", origin: nil, headers: [.authorization: "Bearer \(created.key)"])
            #expect(revoked.status == .unauthorized && revoked.errorCode == "invalid_api_key")
            // Wrong keys from one address: perAccount (3) a window, then 429.
            var statuses: [Int] = []
            for index in 0..<5 {
                statuses.append(
                    Int(
                        try await api.request(
                            .get, "/api/admin/users?username=x", origin: nil, headers: [.authorization: "Bearer pkd_guess\(index)"]
                        ).status.code))
            }
            #expect(statuses == [401, 429, 429, 429, 429] || statuses.filter { $0 == 429 }.count >= 2, "\(statuses)")
            // Every use is audited.
            let uses = try await harness.store.auditEvents(accountID: nil, limit: 50).filter { $0.kind == "api_key_used" }
            #expect(uses.count == 1 && uses.first?.detail?.contains("shop") == true)
        }
    }

    /// Server-initiated enrolment: the app's backend creates the account, hands its client a
    /// registration token, the client registers a passkey with it (and is signed in), signs in
    /// again, and the backend checks the access token with the JWKS.
    @Test func theRegistrationTokenFlowEndToEnd() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let key = try await Self.apiKey(harness, scopes: ["users:read", "users:write", "introspect"])
            let auth: HTTPFields = [.authorization: "Bearer \(key)"]
            let create = try await api.request(
                .post, "/api/admin/users", body: Array(#"{"username":"Shopper","displayName":"Sam Shopper","externalId":"cust-42"}"#.utf8),
                origin: nil, headers: auth)
            #expect(create.status == .created && create.string("externalId") == "cust-42")
            let id = try #require(create.string("id"))
            // Idempotent on externalId; a username held by someone else is refused.
            let again = try await api.request(
                .post, "/api/admin/users", body: Array(#"{"username":"other","externalId":"cust-42"}"#.utf8), origin: nil, headers: auth)
            #expect(again.status == .ok && again.string("id") == id)
            let clash = try await api.request(
                .post, "/api/admin/users", body: Array(#"{"username":"shopper","externalId":"cust-43"}"#.utf8), origin: nil, headers: auth)
            #expect(clash.errorCode == "username_taken")
            #expect(try await api.request(.get, "/api/admin/users?externalId=cust-42", origin: nil, headers: auth).string("id") == id)

            let issued = try await api.request(.post, "/api/admin/users/\(id)/registration-token", origin: nil, headers: auth)
            #expect(issued.status == .created)
            let registrationToken = try #require(issued.string("registrationToken"))
            let options = try await api.post("/api/auth/register/options", ["registrationToken": registrationToken])
            #expect(options.status == .ok)
            // Single use.
            #expect(
                try await api.post("/api/auth/register/options", ["registrationToken": registrationToken]).errorCode
                    == "invalid_registration_token")
            var authenticator = SoftwareAuthenticator(seed: Array("enrol".utf8))
            let creation = try options.decode(PublicKeyCredentialCreationOptionsJSON.self)
            #expect(creation.user.name == "Shopper" && creation.user.displayName == "Sam Shopper")
            let (registration, credential0) = try authenticator.register(options: creation, origin: ServerHarness.origin)
            var credential = credential0
            let verified = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(verified.status == .ok && verified.string("token") != nil && verified.json["user"]?["id"] == .string(id))
            let signIn = try await api.signIn(credential: &credential, authenticator: authenticator)
            let access = try #require(signIn.string("accessToken"))
            let jwks = try await api.request(.get, "/.well-known/jwks.json")
            #expect(try Self.verifiedWithJWKS(access, jwks: jwks))
            let claims = try JWT(access)
            #expect(claims.string("externalId") == "cust-42" && claims.string("sub") == id)

            // The account's passkeys and sessions through the server API.
            let passkeys = try await api.request(.get, "/api/admin/users/\(id)/passkeys", origin: nil, headers: auth)
            guard case .array(let list)? = passkeys.json["passkeys"], case .string(let passkeyID)? = list.first?["id"] else {
                Issue.record("\(passkeys.json)")
                return
            }
            let renamed = try await api.request(
                .patch, "/api/admin/users/\(id)/passkeys/\(passkeyID)", body: Array(#"{"name":"Work phone"}"#.utf8), origin: nil,
                headers: auth)
            #expect(renamed.string("name") == "Work phone")
            let sessions = try await api.request(.get, "/api/admin/users/\(id)/sessions", origin: nil, headers: auth)
            guard case .array(let live)? = sessions.json["sessions"] else {
                Issue.record("no sessions")
                return
            }
            #expect(live.count == 2)
            let revoked = try await api.request(.delete, "/api/admin/users/\(id)/sessions", origin: nil, headers: auth)
            #expect(revoked.json["revoked"] == .number(2))
            #expect(Self.active(try await Self.introspect(api, access, key: key)) == false)

            // Disabled: no registration token, no sign-in.
            #expect(try await api.request(.post, "/api/admin/users/\(id)/disable", origin: nil, headers: auth).status == .ok)
            #expect(
                try await api.request(.post, "/api/admin/users/\(id)/registration-token", origin: nil, headers: auth).errorCode
                    == "account_disabled")
            #expect(try await api.request(.post, "/api/admin/users/\(id)/enable", origin: nil, headers: auth).status == .noContent)
            let link = try await api.request(.post, "/api/admin/users/\(id)/recovery-link", origin: nil, headers: auth)
            #expect(link.status == .created && link.string("url")?.contains("#recover=") == true)
            #expect(try await api.request(.get, "/api/admin/users/\(UUID())", origin: nil, headers: auth).errorCode == "account_not_found")
        }
    }

    // MARK: Sessions a person can see

    @Test func sessionsNameTheirDeviceAndWhenTheyWereLastSeen() async throws {
        #expect(
            DeviceName.describe(
                userAgent:
                    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1"
            )
                == "Safari on iPhone")
        #expect(
            DeviceName.describe(
                userAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36")
                == "Chrome on Windows")
        #expect(DeviceName.describe(userAgent: "MyApp/1 CFNetwork/1490.0.4 Darwin/23.2.0") == "iOS app")
        #expect(DeviceName.describe(userAgent: "okhttp/4.12.0") == "Android app")
        #expect(DeviceName.describe(userAgent: nil) == "Unknown device")
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("seen".utf8))
            let (token, _, _) = try await api.signUp("sol", authenticator: &authenticator)
            harness.clock.advance(120)
            let list = try await api.request(.get, "/api/auth/sessions", token: token)
            guard case .array(let sessions)? = list.json["sessions"] else {
                Issue.record("no sessions")
                return
            }
            #expect(sessions.first?["device"] != nil && sessions.first?["lastSeenAt"] != nil && sessions.first?["lastSeenAt"] != .null)
        }
    }

    // MARK: CORS

    @Test func corsAnswersListedOriginsOnlyAndNeverStar() async throws {
        let app = "http://localhost:9000"
        let harness = try await ServerHarness { $0.corsOrigins = [app] }
        try await harness.run { api in
            let preflight = try await api.request(
                .options, "/api/auth/authenticate/options", origin: app,
                headers: [.accessControlRequestMethod: "POST", .accessControlRequestHeaders: "content-type"])
            #expect(preflight.status == .noContent && preflight.headers[.accessControlAllowOrigin] == app)
            #expect(preflight.headers[.accessControlAllowCredentials] == "true")
            #expect(preflight.headers[.accessControlAllowHeaders]?.contains("Authorization") == true)
            #expect(
                preflight.headers[.accessControlAllowMethods]?.contains("POST") == true && preflight.headers[.accessControlMaxAge] == "600")
            let refused = try await api.request(
                .options, "/api/auth/authenticate/options", origin: "http://evil.example", headers: [.accessControlRequestMethod: "POST"])
            #expect(refused.headers[.accessControlAllowOrigin] == nil && refused.headers[.vary] == "Origin")
            let options = try await api.post("/api/auth/authenticate/options", [String: String](), origin: app)
            #expect(options.status == .ok && options.headers[.accessControlAllowOrigin] == app && options.headers[.vary] == "Origin")
            // A listed CORS origin may change state; others may not.
            let evil = try await api.post("/api/auth/authenticate/options", [String: String](), origin: "http://evil.example")
            #expect(evil.errorCode == "csrf_origin_mismatch" && evil.headers[.accessControlAllowOrigin] == nil)
            let error = try await api.request(.get, "/api/auth/session", origin: app)
            #expect(error.status == .unauthorized && error.headers[.accessControlAllowOrigin] == app)
        }
        var configuration = EdgeConfiguration()
        configuration.corsOrigins = ["*"]
        #expect(throws: ConfigurationError.self) { try configuration.validate() }
    }

    /// `http://*.example.com` used to start, and a preflight from that literal origin got 204 with
    /// credentials: browsers send serialized origins only, so anything else is refused at start.
    static let refusedCORSOrigins = [
        "http://*.example.com", "https://*", "*", "null", "https://app.example.com/", "https://app.example.com/app",
        "https://user@app.example.com", "https://app.example.com@evil.example", "https://app.example.com?x=1",
        "https://app.example.com#x", "https://App.Example.com", "HTTPS://app.example.com", "https://app.example.com:443",
        "http://app.example.com:80", "https://app.example.com:0", "https://app.example.com:65536", "https://app.example.com:",
        "https://app.example.com:0443", "https://", "https:app.example.com", "ftp://app.example.com", "app.example.com",
        "https://%61pp.example.com", "https://app..example.com", "https://0x7f.1", "https://bücher.example", "https://[::1%25lo]",
        "https://[::1", " https://app.example.com", "https://app.example.com\\", "android:apk-key-hash:abc",
    ]
    static let acceptedCORSOrigins = [
        "https://app.example.com", "http://localhost:9000", "https://app.example.com:8443", "http://127.0.0.1:8080",
        "http://[::1]:8080", "https://xn--bcher-kva.example", "https://my_app.example.com",
    ]

    @Test func corsOriginsMustBeSerializedOrigins() throws {
        for origin in Self.refusedCORSOrigins {
            #expect(!ServerConfiguration.isOrigin(origin), "\(origin)")
            var configuration = EdgeConfiguration()
            configuration.corsOrigins = ["https://app.example.com", origin]
            let error = #expect(throws: ConfigurationError.self) { try configuration.validate() }
            #expect(error?.setting == "corsOrigins", "\(origin)")
        }
        var configuration = EdgeConfiguration()
        configuration.corsOrigins = Self.acceptedCORSOrigins
        for origin in Self.acceptedCORSOrigins { #expect(ServerConfiguration.isOrigin(origin), "\(origin)") }
        try configuration.validate()
    }
}
