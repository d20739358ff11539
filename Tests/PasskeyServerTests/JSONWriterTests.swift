import Crypto
import Foundation
import JWTKit
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer

/// The hand-written answers are byte for byte what `JSONEncoder` (the API's encoder) writes.
@Suite("JSONWriter")
struct JSONWriterTests {
    static func both(_ value: some Encodable & JSONWritable) throws -> (String, String) {
        var writer = JSONWriter()
        value.write(to: &writer)
        return (String(decoding: writer.bytes, as: UTF8.self), String(decoding: try HTTP.encoder.encode(value), as: UTF8.self))
    }

    static let awkward = [
        "", "plain", "quote \" backslash \\ slash / done", "lines\n\r\t\u{08}\u{0C}", "controls \u{01}\u{1F}\u{7F}", "é 名前 🙂",
        "</script>",
    ]

    /// `JSONText` (error bodies and the JSON log lines) writes a string every JSON reader reads
    /// back unchanged: `JSONWriter`'s escapes, and `<` as `\u003c`.
    @Test func quotedTextReadsBackAsItWas() throws {
        #expect(
            JSONText.quote("a\"b\\c\n\r\t\u{08}<\u{01}\u{1F}\u{7F}é🙂")
                == #""a\"b\\c\n\r\t\b\u003c\u0001\u001f"# + "\u{7F}é🙂\"")
        var generator = SplitMix64.forTest()
        let pieces: [String] = [
            "\"", "\\", "<", ">", "/", "\n", "\r", "\t", "\u{00}", "\u{08}", "\u{1B}", "\u{7F}", "a", "Z", "é", "名", "🙂", " ",
        ]
        for text in Self.awkward
            + (0..<500).map({ _ in
                (0..<Int.random(in: 0...12, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            })
        {
            let quoted = JSONText.quote(text)
            #expect(!quoted.utf8.dropFirst().dropLast().contains { $0 < 0x20 || $0 == UInt8(ascii: "<") }, "\(quoted)")
            let read = try JSONSerialization.jsonObject(with: Data("[\(quoted)]".utf8)) as? [String]
            #expect(read == [text], "\(quoted) (seed \(generator.seed))")
        }
    }

    @Test func requestOptions() throws {
        for text in Self.awkward {
            let options = PublicKeyCredentialRequestOptionsJSON(
                challenge: Base64URLBytes(Array(0..<32)), timeout: 300_000, rpId: text,
                allowCredentials: [
                    PublicKeyCredentialDescriptorJSON(id: [1, 2, 3], transports: ["internal", text]),
                    PublicKeyCredentialDescriptorJSON(id: Array(repeating: 0xFF, count: 40)),
                ], userVerification: text, hints: [text, "hybrid"],
                extensions: [
                    "z": .object(["b": .number(1), "a": .array([.bool(true), .null, .number(-2.5), .number(1e20), .string(text)])]),
                    "appid": .string(text),
                ])
            let (fast, reference) = try Self.both(options)
            #expect(fast == reference)
        }
        let bare = PublicKeyCredentialRequestOptionsJSON(
            challenge: Base64URLBytes([9]), timeout: nil, rpId: "example.com", allowCredentials: [], userVerification: "required")
        let (fast, reference) = try Self.both(bare)
        #expect(fast == reference)
    }

    @Test func signInAnswers() throws {
        for (index, text) in Self.awkward.enumerated() {
            let account = Account(
                username: text, displayName: text, userHandle: Array(0..<64), createdAt: Date(),
                externalID: index % 2 == 0 ? nil : text)
            for date in [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.999), Date()] {
                for prfEnabled in [nil, false, true] {
                    let answer = SignInJSON(
                        user: UserJSON(account), token: text, expiresAt: date, accessToken: "eyJ.\(text)", accessTokenExpiresAt: date,
                        prfEnabled: prfEnabled)
                    let (fast, reference) = try Self.both(answer)
                    #expect(fast == reference)
                }
            }
        }
    }

    @Test func creationOptions() throws {
        for (index, text) in Self.awkward.enumerated() {
            // The library makes these itself (no public initializer): an empty one, then filled.
            let empty = try JSONDecoder().decode(AuthenticatorSelectionCriteria.self, from: Data("{}".utf8))
            var full = empty
            full.authenticatorAttachment = text
            full.residentKey = text
            full.requireResidentKey = index % 2 == 0
            full.userVerification = text
            var discoverable = empty
            discoverable.residentKey = "required"
            discoverable.requireResidentKey = true
            let selections: [AuthenticatorSelectionCriteria?] = [nil, empty, full, discoverable]
            for (round, selection) in selections.enumerated() {
                let options = PublicKeyCredentialCreationOptionsJSON(
                    rp: PublicKeyCredentialRpEntity(id: text, name: "RP \(text)"),
                    user: PublicKeyCredentialUserEntityJSON(id: Array(0..<UInt8(index * 9 + 1)), name: text, displayName: text),
                    challenge: Base64URLBytes(Array(0..<32)),
                    pubKeyCredParams: [
                        .init(alg: .es256), .init(alg: .edDSA), .init(alg: .rs256), .init(alg: COSEAlgorithmIdentifier(rawValue: 0)),
                    ],
                    timeout: round % 2 == 0 ? 300_000 : nil,
                    excludeCredentials: round == 0
                        ? []
                        : [
                            PublicKeyCredentialDescriptorJSON(id: [1, 2, 3], transports: ["internal", text]),
                            PublicKeyCredentialDescriptorJSON(id: Array(repeating: 0xFE, count: 40)),
                        ],
                    authenticatorSelection: selection, hints: round == 1 ? [] : [text, "client-device"], attestation: text,
                    extensions: round == 2 ? nil : ["credProps": .bool(true), "z": .object(["b": .number(1), "a": .string(text)])])
                let (fast, reference) = try Self.both(options)
                #expect(fast == reference)
            }
        }
    }

    @Test func signUpAnswers() throws {
        for (index, text) in Self.awkward.enumerated() {
            let account = Account(
                username: text, displayName: text, userHandle: Array(0..<64), createdAt: Date(),
                externalID: index % 2 == 0 ? nil : text)
            for date in [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.999), Date()] {
                let passkey = Passkey(
                    credentialID: Array(0..<UInt8(16 + index)), accountID: account.id, publicKey: [1, 2, 3], signCount: 0,
                    aaguid: index % 2 == 0 ? "fbfc3007-154e-4ecc-8c0b-6e020557d7bd" : text,
                    transports: index % 3 == 0 ? [] : ["internal", text], backupEligible: index % 2 == 0, backedUp: index % 3 == 0,
                    userVerified: index % 2 == 1, attestationFormat: text, attestationTrusted: false, name: text, createdAt: date,
                    lastUsedAt: index % 2 == 0 ? nil : date)
                for tokens in [true, false] {
                    let answer = RegisterVerifyJSON(
                        user: UserJSON(account), passkey: PasskeyJSON(passkey), token: tokens ? text : nil,
                        accessToken: tokens ? "eyJ.\(text)" : nil, accessTokenExpiresAt: tokens ? date : nil)
                    let (fast, reference) = try Self.both(answer)
                    #expect(fast == reference)
                }
            }
        }
    }

    @Test func integersAreWrittenAsSwiftPrintsThem() {
        for value in [0, 1, -1, 9, 10, 99, 100, 300_000, -300_000, Int(Int32.max), Int.max, Int.min, Int.min + 1] {
            var writer = JSONWriter()
            writer.integer(value)
            #expect(String(decoding: writer.bytes, as: UTF8.self) == String(value))
        }
    }

    static func random(_ count: Int, _ generator: inout SplitMix64) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// Ceremony states: what the writer writes, `JSONDecoder` reads as the same state, and what
    /// `JSONEncoder` wrote (a ceremony begun by an earlier version) the fast reader reads alike.
    @Test func ceremonyStatesReadTheSameEitherWay() throws {
        var generator = SplitMix64.forTest()
        for round in 0..<40 {
            let requirement = UserVerificationRequirement.allCases[round % 3]
            let profile = CeremonyProfile(unsafeToleratesRewrittenFlags: round % 5 == 0)
            let hints = Array(["security-key", "client-device", "hybrid"].prefix(round % 4))
            let authentication = AuthenticationState(
                challenge: Self.random(round % 7 == 0 ? 16 : 32, &generator), userVerification: requirement,
                allowCredentials: (0..<(round % 4)).map { _ in Self.random(Int.random(in: 1...255, using: &generator), &generator) },
                hints: hints, profile: profile)
            // Extensions: none but credProps, then each kind alone and together.
            var extensions = RegistrationExtensionInputs(credProps: round % 9 != 1, minPinLength: round % 6 == 2)
            if round % 4 == 1 {
                extensions.prf = .init(
                    eval: PRFValues(first: Self.random(32, &generator), second: round % 8 == 1 ? Self.random(32, &generator) : nil))
            }
            if round % 4 == 3 { extensions.prf = .init() }
            if round % 3 == 2 { extensions.largeBlob = round % 2 == 0 ? .required : .preferred }
            if round % 5 == 3 {
                extensions.credentialProtection = .init(
                    policy: CredentialProtectionPolicy.allCases[round % 3], enforce: round % 2 == 0,
                    requireFor: round % 10 == 3 ? .all : .deviceBound)
            }
            let registration = RegistrationState(
                challenge: Self.random(32, &generator), userVerification: requirement, conditional: round % 2 == 0,
                userHandle: Self.random(64, &generator),
                excludeCredentials: (0..<(round % 3)).map { _ in Self.random(Int.random(in: 16...64, using: &generator), &generator) },
                hints: hints, profile: profile,
                extensions: extensions)

            let written = PasskeyService.encoded(authentication)
            #expect(try JSONDecoder().decode(AuthenticationState.self, from: Data(written)) == authentication, "seed \(generator.seed)")
            #expect(CeremonyStateCoding.authentication(written) == authentication)
            #expect(CeremonyStateCoding.authentication(Array(try JSONEncoder().encode(authentication))) == authentication)

            let writtenRegistration = PasskeyService.encoded(registration)
            #expect(try JSONDecoder().decode(RegistrationState.self, from: Data(writtenRegistration)) == registration)
            #expect(CeremonyStateCoding.registration(writtenRegistration) == registration)
            #expect(CeremonyStateCoding.registration(Array(try JSONEncoder().encode(registration))) == registration)
        }
        // Neither reader makes a state of something that is not one.
        for bad in ["", "{}", "[]", #"{"challenge":"AAAA"}"#, #"{"challenge":5,"userVerification":"required"}"#] {
            #expect(CeremonyStateCoding.authentication(Array(bad.utf8)) == nil)
            #expect(CeremonyStateCoding.registration(Array(bad.utf8)) == nil)
        }
        let unknownRequirement =
            #"{"allowCredentials":[],"challenge":"AAAA","hints":[],"profile":{"unsafeToleratesRewrittenFlags":false},"userVerification":"sometimes"}"#
        #expect(CeremonyStateCoding.authentication(Array(unknownRequirement.utf8)) == nil)
    }

    /// Access tokens written by passkeyd's own ES256 path verify with jwt-kit and carry exactly
    /// the claims given (one audience as a string, several as an array; absent optionals absent).
    @Test func compactES256TokensVerifyWithJWTKit() async throws {
        let key = P256.Signing.PrivateKey()
        let keys = JWTKeyCollection()
        await keys.add(ecdsa: try ES256PrivateKey(backing: key), kid: JWKIdentifier(string: "k1"))
        for (index, text) in Self.awkward.enumerated() {
            let issued = Date(timeIntervalSince1970: 1_795_000_000)
            let claims = AccessTokenClaims(
                iss: IssuerClaim(value: "https://id.example"), sub: SubjectClaim(value: UUID().uuidString.lowercased()),
                aud: AudienceClaim(value: index % 2 == 0 ? ["https://api.example"] : ["a", text]), iat: IssuedAtClaim(value: issued),
                nbf: NotBeforeClaim(value: issued), exp: ExpirationClaim(value: issued.addingTimeInterval(300)),
                jti: IDClaim(value: UUID().uuidString), sid: "sid-\(text)", amr: index % 3 == 0 ? [] : ["webauthn"],
                auth_time: 1_794_999_000, username: text, externalId: index % 2 == 0 ? nil : text,
                client_id: index % 3 == 1 ? text : nil, scope: index % 3 == 2 ? "openid \(text)" : nil)
            let token = try AccessTokens.compactES256(claims, kid: "k1", type: "at+jwt", key: key)
            let verified = try await keys.verify(token, as: AccessTokenClaims.self)
            #expect(verified.iss == claims.iss && verified.sub == claims.sub && verified.aud == claims.aud)
            #expect(verified.iat.value == issued && verified.nbf.value == issued && verified.exp.value == claims.exp.value)
            #expect(verified.jti == claims.jti && verified.sid == claims.sid && verified.amr == claims.amr)
            #expect(verified.auth_time == claims.auth_time && verified.username == claims.username)
            #expect(verified.externalId == claims.externalId && verified.client_id == claims.client_id && verified.scope == claims.scope)
            let parts = token.split(separator: ".").map(String.init)
            let header = try JSONObject(bytes: try #require(Base64URLBytes(encoded: parts[0])).bytes)
            #expect(try header.string("alg") == "ES256" && header.string("kid") == "k1" && header.string("typ") == "at+jwt")
            let payload = try JSONObject(bytes: try #require(Base64URLBytes(encoded: parts[1])).bytes)
            #expect(payload.has("externalId") == (claims.externalId != nil) && payload.has("scope") == (claims.scope != nil))
            #expect(try #require(Base64URLBytes(encoded: parts[2])).bytes.count == 64)
        }
    }
}
