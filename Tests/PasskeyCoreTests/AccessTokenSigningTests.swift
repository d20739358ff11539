import Crypto
import Foundation
import JWTKit
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn

@testable import PasskeyCore

/// passkeyd signs its ES256 access tokens itself (``AccessTokens/compactES256(_:kid:type:key:)``,
/// kept because it costs about half of what jwt-kit's `JWTKeyCollection.sign` does, ~5% of a
/// sign-in: docs/PERFORMANCE.md). These tests hold it to jwt-kit.
///
/// What jwt-kit writes differs from the hand path in exactly three ways, all in the JSON, none in
/// what it means:
/// - key order: jwt-kit's default `JSONEncoder` does not sort keys (the payload's come in the
///   claims' declaration order, the header's in its dictionary's order, which changes from one
///   process to the next); the hand path sorts them;
/// - slashes: the default encoder writes `/` as `\/` (`https:\/\/id.example`); the hand path
///   writes `/`;
/// - dates: the default encoder writes a `Date` as seconds with their fraction; the hand path
///   writes whole seconds, rounded down (never later than the claim). The claims passkeyd makes
///   are whole seconds already, except an `exp` capped at a session's end.
/// With a jwt-kit serializer whose encoder sorts keys and leaves slashes alone, the signing input
/// (`base64url(header).base64url(payload)`) is the same, byte for byte.
@Suite("Access token signing")
struct AccessTokenSigningTests {
    static let issued = Date(timeIntervalSince1970: 1_795_000_000)
    static let awkward = [
        "", "plain", "quote \" backslash \\ slash / done", "lines\n\r\t\u{08}\u{0C}", "controls \u{01}\u{1F}\u{7F}", "é 名前 🙂",
        "</script>", "https://api.example/v1?x=1&y=2",
    ]

    /// Claims of every shape a token takes: one audience (a string) or several (an array), the
    /// optionals present and absent, strings that need escaping.
    static func claims(_ index: Int, _ text: String, expiresAt: Date? = nil) -> AccessTokenClaims {
        AccessTokenClaims(
            iss: IssuerClaim(value: "https://id.example"), sub: SubjectClaim(value: UUID().uuidString.lowercased()),
            aud: AudienceClaim(value: index % 2 == 0 ? ["https://id.example"] : ["https://api.example", text]),
            iat: IssuedAtClaim(value: issued), nbf: NotBeforeClaim(value: issued),
            exp: ExpirationClaim(value: expiresAt ?? issued.addingTimeInterval(300)), jti: IDClaim(value: UUID().uuidString.lowercased()),
            sid: "sid-\(text)", amr: index % 3 == 0 ? [] : ["webauthn"], auth_time: 1_794_999_000,
            username: index % 4 == 3 ? nil : text, externalId: index % 2 == 0 ? nil : text, client_id: index % 3 == 1 ? text : nil,
            scope: index % 3 == 2 ? "openid \(text)" : nil, grant_id: index % 3 == 2 ? "grant-\(text)" : nil)
    }

    /// A token's three segments, the first two decoded from base64url.
    static func parts(_ token: String) throws -> (header: [UInt8], payload: [UInt8], signingInput: String, signature: [UInt8]) {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        return (
            try #require(Base64URLBytes(encoded: parts[0])).bytes, try #require(Base64URLBytes(encoded: parts[1])).bytes,
            parts[0] + "." + parts[1], try #require(Base64URLBytes(encoded: parts[2])).bytes
        )
    }

    static func jsonObject(_ bytes: [UInt8]) throws -> NSDictionary {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? NSDictionary)
    }

    static func jwtKitHeader(type: String) -> JWTHeader {
        var header = JWTHeader()
        header.typ = type
        return header
    }

    @Test func signingInputIsJWTKitsByteForByteWithSortedKeysAndUnescapedSlashes() async throws {
        let key = P256.Signing.PrivateKey()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        let keys = JWTKeyCollection()
        await keys.add(
            ecdsa: try ES256PrivateKey(backing: key), kid: JWKIdentifier(string: "k1"),
            serializer: DefaultJWTSerializer(jsonEncoder: encoder))
        for (index, text) in Self.awkward.enumerated() {
            for type in ["JWT", "at+jwt"] {
                let claims = Self.claims(index, text)
                let hand = try Self.parts(try AccessTokens.compactES256(claims, kid: "k1", type: type, key: key))
                let kit = try Self.parts(
                    try await keys.sign(claims, kid: JWKIdentifier(string: "k1"), header: Self.jwtKitHeader(type: type)))
                #expect(String(decoding: hand.header, as: UTF8.self) == String(decoding: kit.header, as: UTF8.self))
                #expect(String(decoding: hand.payload, as: UTF8.self) == String(decoding: kit.payload, as: UTF8.self))
                #expect(hand.signingInput == kit.signingInput)
                // RFC 7518 §3.4: R ‖ S, 32 bytes each, as jwt-kit's.
                #expect(hand.signature.count == 64 && kit.signature.count == 64)
            }
        }
    }

    @Test func signingInputMeansWhatJWTKitsDefaultOutputMeans() async throws {
        let key = P256.Signing.PrivateKey()
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(backing: key), kid: JWKIdentifier(string: "k1"))
        for (index, text) in Self.awkward.enumerated() {
            let claims = Self.claims(index, text)
            let hand = try Self.parts(try AccessTokens.compactES256(claims, kid: "k1", type: "JWT", key: key))
            let kit = try Self.parts(try await keys.sign(claims, kid: JWKIdentifier(string: "k1"), header: Self.jwtKitHeader(type: "JWT")))
            #expect(try Self.jsonObject(hand.header) == Self.jsonObject(kit.header))
            #expect(try Self.jsonObject(hand.payload) == Self.jsonObject(kit.payload))
            // Nothing else differs: jwt-kit's bytes with `\/` read as `/` are the hand path's
            // bytes in another order (its keys unsorted).
            for (mine, theirs) in [(hand.header, kit.header), (hand.payload, kit.payload)] {
                let unescaped = String(decoding: theirs, as: UTF8.self).replacingOccurrences(of: #"\/"#, with: "/")
                #expect(Array(unescaped.utf8).sorted() == mine.sorted())
            }
        }
        // A fractional `exp` (a token capped at its session's end): whole seconds, rounded down.
        let capped = Self.claims(0, "plain", expiresAt: Self.issued.addingTimeInterval(299.75))
        let hand = try Self.parts(try AccessTokens.compactES256(capped, kid: "k1", type: "JWT", key: key))
        let kit = try Self.parts(try await keys.sign(capped, kid: JWKIdentifier(string: "k1"), header: Self.jwtKitHeader(type: "JWT")))
        #expect(try Self.jsonObject(hand.payload)["exp"] as? Int == 1_795_000_299)
        #expect(try Self.jsonObject(kit.payload)["exp"] as? Double == 1_795_000_299.75)
    }

    /// A token of either path verifies with the other: the hand path's with jwt-kit, jwt-kit's
    /// with ``AccessTokens/verify(_:audiences:anyAudience:)`` (the server's own check), on the
    /// key passkeyd made and keeps in its store.
    @Test func eachPathVerifiesTheOthersTokens() async throws {
        let store = try await TestDatabase.makeStore(.sqlite)
        let now = Self.issued.addingTimeInterval(10)
        let tokens = AccessTokens(store: store, configuration: .init(), issuer: "https://id.example", now: { now })
        try await tokens.prepare()
        let stored = try #require(try await store.signingKeys(now: now).first { $0.algorithm == "ES256" })
        let keys = JWTKeyCollection()
        await keys.add(
            ecdsa: try ES256PrivateKey(backing: P256.Signing.PrivateKey(derRepresentation: stored.privateKey)),
            kid: JWKIdentifier(string: stored.kid))
        for (index, text) in Self.awkward.enumerated() {
            var claims = Self.claims(index, text)
            claims.aud = AudienceClaim(value: ["https://id.example"])

            // AccessTokens.sign takes the hand path for ES256 claims it can write.
            let hand = try await tokens.sign(claims)
            let handHeader = try Self.jsonObject(try Self.parts(hand).header)
            #expect(handHeader == ["alg": "ES256", "kid": stored.kid, "typ": "JWT"])
            let verified = try await keys.verify(hand, as: AccessTokenClaims.self)
            #expect(verified.iss == claims.iss && verified.sub == claims.sub && verified.aud == claims.aud)
            #expect(verified.iat.value == Self.issued && verified.nbf.value == Self.issued && verified.exp.value == claims.exp.value)
            #expect(verified.jti == claims.jti && verified.sid == claims.sid && verified.amr == claims.amr)
            #expect(verified.auth_time == claims.auth_time && verified.username == claims.username)
            #expect(verified.externalId == claims.externalId && verified.client_id == claims.client_id)
            #expect(verified.scope == claims.scope && verified.grant_id == claims.grant_id)
            #expect(try await tokens.verify(hand) != nil)

            let kit = try await keys.sign(claims, kid: JWKIdentifier(string: stored.kid), header: Self.jwtKitHeader(type: "JWT"))
            let checked = try #require(try await tokens.verify(kit))
            #expect(checked == claims && checked.username == claims.username && checked.externalId == claims.externalId)
            #expect(checked.exp.value == claims.exp.value && checked.scope == claims.scope && checked.amr == claims.amr)

            // Either signature over the other path's bytes fails: the check is real.
            let forged = try Self.parts(kit).signingInput + "." + hand.split(separator: ".")[2]
            #expect(try await tokens.verify(forged) == nil)
            await #expect(throws: (any Error).self) { try await keys.verify(forged, as: AccessTokenClaims.self) }
        }
    }

    /// `passkeyd admin keys rotate --now` (issue 42, item 9): another instance on the database
    /// signs with the new key, and publishes it, within ``AccessTokens/versionCheckInterval`` of
    /// the command returning (it used to keep the old key until its 30 s reload). Two instances
    /// and the command each on a store of their own, as three processes; on SQLite and PostgreSQL.
    @Test(arguments: TestDatabase.kinds)
    func rotateNowSignsOnEveryInstanceAtItsNextVersionCheck(_ kind: TestDatabase.Kind) async throws {
        let url = try await TestDatabase.makeURL(kind)
        func open() throws -> any PasskeyStore {
            switch kind {
            case .sqlite: try SQLiteStore(path: String(url.dropFirst("sqlite://".count)))
            case .postgres: try PostgresStore(url: url, options: TestDatabase.postgresOptions(maxConnections: 2))
            }
        }
        let stores = [try open(), try open(), try open()]
        defer { for store in stores { (store as? PostgresStore)?.close() } }
        try await stores[0].migrate()
        let clock = TestClock()
        let configuration = ServerConfiguration.Tokens()
        let instances = stores.prefix(2).map {
            AccessTokens(store: $0, configuration: configuration, issuer: "https://id.example", now: { clock.now })
        }
        for instance in instances { try await instance.prepare() }
        func kid(_ token: String) throws -> String? {
            try Self.jsonObject(try Self.parts(token).header)["kid"] as? String
        }
        func published(_ instance: AccessTokens) async throws -> [String] {
            let jwks = try Self.jsonObject(try await instance.jwks())
            return (jwks["keys"] as? [NSDictionary] ?? []).compactMap { $0["kid"] as? String }
        }
        var claims = Self.claims(0, "plain")
        claims.aud = AudienceClaim(value: ["https://id.example"])
        let old = try #require(try kid(try await instances[1].sign(claims)))
        #expect(try await published(instances[1]) == [old])

        for round in 1...3 {
            clock.advance(1)  // keys made in one millisecond would be ordered by their random ids
            let rotated = try await AccessTokens.rotate(store: stores[2], configuration: configuration, now: clock.now, immediately: true)
            clock.advance(AccessTokens.versionCheckInterval)
            for instance in instances {
                #expect(try kid(try await instance.sign(claims)) == rotated.kid, "round \(round)")
                #expect(try await published(instance).contains(rotated.kid), "round \(round)")
                #expect(try await published(instance).contains(old), "round \(round): the old key verifies until it retires")
            }
        }
    }
}
