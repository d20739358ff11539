import Crypto
import Foundation
import PasskeyStore
import WebAuthn

/// WebAuthn extensions (docs/extensions.md): what a ceremony asks for (the configuration's
/// defaults plus what a request adds), what a registration learned, and the per-passkey PRF input.
extension PasskeyService {
    /// What a registration request asks for beyond the configuration (native API `extensions`).
    public struct RegistrationExtensionRequest: Sendable, Hashable {
        /// Ask whether the passkey supports the PRF, and evaluate it with the passkey's salt.
        public var prf: Bool
        /// `largeBlob.support`.
        public var largeBlob: RegistrationExtensionInputs.LargeBlobSupport?
        public init(prf: Bool = false, largeBlob: RegistrationExtensionInputs.LargeBlobSupport? = nil) {
            self.prf = prf
            self.largeBlob = largeBlob
        }
    }

    /// What a sign-in request asks for (native API `extensions`).
    public struct SignInExtensionRequest: Sendable, Hashable {
        /// Evaluate the PRF of each allowed passkey with its own salt (`evalByCredential`).
        public var prf: Bool
        /// Read the passkey's large blob, or write one.
        public var largeBlob: AuthenticationExtensionInputs.LargeBlobRequest?
        public init(prf: Bool = false, largeBlob: AuthenticationExtensionInputs.LargeBlobRequest? = nil) {
            self.prf = prf
            self.largeBlob = largeBlob
        }
        /// Nothing asked.
        public var isEmpty: Bool { !prf && largeBlob == nil }
    }

    /// The PRF input of a new passkey or a rotation: 32 random bytes. Public (it travels in the
    /// options); the secret is the authenticator's, per credential.
    static func makePRFSalt() -> [UInt8] { RelyingParty.randomBytes(32) }

    /// The registration extensions: credProps always, the configured credProtect and
    /// minPinLength, PRF (with a new salt) when configured or asked, largeBlob when asked.
    func registrationExtensions(_ request: RegistrationExtensionRequest) -> RegistrationExtensionInputs {
        let settings = configuration.extensions
        var inputs = RegistrationExtensionInputs(minPinLength: settings.minPinLength)
        if settings.prf || request.prf { inputs.prf = .init(eval: PRFValues(first: Self.makePRFSalt())) }
        inputs.largeBlob = request.largeBlob
        if let policy = settings.credentialProtection {
            let scope = settings.credentialProtectionRequiredFor
            // §10.1.2: with `enforceCredentialProtectionPolicy` the client makes no credential on an
            // authenticator without credProtect, synced passkeys' providers included, and the person
            // sees only a cancelled ceremony. Only `all` refuses every such passkey anyway; with
            // `device-bound` the server judges the answer (BE, a signed flag): a synced passkey
            // without credProtect is accepted, a device-bound one refused with its own code.
            inputs.credentialProtection = .init(
                policy: policy, enforce: scope == .all && policy != .userVerificationOptional, requireFor: scope)
        }
        return inputs
    }

    /// What a verified registration reported, as the store keeps it.
    static func passkeyExtensions(_ verified: VerifiedRegistration) -> PasskeyExtensions {
        PasskeyExtensions(
            discoverable: verified.discoverable, prfEnabled: verified.prfEnabled,
            credProtect: verified.authenticatorExtensions.credProtect?.level, largeBlob: verified.clientExtensions.largeBlobSupported,
            minPinLength: verified.authenticatorExtensions.minPinLength)
    }

    /// The sign-in extensions for the credentials in `allowCredentials`. PRF: each passkey's own
    /// salt (made now for a passkey that has none); a decoy (unknown username) gets a stable
    /// made-up salt, so its options look like a real account's.
    func signInExtensions(
        _ request: SignInExtensionRequest, passkeys: [Passkey], decoy: (credentialID: [UInt8], username: String)?
    ) async throws -> AuthenticationExtensionInputs? {
        guard !request.isEmpty else { return nil }
        var inputs = AuthenticationExtensionInputs(largeBlob: request.largeBlob)
        if request.prf {
            var salts: [[UInt8]: PRFValues] = [:]
            for passkey in passkeys {
                var salt = passkey.prfSalt
                if salt == nil { salt = try await store.ensurePRFSalt(credentialID: passkey.credentialID, salt: Self.makePRFSalt()) }
                // A passkey deleted meanwhile is left out; the ceremony cannot use it anyway.
                if let salt { salts[passkey.credentialID] = PRFValues(first: salt) }
            }
            if let decoy {
                // Bound to the name and the credential ID, as a real passkey's salt is to its
                // passkey: the same ID asked again gives the same salt, another ID another one
                // (a salt of the name alone would match across IDs, which a real account's
                // never do: an oracle for which names have passkeys).
                let secret = SymmetricKey(data: try await decoySecret())
                let message = Array(("prf-salt:" + Account.key(for: decoy.username) + ":").utf8) + decoy.credentialID
                salts[decoy.credentialID] = PRFValues(first: Array(HMAC<SHA256>.authenticationCode(for: message, using: secret)))
            }
            inputs.prf = .init(evalByCredential: salts)
        }
        return inputs
    }

    /// Checks a sign-in request's extensions before any work: PRF names each passkey, so it
    /// needs the username (WebAuthn §10.1.4: `evalByCredential` with an empty `allowCredentials`
    /// is refused by the client); a large blob write needs the one passkey it is for, and fits
    /// the configured cap.
    func checkSignInExtensions(_ request: SignInExtensionRequest, username: String?, credentialID: [UInt8]?) throws {
        let named = !(username?.trimmingCharacters(in: .whitespaces).isEmpty ?? true)
        if request.prf && !named {
            throw PasskeyServiceError(
                .invalidExtension,
                "prf on a sign-in needs the username: each passkey is evaluated with its own salt (evalByCredential), which needs allowCredentials"
            )
        }
        switch request.largeBlob {
        case .write(let blob)?:
            guard named, credentialID != nil else {
                throw PasskeyServiceError(
                    .invalidExtension, "largeBlob.write needs the username and the credentialId of the one passkey to write to")
            }
            guard blob.bytes.count <= configuration.extensions.largeBlobMaxBytes else {
                throw PasskeyServiceError(
                    .largeBlobTooLarge,
                    "largeBlob.write is \(blob.bytes.count) bytes; at most \(configuration.extensions.largeBlobMaxBytes) are accepted")
            }
        case .read?:
            guard named else { throw PasskeyServiceError(.invalidExtension, "largeBlob.read needs the username") }
        case nil:
            break
        }
    }

    /// A new PRF salt for one of the signed-in account's passkeys: the next PRF sign-in with it
    /// derives a different secret (the app re-wraps its data key first: docs/extensions.md).
    public func rotatePRFSalt(credentialID: [UInt8], signedIn: SignedIn, client: Client) async throws -> Passkey {
        try requireRecentSignIn(signedIn)
        let accountID = signedIn.account.id
        guard try await store.setPRFSalt(accountID: accountID, credentialID: credentialID, salt: Self.makePRFSalt()),
            let passkey = try await store.passkey(credentialID: credentialID), passkey.accountID == accountID
        else { throw PasskeyServiceError.passkeyNotFound }
        await audit(.passkeyPRFSaltRotated, accountID: accountID, credentialID: credentialID, client: client, detail: passkey.name)
        return passkey
    }
}
