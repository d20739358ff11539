/// `fido-u2f` attestation (WebAuthn Level 3 §8.6):
///
/// ```
/// u2fStmtFormat = { x5c: [ attestnCert: bytes ], sig: bytes }
/// ```
enum FIDOU2FAttestation {
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        let signature = try input.bytes("sig")
        // §8.6 step 2: Check that x5c has exactly one element and let attCert be that element.
        guard let chain = try input.certificateChain(required: true), chain.count == 1, let certificate = chain.first else {
            throw WebAuthnError(.attestationInvalid, "fido-u2f x5c must hold exactly one certificate")
        }
        // Let certificate public key be the public key conveyed by attCert. If certificate public
        // key is not an Elliptic Curve (EC) public key over the P-256 curve, terminate.
        guard case .p256 = try AttestationCertificates.verifier(for: certificate) else {
            throw WebAuthnError(.attestationInvalid, "fido-u2f attestation certificate key is not P-256")
        }
        // §8.6 step 4: Convert the COSE_KEY formatted credentialPublicKey to Raw ANSI X9.62
        // public key format: 0x04 || x (32 bytes) || y (32 bytes).
        guard case .p256(let credentialKey) = input.credential.publicKey.verifier else {
            throw WebAuthnError(.attestationInvalid, "fido-u2f credential key is not an ES256 P-256 key")
        }
        let publicKeyU2F = Array(credentialKey.x963Representation)
        // §8.6 step 5: verificationData = 0x00 || rpIdHash || clientDataHash || credentialId || publicKeyU2F.
        let verificationData: [UInt8] =
            [0x00] + input.authenticatorData.rpIDHash + input.clientDataHash
            + input.credential.credentialID + publicKeyU2F
        // §8.6 step 6: Verify the sig using verificationData and the certificate public key per
        // SEC1 with SHA-256.
        try AttestationCertificates.verifySignature(
            signature, over: verificationData, certificate: certificate, algorithm: .es256, format: "fido-u2f")
        return StatementResult(type: .basic, certificates: chain)
    }
}
