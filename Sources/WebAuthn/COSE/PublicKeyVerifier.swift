import Crypto
import Foundation
import _CryptoExtras

/// A parsed public key ready to check signatures: the form both credential keys (from COSE) and
/// attestation certificate keys (from X.509) take before verification.
enum PublicKeyVerifier: Sendable {
    case p256(P256.Signing.PublicKey)
    case p384(P384.Signing.PublicKey)
    case p521(P521.Signing.PublicKey)
    case ed25519(Curve25519.Signing.PublicKey)
    case rsa(_RSA.Signing.PublicKey)
    case mlDSA65(MLDSA65.PublicKey)
    case mlDSA87(MLDSA87.PublicKey)

    /// Checks `signature` over `data` for the COSE algorithm `algorithm`.
    ///
    /// WebAuthn §6.5.5: ECDSA signatures are ASN.1 DER `Ecdsa-Sig-Value`; EdDSA signatures are the
    /// raw 64 bytes; RSA signatures are the raw `k`-byte integer.
    func isValidSignature(_ signature: [UInt8], for data: [UInt8], algorithm: COSEAlgorithmIdentifier) -> Bool {
        switch (self, algorithm) {
        case (.p256(let key), .es256):
            guard let sig = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(sig, for: SHA256.hash(data: data))
        case (.p384(let key), .es384):
            guard let sig = try? P384.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(sig, for: SHA384.hash(data: data))
        case (.p521(let key), .es512):
            guard let sig = try? P521.Signing.ECDSASignature(derRepresentation: signature) else { return false }
            return key.isValidSignature(sig, for: SHA512.hash(data: data))
        case (.ed25519(let key), .edDSA), (.ed25519(let key), .ed25519):
            return key.isValidSignature(signature, for: data)
        case (.mlDSA65(let key), .mlDSA65):
            return key.isValidSignature(signature, for: data)
        case (.mlDSA87(let key), .mlDSA87):
            return key.isValidSignature(signature, for: data)
        case (.rsa(let key), _):
            let sig = _RSA.Signing.RSASignature(rawRepresentation: signature)
            switch algorithm {
            case .rs256: return key.isValidSignature(sig, for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5)
            case .rs384: return key.isValidSignature(sig, for: SHA384.hash(data: data), padding: .insecurePKCS1v1_5)
            case .rs512: return key.isValidSignature(sig, for: SHA512.hash(data: data), padding: .insecurePKCS1v1_5)
            case .ps256: return key.isValidSignature(sig, for: SHA256.hash(data: data), padding: .PSS)
            case .ps384: return key.isValidSignature(sig, for: SHA384.hash(data: data), padding: .PSS)
            case .ps512: return key.isValidSignature(sig, for: SHA512.hash(data: data), padding: .PSS)
            case .rs1: return key.isValidSignature(sig, for: Insecure.SHA1.hash(data: data), padding: .insecurePKCS1v1_5)
            default: return false
            }
        default:
            return false
        }
    }

    /// Whether this key type can produce signatures of `algorithm` at all.
    func supports(_ algorithm: COSEAlgorithmIdentifier) -> Bool {
        switch (self, algorithm) {
        case (.p256, .es256), (.p384, .es384), (.p521, .es512), (.ed25519, .edDSA), (.ed25519, .ed25519): true
        case (.mlDSA65, .mlDSA65), (.mlDSA87, .mlDSA87): true
        case (.rsa, .rs256), (.rsa, .rs384), (.rsa, .rs512), (.rsa, .ps256), (.rsa, .ps384), (.rsa, .ps512), (.rsa, .rs1): true
        default: false
        }
    }
}
