import Crypto
import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

/// Issue 37's extensions in the core: the Level 3 JSON encodings of the inputs, the strict and
/// bounded reading of `clientExtensionResults`, the typed authenticator extension outputs, the
/// ED flag's map in authenticator data, and the ceremonies that check what they asked for.
@Suite("Extensions")
struct ExtensionTests {
    /// `extensions` as the client receives it: keys sorted, so the JSON can be compared exactly.
    static func encoded(_ json: [String: JSONValue]?) throws -> String? {
        guard let json else { return nil }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(json), as: UTF8.self)
    }

    /// `clientExtensionResults` read from its wire text by the strict JSON reader.
    static func outputs(_ text: String) throws -> ClientExtensionOutputs {
        guard case .object(let members) = try JSONReader.parse(Array(text.utf8)) else {
            throw WebAuthnError(.malformedJSON, "not an object")
        }
        return try ClientExtensionOutputs(members)
    }

    static func map(_ entries: (String, CBORValue)...) -> CBORValue {
        .map(entries.map { CBORMapEntry(.text($0.0), $0.1) })
    }

    /// Assertion-shaped authenticator data: rpIdHash, flags, counter 1, then `tail`.
    static func authData(flags: UInt8, tail: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: Array("example.com".utf8))) + [flags, 0, 0, 0, 1] + tail
    }

    static let upUV: UInt8 = 0x05
    static let upUVED: UInt8 = 0x85
    static let salt = Array(repeating: UInt8(0x5a), count: 32)
    /// Bytes whose base64 and base64url differ (`+/+/` against `-_-_`).
    static let awkwardID: [UInt8] = [0xfb, 0xff, 0xbf]
}

// MARK: - Inputs: Level 3 JSON encodings

extension ExtensionTests {
    @Test func registrationAsksForCredPropsByDefault() throws {
        #expect(try Self.encoded(RegistrationExtensionInputs().json) == #"{"credProps":true}"#)
    }

    @Test func nothingAskedEncodesAsNoExtensions() throws {
        #expect(RegistrationExtensionInputs(credProps: false).json == nil)
        #expect(AuthenticationExtensionInputs().json == nil)
        // A PRF request with no inputs at all still asks (`prf: {}`): it is not "nothing".
        #expect(try Self.encoded(AuthenticationExtensionInputs(prf: .init()).json) == #"{"prf":{}}"#)
    }

    @Test func registrationPRFAsksForSupportOrAnEvaluation() throws {
        let supportOnly = RegistrationExtensionInputs(credProps: false, prf: .init())
        #expect(try Self.encoded(supportOnly.json) == #"{"prf":{}}"#)
        let first = RegistrationExtensionInputs(prf: .init(eval: PRFValues(first: [1, 2, 3])))
        #expect(try Self.encoded(first.json) == #"{"credProps":true,"prf":{"eval":{"first":"AQID"}}}"#)
        let both = RegistrationExtensionInputs(credProps: false, prf: .init(eval: PRFValues(first: Self.awkwardID, second: [0xff])))
        #expect(try Self.encoded(both.json) == #"{"prf":{"eval":{"first":"-_-_","second":"_w"}}}"#)
    }

    @Test(arguments: [RegistrationExtensionInputs.LargeBlobSupport.required, .preferred])
    func largeBlobSupportIsWritten(_ support: RegistrationExtensionInputs.LargeBlobSupport) throws {
        let inputs = RegistrationExtensionInputs(credProps: false, largeBlob: support)
        #expect(try Self.encoded(inputs.json) == #"{"largeBlob":{"support":"\#(support.rawValue)"}}"#)
    }

    @Test(arguments: CredentialProtectionPolicy.allCases, [true, false])
    func credentialProtectionPolicyIsWrittenWithItsEnforcement(_ policy: CredentialProtectionPolicy, _ enforce: Bool) throws {
        // `requireFor` is the relying party's own rule: it never reaches the client.
        for scope in [RegistrationExtensionInputs.CredentialProtection.Scope.none, .deviceBound, .all] {
            let inputs = RegistrationExtensionInputs(
                credProps: false, credentialProtection: .init(policy: policy, enforce: enforce, requireFor: scope))
            #expect(
                try Self.encoded(inputs.json)
                    == #"{"credentialProtectionPolicy":"\#(policy.rawValue)","enforceCredentialProtectionPolicy":\#(enforce)}"#)
        }
    }

    @Test func credProtectLevelsAndPolicyNamesAgree() {
        #expect(CredentialProtectionPolicy.allCases.map(\.level) == [1, 2, 3])
        #expect(
            CredentialProtectionPolicy.allCases.map(\.rawValue) == [
                "userVerificationOptional", "userVerificationOptionalWithCredentialIDList", "userVerificationRequired",
            ])
        for level in 1...3 { #expect(CredentialProtectionPolicy(level: level)?.level == level) }
        for level in [-1, 0, 4, 255] { #expect(CredentialProtectionPolicy(level: level) == nil) }
    }

    @Test func minPinLengthIsWritten() throws {
        #expect(try Self.encoded(RegistrationExtensionInputs(credProps: false, minPinLength: true).json) == #"{"minPinLength":true}"#)
    }

    @Test func everyRegistrationInputTogether() throws {
        let inputs = RegistrationExtensionInputs(
            prf: .init(eval: PRFValues(first: [0])), largeBlob: .preferred,
            credentialProtection: .init(policy: .userVerificationRequired, enforce: true, requireFor: .deviceBound), minPinLength: true)
        #expect(
            try Self.encoded(inputs.json)
                == #"{"credProps":true,"credentialProtectionPolicy":"userVerificationRequired","enforceCredentialProtectionPolicy":true,"#
                + #""largeBlob":{"support":"preferred"},"minPinLength":true,"prf":{"eval":{"first":"AA"}}}"#)
    }

    @Test func authenticationPRFKeysEvalByCredentialInBase64URL() throws {
        let inputs = AuthenticationExtensionInputs(
            prf: .init(
                eval: PRFValues(first: [1]),
                evalByCredential: [Self.awkwardID: PRFValues(first: [2], second: [3]), [1, 2]: PRFValues(first: [4])]))
        #expect(
            try Self.encoded(inputs.json)
                == #"{"prf":{"eval":{"first":"AQ"},"evalByCredential":{"-_-_":{"first":"Ag","second":"Aw"},"AQI":{"first":"BA"}}}}"#)
        // An empty evalByCredential is left out rather than written as `{}`.
        #expect(
            try Self.encoded(AuthenticationExtensionInputs(prf: .init(eval: PRFValues(first: [1]))).json)
                == #"{"prf":{"eval":{"first":"AQ"}}}"#)
    }

    @Test func largeBlobReadAndWriteAreWritten() throws {
        #expect(try Self.encoded(AuthenticationExtensionInputs(largeBlob: .read).json) == #"{"largeBlob":{"read":true}}"#)
        let write = AuthenticationExtensionInputs(largeBlob: .write(Base64URLBytes(Self.awkwardID + [1])))
        #expect(try Self.encoded(write.json) == #"{"largeBlob":{"write":"-_-_AQ"}}"#)
    }

    @Test func optionsCarryTheInputsAndTheStateKeepsThem() throws {
        let rp = try RelyingParty(.init(rpID: "example.com", origins: ["https://example.com"]))
        let user = PublicKeyCredentialUserEntity(id: [1, 2, 3], name: "ada", displayName: "Ada")
        let inputs = RegistrationExtensionInputs(
            prf: .init(), largeBlob: .required,
            credentialProtection: .init(policy: .userVerificationOptionalWithCredentialIDList, enforce: false, requireFor: .all))
        let begin = rp.beginRegistration(user: user, extensions: inputs)
        #expect(begin.options.extensions == inputs.json)
        #expect(begin.state.extensions == inputs)
        // The state is kept between begin and finish (a cookie, a row): the request survives it.
        let kept = try JSONDecoder().decode(RegistrationState.self, from: JSONEncoder().encode(begin.state))
        #expect(kept.extensions == inputs)
        // A state kept before extensions were recorded asked for credProps only.
        guard case .object(var old) = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(begin.state)) else {
            Issue.record("a state encodes as an object")
            return
        }
        old["extensions"] = nil
        let legacy = try JSONDecoder().decode(RegistrationState.self, from: JSONEncoder().encode(JSONValue.object(old)))
        #expect(legacy.extensions == RegistrationExtensionInputs())

        let request = rp.beginAuthentication(extensions: AuthenticationExtensionInputs(largeBlob: .read))
        #expect(request.options.extensions == ["largeBlob": .object(["read": .bool(true)])])
        #expect(rp.beginAuthentication().options.extensions == nil)
    }
}

// MARK: - clientExtensionResults

extension ExtensionTests {
    @Test func knownClientOutputsAreReadTyped() throws {
        let read = try Self.outputs(
            #"{"credProps":{"rk":true},"prf":{"enabled":false},"largeBlob":{"supported":true,"written":false}}"#)
        #expect(read.discoverable == true && read.prfEnabled == false)
        #expect(read.largeBlobSupported == true && read.largeBlobWritten == false)
        #expect(try ClientExtensionOutputs(nil) == ClientExtensionOutputs())
        #expect(try Self.outputs("{}") == ClientExtensionOutputs())
        // Members that are null or absent read as "not reported".
        #expect(try Self.outputs(#"{"credProps":{"rk":null},"prf":{},"largeBlob":{"supported":null}}"#) == ClientExtensionOutputs())
    }

    @Test func unknownClientOutputsAreIgnored() throws {
        let read = try Self.outputs(
            #"{"appid":true,"hmacCreateSecret":[1,{"x":null}],"devicePubKey":{"dpk":"AAAA"},"credProps":{"rk":false,"authenticatorDisplayName":"Key"},"#
                + #""largeBlob":{"blob":"SGVsbG8sIFdvcmxkIQ","supported":true},"prf":{"enabled":true,"later":7}}"#)
        var expected = ClientExtensionOutputs()
        expected.discoverable = false
        expected.largeBlobSupported = true
        expected.prfEnabled = true
        #expect(read == expected)
    }

    @Test(arguments: [
        #"{"credProps":true}"#, #"{"credProps":[]}"#, #"{"credProps":{"rk":"true"}}"#, #"{"credProps":{"rk":1}}"#,
        #"{"prf":true}"#, #"{"prf":"enabled"}"#, #"{"prf":{"enabled":"true"}}"#, #"{"prf":{"enabled":[true]}}"#,
        #"{"largeBlob":false}"#, #"{"largeBlob":{"supported":1}}"#, #"{"largeBlob":{"written":"yes"}}"#,
        #"{"appid":true,"credProps":{"rk":0}}"#,
    ])
    func knownClientOutputsOfTheWrongTypeAreRefused(_ text: String) {
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) { try Self.outputs(text) }
    }

    @Test func oversizedClientOutputsAreRefused() throws {
        // A large blob read back is the client's: not counted (up to the largest cap, 64 KiB, and
        // past it), and ignored; its siblings are still read.
        for size in [1024, 65_536] {
            let blob = Base64URLBytes(Array(repeating: 0xab, count: size)).base64URL
            #expect(try Self.outputs(#"{"largeBlob":{"blob":"\#(blob)"}}"#) == ClientExtensionOutputs())
            var written = ClientExtensionOutputs()
            written.largeBlobWritten = false
            #expect(try Self.outputs(#"{"largeBlob":{"blob":"\#(blob)","written":false}}"#) == written)
        }
        // Its siblings are counted like any member.
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) {
            try Self.outputs(#"{"largeBlob":{"other":"\#(String(repeating: "a", count: ClientExtensionOutputs.maxBytes))"}}"#)
        }
        #expect(try Self.outputs(#"{"x":"\#(String(repeating: "a", count: 4000))"}"#) == ClientExtensionOutputs())
        // One string, or many small members, past 4096 bytes.
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) {
            try Self.outputs(#"{"x":"\#(String(repeating: "a", count: ClientExtensionOutputs.maxBytes))"}"#)
        }
        let members = (0..<1000).map { #""m\#($0)":true"# }.joined(separator: ",")
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) { try Self.outputs("{\(members)}") }
        let items = Array(repeating: "0", count: 5000).joined(separator: ",")
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) { try Self.outputs(#"{"x":[\#(items)]}"#) }
        let keys = (0..<1000).map { #""k\#($0)":1"# }.joined(separator: ",")
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) { try Self.outputs(#"{"x":{\#(keys)}}"#) }
    }

    @Test func deeplyNestedClientOutputsAreRefused() throws {
        // clientExtensionResults' own members are at depth 1; depth 4 is the deepest accepted.
        #expect(ClientExtensionOutputs.maxDepth == 4)
        #expect(try Self.outputs(#"{"x":{"a":{"b":{"c":true}}}}"#) == ClientExtensionOutputs())
        #expect(try Self.outputs(#"{"x":[[[1]]]}"#) == ClientExtensionOutputs())
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) { try Self.outputs(#"{"x":{"a":{"b":{"c":{"d":true}}}}}"#) }
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) { try Self.outputs(#"{"x":[[[[1]]]]}"#) }
        // An empty array at depth 4 holds nothing at depth 5.
        #expect(try Self.outputs(#"{"x":[[[[]]]]}"#) == ClientExtensionOutputs())
        // Inside a known member too.
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) {
            try Self.outputs(#"{"credProps":{"rk":true,"x":{"y":{"z":[0]}}}}"#)
        }
    }

    @Test(arguments: [
        #"{"prf":{"enabled":true,"results":{"first":"AAAA"}}}"#, #"{"prf":{"results":{"first":"AAAA","second":"AAAA"}}}"#,
        #"{"prf":{"results":{}}}"#, #"{"prf":{"results":"AAAA"}}"#, #"{"prf":{"results":false}}"#,
    ])
    func aPostedPRFOutputIsRefused(_ text: String) {
        #expect(throws: WebAuthnError(.prfOutputPosted, "")) { try Self.outputs(text) }
    }

    @Test func aNullPRFOutputIsNoOutput() throws {
        #expect(try Self.outputs(#"{"prf":{"enabled":true,"results":null}}"#).prfEnabled == true)
        #expect(try Self.outputs(#"{"prf":{"results":null}}"#) == ClientExtensionOutputs())
    }
}

// MARK: - Authenticator extension outputs

extension ExtensionTests {
    @Test(arguments: [
        (UInt64(1), CredentialProtectionPolicy.userVerificationOptional), (2, .userVerificationOptionalWithCredentialIDList),
        (3, .userVerificationRequired),
    ])
    func credProtectLevelsAreRead(_ level: UInt64, _ policy: CredentialProtectionPolicy) throws {
        for registration in [true, false] {
            let outputs = try AuthenticatorExtensionOutputs(map: Self.map(("credProtect", .unsigned(level))), registration: registration)
            #expect(outputs.credProtect == policy)
        }
    }

    @Test(arguments: [
        CBORValue.unsigned(0), .unsigned(4), .unsigned(UInt64.max), .negative(0), .text("2"), .bytes([2]), .bool(true), .float(2),
    ])
    func credProtectOutsideOneToThreeIsRefused(_ value: CBORValue) {
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorExtensionOutputs(map: Self.map(("credProtect", value)), registration: true)
        }
    }

    @Test func minPinLengthIsRead() throws {
        for length in [UInt64(4), 6, 63, 255] {
            #expect(
                try AuthenticatorExtensionOutputs(map: Self.map(("minPinLength", .unsigned(length))), registration: true).minPinLength
                    == Int(length))
        }
        for value in [CBORValue.unsigned(256), .negative(3), .text("6"), .bool(true)] {
            #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
                try AuthenticatorExtensionOutputs(map: Self.map(("minPinLength", value)), registration: true)
            }
        }
    }

    @Test func hmacSecretIsABooleanAtRegistration() throws {
        #expect(try AuthenticatorExtensionOutputs(map: Self.map(("hmac-secret", .bool(true))), registration: true).hmacSecret == true)
        let no = try AuthenticatorExtensionOutputs(map: Self.map(("hmac-secret", .bool(false))), registration: true)
        #expect(no.hmacSecret == false && no.hmacSecretOutput == nil)
        for value in [CBORValue.bytes(Array(repeating: 1, count: 32)), .unsigned(1), .null] {
            #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
                try AuthenticatorExtensionOutputs(map: Self.map(("hmac-secret", value)), registration: true)
            }
        }
    }

    @Test(arguments: [32, 48, 64, 80])
    func hmacSecretInAnAssertionIsItsEncryptedOutputs(_ count: Int) throws {
        let output = (0..<count).map { UInt8($0) }
        let outputs = try AuthenticatorExtensionOutputs(map: Self.map(("hmac-secret", .bytes(output))), registration: false)
        #expect(outputs.hmacSecretOutput == output && outputs.hmacSecret == nil)
    }

    @Test(arguments: [0, 1, 16, 31, 33, 47, 49, 63, 65, 79, 81, 96, 128])
    func hmacSecretOfAnyOtherLengthIsRefused(_ count: Int) {
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorExtensionOutputs(
                map: Self.map(("hmac-secret", .bytes(Array(repeating: 7, count: count)))), registration: false)
        }
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorExtensionOutputs(map: Self.map(("hmac-secret", .bool(true))), registration: false)
        }
    }

    @Test func credBlobTakesTheShapeOfItsCeremony() throws {
        #expect(try AuthenticatorExtensionOutputs(map: Self.map(("credBlob", .bool(true))), registration: true).credBlobStored == true)
        _ = try AuthenticatorExtensionOutputs(map: Self.map(("credBlob", .bytes([1, 2]))), registration: false)
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorExtensionOutputs(map: Self.map(("credBlob", .bytes([1]))), registration: true)
        }
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorExtensionOutputs(map: Self.map(("credBlob", .bool(true))), registration: false)
        }
    }

    @Test(arguments: [CBORValue.unsigned(1), .negative(0), .bytes(Array("credProtect".utf8)), .bool(true), .null])
    func extensionIdentifiersMustBeText(_ key: CBORValue) {
        let map = CBORValue.map([CBORMapEntry(.text("credProtect"), .unsigned(2)), CBORMapEntry(key, .unsigned(2))])
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) { try AuthenticatorExtensionOutputs(map: map, registration: true) }
    }

    @Test func unknownAuthenticatorOutputsAreIgnored() throws {
        let map = Self.map(
            ("devicePubKey", Self.map(("dpk", .bytes([1])))), ("largeBlobKey", .bytes(Array(repeating: 0, count: 32))),
            ("thirdPartyPayment", .bool(true)), ("credprotect", .text("not ours: identifiers are case-sensitive")),
            ("minPinLength", .unsigned(8)))
        var expected = AuthenticatorExtensionOutputs()
        expected.minPinLength = 8
        #expect(try AuthenticatorExtensionOutputs(map: map, registration: true) == expected)
        #expect(try AuthenticatorExtensionOutputs(map: .map([]), registration: false) == AuthenticatorExtensionOutputs())
    }

    @Test(arguments: [CBORValue.array([]), .bytes([0xa0]), .text("{}"), .unsigned(0), .null])
    func anExtensionValueThatIsNotAMapIsRefused(_ value: CBORValue) {
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorExtensionOutputs(map: value, registration: true)
        }
    }
}

// MARK: - The ED flag's map in authenticator data

extension ExtensionTests {
    static let hmacSecretMap = CBORWriter.encode(ExtensionTests.map(("hmac-secret", .bytes(Array(repeating: 0x11, count: 32)))))

    @Test func anExtensionMapFollowsED() throws {
        let data = try AuthenticatorData(bytes: Self.authData(flags: Self.upUVED, tail: Self.hmacSecretMap))
        #expect(data.extensions == Self.map(("hmac-secret", .bytes(Array(repeating: 0x11, count: 32)))))
        #expect(data.extensionOutputs.hmacSecretOutput == Array(repeating: 0x11, count: 32))
        let plain = try AuthenticatorData(bytes: Self.authData(flags: Self.upUV, tail: []))
        #expect(plain.extensions == nil && plain.extensionOutputs == AuthenticatorExtensionOutputs())
    }

    @Test(arguments: [
        ("ED set and no map", upUVED, [UInt8]()), ("trailing byte after the map", upUVED, hmacSecretMap + [0x00]),
        ("two maps", upUVED, hmacSecretMap + [0xa0]), ("an integer, not a map", upUVED, [0x01]),
        ("an array, not a map", upUVED, [0x81, 0xa0]), ("a text string, not a map", upUVED, [0x62, 0x7b, 0x7d]),
        ("a map with ED clear", upUV, hmacSecretMap), ("an empty map with ED clear", upUV, [0xa0]),
        ("a truncated map", upUVED, Array(hmacSecretMap.dropLast())), ("an indefinite-length map", upUVED, [0xbf, 0xff]),
        ("a duplicated identifier", upUVED, [0xa2, 0x63, 0x66, 0x6f, 0x6f, 0x01, 0x63, 0x66, 0x6f, 0x6f, 0x02]),
        ("an output of the wrong type", upUVED, CBORWriter.encode(ExtensionTests.map(("credProtect", .unsigned(4))))),
    ])
    func aBadExtensionMapIsRefused(_ label: String, _ flags: UInt8, _ tail: [UInt8]) {
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, ""), "\(label)") {
            try AuthenticatorData(bytes: Self.authData(flags: flags, tail: tail))
        }
    }

    @Test func everyTruncatedPrefixOfAnExtendedAuthDataThrows() throws {
        let whole = Self.authData(
            flags: Self.upUVED, tail: CBORWriter.encode(Self.map(("credProtect", .unsigned(2)), ("minPinLength", .unsigned(6)))))
        _ = try AuthenticatorData(bytes: whole)
        for length in 0..<whole.count {
            #expect(throws: WebAuthnError.self) { try AuthenticatorData(bytes: Array(whole.prefix(length))) }
        }
    }

    @Test func registrationAuthDataCarriesItsExtensionsAfterTheKey() throws {
        var authenticator = SoftwareAuthenticator(seed: Array("ext".utf8))
        let inputs = RegistrationExtensionInputs(
            prf: .init(), credentialProtection: .init(policy: .userVerificationRequired, enforce: true, requireFor: .all),
            minPinLength: true)
        let options = try RelyingParty(.init(rpID: "example.com", origins: ["https://example.com"]))
            .beginRegistration(user: .init(id: [1], name: "ada", displayName: "Ada"), extensions: inputs).options
        let (response, _) = try authenticator.register(options: options, origin: "https://example.com")
        let object = try AttestationObject(bytes: response.response.attestationObject.bytes)
        let outputs = object.authenticatorData.extensionOutputs
        #expect(object.authenticatorData.attestedCredentialData != nil)
        #expect(outputs.credProtect == .userVerificationRequired && outputs.hmacSecret == true && outputs.minPinLength == 6)
    }
}

// MARK: - Registration ceremonies

extension ExtensionTests {
    /// Registers with `inputs`; `reported` replaces the authenticator's extension map (`nil`: the
    /// software authenticator's own outputs).
    static func register(
        _ harness: inout CeremonyHarness, asking inputs: RegistrationExtensionInputs, reported: CBORValue? = nil,
        mutate: (inout RegistrationResponseJSON) -> Void = { _ in }
    ) async throws -> VerifiedRegistration {
        let begin = harness.rp.beginRegistration(user: harness.user, extensions: inputs)
        var (response, _) = try harness.authenticator.register(options: begin.options, origin: CeremonyHarness.origin, extensions: reported)
        mutate(&response)
        return try await harness.rp.finishRegistration(response: response, state: begin.state)
    }

    typealias Scope = RegistrationExtensionInputs.CredentialProtection.Scope

    /// Every scope, BE set and clear, and levels reported under, at and over level 2 or none,
    /// against a requirement of level 2: accepted, or refused `credential_protection_not_applied`.
    static let credProtectCases: [(Scope, Bool, UInt64?, Bool)] = [
        // Device-bound credentials (BE clear) are covered by `.deviceBound` and `.all`.
        (.deviceBound, false, nil, false), (.deviceBound, false, 1, false), (.deviceBound, false, 2, true),
        (.deviceBound, false, 3, true), (.all, false, nil, false), (.all, false, 1, false), (.all, false, 2, true), (.all, false, 3, true),
        // Synced passkeys (BE set) are covered by `.all` only.
        (.deviceBound, true, nil, true), (.deviceBound, true, 1, true), (.deviceBound, true, 3, true),
        (.all, true, nil, false), (.all, true, 1, false), (.all, true, 2, true), (.all, true, 3, true),
        // `.none` asks and never requires.
        (.none, false, nil, true), (.none, false, 1, true), (.none, true, nil, true), (.none, true, 1, true),
    ]

    @Test(arguments: credProtectCases)
    func credProtectRequirementIsEnforced(_ scope: Scope, _ backupEligible: Bool, _ reported: UInt64?, _ accepted: Bool) async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.backupEligible = backupEligible
        harness.authenticator.backedUp = backupEligible
        // Reported nothing: an authenticator without credProtect, no ED flag at all.
        harness.authenticator.supportsCredProtect = reported != nil
        let inputs = RegistrationExtensionInputs(
            credentialProtection: .init(policy: .userVerificationOptionalWithCredentialIDList, enforce: false, requireFor: scope))
        let map = reported.map { Self.map(("credProtect", .unsigned($0))) }
        if accepted {
            let verified = try await Self.register(&harness, asking: inputs, reported: map)
            #expect(verified.authenticatorExtensions.credProtect?.level == reported.map(Int.init))
            #expect(verified.backupEligible == backupEligible)
        } else {
            await #expect(throws: WebAuthnError(.credentialProtectionNotApplied, "")) {
                try await Self.register(&harness, asking: inputs, reported: map)
            }
        }
    }

    @Test func levelThreeRequiredRefusesLevelTwo() async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.backupEligible = false
        harness.authenticator.backedUp = false
        let inputs = RegistrationExtensionInputs(
            credentialProtection: .init(policy: .userVerificationRequired, enforce: true, requireFor: .deviceBound))
        await #expect(throws: WebAuthnError(.credentialProtectionNotApplied, "")) {
            try await Self.register(&harness, asking: inputs, reported: Self.map(("credProtect", .unsigned(2))))
        }
        // The software authenticator applies what was asked: level 3, accepted.
        #expect(try await Self.register(&harness, asking: inputs).authenticatorExtensions.credProtect == .userVerificationRequired)
    }

    @Test func aCredProtectNobodyRequiredIsStillRead() async throws {
        var harness = try CeremonyHarness()
        let verified = try await Self.register(&harness, asking: .init(), reported: Self.map(("credProtect", .unsigned(1))))
        #expect(verified.authenticatorExtensions.credProtect == .userVerificationOptional)
        // And a malformed one is refused even when nobody asked.
        await #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try await Self.register(&harness, asking: .init(), reported: Self.map(("credProtect", .unsigned(0))))
        }
    }

    @Test func largeBlobRequiredNeedsSupport() async throws {
        var harness = try CeremonyHarness()
        let required = RegistrationExtensionInputs(largeBlob: .required)
        let supported = try await Self.register(&harness, asking: required)
        #expect(supported.clientExtensions.largeBlobSupported == true)

        harness.authenticator.supportsLargeBlob = false
        await #expect(throws: WebAuthnError(.largeBlobUnsupported, "")) { try await Self.register(&harness, asking: required) }
        // A client that says nothing about largeBlob has not said it is supported.
        harness.authenticator.supportsLargeBlob = true
        await #expect(throws: WebAuthnError(.largeBlobUnsupported, "")) {
            try await Self.register(&harness, asking: required) { $0.clientExtensionResults?["largeBlob"] = nil }
        }
        await #expect(throws: WebAuthnError(.largeBlobUnsupported, "")) {
            try await Self.register(&harness, asking: required) { $0.clientExtensionResults = nil }
        }
        // "preferred" takes the answer as it is.
        harness.authenticator.supportsLargeBlob = false
        #expect(try await Self.register(&harness, asking: .init(largeBlob: .preferred)).clientExtensions.largeBlobSupported == false)
    }

    @Test func prfSupportComesFromTheClientOrTheAuthenticator() async throws {
        var harness = try CeremonyHarness()
        let asked = RegistrationExtensionInputs(prf: .init())
        let both = try await Self.register(&harness, asking: asked)
        #expect(both.prfEnabled == true && both.clientExtensions.prfEnabled == true && both.authenticatorExtensions.hmacSecret == true)
        // hmac-secret alone (a client that does not report prf.enabled).
        let authenticatorOnly = try await Self.register(&harness, asking: asked) { $0.clientExtensionResults?["prf"] = nil }
        #expect(authenticatorOnly.prfEnabled == true && authenticatorOnly.clientExtensions.prfEnabled == nil)
        // prf.enabled alone (a platform that hides hmac-secret).
        let clientOnly = try await Self.register(&harness, asking: asked, reported: .map([]))
        #expect(clientOnly.prfEnabled == true && clientOnly.authenticatorExtensions.hmacSecret == nil)
        // Either one saying yes wins over the other saying no.
        let mixed = try await Self.register(&harness, asking: asked, reported: Self.map(("hmac-secret", .bool(false))))
        #expect(mixed.prfEnabled == true)

        harness.authenticator.supportsPRF = false
        #expect(try await Self.register(&harness, asking: asked).prfEnabled == false)
        #expect(try await Self.register(&harness, asking: .init()).prfEnabled == nil)
    }

    @Test func aPRFEvaluatedAtCreationMustNotBePosted() async throws {
        var harness = try CeremonyHarness()
        let asked = RegistrationExtensionInputs(prf: .init(eval: PRFValues(first: Self.salt)))
        await #expect(throws: WebAuthnError(.prfOutputPosted, "")) { try await Self.register(&harness, asking: asked) }
        // Removed as passkeyd.js and PasskeyClient do, `enabled` kept: accepted.
        let verified = try await Self.register(&harness, asking: asked) { response in
            guard case .object(var prf)? = response.clientExtensionResults?["prf"] else { return }
            prf["results"] = nil
            response.clientExtensionResults?["prf"] = .object(prf)
        }
        #expect(verified.prfEnabled == true)
    }

    @Test func malformedClientOutputsFailTheRegistration() async throws {
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.malformedExtensionResults, "")) {
            try await Self.register(&harness, asking: .init()) { $0.clientExtensionResults?["credProps"] = .object(["rk": .string("yes")]) }
        }
        let deep: JSONValue = .object(["a": .object(["b": .object(["c": .object(["d": .null])])])])
        await #expect(throws: WebAuthnError(.malformedExtensionResults, "")) {
            try await Self.register(&harness, asking: .init()) { $0.clientExtensionResults?["unknown"] = deep }
        }
    }

    @Test func minPinLengthIsReportedToARegistration() async throws {
        var harness = try CeremonyHarness()
        #expect(try await Self.register(&harness, asking: .init(minPinLength: true)).authenticatorExtensions.minPinLength == 6)
        harness.authenticator.minPinLength = nil
        #expect(try await Self.register(&harness, asking: .init(minPinLength: true)).authenticatorExtensions.minPinLength == nil)
    }
}

// MARK: - Sign-in ceremonies

extension ExtensionTests {
    /// Strips `prf.results` as a well-behaved client does before posting.
    static func withoutPRFResults(_ response: inout AuthenticationResponseJSON) {
        guard case .object(var prf)? = response.clientExtensionResults?["prf"] else { return }
        prf["results"] = nil
        response.clientExtensionResults?["prf"] = prf.isEmpty ? nil : .object(prf)
    }

    @Test func aPRFSignInCarriesHmacSecretAndVerifies() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        for second in [nil, Array(repeating: UInt8(1), count: 32)] {
            let begin = harness.rp.beginAuthentication(
                allowCredentials: [CredentialDescriptor(id: stored.id)],
                extensions: .init(prf: .init(evalByCredential: [stored.id: PRFValues(first: Self.salt, second: second)])))
            var response = try harness.authenticator.authenticate(
                options: begin.options, origin: CeremonyHarness.origin, credential: &credential)
            #expect(try AuthenticatorData(bytes: response.response.authenticatorData.bytes).flags.contains(.extensionData))
            #expect(throws: WebAuthnError(.prfOutputPosted, "")) {
                try harness.rp.finishAuthentication(response: response, state: begin.state, credential: stored)
            }
            Self.withoutPRFResults(&response)
            let verified = try harness.rp.finishAuthentication(response: response, state: begin.state, credential: stored)
            #expect(verified.authenticatorExtensions.hmacSecretOutput?.count == (second == nil ? 32 : 64))
            #expect(verified.clientExtensions == ClientExtensionOutputs())
            stored.signCount = verified.newSignCount
        }
    }

    /// An assertion whose authenticator data ends with `extensions` (ED set), signed by `credential`.
    static func assertion(
        _ harness: CeremonyHarness, _ credential: inout SoftwareCredential, extensions: [UInt8]
    ) throws -> (AuthenticationBegin, AuthenticationResponseJSON) {
        let begin = harness.rp.beginAuthentication()
        var response = try harness.authenticator.authenticate(
            options: begin.options, origin: CeremonyHarness.origin, credential: &credential)
        var authData = response.response.authenticatorData.bytes
        authData[32] |= 0x80
        authData += extensions
        response.response.authenticatorData = Base64URLBytes(authData)
        response.response.signature = Base64URLBytes(
            try credential.sign(authData + Array(SHA256.hash(data: response.response.clientDataJSON.bytes))))
        return (begin, response)
    }

    @Test(arguments: [32, 48, 64, 80])
    func hmacSecretOutputsOfEveryPINProtocolVerify(_ count: Int) async throws {
        var harness = try CeremonyHarness()
        let (stored, enrolled) = try await harness.enroll()
        var credential = enrolled
        let output = Array(repeating: UInt8(0x77), count: count)
        let (begin, response) = try Self.assertion(
            harness, &credential, extensions: CBORWriter.encode(Self.map(("hmac-secret", .bytes(output)))))
        let verified = try harness.rp.finishAuthentication(response: response, state: begin.state, credential: stored)
        #expect(verified.authenticatorExtensions.hmacSecretOutput == output)
    }

    @Test func aSignedButMalformedExtensionMapFailsTheSignIn() async throws {
        var harness = try CeremonyHarness()
        let (stored, enrolled) = try await harness.enroll()
        var credential = enrolled
        for tail in [
            CBORWriter.encode(Self.map(("hmac-secret", .bytes(Array(repeating: 1, count: 33))))),
            CBORWriter.encode(Self.map(("hmac-secret", .bool(true)))), Self.hmacSecretMap + [0], [],
        ] {
            let (begin, response) = try Self.assertion(harness, &credential, extensions: tail)
            #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
                try harness.rp.finishAuthentication(response: response, state: begin.state, credential: stored)
            }
        }
    }

    @Test func largeBlobWrittenIsReported() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        let blob = Array("a wrapped data key".utf8)
        let write = harness.rp.beginAuthentication(
            allowCredentials: [CredentialDescriptor(id: stored.id)], extensions: .init(largeBlob: .write(Base64URLBytes(blob))))
        let written = try harness.authenticator.authenticate(
            options: write.options, origin: CeremonyHarness.origin, credential: &credential)
        let verified = try harness.rp.finishAuthentication(response: written, state: write.state, credential: stored)
        #expect(verified.clientExtensions.largeBlobWritten == true)
        #expect(credential.largeBlob == blob)
        stored.signCount = verified.newSignCount

        // Reading it back: the blob may be posted; it is the client's and nothing keeps it.
        let read = harness.rp.beginAuthentication(extensions: .init(largeBlob: .read))
        let readBack = try harness.authenticator.authenticate(
            options: read.options, origin: CeremonyHarness.origin, credential: &credential)
        #expect(readBack.clientExtensionResults?["largeBlob"]?["blob"] == .string(Base64URLBytes(blob).base64URL))
        let again = try harness.rp.finishAuthentication(response: readBack, state: read.state, credential: stored)
        #expect(again.clientExtensions == ClientExtensionOutputs())

        // A write the authenticator could not do.
        harness.authenticator.supportsLargeBlob = false
        stored.signCount = again.newSignCount
        let failed = try harness.authenticator.authenticate(options: write.options, origin: CeremonyHarness.origin, credential: &credential)
        #expect(
            try harness.rp.finishAuthentication(response: failed, state: write.state, credential: stored).clientExtensions.largeBlobWritten
                == false)
    }

    @Test func malformedClientOutputsFailTheSignIn() async throws {
        var harness = try CeremonyHarness()
        let (stored, enrolled) = try await harness.enroll()
        var credential = enrolled
        #expect(throws: WebAuthnError(.malformedExtensionResults, "")) {
            try harness.signIn(stored, &credential) { $0.clientExtensionResults = ["largeBlob": .object(["written": .number(1)])] }
        }
        #expect(throws: WebAuthnError(.prfOutputPosted, "")) {
            try harness.signIn(stored, &credential) { $0.clientExtensionResults = ["prf": .object(["results": .object([:])])] }
        }
    }
}
