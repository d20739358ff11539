import Crypto
import Foundation
import SwiftASN1
import WebAuthn
import X509

/// A throwaway FIDO Metadata Service for tests: its own root CA and BLOB signing certificate,
/// and BLOBs (MDS3 JWS) signed with them.
///
/// ```swift
/// let mds = try MetadataBLOBIssuer()
/// let blob = try mds.blob(number: 7, entries: [.init(aaguid: aaguid, description: "Key", status: "REVOKED")])
/// let metadata = try await FIDOMetadata.verify(blob: blob, roots: [mds.root], at: Date())
/// ```
public struct MetadataBLOBIssuer: Sendable {
    public let rootKey: P256.Signing.PrivateKey
    public let root: Certificate
    public let signingKey: P256.Signing.PrivateKey
    public let signingCertificate: Certificate

    /// - Parameters: the validity of the BLOB signing certificate (default: 2023 to 2049; pass an
    ///   interval in the past for an expired one).
    public init(
        name: String = "passkeyd Test MDS Root", signingNotBefore: Date = Date(timeIntervalSince1970: 1_700_000_000),
        signingNotAfter: Date = Date(timeIntervalSince1970: 2_500_000_000),
        signerHostname: String = FIDOMetadata.officialSignerHostname
    ) throws {
        // The root is a test CA like the attestation one.
        let ca = try AttestationCA(
            name: name, notBefore: Date(timeIntervalSince1970: 1_000_000_000), notAfter: Date(timeIntervalSince1970: 2_600_000_000))
        rootKey = ca.rootKey
        root = ca.root
        let rootName = ca.root.subject
        signingKey = P256.Signing.PrivateKey()
        signingCertificate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(signingKey.publicKey), notValidBefore: signingNotBefore,
            notValidAfter: signingNotAfter, issuer: rootName,
            subject: try DistinguishedName {
                CommonName(signerHostname)
                OrganizationName("passkeyd tests")
            }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                SubjectAlternativeNames([.dnsName(signerHostname)])
            },
            issuerPrivateKey: .init(rootKey))
    }

    /// PEM of the root, as an operator would configure it (`mdsRootCertificate`).
    public var rootPEM: String { (try? root.serializeAsPEM().pemString) ?? "" }

    /// One payload entry (MDS3 §3.1.1), reduced to what passkeyd reads.
    public struct Entry: Sendable {
        public var aaguid: AAGUID?
        public var description: String
        public var icon: String?
        public var attestationRoots: [Certificate]
        /// `(status, effectiveDate "YYYY-MM-DD")`, in the order listed.
        public var statusReports: [StatusLine]

        public struct StatusLine: Sendable {
            public var status: String
            public var effectiveDate: String?
            public init(_ status: String, _ effectiveDate: String? = nil) {
                self.status = status
                self.effectiveDate = effectiveDate
            }
        }

        public init(
            aaguid: AAGUID?, description: String, icon: String? = nil, attestationRoots: [Certificate] = [],
            status: String = "FIDO_CERTIFIED", statusReports: [StatusLine]? = nil
        ) {
            self.aaguid = aaguid
            self.description = description
            self.icon = icon
            self.attestationRoots = attestationRoots
            self.statusReports = statusReports ?? [StatusLine(status, "2024-01-01")]
        }
    }

    /// How the JWS header names the signing chain.
    public enum ChainHeader: Sendable {
        /// `x5c`: the signing certificate (and, optionally, the root).
        case x5c(includeRoot: Bool)
        /// Only `x5u`, a URL (refused offline).
        case x5uOnly
        /// Neither: signed by the root's own key (MDS3 §3.2 step 3).
        case signedByRoot
    }

    /// The payload JSON (MDS3 §3.1.6).
    public func payload(number: Int, nextUpdate: String = "2049-01-01", entries: [Entry]) throws -> [UInt8] {
        struct Status: Encodable {
            let status: String
            let effectiveDate: String?
        }
        struct Statement: Encodable {
            let description: String
            let icon: String?
            let attestationRootCertificates: [String]
        }
        struct PayloadEntry: Encodable {
            let aaguid: String?
            let attestationCertificateKeyIdentifiers: [String]?
            let metadataStatement: Statement
            let statusReports: [Status]
            let timeOfLastStatusChange: String
        }
        struct Payload: Encodable {
            let legalHeader: String
            let no: Int
            let nextUpdate: String
            let entries: [PayloadEntry]
        }
        let body = Payload(
            legalHeader: "Test metadata: not for production.", no: number, nextUpdate: nextUpdate,
            entries: try entries.map { entry in
                PayloadEntry(
                    aaguid: entry.aaguid?.description,
                    attestationCertificateKeyIdentifiers: entry.aaguid == nil ? ["923881fe2f214ee465484371aeb72e97f5a58e0a"] : nil,
                    metadataStatement: Statement(
                        description: entry.description, icon: entry.icon,
                        attestationRootCertificates: try entry.attestationRoots.map { Data(try Self.der($0)).base64EncodedString() }),
                    statusReports: entry.statusReports.map { Status(status: $0.status, effectiveDate: $0.effectiveDate) },
                    timeOfLastStatusChange: entry.statusReports.last?.effectiveDate ?? "2024-01-01")
            })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(body))
    }

    /// A signed BLOB: `header.payload.signature`, ES256.
    public func blob(number: Int, nextUpdate: String = "2049-01-01", entries: [Entry], chain: ChainHeader = .x5c(includeRoot: false))
        throws -> String
    {
        try sign(payload: payload(number: number, nextUpdate: nextUpdate, entries: entries), chain: chain)
    }

    /// Signs `payload` as a JWS compact serialization with the BLOB signing key.
    public func sign(payload: [UInt8], chain: ChainHeader = .x5c(includeRoot: false)) throws -> String {
        var header = "{\"alg\":\"ES256\",\"typ\":\"JWT\""
        switch chain {
        case .x5c(let includeRoot):
            let certificates = includeRoot ? [signingCertificate, root] : [signingCertificate]
            let encoded = try certificates.map { "\"\(Data(try Self.der($0)).base64EncodedString())\"" }
            header += ",\"x5c\":[\(encoded.joined(separator: ","))]"
        case .x5uOnly:
            header += ",\"x5u\":\"https://mds.test/chain.pem\""
        case .signedByRoot:
            break
        }
        header += "}"
        let signingInput = Base64URLBytes(Array(header.utf8)).base64URL + "." + Base64URLBytes(payload).base64URL
        let key = if case .signedByRoot = chain { rootKey } else { signingKey }
        let signature = try key.signature(for: Array(signingInput.utf8)).rawRepresentation
        return signingInput + "." + Base64URLBytes(Array(signature)).base64URL
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }
}
