/// Apple anonymous attestation (WebAuthn Level 3 §8.8):
///
/// ```
/// appleStmtFormat = { x5c: [ credCert: bytes, * (caCert: bytes) ] }
/// ```
enum AppleAttestation {
    /// The nonce extension Apple's anonymous attestation CA writes into credCert.
    static let nonceExtension = "1.2.840.113635.100.8.2"

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        guard let chain = try input.certificateChain(required: true), let credCert = chain.first else {
            throw WebAuthnError(.attestationInvalid, "apple attestation x5c is missing")
        }
        // §8.8 step 2-3: Concatenate authenticatorData and clientDataHash to form
        // nonceToHash; perform SHA-256 hash of nonceToHash to produce nonce.
        let nonce = sha256(input.signedData)
        // §8.8 step 4: Verify that nonce equals the value of the extension with OID
        // 1.2.840.113635.100.8.2 in credCert. The extension is
        //   SEQUENCE { [1] EXPLICIT OCTET STRING nonce }
        guard let value = AttestationCertificates.extensionValue(credCert, oid: nonceExtension) else {
            throw WebAuthnError(.attestationInvalid, "apple credCert has no nonce extension")
        }
        let sequence = try DERReader.single(value)
        guard sequence.isUniversal(16),
            let tagged = try sequence.children().first(where: { $0.tagClass == .contextSpecific && $0.tag == 1 }),
            let octets = try tagged.children().first, octets.isUniversal(4)
        else {
            throw WebAuthnError(.attestationInvalid, "apple nonce extension is not SEQUENCE { [1] OCTET STRING }")
        }
        guard constantTimeEquals(octets.value, nonce) else {
            throw WebAuthnError(.attestationInvalid, "apple nonce extension does not equal SHA-256(authData || clientDataHash)")
        }
        // §8.8 step 5: Verify that the credential public key equals the Subject Public Key of credCert.
        guard input.credential.publicKey.sameKey(as: try AttestationCertificates.verifier(for: credCert)) else {
            throw WebAuthnError(.attestationInvalid, "apple credCert public key differs from the credential public key")
        }
        return StatementResult(type: .anonCA, certificates: chain)
    }
}
