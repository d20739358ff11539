import Foundation

/// What makes and uses passkeys for ``PasskeyClient``: the platform authenticator.
///
/// On Apple platforms `ApplePasskeyAuthenticator` drives AuthenticationServices (the passkey
/// sheet, AutoFill). On Linux and in tests, `SoftwarePasskeyProvider` (product
/// `PasskeyClientSoftware`) keeps software passkeys. Both receive the server's options already
/// decoded, and the options exactly as the server sent them (`json`, Level 3 JSON), for an
/// authenticator API that takes JSON (Android's Credential Manager does).
public protocol PasskeyAuthenticator: Sendable {
    /// Creates a passkey (WebAuthn `navigator.credentials.create`).
    func register(_ request: RegistrationRequest) async throws -> RegistrationResult
    /// Signs the challenge with a passkey (`navigator.credentials.get`), in a modal sheet or,
    /// for ``AssertionRequest/Presentation/autoFill``, from the keyboard's suggestions.
    func authenticate(_ request: AssertionRequest) async throws -> AssertionResult
    /// The server no longer knows this passkey (deleted elsewhere): a provider may hide or remove
    /// it (the WebAuthn Signal API's `signalUnknownCredential`). The default does nothing.
    func credentialRemoved(id: Data, relyingPartyID: String) async
}

extension PasskeyAuthenticator {
    public func credentialRemoved(id: Data, relyingPartyID: String) async {}
}

/// Why an authenticator gave no credential. Authenticators throw these; ``PasskeyClient`` turns
/// them into ``PasskeyClientError``.
public enum PasskeyAuthenticatorError: Error, Sendable, Equatable {
    /// The person dismissed the sheet (or the request was cancelled).
    case cancelled
    /// No passkey for this site (and, username-first, this account) on the device.
    case noCredentials
    /// The device already holds one of `excludeCredentials`: this account has a passkey here.
    case excludedCredentialExists
    /// This platform cannot do it (no AutoFill on macOS, an OS too old for passkeys).
    case unsupported(String)
    /// Anything else the platform reported.
    case failed(String)
}

/// One credential descriptor of the options (`excludeCredentials` / `allowCredentials`).
public struct CredentialDescriptor: Sendable, Hashable {
    public var id: Data
    public var transports: [String]
    public init(id: Data, transports: [String] = []) {
        self.id = id
        self.transports = transports
    }
}

/// `PublicKeyCredentialCreationOptions`, decoded (WebAuthn L3 §5.4).
public struct RegistrationRequest: Sendable {
    public var relyingPartyID: String
    public var relyingPartyName: String
    public var challenge: Data
    public var userID: Data
    public var userName: String
    public var userDisplayName: String
    /// COSE algorithm identifiers, most preferred first.
    public var algorithms: [Int]
    public var excludeCredentials: [CredentialDescriptor]
    /// "required", "preferred" or "discouraged".
    public var userVerification: String
    /// "none", "indirect", "direct" or "enterprise".
    public var attestation: String
    public var residentKey: String
    public var timeout: Duration?
    /// The `prf` extension input (WebAuthn L3 §10.1.4), when the server asked for PRF.
    public var prf: PRFRegistrationInput?
    /// The options as the server sent them.
    public var json: Data
}

/// `PublicKeyCredentialRequestOptions`, decoded (WebAuthn L3 §5.5).
public struct AssertionRequest: Sendable {
    public enum Presentation: Sendable, Equatable {
        /// A sheet over the app (`signIn(username:)`).
        case modal
        /// Suggestions on the keyboard of a username field (passkey AutoFill, conditional mediation).
        case autoFill
    }
    public var relyingPartyID: String
    public var challenge: Data
    /// Empty: any discoverable passkey for the site.
    public var allowCredentials: [CredentialDescriptor]
    public var userVerification: String
    public var timeout: Duration?
    public var presentation: Presentation
    /// The `prf` extension input (WebAuthn L3 §10.1.4), when the server asked for PRF.
    public var prf: PRFAssertionInput?
    /// The options as the server sent them.
    public var json: Data
}

/// A new passkey, as the authenticator returns it (`AuthenticatorAttestationResponse`).
public struct RegistrationResult: Sendable {
    public var credentialID: Data
    public var clientDataJSON: Data
    public var attestationObject: Data
    public var transports: [String]
    /// "platform" or "cross-platform", when known.
    public var attachment: String?
    /// `credProps.rk` (WebAuthn L3 §10.1.3): whether the passkey is discoverable, when reported.
    public var discoverable: Bool?
    /// The `prf` client extension output, when PRF was asked and the platform reported it.
    public var prf: PRFOutputs?
    public init(
        credentialID: Data, clientDataJSON: Data, attestationObject: Data, transports: [String] = [], attachment: String? = nil,
        discoverable: Bool? = nil, prf: PRFOutputs? = nil
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.transports = transports
        self.attachment = attachment
        self.discoverable = discoverable
        self.prf = prf
    }
}

/// A signed challenge (`AuthenticatorAssertionResponse`).
public struct AssertionResult: Sendable {
    public var credentialID: Data
    public var clientDataJSON: Data
    public var authenticatorData: Data
    public var signature: Data
    public var userHandle: Data?
    public var attachment: String?
    /// The `prf` client extension output, when PRF was asked and the passkey evaluated it.
    public var prf: PRFOutputs?
    public init(
        credentialID: Data, clientDataJSON: Data, authenticatorData: Data, signature: Data, userHandle: Data?, attachment: String? = nil,
        prf: PRFOutputs? = nil
    ) {
        self.credentialID = credentialID
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
        self.attachment = attachment
        self.prf = prf
    }
}
