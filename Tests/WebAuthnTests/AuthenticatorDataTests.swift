import Crypto
import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

@Suite("Authenticator data and COSE keys")
struct AuthenticatorDataTests {
    static func registrationAuthData(flags: UInt8 = 0x45, extensions: [UInt8] = [], keyType: SoftwareCredential.KeyType = .es256) throws
        -> [UInt8]
    {
        let credential = SoftwareCredential(
            id: Array(repeating: 7, count: 16), keyType: keyType,
            privateKey: try SoftwareCredential.makePrivateKey(keyType, seed: [1]),
            rpID: "example.com", userHandle: [1], userName: "u")
        var bytes = Array(SHA256.hash(data: Array("example.com".utf8))) + [flags, 0, 0, 0, 5]
        bytes += [UInt8](repeating: 0xaa, count: 16) + [0, 16] + credential.id + (try credential.cosePublicKey()) + extensions
        return bytes
    }

    @Test func parsesAttestedCredentialData() async throws {
        let data = try AuthenticatorData(bytes: try Self.registrationAuthData())
        #expect(data.userPresent && data.userVerified && !data.backupEligible)
        #expect(data.signCount == 5)
        #expect(data.attestedCredentialData?.credentialID == Array(repeating: 7, count: 16))
        #expect(data.attestedCredentialData?.aaguid.description == "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")
        #expect(data.attestedCredentialData?.publicKey.algorithm == .es256)
    }

    @Test func parsesExtensionsWhenEDIsSet() async throws {
        let ext = CBORWriter.encode(.map([CBORMapEntry(.text("credProtect"), .unsigned(2))]))
        let data = try AuthenticatorData(bytes: try Self.registrationAuthData(flags: 0xc5, extensions: ext))
        #expect(data.extensions?[text: "credProtect"] == .unsigned(2))
    }

    @Test func extensionsWithoutEDAreRejectedUnlessToleratedExplicitly() async throws {
        let ext = CBORWriter.encode(.map([CBORMapEntry(.text("credProtect"), .unsigned(2))]))
        let bytes = try Self.registrationAuthData(flags: 0x45, extensions: ext)
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) { try AuthenticatorData(bytes: bytes) }
        #expect(try AuthenticatorData(bytes: bytes, extensionFlagHandling: .unsafeAllowExtensionsWithoutFlag).extensions != nil)
    }

    @Test func edWithoutExtensionsIsRejected() async throws {
        #expect(throws: WebAuthnError(.malformedAuthenticatorData, "")) {
            try AuthenticatorData(bytes: try Self.registrationAuthData(flags: 0xc5))
        }
    }

    @Test func backupStateWithoutEligibilityIsRejected() async throws {
        // BS (0x10) without BE (0x08).
        let bytes: [UInt8] = Array(repeating: 0, count: 32) + [0x15, 0, 0, 0, 0]
        #expect(throws: WebAuthnError(.invalidBackupFlags, "")) { try AuthenticatorData(bytes: bytes) }
        #expect(try AuthenticatorData(bytes: [UInt8](repeating: 0, count: 32) + [0x1d, 0, 0, 0, 0]).backedUp)
    }

    @Test func trailingBytesAreRejected() async throws {
        #expect(throws: WebAuthnError.self) { try AuthenticatorData(bytes: try Self.registrationAuthData() + [0]) }
        #expect(throws: WebAuthnError.self) { try AuthenticatorData(bytes: [UInt8](repeating: 0, count: 37) + [0]) }
    }

    @Test func credentialIDLongerThan1023BytesIsRejected() async throws {
        var bytes = Array(repeating: UInt8(0), count: 32) + [0x41, 0, 0, 0, 0] + Array(repeating: 0, count: 16)
        bytes += [0x04, 0x00] + Array(repeating: 1, count: 1024)
        #expect(throws: WebAuthnError(.credentialIDTooLong, "")) { try AuthenticatorData(bytes: bytes) }
    }

    @Test func everyTruncatedPrefixThrows() async throws {
        let bytes = try Self.registrationAuthData()
        for length in 0..<bytes.count {
            #expect(throws: WebAuthnError.self) { try AuthenticatorData(bytes: Array(bytes[0..<length])) }
        }
    }

    @Test func flippedBitsNeverCrash() async throws {
        let bytes = try Self.registrationAuthData(keyType: .ed25519)
        for index in bytes.indices {
            for bit in 0..<8 {
                var mutated = bytes
                mutated[index] ^= 1 << bit
                _ = try? AuthenticatorData(bytes: mutated)
            }
        }
    }

    @Test(arguments: SoftwareCredential.KeyType.allCases)
    func coseKeysVerifyTheirOwnSignatures(_ type: SoftwareCredential.KeyType) async throws {
        let credential = SoftwareCredential(
            id: [1], keyType: type, privateKey: try SoftwareCredential.makePrivateKey(type, seed: [2]),
            rpID: "x", userHandle: [1], userName: "u")
        let key = try CredentialPublicKey(cose: try credential.cosePublicKey())
        #expect(key.algorithm == type.algorithm)
        let message: [UInt8] = Array("hello".utf8)
        try key.verify(signature: try credential.sign(message), over: message)
        #expect(throws: WebAuthnError(.signatureInvalid, "")) {
            try key.verify(signature: try credential.sign(message), over: message + [0])
        }
    }

    @Test func coseKeyWhoseAlgorithmDisagreesWithItsCurveIsRejected() async throws {
        let credential = SoftwareCredential(
            id: [1], keyType: .es256, privateKey: try SoftwareCredential.makePrivateKey(.es256, seed: [3]),
            rpID: "x", userHandle: [1], userName: "u")
        var value = try CBORReader.decode(try credential.cosePublicKey())
        guard case .map(var entries) = value else {
            Issue.record("not a map")
            return
        }
        entries[1] = CBORMapEntry(.int(3), .int(-35))  // ES384 on a P-256 key
        value = .map(entries)
        #expect(throws: WebAuthnError(.unsupportedAlgorithm, "")) { try CredentialPublicKey(cose: CBORWriter.encode(value)) }
    }

    @Test(arguments: [
        // kty missing; EC2 without y; x of the wrong size; OKP on X25519; RSA with a tiny modulus; unknown kty.
        CBORValue.map([CBORMapEntry(.int(3), .int(-7))]),
        .map([
            CBORMapEntry(.int(1), .int(2)), CBORMapEntry(.int(3), .int(-7)), CBORMapEntry(.int(-1), .int(1)),
            CBORMapEntry(.int(-2), .bytes(Array(repeating: 1, count: 32))),
        ]),
        .map([
            CBORMapEntry(.int(1), .int(2)), CBORMapEntry(.int(3), .int(-7)), CBORMapEntry(.int(-1), .int(1)),
            CBORMapEntry(.int(-2), .bytes([1])), CBORMapEntry(.int(-3), .bytes([1])),
        ]),
        .map([
            CBORMapEntry(.int(1), .int(1)), CBORMapEntry(.int(3), .int(-8)), CBORMapEntry(.int(-1), .int(4)),
            CBORMapEntry(.int(-2), .bytes(Array(repeating: 1, count: 32))),
        ]),
        .map([
            CBORMapEntry(.int(1), .int(3)), CBORMapEntry(.int(3), .int(-257)),
            CBORMapEntry(.int(-1), .bytes(Array(repeating: 0xff, count: 64))), CBORMapEntry(.int(-2), .bytes([1, 0, 1])),
        ]),
        .map([CBORMapEntry(.int(1), .int(9)), CBORMapEntry(.int(3), .int(-7))]),
        .array([]),
    ])
    func malformedCOSEKeysAreRejected(_ value: CBORValue) {
        #expect(throws: WebAuthnError.self) { try CredentialPublicKey(cose: CBORWriter.encode(value)) }
    }

    @Test func invalidCurvePointIsRejected() {
        let value = CBORValue.map([
            CBORMapEntry(.int(1), .int(2)), CBORMapEntry(.int(3), .int(-7)), CBORMapEntry(.int(-1), .int(1)),
            CBORMapEntry(.int(-2), .bytes(Array(repeating: 1, count: 32))), CBORMapEntry(.int(-3), .bytes(Array(repeating: 2, count: 32))),
        ])
        #expect(throws: WebAuthnError(.malformedPublicKey, "")) { try CredentialPublicKey(cose: CBORWriter.encode(value)) }
    }

    @Test func aaguidFormatsAndNamesProviders() {
        let aaguid = AAGUID("fbfc3007-154e-4ecc-8c0b-6e020557d7bd")
        #expect(aaguid?.description == "fbfc3007-154e-4ecc-8c0b-6e020557d7bd")
        #expect(AAGUID("not-a-guid") == nil)
        #expect(AAGUID(bytes: Array(repeating: 0, count: 16)).isZero)
        #expect(AAGUID("08987058-cadc-4b81-b6e1-30de50dcbe96")?.providerName == "Windows Hello")
    }

    /// Written and read byte by byte: the same as Foundation's UUID, in both directions, for
    /// any 16 bytes; anything but 32 hex digits and 4 dashes is refused.
    @Test func aaguidTextRoundTripsLikeUUID() {
        var generator = SplitMix64.forTest()
        for _ in 0..<200 {
            let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = AAGUID(bytes: bytes).description
            let uuid = UUID(
                uuid: (
                    bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                    bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
                ))
            #expect(text == uuid.uuidString.lowercased())
            #expect(AAGUID(text)?.bytes == bytes)
            #expect(AAGUID(uuid.uuidString)?.bytes == bytes)
        }
        for bad in [
            "", "fbfc3007154e4ecc8c0b6e020557d7bd", "fbfc3007-154e-4ecc-8c0b-6e020557d7b", "fbfc3007-154e-4ecc-8c0b-6e020557d7bdd",
            "fbfc3007-154e-4ecc-8c0b-6e020557d7bg", "fbfc3007-154e-4ecc-8c0b-6e02-0557d7bd", " fbfc3007-154e-4ecc-8c0b-6e020557d7b",
            "ｆbfc3007-154e-4ecc-8c0b-6e020557d7bd",
        ] {
            #expect(AAGUID(bad) == nil, "\(bad)")
        }
        #expect(AAGUID(bytes: [1, 2, 3]).description == "010203")
    }
}
