import Crypto
import Foundation
import WebAuthn
import _CryptoExtras

/// A passkey held by the ``SoftwareAuthenticator``: its private key and what an authenticator
/// remembers about it. `Codable`, so a CLI can keep passkeys in a file like a provider would.
public struct SoftwareCredential: Codable, Sendable, Hashable {
    /// The key types the software authenticator creates.
    public enum KeyType: String, Codable, Sendable, CaseIterable {
        case es256, ed25519, rs256
        public var algorithm: COSEAlgorithmIdentifier {
            switch self {
            case .es256: .es256
            case .ed25519: .edDSA
            case .rs256: .rs256
            }
        }
    }

    public var id: [UInt8]
    public var keyType: KeyType
    /// Raw private key (P-256 scalar, Ed25519 seed) or PKCS#8 DER (RSA).
    public var privateKey: [UInt8]
    public var rpID: String
    public var userHandle: [UInt8]
    public var userName: String
    public var signCount: UInt32
    /// CTAP2 hmac-secret's CredRandom: 32 random bytes the PRF outputs are HMACs under (the
    /// "with user verification" one; CTAP keeps a second for assertions without UV). `nil`: made
    /// by an authenticator without PRF, so it never gives PRF outputs. Absent from older files.
    public var prfSecret: [UInt8]?
    /// The credential's largeBlob (CTAP2 §6.10: the authenticator's large-blob array holds it,
    /// keyed by the credential); `nil` until a `largeBlob.write`. Absent from older files.
    public var largeBlob: [UInt8]?
    /// The credProtect level it was made with (1, 2 or 3; CTAP2 §12.1); `nil`: none asked, which
    /// behaves as 1. Absent from older files.
    public var credProtect: UInt8?

    public init(
        id: [UInt8], keyType: KeyType, privateKey: [UInt8], rpID: String, userHandle: [UInt8], userName: String, signCount: UInt32 = 0,
        prfSecret: [UInt8]? = nil, largeBlob: [UInt8]? = nil, credProtect: UInt8? = nil
    ) {
        self.id = id
        self.keyType = keyType
        self.privateKey = privateKey
        self.rpID = rpID
        self.userHandle = userHandle
        self.userName = userName
        self.signCount = signCount
        self.prfSecret = prfSecret
        self.largeBlob = largeBlob
        self.credProtect = credProtect
    }

    /// The PRF output for `input` (WebAuthn L3 §10.1.4 mapped onto CTAP2 hmac-secret): the salt is
    /// SHA-256("WebAuthn PRF" || 0x00 || input), the output HMAC-SHA256(CredRandom, salt), 32
    /// bytes. `nil` when the credential has no CredRandom.
    public func prfOutput(_ input: [UInt8]) -> [UInt8]? {
        guard let prfSecret else { return nil }
        let salt = Self.hmacSecretSalt(input)
        return Array(HMAC<SHA256>.authenticationCode(for: salt, using: SymmetricKey(data: prfSecret)))
    }

    /// The 32 bytes standing for what CTAP2 writes in the `hmac-secret` authenticator output for
    /// `input`: there the PRF output encrypted to the client's shared secret, here an HMAC of the
    /// salt under a key derived from CredRandom (same length, never equal to the PRF output).
    public func hmacSecretTransportOutput(_ input: [UInt8]) -> [UInt8]? {
        guard let prfSecret else { return nil }
        let transportKey = HMAC<SHA256>.authenticationCode(
            for: Array("passkeyd software hmac-secret transport".utf8), using: SymmetricKey(data: prfSecret))
        return Array(HMAC<SHA256>.authenticationCode(for: Self.hmacSecretSalt(input), using: SymmetricKey(data: Array(transportKey))))
    }

    /// WebAuthn L3 §10.1.4: the hmac-secret salt a PRF input maps to.
    public static func hmacSecretSalt(_ input: [UInt8]) -> [UInt8] {
        Array(SHA256.hash(data: Array("WebAuthn PRF".utf8) + [0x00] + input))
    }

    /// The credential public key as a COSE_Key (canonical CTAP2 encoding).
    public func cosePublicKey() throws -> [UInt8] {
        switch keyType {
        case .es256:
            let key = try P256.Signing.PrivateKey(rawRepresentation: privateKey).publicKey
            let raw = Array(key.rawRepresentation)
            return CBORWriter.encode(
                .map([
                    CBORMapEntry(.int(1), .int(2)), CBORMapEntry(.int(3), .int(-7)), CBORMapEntry(.int(-1), .int(1)),
                    CBORMapEntry(.int(-2), .bytes(Array(raw[0..<32]))), CBORMapEntry(.int(-3), .bytes(Array(raw[32..<64]))),
                ]))
        case .ed25519:
            let key = try Curve25519.Signing.PrivateKey(rawRepresentation: privateKey).publicKey
            return CBORWriter.encode(
                .map([
                    CBORMapEntry(.int(1), .int(1)), CBORMapEntry(.int(3), .int(-8)), CBORMapEntry(.int(-1), .int(6)),
                    CBORMapEntry(.int(-2), .bytes(Array(key.rawRepresentation))),
                ]))
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(derRepresentation: privateKey).publicKey
            let primitives = try key.getKeyPrimitives()
            return CBORWriter.encode(
                .map([
                    CBORMapEntry(.int(1), .int(3)), CBORMapEntry(.int(3), .int(-257)),
                    CBORMapEntry(.int(-1), .bytes(Array(primitives.modulus))),
                    CBORMapEntry(.int(-2), .bytes(Array(primitives.publicExponent))),
                ]))
        }
    }

    /// Signs `data` as a WebAuthn authenticator does (§6.5.5: DER ECDSA, raw EdDSA, PKCS#1 v1.5 RSA).
    public func sign(_ data: [UInt8]) throws -> [UInt8] {
        switch keyType {
        case .es256:
            return Array(try P256.Signing.PrivateKey(rawRepresentation: privateKey).signature(for: data).derRepresentation)
        case .ed25519:
            return Array(try Curve25519.Signing.PrivateKey(rawRepresentation: privateKey).signature(for: data))
        case .rs256:
            let key = try _RSA.Signing.PrivateKey(derRepresentation: privateKey)
            return Array(try key.signature(for: SHA256.hash(data: data), padding: .insecurePKCS1v1_5).rawRepresentation)
        }
    }

    /// A new private key of `type`; deterministic when `seed` is given (ES256, Ed25519).
    public static func makePrivateKey(_ type: KeyType, seed: [UInt8]? = nil) throws -> [UInt8] {
        switch type {
        case .es256:
            if let seed {
                // Hash the seed until it is a valid scalar (almost always the first try).
                var material = Array(SHA256.hash(data: seed))
                while true {
                    if let key = try? P256.Signing.PrivateKey(rawRepresentation: material) { return Array(key.rawRepresentation) }
                    material = Array(SHA256.hash(data: material))
                }
            }
            return Array(P256.Signing.PrivateKey().rawRepresentation)
        case .ed25519:
            if let seed { return Array(SHA256.hash(data: seed)) }
            return Array(Curve25519.Signing.PrivateKey().rawRepresentation)
        case .rs256:
            return Array(try _RSA.Signing.PrivateKey(keySize: .bits2048).derRepresentation)
        }
    }
}
