/// A COSE algorithm identifier (IANA "COSE Algorithms" registry), as used in
/// `pubKeyCredParams`, COSE keys and attestation statements.
public struct COSEAlgorithmIdentifier: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The value in the IANA COSE Algorithms registry (negative for signature algorithms); JSON carries it as a
    /// number (`"alg": -7`).
    public let rawValue: Int
    /// Wraps any registry value; one this library cannot verify is rejected where a key or signature uses it.
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// ECDSA with SHA-256 on P-256.
    public static let es256 = Self(rawValue: -7)
    /// ECDSA with SHA-384 on P-384.
    public static let es384 = Self(rawValue: -35)
    /// ECDSA with SHA-512 on P-521.
    public static let es512 = Self(rawValue: -36)
    /// EdDSA; with a COSE key of curve Ed25519.
    public static let edDSA = Self(rawValue: -8)
    /// Ed25519 (fully specified, RFC 9864).
    public static let ed25519 = Self(rawValue: -19)
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    public static let rs256 = Self(rawValue: -257)
    /// RSASSA-PKCS1-v1_5 with SHA-384 (RFC 8812).
    public static let rs384 = Self(rawValue: -258)
    /// RSASSA-PKCS1-v1_5 with SHA-512 (RFC 8812).
    public static let rs512 = Self(rawValue: -259)
    /// RSASSA-PSS with SHA-256 and MGF1.
    public static let ps256 = Self(rawValue: -37)
    /// RSASSA-PSS with SHA-384 and MGF1 (RFC 8230).
    public static let ps384 = Self(rawValue: -38)
    /// RSASSA-PSS with SHA-512 and MGF1 (RFC 8230).
    public static let ps512 = Self(rawValue: -39)
    /// ML-DSA-44 (FIPS 204; COSE draft-ietf-cose-dilithium). Not provided by swift-crypto.
    public static let mlDSA44 = Self(rawValue: -48)
    /// ML-DSA-65 (FIPS 204).
    public static let mlDSA65 = Self(rawValue: -49)
    /// ML-DSA-87 (FIPS 204).
    public static let mlDSA87 = Self(rawValue: -50)
    /// RSASSA-PKCS1-v1_5 with SHA-1. Insecure; only old TPM and fido-u2f era attestation uses it,
    /// and it is accepted as a credential key only when the relying party lists it in its algorithms; TPM
    /// attestation statements signed with it are accepted and flagged (``AttestationPolicy/allowSHA1Attestation``).
    public static let rs1 = Self(rawValue: -65535)

    /// The JOSE-style name (`ES256`, `ML-DSA-65`, …), or `COSE(n)` for an identifier without one.
    public var description: String {
        switch self {
        case .es256: "ES256"
        case .es384: "ES384"
        case .es512: "ES512"
        case .edDSA: "EdDSA"
        case .ed25519: "Ed25519"
        case .rs256: "RS256"
        case .rs384: "RS384"
        case .rs512: "RS512"
        case .ps256: "PS256"
        case .ps384: "PS384"
        case .ps512: "PS512"
        case .rs1: "RS1"
        case .mlDSA44: "ML-DSA-44"
        case .mlDSA65: "ML-DSA-65"
        case .mlDSA87: "ML-DSA-87"
        default: "COSE(\(rawValue))"
        }
    }
}
