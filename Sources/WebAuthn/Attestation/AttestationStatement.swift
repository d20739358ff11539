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
    /// What the format verifier noticed on the way, for the verdict (one per ceremony).
    let notes = AttestationNotes()

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
        if algorithm == .rs1 { try noteSHA1("signed with RS1 (RSASSA-PKCS1-v1_5 with SHA-1)") }
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
        try Self.checkChainLength(array.count, format: format)
        var out: [Certificate] = []
        for element in array {
            guard let der = element.bytesValue else {
                throw WebAuthnError(.attestationInvalid, "\(format) attStmt.x5c holds a non-bytes element")
            }
            out.append(try certificate(der))
        }
        return out
    }

    /// Real attestation chains have at most four certificates; a longer one is refused before
    /// any signature is checked, so a crafted chain cannot buy a registration many signature
    /// checks and a long path search.
    static let maxChainLength = 5

    static func checkChainLength(_ count: Int, format: String) throws(WebAuthnError) {
        guard count <= maxChainLength else {
            throw WebAuthnError(.attestationInvalid, "\(format) x5c has \(count) certificates (at most \(maxChainLength))")
        }
    }

    /// Parses one attestation certificate; one whose serial number is negative (RFC 5280
    /// §4.1.2.2 forbids it; TPM vendors issue such AIK certificates) is read from a copy with the
    /// serial made positive, and its original bytes are kept for signature checks
    /// (``CertificateChain``).
    func certificate(_ der: [UInt8]) throws(WebAuthnError) -> Certificate {
        if let certificate = try? Certificate(derEncoded: der) { return certificate }
        // TPM chains only: that is where vendors issue such certificates.
        guard format == "tpm", let repaired = NegativeSerial.repair(der), let certificate = try? Certificate(derEncoded: repaired.der)
        else {
            throw WebAuthnError(.attestationInvalid, "an attestation certificate is not valid DER X.509")
        }
        notes.originals[certificate] = repaired.original
        return certificate
    }

    /// Records that the statement relies on SHA-1, and refuses it when the policy does.
    func noteSHA1(_ what: String) throws(WebAuthnError) {
        guard policy.allowSHA1Attestation else {
            throw WebAuthnError(.unsupportedAlgorithm, "\(format) attestation \(what) is refused by policy (allowSHA1Attestation is off)")
        }
        notes.usedSHA1 = true
    }
}

/// Facts a format verifier records while it runs (a reference, so the immutable input can carry it).
final class AttestationNotes: @unchecked Sendable {
    /// The statement is signed with RS1 (RSASSA-PKCS1-v1_5 with SHA-1).
    var usedSHA1 = false
    /// Certificates read from a repaired copy (negative serial), with what was sent.
    var originals: [Certificate: NegativeSerial.Original] = [:]
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
    ///
    /// Tolerance: an extension that spells out the DEFAULT `cA FALSE` (`30 03 01 01 00`) is valid
    /// BER but not DER, and swift-certificates refuses it. Chromium's virtual authenticator
    /// (WebDriver, used by every browser test suite) produced exactly that in its packed
    /// attestation certificate, and SimpleWebAuthn accepts it. Its meaning is unambiguous: not a
    /// CA, which is what this leaf must be. So it is read as CA=false here, for the attestation
    /// certificate only; an issuing certificate's Basic Constraints are never read leniently.
    static func requireNotCA(_ certificate: Certificate, format: String) throws(WebAuthnError) {
        let constraints: BasicConstraints?
        do {
            constraints = try certificate.extensions.basicConstraints
        } catch {
            guard let value = extensionValue(certificate, oid: "2.5.29.19"), spellsOutDefaultNotCA(value) else {
                throw WebAuthnError(.attestationInvalid, "\(format): Basic Constraints extension is malformed")
            }
            constraints = .notCertificateAuthority
        }
        if case .isCertificateAuthority = constraints {
            throw WebAuthnError(.attestationInvalid, "\(format): attestation certificate is a CA certificate")
        }
    }

    /// `BasicConstraints ::= SEQUENCE { cA BOOLEAN DEFAULT FALSE, ... }` holding exactly an
    /// explicit `cA FALSE` and no path length.
    static func spellsOutDefaultNotCA(_ value: [UInt8]) -> Bool {
        guard let sequence = try? DERReader.single(value), sequence.isUniversal(16), sequence.constructed,
            let children = try? sequence.children(), children.count == 1, children[0].isUniversal(1)
        else { return false }
        return children[0].value == [0x00]
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
