import Crypto
import Foundation
import PasskeyClientSoftware
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyClient

/// PRF keys in the Swift client: the derivation pinned to the vector `passkeyd.js` pins, the
/// encryption format, what is (not) posted, and the whole path against a real `passkeyd serve`
/// with the software authenticator.
@Suite("PasskeyClient PRF keys")
struct PasskeyClientPRFTests {
    static func hex(_ key: SymmetricKey?) -> String? {
        key?.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    @Test func theKeyDerivationMatchesThePinnedVector() throws {
        // HKDF-SHA256(ikm: 01 02 … 20, salt: "passkeyd-prf-v1", info: "notes"), 32 bytes: the vector
        // passkeyd.js pins too (computed apart with Python's hmac, RFC 5869).
        let key = try PRFRequest(context: "notes").deriveKey(fromPRFOutput: Data(1...32))
        let derived = Self.hex(key) ?? ""
        print("PRF HKDF vector (ikm 01..20, context notes): \(derived)")
        #expect(derived == "908aa31e3ad21ef2caacfcb8584cdb5be7974555bb3b27991b5dfa3f00d1b665")
        #expect(Self.hex(try PRFRequest(context: "photos").deriveKey(fromPRFOutput: Data(1...32))) != derived)
        #expect(Self.hex(try PRFRequest(context: "notes").deriveKey(fromPRFOutput: Data(2...33))) != derived)
    }

    @Test(arguments: [0, 257, 1000])
    func aContextOutside1To256BytesIsRefused(_ length: Int) {
        let error = #expect(throws: PasskeyClientError.self) { try PRFRequest(context: String(repeating: "a", count: length)) }
        #expect(error?.code == "invalid_argument")
    }

    @Test func contextsOf1And256BytesAreAccepted() throws {
        _ = try PRFRequest(context: "a")
        // 256 bytes of UTF-8 (128 two-byte characters), not 256 characters.
        _ = try PRFRequest(context: String(repeating: "é", count: 128))
        #expect(throws: PasskeyClientError.self) { try PRFRequest(context: String(repeating: "é", count: 129)) }
    }

    @Test func sealedDataHasTheSharedLayoutAndOpensOnlyWithItsKey() throws {
        let key = try PRFRequest(context: "notes").deriveKey(fromPRFOutput: Data(1...32))
        let note = Data("a note only its passkey opens".utf8)
        let sealed = try PasskeyEncryption.seal(note, using: key)
        // nonce (12) || ciphertext (same length as the note) || tag (16).
        #expect(sealed.count == 12 + note.count + 16)
        #expect(try PasskeyEncryption.open(sealed, using: key) == note)
        // The layout is AES-GCM's: opening it by hand from its parts gives the note.
        let box = try AES.GCM.SealedBox(
            nonce: AES.GCM.Nonce(data: sealed.prefix(12)), ciphertext: sealed.dropFirst(12).dropLast(16), tag: sealed.suffix(16))
        #expect(try AES.GCM.open(box, using: key) == note)
        #expect(try PasskeyEncryption.seal(note, using: key) != sealed)

        let otherKey = try PRFRequest(context: "photos").deriveKey(fromPRFOutput: Data(1...32))
        #expect(throws: PasskeyClientError.decryptionFailed) { try PasskeyEncryption.open(sealed, using: otherKey) }
        var altered = Array(sealed)
        altered[20] ^= 1
        #expect(throws: PasskeyClientError.decryptionFailed) { try PasskeyEncryption.open(Data(altered), using: key) }
        for length in [0, 11, 27] {
            #expect(throws: PasskeyClientError.decryptionFailed) { try PasskeyEncryption.open(sealed.prefix(length), using: key) }
        }

        let text = try PasskeyEncryption.sealText(note, using: key, authenticating: Data("note-1".utf8))
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
        #expect(try PasskeyEncryption.open(text: text, using: key, authenticating: Data("note-1".utf8)) == note)
        #expect(throws: PasskeyClientError.decryptionFailed) {
            try PasskeyEncryption.open(text: text, using: key, authenticating: Data("note-2".utf8))
        }
        #expect(throws: PasskeyClientError.decryptionFailed) { try PasskeyEncryption.open(text: "*", using: key) }
    }

    @Test func prfOutputsAreNeverPosted() throws {
        let secret = Data(repeating: 0xab, count: 32)
        let registration = RegistrationResult(
            credentialID: Data([1, 2]), clientDataJSON: Data(), attestationObject: Data(), discoverable: true,
            prf: PRFOutputs(enabled: true, first: secret, second: secret))
        let posted = String(decoding: try JSONEncoder().encode(RegistrationJSON(registration)), as: UTF8.self)
        #expect(posted.contains(#""clientExtensionResults":{"#))
        #expect(posted.contains(#""enabled":true"#) && posted.contains(#""rk":true"#))
        #expect(!posted.contains("results") && !posted.contains(Base64URL.encode(secret)))

        let assertion = AssertionResult(
            credentialID: Data([1, 2]), clientDataJSON: Data(), authenticatorData: Data(), signature: Data(), userHandle: nil,
            prf: PRFOutputs(first: secret))
        let signedIn = String(decoding: try JSONEncoder().encode(AssertionJSON(assertion)), as: UTF8.self)
        #expect(signedIn.contains(#""clientExtensionResults":{}"#) && !signedIn.contains(Base64URL.encode(secret)))
    }

    @Test func onlyAnOutputGivesAKey() throws {
        let notes = try PRFRequest(context: "notes")
        let output = Data(1...32)
        #expect(
            Self.hex(PasskeyClient.prfResult(PRFOutputs(first: output), for: notes).key) == Self.hex(notes.deriveKey(fromPRFOutput: output))
        )
        for outputs in [PRFOutputs(enabled: false), PRFOutputs(enabled: true), PRFOutputs(second: output), nil] {
            if case .unsupported = PasskeyClient.prfResult(outputs, for: notes) {
            } else {
                Issue.record("\(String(describing: outputs)) gives no key")
            }
        }
    }

    /// WebAuthn L3 §10.1.4: a PRF output is 32 bytes. Anything else gives no key, as
    /// `passkeyd.js` answers `invalid-output`.
    @Test(arguments: [0, 1, 16, 31, 33, 64])
    func anOutputThatIsNot32BytesGivesNoKey(_ length: Int) throws {
        let notes = try PRFRequest(context: "notes")
        let result = PasskeyClient.prfResult(PRFOutputs(enabled: true, first: Data(repeating: 7, count: length)), for: notes)
        guard case .invalidOutput = result else {
            Issue.record("a \(length)-byte output: \(result)")
            return
        }
        #expect(result.key == nil)
    }

    // MARK: Against passkeyd serve

    @Test func aPasskeysKeyIsStableAndItsOwnAndChangesWithItsSalt() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        let notes = try PRFRequest(context: "notes")
        let sessions = MemorySessionStore()
        let phone = fixture.provider()
        let client = fixture.client(phone, sessions: sessions)

        let signedUp = try await client.signUp(username: "ada", displayName: "Ada", prf: notes)
        let phoneKey = try #require(signedUp.prf?.key)
        let phonePasskey = try #require(signedUp.passkey)
        #expect(phonePasskey.prf == true && phonePasskey.discoverable == true)
        let sealed = try PasskeyEncryption.seal(Data("ada's note".utf8), using: phoneKey)

        // Sign-in after sign-in: the same passkey and salt give the same key, which opens the note.
        try await client.signOut()
        for _ in 0..<2 {
            let signedIn = try await client.signIn(username: "ada", prf: notes)
            #expect(Self.hex(signedIn.prf?.key) == Self.hex(phoneKey))
            #expect(try PasskeyEncryption.open(sealed, using: try #require(signedIn.prf?.key)) == Data("ada's note".utf8))
        }
        // Another context, another key, from the same PRF output.
        let photos = try await client.signIn(username: "ada", prf: try PRFRequest(context: "photos"))
        #expect(photos.prf?.key != nil && Self.hex(photos.prf?.key) != Self.hex(phoneKey))
        // A sign-in that does not ask for PRF says nothing about it.
        #expect(try await client.signIn(username: "ada").prf == nil)

        // A second passkey of the same account: its own salt and secret, so its own key.
        let laptop = fixture.provider()
        let laptopClient = fixture.client(laptop, sessions: sessions)
        let added = try await laptopClient.addPasskey(name: "Laptop", prf: notes)
        let laptopKey = try #require(added.prf.key)
        #expect(Self.hex(laptopKey) != Self.hex(phoneKey) && added.passkey.prf == true)
        let viaLaptop = try await laptopClient.signIn(username: "ada", prf: notes)
        #expect(Self.hex(viaLaptop.prf?.key) == Self.hex(laptopKey))
        #expect(throws: PasskeyClientError.decryptionFailed) { try PasskeyEncryption.open(sealed, using: laptopKey) }

        // A rotated salt: the phone's next key is new, and the old note no longer opens with it.
        _ = try await client.signIn(username: "ada", prf: notes)
        try await client.rotatePRFSalt(passkey: phonePasskey.id)
        let rotated = try #require(try await client.signIn(username: "ada", prf: notes).prf?.key)
        #expect(Self.hex(rotated) != Self.hex(phoneKey) && Self.hex(rotated) != Self.hex(laptopKey))
        #expect(throws: PasskeyClientError.decryptionFailed) { try PasskeyEncryption.open(sealed, using: rotated) }
        #expect(Self.hex(try await client.signIn(username: "ada", prf: notes).prf?.key) == Self.hex(rotated))
        // The laptop's salt was not touched.
        #expect(Self.hex(try await laptopClient.signIn(username: "ada", prf: notes).prf?.key) == Self.hex(laptopKey))
    }

    @Test func aPasskeyThatEvaluatesPRFOnlyAtSignInGetsItsKeyAtSignUp() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        var later = SoftwareAuthenticator()
        later.evaluatesPRFAtCreation = false
        let sessions = MemorySessionStore()
        let client = fixture.client(SoftwarePasskeyProvider(origin: fixture.server.origin, authenticator: later), sessions: sessions)
        let notes = try PRFRequest(context: "notes")
        // Creation reports prf.enabled without an output: the client signs in once with that passkey.
        let signedUp = try await client.signUp(username: "ada", prf: notes)
        let key = try #require(signedUp.prf?.key)
        #expect(Self.hex(try await client.signIn(username: "ada", prf: notes).prf?.key) == Self.hex(key))
        #expect(try await client.session()?.user.username == "ada")
        // The same for a passkey added to the account.
        let laptop = fixture.client(SoftwarePasskeyProvider(origin: fixture.server.origin, authenticator: later), sessions: sessions)
        let added = try await laptop.addPasskey(prf: notes)
        #expect(added.prf.key != nil && Self.hex(added.prf.key) != Self.hex(key))
    }

    @Test func theResultNamesThePasskeyWhoseKeyItIs() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        let notes = try PRFRequest(context: "notes")
        let sessions = MemorySessionStore()
        let client = fixture.client(fixture.provider(), sessions: sessions)
        let signedUp = try await client.signUp(username: "ada", prf: notes)
        #expect(signedUp.passkeyID != nil && signedUp.passkeyID == signedUp.passkey?.id)
        let laptop = fixture.client(fixture.provider(), sessions: sessions)
        let added = try await laptop.addPasskey(prf: notes)
        // Each device signs in with its own passkey: the result says which, so the app unwraps its copy.
        #expect(try await client.signIn(username: "ada", prf: notes).passkeyID == signedUp.passkey?.id)
        #expect(try await laptop.signIn(username: "ada", prf: notes).passkeyID == added.passkey.id)
    }

    @Test func aPasskeyWithoutPRFSaysSoSoTheAppCanFallBack() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        var noPRF = SoftwareAuthenticator()
        noPRF.supportsPRF = false
        let provider = SoftwarePasskeyProvider(origin: fixture.server.origin, authenticator: noPRF)
        let client = fixture.client(provider)
        let notes = try PRFRequest(context: "notes")

        let signedUp = try await client.signUp(username: "grace", prf: notes)
        guard case .unsupported? = signedUp.prf else {
            Issue.record("sign-up without PRF support: \(String(describing: signedUp.prf))")
            return
        }
        #expect(signedUp.passkey?.prf == false)
        try await client.signOut()
        let signedIn = try await client.signIn(username: "grace", prf: notes)
        #expect(signedIn.user.username == "grace")
        guard case .unsupported? = signedIn.prf else {
            Issue.record("sign-in without PRF support: \(String(describing: signedIn.prf))")
            return
        }
    }

    // MARK: The follow-up sign-in after creation, and outputs of the wrong size

    @Test func aFailedFollowUpSignInLeavesTheAccountAndPasskeyAndSaysWhy() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        var later = SoftwareAuthenticator()
        later.evaluatesPRFAtCreation = false
        let notes = try PRFRequest(context: "notes")
        let sessions = MemorySessionStore()
        let phone = SoftwarePasskeyProvider(origin: fixture.server.origin, authenticator: later)
        let client = PasskeyClient(server: fixture.url, authenticator: ClosesEverySignInSheet(inner: phone), sessions: sessions)

        // Creation reports prf.enabled without an output; the person closes the second sheet.
        let signedUp = try await client.signUp(username: "ada", prf: notes)
        guard case .notEvaluated(let error)? = signedUp.prf else {
            Issue.record("sign-up whose follow-up sign-in was cancelled: \(String(describing: signedUp.prf))")
            return
        }
        #expect(error == .cancelled)
        #expect(signedUp.prf?.key == nil)
        #expect(signedUp.user.username == "ada" && signedUp.passkey?.prf == true && signedUp.passkeyID == signedUp.passkey?.id)
        // The sign-up's session is the one kept, and it is live.
        let kept = try #require(try await sessions.load(server: fixture.url.absoluteString))
        #expect(kept.accessToken == signedUp.accessToken?.token && kept.expiresAt == signedUp.sessionExpiresAt)
        #expect(try await client.session()?.user.username == "ada")

        // The same for an added passkey: it is on the account, its key still to come.
        let laptop = SoftwarePasskeyProvider(origin: fixture.server.origin, authenticator: later)
        let laptopClient = PasskeyClient(server: fixture.url, authenticator: ClosesEverySignInSheet(inner: laptop), sessions: sessions)
        let added = try await laptopClient.addPasskey(name: "Laptop", prf: notes)
        guard case .notEvaluated(.cancelled) = added.prf else {
            Issue.record("added passkey whose follow-up sign-in was cancelled: \(added.prf)")
            return
        }
        #expect(added.passkey.name == "Laptop" && added.passkey.prf == true)
        #expect(
            try await laptopClient.passkeys().map(\.id).sorted() == [signedUp.passkey?.id, added.passkey.id].compactMap { $0 }.sorted())

        // A later PRF sign-in in which the person goes on gives the passkey's key.
        let signedIn = try await fixture.client(phone, sessions: sessions).signIn(username: "ada", prf: notes)
        #expect(signedIn.prf?.key != nil && signedIn.passkeyID == signedUp.passkey?.id)
    }

    @Test func afterTheFollowUpSignInTheResultDescribesTheLiveSession() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        var later = SoftwareAuthenticator()
        later.evaluatesPRFAtCreation = false
        let sessions = MemorySessionStore()
        let client = fixture.client(SoftwarePasskeyProvider(origin: fixture.server.origin, authenticator: later), sessions: sessions)

        let signedUp = try await client.signUp(username: "ada", prf: try PRFRequest(context: "notes"))
        #expect(signedUp.prf?.key != nil && signedUp.method == .signUp)
        // The follow-up sign-in replaced the sign-up's session on the server: one session is
        // left, the kept one, and the result's access token and expiry are that session's.
        let live = try await client.deviceSessions()
        #expect(live.count == 1 && live.first?.current == true && live.first?.method == "passkey")
        let kept = try #require(try await sessions.load(server: fixture.url.absoluteString))
        #expect(signedUp.accessToken?.token == kept.accessToken)
        #expect(signedUp.sessionExpiresAt == kept.expiresAt)
        let token = try #require(signedUp.accessToken?.token)
        #expect(try Self.claim("sid", of: token) == live.first?.id)
    }

    @Test func aPRFOutputOfAnotherSizeFromThePasskeyGivesNoKey() async throws {
        let fixture = try await PasskeyClientTests.Fixture()
        defer { fixture.stop() }
        let notes = try PRFRequest(context: "notes")
        let client = PasskeyClient(
            server: fixture.url, authenticator: ResizesPRFOutputs(inner: fixture.provider(), length: 16), sessions: MemorySessionStore())
        let signedUp = try await client.signUp(username: "ada", prf: notes)
        guard case .invalidOutput? = signedUp.prf else {
            Issue.record("sign-up with a 16-byte output: \(String(describing: signedUp.prf))")
            return
        }
        let signedIn = try await client.signIn(username: "ada", prf: notes)
        guard case .invalidOutput? = signedIn.prf else {
            Issue.record("sign-in with a 16-byte output: \(String(describing: signedIn.prf))")
            return
        }
        #expect(signedIn.user.username == "ada")
    }

    /// A string claim of a JWT's payload (not verified: the test only reads which session it names).
    static func claim(_ name: String, of token: String) throws -> String? {
        let parts = token.split(separator: ".")
        let payload = try #require(parts.count == 3 ? Base64URL.decode(String(parts[1])) : nil)
        let object = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        return object[name] as? String
    }
}

/// Makes passkeys with `inner`; every sign-in sheet is closed by the person (`.cancelled`).
private struct ClosesEverySignInSheet: PasskeyAuthenticator {
    let inner: SoftwarePasskeyProvider
    func register(_ request: RegistrationRequest) async throws -> RegistrationResult { try await inner.register(request) }
    func authenticate(_ request: AssertionRequest) async throws -> AssertionResult { throw PasskeyAuthenticatorError.cancelled }
}

/// `inner`, with every PRF output cut or zero-padded to `length` bytes: a faulty platform.
private struct ResizesPRFOutputs: PasskeyAuthenticator {
    let inner: SoftwarePasskeyProvider
    let length: Int

    func resized(_ outputs: PRFOutputs?) -> PRFOutputs? {
        guard var outputs, let first = outputs.first else { return outputs }
        outputs.first = Data((Array(first) + [UInt8](repeating: 0, count: max(0, length - first.count))).prefix(length))
        return outputs
    }

    func register(_ request: RegistrationRequest) async throws -> RegistrationResult {
        var result = try await inner.register(request)
        result.prf = resized(result.prf)
        return result
    }

    func authenticate(_ request: AssertionRequest) async throws -> AssertionResult {
        var result = try await inner.authenticate(request)
        result.prf = resized(result.prf)
        return result
    }
}
