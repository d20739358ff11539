import Foundation
import X509

/// A verified FIDO Metadata Service v3 BLOB: what the FIDO Alliance says about authenticator
/// models, keyed by AAGUID.
///
/// Only ``verify(blob:roots:at:signerHostname:)`` makes one, so holding a `FIDOMetadata` means its signature
/// chained to a configured MDS root. Put it in ``AttestationPolicy/metadata``: registrations of an
/// authenticator whose latest status report refuses it fail with `authenticator_not_allowed`, and
/// each entry's `attestationRootCertificates` become trust anchors for that AAGUID alone.
///
/// ```swift
/// let roots = try AttestationPolicy.certificates(pem: mdsRootPEM)   // FIDO's published MDS root
/// let metadata = try await FIDOMetadata.verify(blob: jwtText, roots: roots, at: Date())
/// var policy = AttestationPolicy()
/// policy.metadata = metadata
/// metadata.entry(for: aaguid)?.description   // "YubiKey 5 Series with NFC"
/// ```
///
/// Entries that name their authenticator only by `aaid` (UAF) or by
/// `attestationCertificateKeyIdentifiers` (U2F) have no AAGUID for a WebAuthn registration to
/// match; they are counted in ``skippedEntries`` and otherwise left out.
public struct FIDOMetadata: Sendable {
    /// Largest BLOB read (the real one is a few MiB, most of it icons).
    public static let maxBLOBSize = 16 * 1024 * 1024
    /// The name the FIDO Alliance's BLOB signing certificate is issued to.
    public static let officialSignerHostname = "mds.fidoalliance.org"
    /// Most entries read from one BLOB.
    public static let maxEntries = 100_000

    /// `no`: the BLOB's serial number; a newer BLOB has a greater one (MDS3 §3.1.6).
    public let number: Int
    /// `nextUpdate`: the day (00:00 UTC) by which a newer BLOB should have been fetched (MDS3 §3.1.6).
    public let nextUpdate: Date
    /// `legalHeader`: the terms the BLOB is used under.
    public let legalHeader: String
    /// The entries that name an AAGUID.
    public let entries: [AAGUID: MetadataEntry]
    /// Entries named only by AAID or attestation key identifiers (not used for WebAuthn).
    public let skippedEntries: Int
    /// What was read but left out, for the operator (an attestation root certificate that does
    /// not parse). At most 100 lines.
    public let warnings: [String]

    /// `nextUpdate` as the BLOB spells it: `YYYY-MM-DD`.
    public var nextUpdateDay: String { MetadataDay.format(nextUpdate) }

    /// Whether `nextUpdate` has come: a newer BLOB is due and this one should be replaced.
    public func isStale(at time: Date) -> Bool { time >= nextUpdate }

    /// The entry for `aaguid`, if the BLOB has one.
    public func entry(for aaguid: AAGUID) -> MetadataEntry? { entries[aaguid] }

    /// The entry's `attestationRootCertificates`: trust anchors for attestations of this AAGUID only.
    public func trustAnchors(for aaguid: AAGUID) -> [Certificate] { entries[aaguid]?.attestationRootCertificates ?? [] }

    /// Verifies a BLOB (the JWS compact serialization downloaded from the MDS) against `roots` at
    /// `time`, following FIDO Metadata Service v3.0 §3.2 "Metadata BLOB object processing rules",
    /// and reads its payload. `metadata_invalid`, with the reason, when any step fails.
    ///
    /// Step 5 (the number must exceed the last one processed) needs what was stored before: the
    /// caller keeps that (passkeyd's store refuses an older `no`).
    ///
    /// The signing certificate must also be issued to `signerHostname` (its subjectAltName
    /// dNSName, or its common name when it has none): the FIDO root is a public web root
    /// (GlobalSign R3), so a chain to it alone would let any holder of a GlobalSign certificate
    /// sign a BLOB. `nil` skips the name check (a private metadata service with its own root).
    public static func verify(
        blob: String, roots: [Certificate], at time: Date, signerHostname: String? = officialSignerHostname
    ) async throws(WebAuthnError) -> FIDOMetadata {
        guard blob.utf8.count <= maxBLOBSize else {
            throw invalid("the BLOB is over \(maxBLOBSize / 1024 / 1024) MiB")
        }
        guard !roots.isEmpty else {
            throw WebAuthnError(.invalidConfiguration, "no FIDO MDS root certificate is configured")
        }
        let jws = try MetadataJWS(compact: blob.trimmingCharacters(in: .whitespacesAndNewlines))
        // §3.2 step 2: If the x5u attribute is present in the JWT Header, then … download the
        // certificate chain from the URL specified by the x5u attribute. (This server is offline:
        // a BLOB that names its chain only by URL cannot be checked.)
        if jws.header.x5u != nil && jws.header.x5c == nil {
            throw invalid("the JWS header names its certificate chain only by x5u, which cannot be fetched offline; use a BLOB with x5c")
        }
        // §3.2 step 3: If the x5u attribute is missing, the chain should be retrieved from the x5c
        // attribute. If that attribute is missing as well, Metadata BLOB signing trust anchor is
        // considered the BLOB signing certificate chain.
        let signer: Certificate
        if let chain = jws.header.x5c {
            signer = try await MetadataJWS.validate(chain: chain, roots: roots, at: time)
            if let signerHostname { try MetadataJWS.checkSigner(signer, hostname: signerHostname) }
        } else {
            guard let root = roots.first(where: { jws.isSigned(by: $0) }) else {
                throw invalid("the JWS header has no x5c and no configured MDS root signed the BLOB")
            }
            guard root.notValidBefore <= time, time <= root.notValidAfter else {
                throw invalid("the MDS root that signed the BLOB is not valid at \(time)")
            }
            signer = root
        }
        // §3.2 step 4: Verify the signature of the Metadata BLOB object using the BLOB signing
        // certificate chain (as determined by the steps above). The FIDO Server SHOULD ignore the
        // file if the chain cannot be verified or if one of the chain certificates is revoked.
        // (Revocation lists are not fetched: docs/policy.md.)
        try jws.verifySignature(with: signer)
        // §3.2 step 7: Iterate through the individual entries (of type MetadataBLOBPayloadEntry).
        return try MetadataPayload.read(jws.payload)
    }

    static func invalid(_ reason: String, file: String = #fileID, line: Int = #line) -> WebAuthnError {
        WebAuthnError(.metadataInvalid, reason, file: file, line: line)
    }

    init(number: Int, nextUpdate: Date, legalHeader: String, entries: [AAGUID: MetadataEntry], skippedEntries: Int, warnings: [String]) {
        self.number = number
        self.nextUpdate = nextUpdate
        self.legalHeader = legalHeader
        self.entries = entries
        self.skippedEntries = skippedEntries
        self.warnings = warnings
    }
}
