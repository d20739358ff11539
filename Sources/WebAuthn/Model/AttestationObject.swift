/// The attestation object (WebAuthn Level 3 §6.5.4):
///
/// ```
/// attObj = { "fmt": tstr, "attStmt": { * tstr => any }, "authData": bstr }
/// ```
/// The client platform builds this map, and some encode it with indefinite lengths, so the outer
/// parse allows them (bounded like everything else). The authenticator data inside is parsed
/// strictly.
public struct AttestationObject: Sendable {
    public let format: String
    public let statement: CBORValue
    public let authenticatorData: AuthenticatorData

    public init(bytes: [UInt8], extensionFlagHandling: AuthenticatorData.ExtensionFlagHandling = .strict) throws(WebAuthnError) {
        guard !bytes.isEmpty else {
            throw WebAuthnError(.malformedAttestationObject, "attestationObject is empty")
        }
        let value: CBORValue
        do {
            value = try CBORReader.decode(bytes, limits: .init(allowIndefiniteLength: true))
        } catch {
            throw WebAuthnError(.malformedAttestationObject, "attestationObject is not valid CBOR: \(error.reason)")
        }
        guard case .map = value else {
            throw WebAuthnError(.malformedAttestationObject, "attestationObject is not a CBOR map")
        }
        guard let format = value[text: "fmt"]?.textValue else {
            throw WebAuthnError(.malformedAttestationObject, "attestationObject.fmt is missing or not text")
        }
        guard let statement = value[text: "attStmt"], case .map = statement else {
            throw WebAuthnError(.malformedAttestationObject, "attestationObject.attStmt is missing or not a map")
        }
        guard let authData = value[text: "authData"]?.bytesValue else {
            throw WebAuthnError(.malformedAttestationObject, "attestationObject.authData is missing or not bytes")
        }
        self.format = format
        self.statement = statement
        self.authenticatorData = try AuthenticatorData(bytes: authData, extensionFlagHandling: extensionFlagHandling)
    }
}
