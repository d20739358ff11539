import Crypto
import Foundation

/// What an app asks of the WebAuthn PRF extension: a key for one purpose, named by `context`.
///
/// The passkey computes a secret from a salt the server keeps for it (WebAuthn L3 §10.1.4); the
/// client derives the app's key from that secret with HKDF-SHA256 (salt `passkeyd-prf-v1`, info
/// the context, 32 bytes), the same way `passkeyd.js` does, so an app and its web page derive the
/// same key from the same passkey. The server never sees the secret or the key.
///
/// ```swift
/// let notes = try PRFRequest(context: "notes")
/// let signedIn = try await passkeys.signIn(username: "ada", prf: notes)
/// if let key = signedIn.prf?.key {
///     let box = try PasskeyEncryption.seal(Data("my note".utf8), using: key)
/// } else {
///     // This passkey gives no PRF output: fall back (a recovery key the person keeps, a password).
/// }
/// ```
public struct PRFRequest: Sendable, Hashable {
    /// The HKDF salt of every passkeyd PRF key (the contract with `passkeyd.js`).
    public static let hkdfSalt = Data("passkeyd-prf-v1".utf8)
    /// The purpose of the key, HKDF's info: 1 to 256 bytes of UTF-8, chosen by the app ("notes").
    public let context: String

    /// Fails with ``PasskeyClientError/invalidArgument(_:)`` for an empty context or one over 256 bytes.
    public init(context: String) throws(PasskeyClientError) {
        guard (1...256).contains(context.utf8.count) else {
            throw PasskeyClientError.invalidArgument("a PRF context is 1 to 256 bytes of UTF-8")
        }
        self.context = context
    }

    /// The app's key from a PRF output (`results.first`, 32 bytes):
    /// HKDF-SHA256(ikm: output, salt: "passkeyd-prf-v1", info: context), 32 bytes (AES-256-GCM).
    public func deriveKey(fromPRFOutput output: Data) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: output), salt: Self.hkdfSalt, info: Data(context.utf8), outputByteCount: 32)
    }
}

/// What PRF gave a sign-up or sign-in that asked for it. `passkeyd.js` answers the same
/// outcomes as `{key}` or `{key: null, reason}`: `unsupported`, `not-evaluated`, `invalid-output`.
public enum PRFResult: Sendable {
    /// The app's key, derived from the passkey's PRF output (``PRFRequest/deriveKey(fromPRFOutput:)``).
    case key(SymmetricKey)
    /// This passkey, its provider or this OS gives no PRF output: the app falls back (a recovery
    /// key the person keeps, a password, data that is not end-to-end encrypted).
    case unsupported
    /// Sign-up or added passkey only: the new passkey reported PRF support without an output, and
    /// the one sign-in the client runs to get the key failed with this error (the person closed
    /// the sheet: ``PasskeyClientError/cancelled``). The account or passkey exists and the
    /// sign-up's session is kept: a later ``PasskeyClient/signIn(username:prf:)`` gives the key.
    case notEvaluated(PasskeyClientError)
    /// The passkey gave a PRF output that is not 32 bytes (WebAuthn's PRF outputs always are):
    /// no key is derived from it. Treat it as ``unsupported``.
    case invalidOutput

    /// The key, when there is one.
    public var key: SymmetricKey? {
        if case .key(let key) = self { return key }
        return nil
    }
}

/// A new passkey and what PRF gave while it was created (``PasskeyClient/addPasskey(name:prf:)``).
public struct AddedPasskey: Sendable {
    public var passkey: Passkey
    public var prf: PRFResult
}

/// `AuthenticationExtensionsPRFValues` (WebAuthn L3 §10.1.4): the inputs PRF is evaluated at,
/// the salts the server chose (decoded from base64url).
public struct PRFInputValues: Sendable, Hashable {
    public var first: Data
    public var second: Data?
    public init(first: Data, second: Data? = nil) {
        self.first = first
        self.second = second
    }
}

/// The `prf` input of a registration: support is asked for, and `eval` may ask for outputs at once.
public struct PRFRegistrationInput: Sendable, Hashable {
    public var eval: PRFInputValues?
    public init(eval: PRFInputValues? = nil) { self.eval = eval }
}

/// The `prf` input of a sign-in: `evalByCredential` (by credential ID) wins over `eval` for its credential.
public struct PRFAssertionInput: Sendable, Hashable {
    public var eval: PRFInputValues?
    public var evalByCredential: [Data: PRFInputValues]
    public init(eval: PRFInputValues? = nil, evalByCredential: [Data: PRFInputValues] = [:]) {
        self.eval = eval
        self.evalByCredential = evalByCredential
    }

    /// The inputs for the credential `id` (WebAuthn L3 §10.1.4: its evalByCredential entry, else eval).
    public func values(for id: Data) -> PRFInputValues? { evalByCredential[id] ?? eval }
}

/// The PRF outputs an authenticator returned (`prf` of the client extension results). The
/// outputs are secrets of the client: ``PasskeyClient`` derives the key from them and never sends
/// them to the server.
public struct PRFOutputs: Sendable, Hashable {
    /// Registration: whether the new passkey supports PRF (`prf.enabled`); `nil` when not reported.
    public var enabled: Bool?
    /// The output for `first` (`results.first`, 32 bytes), when evaluated.
    public var first: Data?
    /// The output for `second`, when asked and evaluated.
    public var second: Data?
    public init(enabled: Bool? = nil, first: Data? = nil, second: Data? = nil) {
        self.enabled = enabled
        self.first = first
        self.second = second
    }
}
