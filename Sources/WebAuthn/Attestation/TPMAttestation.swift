import Crypto
import X509
import _CryptoExtras

/// `tpm` attestation (WebAuthn Level 3 §8.3):
///
/// ```
/// tpmStmtFormat = { ver: "2.0", alg: COSEAlgorithmIdentifier, x5c: [ aikCert: bytes, * (caCert: bytes) ],
///                   sig: bytes, certInfo: bytes, pubArea: bytes }
/// ```
enum TPMAttestation {
    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        // §8.3 step 1: Verify that attStmt is valid CBOR conforming to the syntax defined above.
        guard input.statement[text: "ver"]?.textValue == "2.0" else {
            throw WebAuthnError(.attestationInvalid, "tpm attStmt.ver is not \"2.0\"")
        }
        let algorithm = try input.algorithm()
        let signature = try input.bytes("sig")
        let certInfoBytes = try input.bytes("certInfo")
        let pubAreaBytes = try input.bytes("pubArea")
        let pubArea = try TPM.Public(bytes: pubAreaBytes)

        // §8.3 step 2: Verify that the public key specified by the parameters and unique fields
        // of pubArea is identical to the credentialPublicKey in the attestedCredentialData.
        guard input.credential.publicKey.sameKey(as: try verifier(for: pubArea.key)) else {
            throw WebAuthnError(.attestationInvalid, "tpm pubArea key differs from the credential public key")
        }
        // §8.3 step 3: Concatenate authenticatorData and clientDataHash to form attToBeSigned.
        let attToBeSigned = input.signedData
        // §8.3 step 4: Validate that certInfo is valid:
        let certInfo = try TPM.Attest(bytes: certInfoBytes)
        // - Verify that magic is set to TPM_GENERATED_VALUE.
        guard certInfo.magic == TPM.generatedValue else {
            throw WebAuthnError(.attestationInvalid, "tpm certInfo.magic is not TPM_GENERATED_VALUE")
        }
        // - Verify that type is set to TPM_ST_ATTEST_CERTIFY.
        guard certInfo.type == TPM.stAttestCertify else {
            throw WebAuthnError(.attestationInvalid, "tpm certInfo.type is not TPM_ST_ATTEST_CERTIFY")
        }
        // - Verify that extraData is set to the hash of attToBeSigned using the hash algorithm
        //   employed in "alg".
        guard let expectedExtraData = hash(attToBeSigned, for: algorithm), constantTimeEquals(certInfo.extraData, expectedExtraData) else {
            throw WebAuthnError(.attestationInvalid, "tpm certInfo.extraData is not the hash of authData || clientDataHash")
        }
        // - Verify that attested contains a TPMS_CERTIFY_INFO structure whose name field
        //   contains a valid Name for pubArea, as computed using the algorithm in the nameAlg
        //   field of pubArea (Name = nameAlg (2 bytes) || H_nameAlg(pubArea)).
        // A SHA-1 nameAlg is not flagged like an RS1 signature: the Name is compared with what the
        // TPM signed, so forging one needs a second preimage, which SHA-1 still resists.
        guard let nameDigest = hash(pubAreaBytes, tpmAlgorithm: pubArea.nameAlg) else {
            throw WebAuthnError(.attestationInvalid, "tpm pubArea.nameAlg \(pubArea.nameAlg) is not supported")
        }
        let expectedName = [UInt8(pubArea.nameAlg >> 8), UInt8(pubArea.nameAlg & 0xff)] + nameDigest
        guard constantTimeEquals(certInfo.attestedName, expectedName) else {
            throw WebAuthnError(.attestationInvalid, "tpm certInfo.attested.name is not the Name of pubArea")
        }
        // §8.3 step 5: If x5c is present: verify the sig is a valid signature over certInfo
        // using the attestation public key in aikCert with the algorithm specified in alg.
        guard let chain = try input.certificateChain(required: true), let aikCert = chain.first else {
            throw WebAuthnError(.attestationInvalid, "tpm attStmt.x5c is missing")
        }
        try AttestationCertificates.verifySignature(
            signature, over: certInfoBytes, certificate: aikCert, algorithm: algorithm, format: "tpm")
        // - Verify that aikCert meets the requirements in §8.3.1.
        try checkCertificateRequirements(aikCert)
        // - If aikCert contains an extension with OID 1.3.6.1.4.1.45724.1.1.4
        //   (id-fido-gen-ce-aaguid) verify that the value matches the aaguid in authenticatorData.
        try AttestationCertificates.checkAAGUIDExtension(aikCert, aaguid: input.credential.aaguid, format: "tpm")
        return StatementResult(type: .attCA, certificates: chain)
    }

    /// §8.3.1 TPM Attestation Statement Certificate Requirements.
    private static func checkCertificateRequirements(_ certificate: Certificate) throws(WebAuthnError) {
        // "Version MUST be set to 3."
        guard certificate.version == .v3 else {
            throw WebAuthnError(.attestationInvalid, "tpm AIK certificate is not X.509 v3")
        }
        // "Subject field MUST be set to empty."
        guard certificate.subject.isEmpty else {
            throw WebAuthnError(.attestationInvalid, "tpm AIK certificate subject is not empty")
        }
        // "The Subject Alternative Name extension MUST be set as defined in [TPMv2-EK-Profile]
        // section 3.2.9": a directoryName holding TPM manufacturer (2.23.133.2.1), model
        // (2.23.133.2.2) and version (2.23.133.2.3). The manufacturer value is reported, not
        // matched against the TCG vendor registry: trust comes from the chain to the configured
        // roots (conformance tools and the specification's vectors use unregistered IDs).
        let names: SubjectAlternativeNames?
        do {
            names = try certificate.extensions.subjectAlternativeNames
        } catch {
            throw WebAuthnError(.attestationInvalid, "tpm AIK certificate subjectAltName is malformed")
        }
        var manufacturer: [String] = []
        var model: [String] = []
        var version: [String] = []
        for name in names ?? SubjectAlternativeNames() {
            if case .directoryName(let dn) = name {
                manufacturer += AttestationCertificates.attributeValues(dn, oid: "2.23.133.2.1")
                model += AttestationCertificates.attributeValues(dn, oid: "2.23.133.2.2")
                version += AttestationCertificates.attributeValues(dn, oid: "2.23.133.2.3")
            }
        }
        guard !manufacturer.isEmpty, !model.isEmpty, !version.isEmpty else {
            throw WebAuthnError(.attestationInvalid, "tpm AIK certificate subjectAltName lacks TPM manufacturer, model or version")
        }
        // "The Extended Key Usage extension MUST contain the OID 2.23.133.8.3
        // ('joint-iso-itu-t(2) international-organizations(23) 133 tcg-kp(8)
        // tcg-kp-AIKCertificate(3)')."
        guard let eku = AttestationCertificates.extensionValue(certificate, oid: "2.5.29.37"),
            try DERReader.single(eku).children().contains(where: { $0.isUniversal(6) && $0.value == [0x67, 0x81, 0x05, 0x08, 0x03] })
        else {
            throw WebAuthnError(.attestationInvalid, "tpm AIK certificate extended key usage lacks tcg-kp-AIKCertificate")
        }
        // "The Basic Constraints extension MUST have the CA component set to false."
        try AttestationCertificates.requireNotCA(certificate, format: "tpm")
    }

    private static func verifier(for key: TPM.Public.Key) throws(WebAuthnError) -> PublicKeyVerifier {
        do {
            switch key {
            case .rsa(let modulus, let exponent):
                var e = withUnsafeBytes(of: exponent.bigEndian) { Array($0) }
                while e.first == 0 { e.removeFirst() }
                return .rsa(try _RSA.Signing.PublicKey(n: modulus, e: e))
            case .ecc(let curveID, let x, let y):
                let point = [0x04] + x + y
                switch curveID {
                case 0x0003: return .p256(try P256.Signing.PublicKey(x963Representation: point))
                case 0x0004: return .p384(try P384.Signing.PublicKey(x963Representation: point))
                case 0x0005: return .p521(try P521.Signing.PublicKey(x963Representation: point))
                default: throw WebAuthnError(.attestationInvalid, "tpm pubArea curve \(curveID) is not supported")
                }
            }
        } catch let error as WebAuthnError {
            throw error
        } catch {
            throw WebAuthnError(.attestationInvalid, "tpm pubArea key is not a valid public key")
        }
    }

    private static func hash(_ data: [UInt8], for algorithm: COSEAlgorithmIdentifier) -> [UInt8]? {
        switch algorithm {
        case .es256, .rs256, .ps256: Array(SHA256.hash(data: data))
        case .es384, .rs384, .ps384: Array(SHA384.hash(data: data))
        case .es512, .rs512, .ps512: Array(SHA512.hash(data: data))
        case .rs1: Array(Insecure.SHA1.hash(data: data))
        default: nil
        }
    }

    private static func hash(_ data: [UInt8], tpmAlgorithm: UInt16) -> [UInt8]? {
        switch tpmAlgorithm {
        case TPM.algSHA1: Array(Insecure.SHA1.hash(data: data))
        case TPM.algSHA256: Array(SHA256.hash(data: data))
        case TPM.algSHA384: Array(SHA384.hash(data: data))
        case TPM.algSHA512: Array(SHA512.hash(data: data))
        default: nil
        }
    }
}
