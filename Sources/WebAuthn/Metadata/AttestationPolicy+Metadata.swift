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
