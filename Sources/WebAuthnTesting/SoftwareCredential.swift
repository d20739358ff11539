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

    public init(
        id: [UInt8], keyType: KeyType, privateKey: [UInt8], rpID: String, userHandle: [UInt8], userName: String, signCount: UInt32 = 0
    ) {
        self.id = id
        self.keyType = keyType
        self.privateKey = privateKey
        self.rpID = rpID
        self.userHandle = userHandle
        self.userName = userName
        self.signCount = signCount
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
