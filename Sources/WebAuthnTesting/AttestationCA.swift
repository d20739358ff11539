import Crypto
import Foundation
import SwiftASN1
import WebAuthn
import X509

/// A throwaway attestation PKI for tests: a root CA that issues packed attestation
/// certificates meeting WebAuthn §8.2.1.
public struct AttestationCA: Sendable {
    public let rootKey: P256.Signing.PrivateKey
    public let root: Certificate

    public init(
        name: String = "passkeyd Test Attestation Root", notBefore: Date = Date(timeIntervalSince1970: 1_700_000_000),
        notAfter: Date = Date(timeIntervalSince1970: 2_500_000_000)
    ) throws {
        rootKey = P256.Signing.PrivateKey()
        let subject = try DistinguishedName {
            CommonName(name)
            OrganizationName("passkeyd tests")
        }
        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: notBefore, notValidAfter: notAfter,
            issuer: subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(keyCertSign: true)
            },
            issuerPrivateKey: .init(rootKey))
    }

    /// PEM of the root, as an operator would configure it.
    public var rootPEM: String { (try? root.serializeAsPEM().pemString) ?? "" }

    /// Issues a packed attestation certificate for `key`, carrying `aaguid` in
    /// id-fido-gen-ce-aaguid (or a different one, to test the mismatch check).
    public func issueAttestationCertificate(
        for key: P256.Signing.PrivateKey, aaguid: AAGUID?, organizationalUnit: String = "Authenticator Attestation",
        isCA: Bool = false, spellsOutCAFalse: Bool = false
    ) throws -> Certificate {
        let subject = try DistinguishedName {
            CountryName("US")
            OrganizationName("passkeyd tests")
            OrganizationalUnitName(organizationalUnit)
            CommonName("Software Authenticator")
        }
        var extensions = try Certificate.Extensions {
            Critical(isCA ? BasicConstraints.isCertificateAuthority(maxPathLength: nil) : BasicConstraints.notCertificateAuthority)
        }
        if spellsOutCAFalse {
            // `cA FALSE` written out (BER, not DER), as an older Chromium virtual authenticator did.
            extensions = try Certificate.Extensions([
                Certificate.Extension(oid: [2, 5, 29, 19], critical: true, value: [0x30, 0x03, 0x01, 0x01, 0x00])
            ])
        }
        if let aaguid {
            var serializer = DER.Serializer()
            try serializer.serialize(ASN1OctetString(contentBytes: ArraySlice(aaguid.bytes)))
            try extensions.append(
                Certificate.Extension(
                    oid: [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4], critical: false, value: ArraySlice(serializer.serializedBytes)))
        }
        return try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: root.notValidBefore,
            notValidAfter: root.notValidAfter, issuer: root.subject, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions, issuerPrivateKey: .init(rootKey))
    }
}
