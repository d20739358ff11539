import Foundation
import PasskeyClient
import WebAuthn
import WebAuthnTesting

/// A software passkey provider for ``PasskeyClient`` on Linux and in tests: it keeps passkeys in
/// memory and answers like a platform authenticator, from the project's `SoftwareAuthenticator`.
/// Its keys are plain memory: a tool for servers, tests and demos, never a vault for people.
public actor SoftwarePasskeyProvider: PasskeyAuthenticator {
    /// The web origin its client data names (`https://<rp id>` for an app, as Apple's and
    /// Android's platforms write for associated apps; the page's origin for a browser).
    public let origin: String
    public private(set) var credentials: [SoftwareCredential]
    /// Flags, key type and attestation of the passkeys it makes.
    public var authenticator: SoftwareAuthenticator
    private var refusal: PasskeyAuthenticatorError?
    private var preferredUserName: String?

    public init(origin: String, credentials: [SoftwareCredential] = [], authenticator: SoftwareAuthenticator = SoftwareAuthenticator()) {
        self.origin = origin
        self.credentials = credentials
        self.authenticator = authenticator
    }

    /// The next ceremony fails with `error`, as when the person closes the sheet (`.cancelled`).
    public func refuseNext(_ error: PasskeyAuthenticatorError) { refusal = error }

    /// In the next discoverable sign-in, the person picks this account's passkey (else the newest).
    public func pickNext(userName: String) { preferredUserName = userName }

    /// The person deletes a passkey from the device.
    public func remove(credentialID: Data) { credentials.removeAll { $0.id == Array(credentialID) } }

    public func register(_ request: RegistrationRequest) async throws -> RegistrationResult {
        if let refusal = takeRefusal() { throw refusal }
        // WebAuthn L3 §6.3.2 step 3: a device holding an excluded credential makes no new one.
        let excluded = Set(request.excludeCredentials.map { Array($0.id) })
        if credentials.contains(where: { $0.rpID == request.relyingPartyID && excluded.contains($0.id) }) {
            throw PasskeyAuthenticatorError.excludedCredentialExists
        }
        let options = try decode(PublicKeyCredentialCreationOptionsJSON.self, request.json)
        let (response, credential) = try ceremony { try authenticator.register(options: options, origin: origin) }
        credentials.append(credential)
        let results = response.clientExtensionResults ?? [:]
        var discoverable: Bool?
        if case .bool(let rk)? = results["credProps"]?["rk"] { discoverable = rk }
        return RegistrationResult(
            credentialID: Data(response.rawId.bytes), clientDataJSON: Data(response.response.clientDataJSON.bytes),
            attestationObject: Data(response.response.attestationObject.bytes), transports: response.response.transports ?? [],
            attachment: response.authenticatorAttachment, discoverable: discoverable, prf: Self.prfOutputs(results["prf"]))
    }

    public func authenticate(_ request: AssertionRequest) async throws -> AssertionResult {
        if let refusal = takeRefusal() { throw refusal }
        let allowed = Set(request.allowCredentials.map { Array($0.id) })
        let picked = preferredUserName
        preferredUserName = nil
        // Like a provider: this site's passkeys, among allowCredentials when the server named
        // some; the person's pick, else the newest.
        let candidates = credentials.indices.filter {
            credentials[$0].rpID == request.relyingPartyID && (allowed.isEmpty || allowed.contains(credentials[$0].id))
        }
        guard let index = candidates.last(where: { credentials[$0].userName == picked }) ?? candidates.last else {
            throw PasskeyAuthenticatorError.noCredentials
        }
        let options = try decode(PublicKeyCredentialRequestOptionsJSON.self, request.json)
        var credential = credentials[index]
        let response = try ceremony { try authenticator.authenticate(options: options, origin: origin, credential: &credential) }
        credentials[index] = credential
        return AssertionResult(
            credentialID: Data(response.rawId.bytes), clientDataJSON: Data(response.response.clientDataJSON.bytes),
            authenticatorData: Data(response.response.authenticatorData.bytes), signature: Data(response.response.signature.bytes),
            userHandle: response.response.userHandle.map { Data($0.bytes) }, attachment: response.authenticatorAttachment,
            prf: Self.prfOutputs(response.clientExtensionResults?["prf"]))
    }

    /// The `prf` client output (`{"enabled"?, "results"?: {"first", "second"?}}`, base64url) as values.
    static func prfOutputs(_ value: JSONValue?) -> PRFOutputs? {
        guard case .object(let prf)? = value else { return nil }
        func bytes(_ member: String) -> Data? {
            guard case .string(let text)? = prf["results"]?[member], let decoded = Base64URLBytes(encoded: text) else { return nil }
            return Data(decoded.bytes)
        }
        var enabled: Bool?
        if case .bool(let flag)? = prf["enabled"] { enabled = flag }
        return PRFOutputs(enabled: enabled, first: bytes("first"), second: bytes("second"))
    }

    /// Runs the software authenticator; a refusal a browser would throw becomes the provider's.
    private func ceremony<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SoftwareAuthenticator.ClientError {
            throw PasskeyAuthenticatorError.failed("\(error.name): \(error.reason)")
        }
    }

    /// The Signal API's `signalUnknownCredential`: the server no longer knows it, so it goes.
    public func credentialRemoved(id: Data, relyingPartyID: String) {
        credentials.removeAll { $0.id == Array(id) && $0.rpID == relyingPartyID }
    }

    private func takeRefusal() -> PasskeyAuthenticatorError? {
        defer { refusal = nil }
        return refusal
    }

    private func decode<T: Decodable>(_ type: T.Type, _ json: Data) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: json)
        } catch {
            throw PasskeyAuthenticatorError.failed("the options are not WebAuthn JSON: \(error)")
        }
    }
}
