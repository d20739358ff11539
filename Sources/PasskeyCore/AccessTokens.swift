import Crypto
import Foundation
import JWTKit
import PasskeyStore
import Synchronization
import WebAuthn
import _CryptoExtras

/// What an access token says (RFC 7519 registered claims, RFC 8176 `amr`, OIDC `sid` and
/// `auth_time`). ES256 tokens are written directly (`AccessTokens.compactES256`),
/// EdDSA and RS256 ones signed with jwt-kit; every token is checked with jwt-kit.
public struct AccessTokenClaims: JWTPayload, Equatable {
    public var iss: IssuerClaim
    public var sub: SubjectClaim
    public var aud: AudienceClaim
    public var iat: IssuedAtClaim
    public var nbf: NotBeforeClaim
    public var exp: ExpirationClaim
    public var jti: IDClaim
    /// The session's id (as `GET /api/auth/sessions` lists it), never its token.
    public var sid: String
    public var amr: [String]
    public var auth_time: Int
    /// The account's username: in a session's own tokens, and in a client's only with the
    /// `profile` scope (OIDC Core §5.4).
    public var username: String?
    /// The operator's id for the account: in a session's own tokens, never in a client's.
    public var externalId: String?
    /// RFC 9068, for tokens the OpenID provider issues to a client.
    public var client_id: String?
    public var scope: String?
    /// The grant (refresh-token family) a client's token was issued under: revoking the grant
    /// (a code used twice, a refresh token reused or revoked) revokes the token too.
    public var grant_id: String?

    /// Times are checked by ``AccessTokens/verify(_:)`` against the server's clock.
    public func verify(using algorithm: some JWTAlgorithm) async throws {}

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.jti.value == rhs.jti.value && lhs.sub.value == rhs.sub.value && lhs.sid == rhs.sid
    }
}

/// Signing keys, access tokens and the JWKS document.
///
/// - Keys are made and kept by passkeyd (`signing_keys`); every instance on one database signs
///   with the same current key (the newest whose `activatesAt` has passed) and publishes every
///   key not yet retired.
/// - Rotation (``rotate(store:configuration:now:immediately:)``) adds a key that is published at
///   once but signs only after `publishSeconds` (the JWKS cache lifetime), so no verifier holding
///   a cached JWKS meets an unknown `kid`; the keys it replaces keep verifying until every token
///   they signed has expired, then are retired and deleted.
public final class AccessTokens: Sendable {
    public struct Minted: Sendable {
        public let token: String
        public let expiresAt: Date
    }

    private struct Loaded: Sendable {
        var keys: [SigningKey]
        var collection: JWTKeyCollection
        var jwks: [UInt8]
        var at: Date
        /// The store's ``PasskeyStore/signingKeysVersion()`` when these keys were read, and when
        /// it was last compared with the store's.
        var version: [UInt8]
        var checkedAt: Date
        /// The ES256 keys by `kid`, for ``AccessTokens/sign(_:algorithm:type:)``'s own path.
        var es256: [String: P256.Signing.PrivateKey] = [:]

        /// The newest key of `algorithm` that has activated (its oldest before any has).
        func signing(at time: Date, algorithm: String) -> SigningKey? {
            let candidates = keys.filter { $0.algorithm == algorithm }
            return candidates.last { $0.activatesAt <= time } ?? candidates.first
        }
    }

    package let store: any PasskeyStore
    package let configuration: ServerConfiguration.Tokens
    package let issuer: String
    package let now: @Sendable () -> Date
    private let loaded = Mutex<Loaded?>(nil)

    package init(store: any PasskeyStore, configuration: ServerConfiguration.Tokens, issuer: String, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.configuration = configuration
        self.issuer = issuer
        self.now = now
    }

    /// The audiences tokens carry (configured, else the issuer).
    package var audiences: [String] { configuration.audiences.isEmpty ? [issuer] : configuration.audiences }

    // MARK: Keys

    /// Makes a new private key of `algorithm`.
    package static func makeKey(algorithm: String, now: Date, activatesAt: Date) throws -> SigningKey {
        let kid = Base64URLBytes(RelyingParty.randomBytes(12)).base64URL
        let privateKey: [UInt8]
        switch algorithm {
        case "ES256": privateKey = Array(P256.Signing.PrivateKey().derRepresentation)
        case "EdDSA": privateKey = Array(Curve25519.Signing.PrivateKey().rawRepresentation)
        case "RS256": privateKey = Array(try _RSA.Signing.PrivateKey(keySize: .bits2048).derRepresentation)
        default: throw ConfigurationError(setting: "tokens.algorithm", problem: "must be ES256, EdDSA or RS256")
        }
        return SigningKey(kid: kid, algorithm: algorithm, privateKey: privateKey, createdAt: now, activatesAt: activatesAt)
    }

    /// Adds a signing key: published now, signing after `publishSeconds` (or at once), and the
    /// keys it replaces retired once no token they signed can still be valid.
    @discardableResult
    public static func rotate(
        store: any PasskeyStore, configuration: ServerConfiguration.Tokens, now: Date, immediately: Bool = false, algorithm: String? = nil
    ) async throws -> SigningKey {
        let activation = immediately ? now : now.addingTimeInterval(Double(configuration.publishSeconds))
        let key = try makeKey(algorithm: algorithm ?? configuration.algorithm, now: now, activatesAt: activation)
        // Tokens signed by the old key until the new one signs live at most `lifetimeSeconds`;
        // a minute more covers clocks that differ.
        let retirement = activation.addingTimeInterval(Double(configuration.lifetimeSeconds + 60))
        try await store.addSigningKey(key, retiringOthersAt: retirement)
        return key
    }

    /// At start: the first key when the store has none. (A key of another algorithm, RS256 for
    /// an OpenID Connect client that asks for it, is made the first time it is needed.)
    package func prepare() async throws {
        let time = now()
        _ = try await store.addFirstSigningKey(
            try Self.makeKey(algorithm: configuration.algorithm, now: time, activatesAt: time), now: time)
        _ = try await current(refresh: true)
    }

    /// How often the keys' version is compared with the store's: a rotation by another instance
    /// or the CLI (`rotate --now` too) signs here within this and one read's time after it.
    package static let versionCheckInterval: TimeInterval = 0.5

    /// The keys in memory. Every ``versionCheckInterval`` one caller reads the store's key
    /// version (one primary-key read; everyone else meanwhile goes on with the keys held) and
    /// reloads when it changed; every 30 s they are reloaded anyway (keys retire by time alone).
    /// A store that does not answer the version read leaves the held keys in use until then.
    private func current(refresh: Bool = false) async throws -> Loaded {
        let time = now()
        if !refresh, let cached = loaded.withLock({ $0 }), time.timeIntervalSince(cached.at) < 30, time >= cached.at {
            guard time.timeIntervalSince(cached.checkedAt) >= Self.versionCheckInterval || time < cached.checkedAt else { return cached }
            let claimed = loaded.withLock { held -> Bool in
                guard var state = held, state.checkedAt == cached.checkedAt else { return false }
                state.checkedAt = time
                held = state
                return true
            }
            guard claimed, let version = try? await store.signingKeysVersion(), version != cached.version else { return cached }
        }
        let version = try await store.signingKeysVersion()
        var keys = try await store.signingKeys(now: time)
        if !keys.contains(where: { $0.algorithm == configuration.algorithm }) {
            _ = try await store.addFirstSigningKey(
                try Self.makeKey(algorithm: configuration.algorithm, now: time, activatesAt: time), now: time)
            keys = try await store.signingKeys(now: time)
        }
        let collection = JWTKeyCollection()
        var published: [JWK] = []
        var es256: [String: P256.Signing.PrivateKey] = [:]
        for key in keys {
            guard let identifier = JWKIdentifier(string: key.kid) as JWKIdentifier? else { continue }
            switch key.algorithm {
            case "ES256":
                let backing = try P256.Signing.PrivateKey(derRepresentation: key.privateKey)
                es256[key.kid] = backing
                let privateKey = try ES256PrivateKey(backing: backing)
                await collection.add(ecdsa: privateKey, kid: identifier)
                if let parameters = privateKey.publicKey.parameters {
                    published.append(.ecdsa(.es256, identifier: identifier, x: parameters.x, y: parameters.y, curve: .p256))
                }
            case "EdDSA":
                let backing = try Curve25519.Signing.PrivateKey(rawRepresentation: key.privateKey)
                await collection.add(eddsa: EdDSA.PrivateKey(backing: backing), kid: identifier)
                published.append(
                    .octetKeyPair(
                        .eddsa, identifier: identifier, x: Base64URLBytes(Array(backing.publicKey.rawRepresentation)).base64URL, y: nil,
                        curve: .ed25519))
            case "RS256":
                let privateKey = try Insecure.RSA.PrivateKey(backing: _RSA.Signing.PrivateKey(derRepresentation: key.privateKey))
                await collection.add(rsa: privateKey, digestAlgorithm: .sha256, kid: identifier)
                let primitives = try privateKey.publicKey.getKeyPrimitives()
                published.append(
                    .rsa(
                        .rs256, identifier: identifier, modulus: Base64URLBytes(Array(primitives.modulus)).base64URL,
                        exponent: Base64URLBytes(Array(primitives.publicExponent)).base64URL))
            default:
                continue
            }
        }
        // Only a token naming one of these keys is checked, never against a default key.
        await collection.clearDefault()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let jwks = Array(try encoder.encode(JWKS(keys: published)))
        let fresh = Loaded(keys: keys, collection: collection, jwks: jwks, at: time, version: version, checkedAt: time, es256: es256)
        loaded.withLock { $0 = fresh }
        return fresh
    }

    /// `GET /.well-known/jwks.json`: every key that may still verify a token.
    public func jwks() async throws -> [UInt8] { try await current().jwks }

    // MARK: Tokens

    /// RFC 8176 methods for how a session was made.
    package static func amr(method: String) -> [String] {
        switch method {
        case "passkey", "sign_up": ["webauthn"]
        case "password": ["pwd"]
        case "recovery_code", "recovery_link": ["otp"]
        default: []
        }
    }

    /// The session's public id: base64url of its token's hash (never the token).
    public static func sessionID(_ session: SessionRecord) -> String { Base64URLBytes(session.tokenHash).base64URL }

    /// A new access token for a live session of `account`.
    public func mint(account: Account, session: SessionRecord, audiences: [String]? = nil, lifetime: Int? = nil) async throws -> Minted {
        let claims = AccessTokenClaimsFactory.claims(
            tokens: self, account: account, session: session, audiences: audiences ?? self.audiences,
            lifetime: lifetime ?? configuration.lifetimeSeconds, now: now())
        return Minted(token: try await sign(claims), expiresAt: claims.exp.value)
    }

    /// Signs `payload` with the current key of `algorithm` (default: the configured one).
    public func sign(_ payload: some JWTPayload, algorithm: String? = nil, type: String = "JWT") async throws -> String {
        let algorithm = algorithm ?? configuration.algorithm
        var loaded = try await current()
        if loaded.signing(at: now(), algorithm: algorithm) == nil {
            let time = now()
            _ = try await store.addFirstSigningKey(try Self.makeKey(algorithm: algorithm, now: time, activatesAt: time), now: time)
            loaded = try await current(refresh: true)
        }
        guard let key = loaded.signing(at: now(), algorithm: algorithm) else { throw StoreError(.unavailable, "no signing key") }
        if let claims = payload as? any JSONWritable, key.algorithm == "ES256", let privateKey = loaded.es256[key.kid] {
            return try Self.compactES256(claims, kid: key.kid, type: type, key: privateKey)
        }
        var header = JWTHeader()
        header.typ = type
        return try await loaded.collection.sign(payload, kid: JWKIdentifier(string: key.kid), header: header)
    }

    /// RFC 7515 compact serialization of an ES256 JWS (RFC 7518 §3.4: the signature is R ‖ S,
    /// 32 bytes each), written directly: the access token of every sign-in, without jwt-kit's
    /// `JSONEncoder` and key-collection actor. Measured on the project's VM (release, one thread,
    /// 2026-11-27): 27–31 µs a token here against 53–59 µs through `JWTKeyCollection.sign`, the
    /// same P-256 signature (24–26 µs) in both; the ~25–31 µs saved is about 4–5% of a sign-in's
    /// server CPU (docs/PERFORMANCE.md). Tokens are checked by jwt-kit (``verify(_:audiences:anyAudience:)``);
    /// `AccessTokenSigningTests` holds the signing input byte for byte to jwt-kit's (keys sorted,
    /// slashes unescaped, dates in whole seconds) and verifies each path's tokens with the other.
    package static func compactES256(_ claims: any JSONWritable, kid: String, type: String, key: P256.Signing.PrivateKey) throws -> String {
        var header = JSONWriter(capacity: 64)
        header.object { members in
            members.string("alg", "ES256")
            members.string("kid", kid)
            members.string("typ", type)
        }
        var payload = JSONWriter(capacity: 512)
        claims.write(to: &payload)
        var input = Array(Base64URLBytes(header.bytes).base64URL.utf8)
        input.append(UInt8(ascii: "."))
        input += Base64URLBytes(payload.bytes).base64URL.utf8
        let signature = try key.signature(for: input)
        return String(decoding: input, as: UTF8.self) + "." + Base64URLBytes(Array(signature.rawRepresentation)).base64URL
    }

    /// The claims of a token passkeyd signed that is valid now (signature by a published key
    /// with that key's algorithm, issuer, one of the audiences, not before `nbf`, before `exp`),
    /// else nil. Session liveness is the caller's to check (`sid`).
    public func verify(_ token: String, audiences accepted: [String]? = nil, anyAudience: Bool = false) async throws -> AccessTokenClaims? {
        guard token.utf8.count <= 8192, let header = Self.header(of: token), let kid = header.kid, let alg = header.alg else { return nil }
        var loaded = try await current()
        if !loaded.keys.contains(where: { $0.kid == kid }) { loaded = try await current(refresh: true) }
        guard let key = loaded.keys.first(where: { $0.kid == kid }), key.algorithm == alg else { return nil }
        guard let claims = try? await loaded.collection.verify(token, as: AccessTokenClaims.self) else { return nil }
        let time = now()
        let wanted = accepted ?? audiences
        guard claims.iss.value == issuer, anyAudience || claims.aud.value.contains(where: wanted.contains),
            claims.exp.value > time, claims.nbf.value <= time.addingTimeInterval(60)
        else { return nil }
        return claims
    }

    /// What an ID token carries that an access token does not, and the claims an access token
    /// carries that an ID token must not.
    private struct IDTokenShape: JWTPayload {
        let iss: IssuerClaim
        let aud: AudienceClaim
        let sub: SubjectClaim
        let azp: String
        let acr: String
        let auth_time: Int
        let jti: String?
        let client_id: String?
        let scope: String?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// The audience (the one client) and subject of an ID token passkeyd issued, expired or not
    /// (RP-Initiated Logout 1.0 §2: "the OP MUST validate that it was the issuer of the ID
    /// Token"), else nil. An ID token is told from passkeyd's access tokens by its header (`typ`
    /// JWT, never `at+jwt`) and its claims: this issuer, one audience that is also its `azp`,
    /// `acr` and `auth_time`, and no `jti`, `client_id` or `scope` (which every access token has).
    public func idTokenHint(_ token: String) async throws -> (audience: String, subject: String)? {
        guard token.utf8.count <= 8192, let header = Self.header(of: token), let kid = header.kid, let alg = header.alg,
            header.typ == nil || header.typ == "JWT"
        else { return nil }
        var loaded = try await current()
        if !loaded.keys.contains(where: { $0.kid == kid }) { loaded = try await current(refresh: true) }
        guard let key = loaded.keys.first(where: { $0.kid == kid }), key.algorithm == alg,
            let claims = try? await loaded.collection.verify(token, as: IDTokenShape.self)
        else { return nil }
        guard claims.iss.value == issuer, claims.aud.value.count == 1, let audience = claims.aud.value.first, claims.azp == audience,
            claims.jti == nil, claims.client_id == nil, claims.scope == nil
        else { return nil }
        return (audience, claims.sub.value)
    }

    private struct Header: Decodable {
        let alg: String?
        let kid: String?
        let typ: String?
    }

    private static func header(of token: String) -> Header? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let bytes = Base64URLBytes(encoded: String(parts[0]))?.bytes else { return nil }
        return try? JSONDecoder().decode(Header.self, from: Data(bytes))
    }
}

extension AccessTokenClaims: JSONWritable {
    /// The claims as jwt-kit's coder writes them (NumericDate as whole seconds, a single
    /// audience as a string, absent optionals omitted), keys sorted.
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.member("amr") { $0.array(amr) { $0.string($1) } }
            if aud.value.count == 1 { members.string("aud", aud.value[0]) } else { members.strings("aud", aud.value) }
            members.member("auth_time") { $0.integer(auth_time) }
            members.optionalString("client_id", client_id)
            members.member("exp") { $0.integer(Int(exp.value.timeIntervalSince1970.rounded(.down))) }
            members.optionalString("externalId", externalId)
            members.optionalString("grant_id", grant_id)
            members.member("iat") { $0.integer(Int(iat.value.timeIntervalSince1970.rounded(.down))) }
            members.string("iss", iss.value)
            members.string("jti", jti.value)
            members.member("nbf") { $0.integer(Int(nbf.value.timeIntervalSince1970.rounded(.down))) }
            members.optionalString("scope", scope)
            members.string("sid", sid)
            members.string("sub", sub.value)
            members.optionalString("username", username)
        }
    }
}

/// Access-token claims for a session (shared by the sign-in answers and the token endpoint).
package enum AccessTokenClaimsFactory {
    package static func claims(
        tokens: AccessTokens, account: Account, session: SessionRecord, audiences: [String], lifetime: Int, now: Date
    )
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
