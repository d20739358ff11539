import Crypto
import Foundation
@_spi(FixedExpiryValidationTime) import X509
import _CryptoExtras

/// The Metadata BLOB as a JWS (MDS3 §3.1.7: "The metadata BLOB is a JSON Web Token … in JWS
/// Compact Serialization"):
///
/// ```
/// BASE64URL(header) "." BASE64URL(payload) "." BASE64URL(signature)
/// header = { "alg": text, ? "typ": text, ? "x5c": [+ base64 DER], ? "x5u": text, ? "crit": [text] }
/// ```
struct MetadataJWS {
    struct Header {
        var alg: String
        /// The signing chain, leaf first (RFC 7515 §4.1.6: standard base64 DER).
        var x5c: [Certificate]?
        var x5u: String?
    }

    /// Most certificates accepted in `x5c`.
    static let maxChainLength = 8

    let header: Header
    let payload: [UInt8]
    let signature: [UInt8]
    /// `BASE64URL(header) "." BASE64URL(payload)`: the bytes the signature covers (RFC 7515 §5.2).
    let signingInput: [UInt8]

    init(compact: String) throws(WebAuthnError) {
        let parts = Array(compact.utf8).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64.decode(String(decoding: parts[0], as: UTF8.self), flavor: .urlUnpadded),
            let payload = Base64.decode(String(decoding: parts[1], as: UTF8.self), flavor: .urlUnpadded),
            let signature = Base64.decode(String(decoding: parts[2], as: UTF8.self), flavor: .urlUnpadded)
        else {
            throw FIDOMetadata.invalid("the BLOB is not a JWS compact serialization (three base64url parts joined by dots)")
        }
        self.header = try Self.readHeader(headerBytes)
        self.payload = payload
        self.signature = signature
        self.signingInput = Array(parts[0]) + [UInt8(ascii: ".")] + Array(parts[1])
    }

    private static func readHeader(_ bytes: [UInt8]) throws(WebAuthnError) -> Header {
        do throws(WebAuthnError) {
            let object = try JSONObject(bytes: bytes)
            // RFC 7515 §4.1.11: a recipient that does not understand a "crit" extension must
            // reject the JWS. This reader understands none.
            if object.has("crit") {
                throw FIDOMetadata.invalid("the JWS header has a crit member; no JWS extension is understood here")
            }
            var chain: [Certificate]?
            if let encoded = try object.optionalStringArray("x5c") {
                guard !encoded.isEmpty, encoded.count <= maxChainLength else {
                    throw FIDOMetadata.invalid("the JWS header's x5c must hold 1 to \(maxChainLength) certificates")
                }
                chain = []
                for (index, text) in encoded.enumerated() {
                    guard let der = Base64.decode(text, flavor: .any), let certificate = try? Certificate(derEncoded: der) else {
                        throw FIDOMetadata.invalid("x5c[\(index)] is not a base64 DER X.509 certificate")
                    }
                    chain?.append(certificate)
                }
            }
            return Header(alg: try object.string("alg"), x5c: chain, x5u: try object.optionalString("x5u"))
        } catch {
            guard error.code == .malformedJSON else { throw error }
            throw FIDOMetadata.invalid("the JWS header is not the expected JSON: \(error.reason)")
        }
    }

    /// §3.2 step 4 (its first half): the x5c chain must lead to one of `roots`, every certificate
    /// valid at `time` (RFC 5280 path validation). Returns the leaf, the BLOB signing certificate.
    static func validate(chain: [Certificate], roots: [Certificate], at time: Date) async throws(WebAuthnError) -> Certificate {
        guard let leaf = chain.first else { throw FIDOMetadata.invalid("the JWS header's x5c is empty") }
        for (index, certificate) in chain.enumerated() where !(certificate.notValidBefore <= time && time <= certificate.notValidAfter) {
            throw FIDOMetadata.invalid(
                "x5c[\(index)] (\(certificate.subject)) is not valid at \(time): \(certificate.notValidBefore) – \(certificate.notValidAfter)"
            )
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(fixedExpiryValidationTime: time)
        }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore(chain.dropFirst()))
        switch result {
        case .validCertificate:
            return leaf
        case .couldNotValidate(let failures):
            // The policy's reasons print whole certificates: only a short one is worth a log line.
            let reason = failures.first.map { "\($0.policyFailureReason)" } ?? ""
            let because = reason.isEmpty || reason.count > 300 ? "" : " (\(reason))"
            throw FIDOMetadata.invalid(
                "the x5c chain (\(leaf.subject)) does not lead to a configured MDS root certificate valid at \(time)\(because)")
        }
    }

    /// Whether `certificate`'s key made the signature (for a BLOB without x5c, §3.2 step 3).
    /// The signing certificate names `hostname` (a subjectAltName dNSName, or the common name
    /// when there is no subjectAltName) and, when it has a key usage, may sign.
    static func checkSigner(_ signer: Certificate, hostname: String) throws(WebAuthnError) {
        var names: [String] = []
        if let alternatives = try? signer.extensions.subjectAlternativeNames {
            for name in alternatives { if case .dnsName(let dns) = name { names.append(dns) } }
        } else {
            names = AttestationCertificates.attributeValues(signer.subject, oid: "2.5.4.3")
        }
        guard names.contains(where: { $0.lowercased() == hostname.lowercased() }) else {
            throw FIDOMetadata.invalid("the BLOB signing certificate is issued to \(names) and not to \(hostname)")
        }
        if let usage = try? signer.extensions.keyUsage, !usage.digitalSignature {
            throw FIDOMetadata.invalid("the BLOB signing certificate's key usage does not allow digitalSignature")
        }
    }

    func isSigned(by certificate: Certificate) -> Bool {
        (try? verifySignature(with: certificate)) != nil
    }

    /// RFC 7515 §5.2 step 8 / RFC 7518 §3: validate the JWS signature with the signer's key,
    /// for the header's `alg`. ECDSA signatures are the raw `r || s` (RFC 7518 §3.4), not DER.
    func verifySignature(with signer: Certificate) throws(WebAuthnError) {
        let key = signer.publicKey
        let data = signingInput
        let valid: Bool
        switch header.alg {
        case "ES256":
            guard let key = P256.Signing.PublicKey(key) else { throw mismatch() }
            guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else { throw badLength() }
            valid = key.isValidSignature(signature, for: SHA256.hash(data: data))
        case "ES384":
            guard let key = P384.Signing.PublicKey(key) else { throw mismatch() }
            guard let signature = try? P384.Signing.ECDSASignature(rawRepresentation: signature) else { throw badLength() }
            valid = key.isValidSignature(signature, for: SHA384.hash(data: data))
        case "ES512":
            guard let key = P521.Signing.PublicKey(key) else { throw mismatch() }
            guard let signature = try? P521.Signing.ECDSASignature(rawRepresentation: signature) else { throw badLength() }
            valid = key.isValidSignature(signature, for: SHA512.hash(data: data))
        case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
            guard let key = _RSA.Signing.PublicKey(key) else { throw mismatch() }
            let algorithms: [String: COSEAlgorithmIdentifier] = [
                "RS256": .rs256, "RS384": .rs384, "RS512": .rs512, "PS256": .ps256, "PS384": .ps384, "PS512": .ps512,
            ]
            guard let algorithm = algorithms[header.alg] else { throw mismatch() }
            valid = PublicKeyVerifier.rsa(key).isValidSignature(signature, for: data, algorithm: algorithm)
        default:
            throw FIDOMetadata.invalid("the JWS alg \"\(header.alg)\" is not supported (ES256, ES384, ES512, RS256…RS512, PS256…PS512 are)")
        }
        guard valid else { throw FIDOMetadata.invalid("the BLOB's JWS signature does not verify with the signing certificate") }
    }

    private func mismatch() -> WebAuthnError {
        FIDOMetadata.invalid("the JWS alg \(header.alg) does not match the signing certificate's key")
    }

    private func badLength() -> WebAuthnError {
        FIDOMetadata.invalid("the \(header.alg) signature is not the raw r || s of its curve")
    }
}
