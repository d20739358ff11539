import X509

/// `packed` attestation (WebAuthn Level 3 §8.2):
///
/// ```
/// packedStmtFormat = { alg: COSEAlgorithmIdentifier, sig: bytes, x5c: [ attestnCert: bytes, * (caCert: bytes) ] }
///                  / { alg: COSEAlgorithmIdentifier, sig: bytes }
/// ```
enum PackedAttestation {
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        // §8.2 step 1: Verify that attStmt is valid CBOR conforming to the syntax defined above
        // and perform CBOR decoding on it to extract the contained fields.
        let algorithm = try input.algorithm()
        let signature = try input.bytes("sig")

        if let chain = try input.certificateChain(required: false), let leaf = chain.first {
            // §8.2 step 2 (x5c present): Verify that sig is a valid signature over the
            // concatenation of authenticatorData and clientDataHash using the attestation public
            // key in attestnCert with the algorithm specified in alg.
            try AttestationCertificates.verifySignature(
                signature, over: input.signedData, certificate: leaf, algorithm: algorithm, format: "packed")
            // §8.2 step 2: Verify that attestnCert meets the requirements in §8.2.1.
            try checkCertificateRequirements(leaf)
            // §8.2 step 2: If attestnCert contains an extension with OID 1.3.6.1.4.1.45724.1.1.4
            // (id-fido-gen-ce-aaguid) verify that the value of this extension matches the aaguid
            // in authenticatorData.
            try AttestationCertificates.checkAAGUIDExtension(leaf, aaguid: input.credential.aaguid, format: "packed")
            // Basic or AttCA: indistinguishable without metadata; reported as basic.
            return StatementResult(type: .basic, certificates: chain)
        }

        // §8.2 step 3 (self attestation): Validate that alg matches the algorithm of the
        // credentialPublicKey in authenticatorData.
        guard algorithm == input.credential.publicKey.algorithm else {
            throw WebAuthnError(
                .attestationInvalid,
                "packed self attestation alg \(algorithm) differs from the credential key's \(input.credential.publicKey.algorithm)")
        }
        // §8.2 step 3: Verify that sig is a valid signature over the concatenation of
        // authenticatorData and clientDataHash using the credential public key with alg.
        guard input.credential.publicKey.verifier.isValidSignature(signature, for: input.signedData, algorithm: algorithm) else {
            throw WebAuthnError(.attestationInvalid, "packed self attestation signature does not verify")
        }
        return StatementResult(type: .self, certificates: [])
    }

    /// §8.2.1 Certificate Requirements for Packed Attestation Statements.
    private static func checkCertificateRequirements(_ certificate: Certificate) throws(WebAuthnError) {
        // "Version MUST be set to 3 (which is indicated by an ASN.1 INTEGER with value 2)."
        guard certificate.version == .v3 else {
            throw WebAuthnError(.attestationInvalid, "packed attestation certificate is not X.509 v3")
        }
        // "Subject field MUST be set to: Subject-C, Subject-O, Subject-OU (literal string
        // 'Authenticator Attestation'), Subject-CN."
        let subject = certificate.subject
        let country = AttestationCertificates.attributeValues(subject, oid: "2.5.4.6")
        let organization = AttestationCertificates.attributeValues(subject, oid: "2.5.4.10")
        let unit = AttestationCertificates.attributeValues(subject, oid: "2.5.4.11")
        let common = AttestationCertificates.attributeValues(subject, oid: "2.5.4.3")
        guard !country.isEmpty, !organization.isEmpty, !common.isEmpty, unit.contains("Authenticator Attestation") else {
            throw WebAuthnError(
                .attestationInvalid, "packed attestation certificate subject lacks C, O, OU=\"Authenticator Attestation\" or CN")
        }
        // "The Basic Constraints extension MUST have the CA component set to false."
        // A certificate without the extension is not a CA either (RFC 5280 §4.2.1.9), so it is
        // accepted; one that claims CA=true is not.
        try AttestationCertificates.requireNotCA(certificate, format: "packed")
    }
}
