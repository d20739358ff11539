import Crypto
import _CryptoExtras

/// A credential public key read from its COSE_Key encoding (RFC 9052 §7, RFC 9053), parsed once
/// and ready to verify assertions.
///
/// Supported: ES256 (P-256), ES384 (P-384), ES512 (P-521), EdDSA / Ed25519, RS256/384/512 and
/// PS256/384/512 (RSA ≥ 2048 bits), ML-DSA-65 and ML-DSA-87 (AKP keys). The algorithm in the key must agree with its key type and
/// curve; anything else is `unsupported_algorithm` or `malformed_public_key`.
///
/// ```swift
/// let key = try CredentialPublicKey(cose: storedKeyBytes)   // once, e.g. when loaded
/// try key.verify(signature: sig, over: authData + clientDataHash)
/// ```
public struct CredentialPublicKey: Sendable {
    /// The COSE algorithm this key signs with.
    public let algorithm: COSEAlgorithmIdentifier
    /// The exact COSE_Key bytes, as the authenticator produced them (what the store keeps).
    public let coseBytes: [UInt8]
    let verifier: PublicKeyVerifier

    // COSE_Key labels (RFC 9052 §7.1, RFC 9053 §7).
    private enum Label {
        static let kty: Int64 = 1, alg: Int64 = 3
        static let crv: Int64 = -1, x: Int64 = -2, y: Int64 = -3
        static let n: Int64 = -1, e: Int64 = -2
    }

    /// Parses a COSE_Key from its CBOR encoding (strict: definite lengths, no trailing bytes).
    public init(cose bytes: [UInt8]) throws(WebAuthnError) {
        let value: CBORValue
        do {
            value = try CBORReader.decode(bytes)
        } catch {
            throw WebAuthnError(.malformedPublicKey, "credential public key is not valid CBOR: \(error.reason)")
        }
        try self.init(cose: value, bytes: bytes)
    }

    init(cose value: CBORValue, bytes: [UInt8]) throws(WebAuthnError) {
        guard case .map(let entries) = value else {
            throw WebAuthnError(.malformedPublicKey, "COSE_Key is not a CBOR map")
        }
        func int(_ label: Int64, _ name: String) throws(WebAuthnError) -> Int64 {
            guard let v = value[int: label] else { throw WebAuthnError(.malformedPublicKey, "COSE_Key has no \(name)") }
            guard let i = v.intValue else { throw WebAuthnError(.malformedPublicKey, "COSE_Key \(name) is not an integer") }
            return i
        }
        func data(_ label: Int64, _ name: String) throws(WebAuthnError) -> [UInt8] {
            guard let v = value[int: label] else { throw WebAuthnError(.malformedPublicKey, "COSE_Key has no \(name)") }
            guard let b = v.bytesValue else { throw WebAuthnError(.malformedPublicKey, "COSE_Key \(name) is not a byte string") }
            return b
        }
        // Every label in a COSE_Key is an integer or text (RFC 9052 §7); ours are all integers.
        for entry in entries where entry.key.intValue == nil && entry.key.textValue == nil {
            throw WebAuthnError(.malformedPublicKey, "COSE_Key label is neither integer nor text")
        }
        let kty = try int(Label.kty, "kty")
        let algorithm = COSEAlgorithmIdentifier(rawValue: Int(try int(Label.alg, "alg")))
        self.algorithm = algorithm
        self.coseBytes = bytes

        do {
            switch kty {
            case 2:  // EC2
                let crv = try int(Label.crv, "crv")
                let x = try data(Label.x, "x")
                guard let yValue = value[int: Label.y], let y = yValue.bytesValue else {
                    throw WebAuthnError(.malformedPublicKey, "EC2 key has no uncompressed y coordinate")
                }
                let point = [0x04] + x + y
                switch (crv, algorithm) {
                case (1, .es256):
                    guard x.count == 32, y.count == 32 else {
                        throw WebAuthnError(.malformedPublicKey, "P-256 coordinates must be 32 bytes")
                    }
                    verifier = .p256(try P256.Signing.PublicKey(x963Representation: point))
                case (2, .es384):
                    guard x.count == 48, y.count == 48 else {
                        throw WebAuthnError(.malformedPublicKey, "P-384 coordinates must be 48 bytes")
                    }
                    verifier = .p384(try P384.Signing.PublicKey(x963Representation: point))
                case (3, .es512):
                    guard x.count == 66, y.count == 66 else {
                        throw WebAuthnError(.malformedPublicKey, "P-521 coordinates must be 66 bytes")
                    }
                    verifier = .p521(try P521.Signing.PublicKey(x963Representation: point))
                default:
                    throw WebAuthnError(.unsupportedAlgorithm, "EC2 key with curve \(crv) and algorithm \(algorithm)")
                }
            case 1:  // OKP
                let crv = try int(Label.crv, "crv")
                let x = try data(Label.x, "x")
                guard crv == 6, algorithm == .edDSA || algorithm == .ed25519 else {
                    throw WebAuthnError(.unsupportedAlgorithm, "OKP key with curve \(crv) and algorithm \(algorithm)")
                }
                guard x.count == 32 else { throw WebAuthnError(.malformedPublicKey, "Ed25519 key must be 32 bytes") }
                verifier = .ed25519(try Curve25519.Signing.PublicKey(rawRepresentation: x))
            case 7:  // AKP (algorithm key pair: ML-DSA), public key at label -1.
                let pub = try data(Label.crv, "pub")
                switch algorithm {
                case .mlDSA65: verifier = .mlDSA65(try MLDSA65.PublicKey(rawRepresentation: pub))
                case .mlDSA87: verifier = .mlDSA87(try MLDSA87.PublicKey(rawRepresentation: pub))
                default:
                    throw WebAuthnError(
                        .unsupportedAlgorithm, "AKP key with algorithm \(algorithm) (ML-DSA-44 is not available in swift-crypto)")
                }
            case 3:  // RSA
                let n = try data(Label.n, "n")
                let e = try data(Label.e, "e")
                switch algorithm {
                case .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .rs1: break
                default: throw WebAuthnError(.unsupportedAlgorithm, "RSA key with algorithm \(algorithm)")
                }
                guard n.count <= 1024, e.count <= 8, !e.isEmpty, !n.isEmpty else {
                    throw WebAuthnError(.malformedPublicKey, "RSA modulus or exponent has an implausible size")
                }
                verifier = .rsa(try _RSA.Signing.PublicKey(n: n, e: e))
            default:
                throw WebAuthnError(.unsupportedAlgorithm, "COSE key type \(kty)")
            }
        } catch let error as WebAuthnError {
            throw error
        } catch {
            // The library's own error (BoringSSL numbers) is not repeated: reasons reach clients.
            throw WebAuthnError(.malformedPublicKey, "the COSE key is not a valid public key for its algorithm")
        }
    }

    /// Verifies `signature` over `data` with this key and its algorithm, or throws
    /// `signature_invalid`.
    public func verify(signature: [UInt8], over data: [UInt8]) throws(WebAuthnError) {
        guard verifier.isValidSignature(signature, for: data, algorithm: algorithm) else {
            throw WebAuthnError(.signatureInvalid, "signature does not verify with the credential public key (\(algorithm))")
        }
    }

    /// Whether `other` is the same public key (used by attestation formats that compare the
    /// credential key with a certificate key).
    func sameKey(as other: PublicKeyVerifier) -> Bool {
        switch (verifier, other) {
        case (.p256(let a), .p256(let b)): a.rawRepresentation == b.rawRepresentation
        case (.p384(let a), .p384(let b)): a.rawRepresentation == b.rawRepresentation
        case (.p521(let a), .p521(let b)): a.rawRepresentation == b.rawRepresentation
        case (.ed25519(let a), .ed25519(let b)): a.rawRepresentation == b.rawRepresentation
        case (.rsa(let a), .rsa(let b)): a.derRepresentation == b.derRepresentation
        case (.mlDSA65(let a), .mlDSA65(let b)): a.rawRepresentation == b.rawRepresentation
        case (.mlDSA87(let a), .mlDSA87(let b)): a.rawRepresentation == b.rawRepresentation
        default: false
        }
    }
}
