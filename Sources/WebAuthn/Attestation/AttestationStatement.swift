import Crypto
import Foundation
import X509
import _CryptoExtras

/// Everything a statement format verifier reads (§7.1 step 21 inputs).
struct AttestationInput {
    let format: String
    let statement: CBORValue
    let authenticatorData: AuthenticatorData
    let credential: AttestedCredentialData
    let clientDataHash: [UInt8]
    let policy: AttestationPolicy
    let verificationTime: Date

    /// `authenticatorData || clientDataHash`, the bytes most formats sign.
    var signedData: [UInt8] { authenticatorData.bytes + clientDataHash }

    func bytes(_ key: String) throws(WebAuthnError) -> [UInt8] {
        guard let value = statement[text: key]?.bytesValue else {
            throw WebAuthnError(.attestationInvalid, "\(format) attStmt.\(key) is missing or not bytes")
        }
        return value
    }

    func algorithm() throws(WebAuthnError) -> COSEAlgorithmIdentifier {
        guard let value = statement[text: "alg"]?.intValue, let raw = Int(exactly: value) else {
            throw WebAuthnError(.attestationInvalid, "\(format) attStmt.alg is missing or not an integer")
        }
        let algorithm = COSEAlgorithmIdentifier(rawValue: raw)
        if algorithm == .rs1 && !policy.unsafeAllowSHA1Attestation {
            throw WebAuthnError(.unsupportedAlgorithm, "\(format) attestation signed with SHA-1 (RS1) is not allowed")
        }
        return algorithm
    }

    /// `x5c`: a non-empty array of DER certificates, leaf first. `nil` when absent.
    func certificateChain(required: Bool) throws(WebAuthnError) -> [Certificate]? {
        guard let value = statement[text: "x5c"] else {
            if required { throw WebAuthnError(.attestationInvalid, "\(format) attStmt.x5c is missing") }
            return nil
        }
        guard let array = value.arrayValue, !array.isEmpty else {
            throw WebAuthnError(.attestationInvalid, "\(format) attStmt.x5c is not a non-empty array")
        }
        var out: [Certificate] = []
        for element in array {
            guard let der = element.bytesValue else {
                throw WebAuthnError(.attestationInvalid, "\(format) attStmt.x5c holds a non-bytes element")
            }
            out.append(try AttestationCertificates.parse(der))
        }
        return out
    }
}

/// What a format verifier returns before the trust decision.
struct StatementResult {
    let type: AttestationType
    let certificates: [Certificate]
}

/// Certificate helpers shared by the formats.
enum AttestationCertificates {
    /// id-fido-gen-ce-aaguid (FIDO Metadata; WebAuthn §8.2.1, §8.3.1).
    static let aaguidExtension: ASN1ObjectIdentifierText = "1.3.6.1.4.1.45724.1.1.4"

    static func parse(_ der: [UInt8]) throws(WebAuthnError) -> Certificate {
        do {
            return try Certificate(derEncoded: der)
        } catch {
            throw WebAuthnError(.attestationInvalid, "an attestation certificate is not valid DER X.509")
        }
    }

    /// The certificate's key in verifiable form.
    static func verifier(for certificate: Certificate) throws(WebAuthnError) -> PublicKeyVerifier {
        let key = certificate.publicKey
        if let k = P256.Signing.PublicKey(key) { return .p256(k) }
        if let k = P384.Signing.PublicKey(key) { return .p384(k) }
        if let k = P521.Signing.PublicKey(key) { return .p521(k) }
        if let k = Curve25519.Signing.PublicKey(key) { return .ed25519(k) }
        if let k = _RSA.Signing.PublicKey(key) { return .rsa(k) }
        throw WebAuthnError(.attestationInvalid, "attestation certificate key type is not supported")
    }

    /// Verifies `signature` over `data` with the leaf certificate's key.
    static func verifySignature(
        _ signature: [UInt8], over data: [UInt8], certificate: Certificate,
        algorithm: COSEAlgorithmIdentifier, format: String
    ) throws(WebAuthnError) {
        let verifier = try verifier(for: certificate)
        guard verifier.supports(algorithm) else {
            throw WebAuthnError(.attestationInvalid, "\(format): alg \(algorithm) does not match the attestation certificate key")
        }
        guard verifier.isValidSignature(signature, for: data, algorithm: algorithm) else {
            throw WebAuthnError(.attestationInvalid, "\(format): attestation signature does not verify")
        }
    }

    /// The raw value (extnValue contents) of an extension, if present.
    static func extensionValue(_ certificate: Certificate, oid: ASN1ObjectIdentifierText) -> [UInt8]? {
        for ext in certificate.extensions where ext.oid.description == oid {
            return Array(ext.value)
        }
        return nil
    }

    /// If the certificate carries id-fido-gen-ce-aaguid, it must equal the AAGUID in authData.
    /// The extension value is an OCTET STRING holding the 16 AAGUID bytes.
    static func checkAAGUIDExtension(_ certificate: Certificate, aaguid: AAGUID, format: String) throws(WebAuthnError) {
        guard let value = extensionValue(certificate, oid: aaguidExtension) else { return }
        for ext in certificate.extensions where ext.oid.description == aaguidExtension && ext.critical {
            throw WebAuthnError(.attestationInvalid, "\(format): id-fido-gen-ce-aaguid must not be critical")
        }
        let element = try DERReader.single(value)
        guard element.isUniversal(4), element.value.count == 16 else {
            throw WebAuthnError(.attestationInvalid, "\(format): id-fido-gen-ce-aaguid is not a 16-byte OCTET STRING")
        }
        guard constantTimeEquals(element.value, aaguid.bytes) else {
            throw WebAuthnError(
                .attestationInvalid, "\(format): id-fido-gen-ce-aaguid in the certificate differs from the AAGUID in authData")
        }
    }

    /// Basic Constraints, when present, must say CA=false for an attestation (leaf) certificate.
    static func requireNotCA(_ certificate: Certificate, format: String) throws(WebAuthnError) {
        let constraints: BasicConstraints?
        do {
            constraints = try certificate.extensions.basicConstraints
        } catch {
            throw WebAuthnError(.attestationInvalid, "\(format): Basic Constraints extension is malformed")
        }
        if case .isCertificateAuthority = constraints {
            throw WebAuthnError(.attestationInvalid, "\(format): attestation certificate is a CA certificate")
        }
    }

    /// The values of one attribute type in a distinguished name.
    static func attributeValues(_ name: DistinguishedName, oid: ASN1ObjectIdentifierText) -> [String] {
        var out: [String] = []
        for rdn in name {
            for attribute in rdn where attribute.type.description == oid {
                out.append(attribute.value.description)
            }
        }
        return out
    }
}

typealias ASN1ObjectIdentifierText = String
