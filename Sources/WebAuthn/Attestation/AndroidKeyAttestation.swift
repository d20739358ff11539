/// `android-key` attestation (WebAuthn Level 3 §8.4):
///
/// ```
/// androidStmtFormat = { alg: COSEAlgorithmIdentifier, sig: bytes, x5c: [ credCert: bytes, * (caCert: bytes) ] }
/// ```
/// credCert carries the Android Key Attestation extension (OID 1.3.6.1.4.1.11129.2.1.17):
/// ```
/// KeyDescription ::= SEQUENCE { attestationVersion INTEGER, attestationSecurityLevel ENUMERATED,
///     keymasterVersion INTEGER, keymasterSecurityLevel ENUMERATED, attestationChallenge OCTET STRING,
///     uniqueId OCTET STRING, softwareEnforced AuthorizationList, teeEnforced AuthorizationList }
/// AuthorizationList ::= SEQUENCE { purpose [1] EXPLICIT SET OF INTEGER OPTIONAL, ...,
///     allApplications [600] EXPLICIT NULL OPTIONAL, ..., origin [702] EXPLICIT INTEGER OPTIONAL, ... }
/// ```
enum AndroidKeyAttestation {
    static let keyDescriptionExtension = "1.3.6.1.4.1.11129.2.1.17"
    private static let kmOriginGenerated: Int64 = 0
    private static let kmPurposeSign: Int64 = 2

    struct AuthorizationList {
        var purposes: [Int64]?
        var origin: Int64?
        var allApplications = false
    }

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        let algorithm = try input.algorithm()
        let signature = try input.bytes("sig")
        guard let chain = try input.certificateChain(required: true), let credCert = chain.first else {
            throw WebAuthnError(.attestationInvalid, "android-key x5c is missing")
        }
        // §8.4 step 2: Verify that sig is a valid signature over the concatenation of
        // authenticatorData and clientDataHash using the public key in the first certificate in
        // x5c with the algorithm specified in alg.
        try AttestationCertificates.verifySignature(
            signature, over: input.signedData, certificate: credCert, algorithm: algorithm, format: "android-key")
        // §8.4 step 3: Verify that the public key in the first certificate in x5c matches the
        // credentialPublicKey in the attestedCredentialData in authenticatorData.
        guard input.credential.publicKey.sameKey(as: try AttestationCertificates.verifier(for: credCert)) else {
            throw WebAuthnError(.attestationInvalid, "android-key credCert public key differs from the credential public key")
        }
        // §8.4 step 4: Verify that the attestationChallenge field in the attestation certificate
        // extension data is identical to clientDataHash.
        guard let value = AttestationCertificates.extensionValue(credCert, oid: keyDescriptionExtension) else {
            throw WebAuthnError(.attestationInvalid, "android-key credCert has no key attestation extension")
        }
        let fields = try DERReader.single(value).children()
        guard fields.count >= 8, fields[4].isUniversal(4) else {
            throw WebAuthnError(.attestationInvalid, "android-key KeyDescription is malformed")
        }
        guard constantTimeEquals(fields[4].value, input.clientDataHash) else {
            throw WebAuthnError(.attestationInvalid, "android-key attestationChallenge is not the clientDataHash")
        }
        let software = try authorizationList(fields[6])
        let tee = try authorizationList(fields[7])
        // §8.4 step 5: The AuthorizationList.allApplications field is not present on either
        // authorization list (softwareEnforced nor teeEnforced), since PublicKeyCredential MUST
        // be scoped to the RP ID.
        guard !software.allApplications, !tee.allApplications else {
            throw WebAuthnError(.attestationInvalid, "android-key key is usable by all applications")
        }
        // §8.4 step 5: For the following, use only the teeEnforced authorization list if the RP
        // wants to accept only keys from a trusted execution environment, otherwise use the union
        // of teeEnforced and softwareEnforced. The origin field equals KM_ORIGIN_GENERATED; the
        // purpose field equals KM_PURPOSE_SIGN. A value in teeEnforced takes precedence.
        let origin = tee.origin ?? software.origin
        let purposes = tee.purposes ?? software.purposes
        guard origin == kmOriginGenerated else {
            throw WebAuthnError(.attestationInvalid, "android-key key origin is not KM_ORIGIN_GENERATED")
        }
        guard let purposes, purposes.contains(kmPurposeSign) else {
            throw WebAuthnError(.attestationInvalid, "android-key key purpose does not include KM_PURPOSE_SIGN")
        }
        return StatementResult(type: .basic, certificates: chain)
    }

    private static func authorizationList(_ element: DERReader.Element) throws(WebAuthnError) -> AuthorizationList {
        guard element.isUniversal(16) else {
            throw WebAuthnError(.attestationInvalid, "android-key AuthorizationList is not a SEQUENCE")
        }
        var list = AuthorizationList()
        for field in try element.children() where field.tagClass == .contextSpecific {
            switch field.tag {
            case 1:
                guard let set = try field.children().first, set.isUniversal(17) else {
                    throw WebAuthnError(.attestationInvalid, "android-key purpose is not a SET")
                }
                var purposes: [Int64] = []
                for element in try set.children() { purposes.append(try element.integer()) }
                list.purposes = purposes
            case 600:
                list.allApplications = true
            case 702:
                guard let integer = try field.children().first else {
                    throw WebAuthnError(.attestationInvalid, "android-key origin is empty")
                }
                list.origin = try integer.integer()
            default:
                continue
            }
        }
        return list
    }
}
