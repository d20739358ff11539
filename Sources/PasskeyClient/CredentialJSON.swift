import Foundation

/// `RegistrationResponseJSON` / `AuthenticationResponseJSON` (WebAuthn L3 §5.1.8, §5.1.9):
/// the credential's ID twice, its type, the authenticator's response, its attachment and the
/// client extension results the server may read.
struct CredentialJSON<Response: Encodable & Sendable>: Encodable, Sendable {
    var id: String
    var rawId: String
    var type = "public-key"
    var response: Response
    var authenticatorAttachment: String?
    var clientExtensionResults = ClientExtensionResultsJSON()

    init(credentialID: Data, response: Response, attachment: String?) {
        id = Base64URL.encode(credentialID)
        rawId = id
        self.response = response
        authenticatorAttachment = attachment
    }
}

/// `AuthenticationExtensionsClientOutputsJSON` as posted to passkeyd: what the server may learn.
/// It has no member for PRF outputs (`prf.results`) or a large blob's content (`largeBlob.blob`):
/// those are the client's secrets and data, so no code path can post them.
struct ClientExtensionResultsJSON: Encodable, Sendable {
    struct CredProps: Encodable, Sendable { var rk: Bool }
    struct PRF: Encodable, Sendable { var enabled: Bool? }
    var credProps: CredProps?
    var prf: PRF?
}

struct AttestationResponseJSON: Encodable, Sendable {
    var clientDataJSON: String
    var attestationObject: String
    var transports: [String]
}

struct AssertionResponseJSON: Encodable, Sendable {
    var clientDataJSON: String
    var authenticatorData: String
    var signature: String
    var userHandle: String?
}

typealias RegistrationJSON = CredentialJSON<AttestationResponseJSON>
typealias AssertionJSON = CredentialJSON<AssertionResponseJSON>

extension CredentialJSON where Response == AttestationResponseJSON {
    init(_ result: RegistrationResult) {
        self.init(
            credentialID: result.credentialID,
            response: AttestationResponseJSON(
                clientDataJSON: Base64URL.encode(result.clientDataJSON), attestationObject: Base64URL.encode(result.attestationObject),
                transports: result.transports),
            attachment: result.attachment)
        clientExtensionResults.credProps = result.discoverable.map { ClientExtensionResultsJSON.CredProps(rk: $0) }
        clientExtensionResults.prf = result.prf.map { ClientExtensionResultsJSON.PRF(enabled: $0.enabled) }
    }
}

extension CredentialJSON where Response == AssertionResponseJSON {
    init(_ result: AssertionResult) {
        self.init(
            credentialID: result.credentialID,
            response: AssertionResponseJSON(
                clientDataJSON: Base64URL.encode(result.clientDataJSON), authenticatorData: Base64URL.encode(result.authenticatorData),
                signature: Base64URL.encode(result.signature), userHandle: result.userHandle.map(Base64URL.encode)),
            attachment: result.attachment)
    }
}
