import Foundation
import X509

extension AttestationPolicy {
    /// The anchors an attestation of `aaguid` may chain to (§7.1 step 23: "obtain a list of
    /// acceptable trust anchors … for that attestation type and statement format … for example,
    /// the FIDO Metadata Service"): the configured ``trustAnchors``, plus the
    /// `attestationRootCertificates` of the metadata entry for that AAGUID, which vouch for that
    /// model alone.
    public func trustAnchors(for aaguid: AAGUID) -> [Certificate] {
        guard let metadata else { return trustAnchors }
        return trustAnchors + metadata.trustAnchors(for: aaguid)
    }

    /// ``trustAnchors(for:)`` for one attestation: the metadata roots count only when the
    /// attestation certificate names its model in id-fido-gen-ce-aaguid (which the format
    /// verifiers have already matched against authData). A vendor root signs many models, and
    /// an Android hardware key chains to Google's root whatever AAGUID its app writes: without
    /// the extension nothing binds the AAGUID to the chain, so the model's metadata roots cannot
    /// vouch for it. Configured ``trustAnchors`` always count.
    func trustAnchors(for aaguid: AAGUID, attestationCertificate: Certificate?) -> (anchors: [Certificate], withheld: Bool) {
        let fromMetadata = metadata?.trustAnchors(for: aaguid) ?? []
        guard !fromMetadata.isEmpty else { return (trustAnchors, false) }
        guard let leaf = attestationCertificate,
            AttestationCertificates.extensionValue(leaf, oid: AttestationCertificates.aaguidExtension) != nil
        else { return (trustAnchors, true) }
        return (trustAnchors + fromMetadata, false)
    }

    /// MDS3 §3.2 step 7c: "It is up to the relying party to specify behavior for authenticators
    /// with status reports that indicate a lack of certification, or known security issues.
    /// However, the status REVOKED indicates significant security issues related to such
    /// authenticators." A model with a status report in effect at `time` that is one of
    /// ``AuthenticatorStatus/refusing`` is refused with `authenticator_not_allowed`
    /// (``MetadataEntry/refusal(at:)``: such statuses are not lifted by later reports).
    func checkMetadataStatus(of aaguid: AAGUID, at time: Date) throws(WebAuthnError) {
        guard let entry = metadata?.entry(for: aaguid), let report = entry.refusal(at: time) else { return }
        let name = entry.description.map { "\($0) (\(aaguid))" } ?? "AAGUID \(aaguid)"
        let since = report.effectiveDate.map { " since \(MetadataDay.format($0))" } ?? ""
        throw WebAuthnError(
            .authenticatorNotAllowed,
            "FIDO metadata BLOB no. \(metadata?.number ?? 0) reports \(name) as \(report.status.rawValue)\(since)")
    }
}
