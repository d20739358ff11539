/// The attestation object (WebAuthn Level 3 §6.5.4):
///
/// ```
/// attObj = { "fmt": tstr, "attStmt": { * tstr => any }, "authData": bstr }
/// ```
/// The client platform builds this map, and some encode it with indefinite lengths, so the outer
/// parse allows them (bounded like everything else). The authenticator data inside is parsed
/// strictly.
public struct AttestationObject: Sendable {
    /// The attestation statement format identifier, `fmt` (§6.5.2): `none`, `packed`, `tpm`, `apple`, …
    public let format: String
    /// The attestation statement, `attStmt`: a CBOR map whose members the format defines (§8). Not verified here.
    public let statement: CBORValue
    /// The authenticator data, `authData` (§6.1), parsed; in a registration it holds the attested credential data.
    public let authenticatorData: AuthenticatorData

    /// Parses an attestation object from its CBOR bytes. Throws `malformed_attestation_object` when the outer map is
    /// wrong, or an error of ``AuthenticatorData/init(bytes:extensionFlagHandling:)`` for the authenticator data inside.
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
