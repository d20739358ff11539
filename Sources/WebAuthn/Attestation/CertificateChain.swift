import Foundation
import SwiftASN1
import X509

/// Linear validation of an attestation certificate chain (x5c, leaf first) as WebAuthn §7.1
/// step 23 asks: every certificate signed by the next, intermediates are CAs, every certificate
/// valid at the verification time, and the last one issued by (or equal to) a configured anchor.
///
/// Attestation chains are short and arrive in order, so no path building is needed; doing it
/// here keeps the check synchronous and lets it accept the critical extensions attestation
/// certificates carry (a TPM AIK certificate's subjectAltName is critical by design).
enum CertificateChain {
    /// Critical extensions a certificate in an attestation chain may carry.
    private static let understoodCriticalExtensions: Set<String> = [
        "2.5.29.19",  // basicConstraints
        "2.5.29.15",  // keyUsage
        "2.5.29.37",  // extKeyUsage
        "2.5.29.17",  // subjectAltName (TPM AIK certificates, §8.3.1)
        "2.5.29.32",  // certificatePolicies
    ]

    /// Checks the links inside `chain` (always) and, when `anchors` is not empty, that it ends at
    /// one of them. Returns whether the chain is anchored.
    static func validate(_ chain: [Certificate], anchors: [Certificate], at time: Date, format: String) throws(WebAuthnError) -> Bool {
        guard !chain.isEmpty else { return false }
        for certificate in chain {
            for ext in certificate.extensions where ext.critical && !understoodCriticalExtensions.contains(ext.oid.description) {
                throw WebAuthnError(.attestationInvalid, "\(format): certificate has an unknown critical extension \(ext.oid)")
            }
        }
        for index in 0..<(chain.count - 1) {
            let child = chain[index]
            let parent = chain[index + 1]
            guard isCA(parent) else {
                throw WebAuthnError(.attestationInvalid, "\(format): x5c[\(index + 1)] issues a certificate but is not a CA")
            }
            guard child.issuer == parent.subject, parent.publicKey.isValidSignature(child.signature, for: child) else {
                throw WebAuthnError(.attestationInvalid, "\(format): x5c[\(index)] is not signed by x5c[\(index + 1)]")
            }
        }
        guard !anchors.isEmpty else { return false }

        for (index, certificate) in chain.enumerated() where !isValid(certificate, at: time) {
            throw WebAuthnError(
                .attestationUntrusted,
                "\(format): x5c[\(index)] is not valid at \(time) (\(certificate.notValidBefore) – \(certificate.notValidAfter))")
        }
        guard let last = chain.last else { return false }
        for anchor in anchors {
            if anchor == last { return true }
            if last.issuer == anchor.subject, anchor.publicKey.isValidSignature(last.signature, for: last) {
                guard isValid(anchor, at: time) else { continue }
                return true
            }
        }
        return false
    }

    private static func isValid(_ certificate: Certificate, at time: Date) -> Bool {
        certificate.notValidBefore <= time && time <= certificate.notValidAfter
    }

    private static func isCA(_ certificate: Certificate) -> Bool {
        guard let constraints = try? certificate.extensions.basicConstraints else {
            // X.509 v1 roots and intermediates predate the extension.
            return certificate.version == .v1
        }
        if case .isCertificateAuthority = constraints { return true }
        return false
    }
}
