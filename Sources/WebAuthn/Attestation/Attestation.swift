import Foundation

/// The attestation step of registration (WebAuthn Level 3 §7.1 steps 21–24): dispatch on the
/// format, verify the statement, then decide trust.
enum Attestation {
    static func verify(_ input: AttestationInput) async throws(WebAuthnError) -> AttestationVerdict {
        // §7.1 step 21: Determine the attestation statement format by performing a USASCII
        // case-sensitive match on fmt against the set of supported WebAuthn Attestation Statement
        // Format Identifier values.
        if let allowed = input.policy.allowedFormats, !allowed.contains(input.format) {
            throw WebAuthnError(.attestationNotAllowed, "attestation format \(input.format) is not allowed by policy")
        }
        // MDS3 §3.2 step 7c: an authenticator model the FIDO metadata reports revoked or compromised is refused.
        try input.policy.checkMetadataStatus(of: input.credential.aaguid, at: input.verificationTime)
        // §7.1 step 22: Verify that attStmt is a correct attestation statement, conveying a valid
        // attestation signature, by using the attestation statement format fmt's verification
        // procedure given attStmt, authData and hash.
        let result: StatementResult
        switch input.format {
        case "none": result = try NoneAttestation.verify(input)
        case "packed": result = try PackedAttestation.verify(input)
        case "fido-u2f": result = try FIDOU2FAttestation.verify(input)
        case "apple": result = try AppleAttestation.verify(input)
        case "android-key": result = try AndroidKeyAttestation.verify(input)
        case "android-safetynet": result = try AndroidSafetyNetAttestation.verify(input)
        case "tpm": result = try TPMAttestation.verify(input)
        default:
            throw WebAuthnError(.unsupportedAttestationFormat, "attestation format \"\(input.format)\" is not supported")
        }
        // §7.1 step 23: If validation is successful, obtain a list of acceptable trust anchors
        // for that attestation type and statement format; assess the attestation trustworthiness
        // using the outputs of the verification procedure: for basic/attCA/anonCA, the x5c chain
        // must lead to an acceptable root certificate.
        // A certificate signed with SHA-1 counts like an RS1 statement (a chosen-prefix
        // collision can forge one): flagged, or refused under a strict policy.
        if result.certificates.contains(where: { $0.signatureAlgorithm == .sha1WithRSAEncryption }) {
            try input.noteSHA1("has a certificate signed with sha1WithRSAEncryption")
        }
        var chain = CertificateChain.Outcome(trusted: false, failure: nil)
        if !result.certificates.isEmpty {
            let anchors = input.policy.trustAnchors(for: input.credential.aaguid, attestationCertificate: result.certificates.first)
            chain = try await CertificateChain.validate(
                result.certificates, anchors: anchors.anchors, at: input.verificationTime, format: input.format, notes: input.notes)
            if anchors.withheld && !chain.trusted {
                chain.failure =
                    "the FIDO metadata roots for \(input.credential.aaguid) vouch only for attestation certificates that name the model "
                    + "(id-fido-gen-ce-aaguid), and this one does not" + (chain.failure.map { "; \($0)" } ?? "")
            }
        }
        // §7.1 step 24: If the attestation statement is not trustworthy under the relying party's
        // policy, fail the registration ceremony.
        if input.policy.requireTrustedAttestation && !chain.trusted {
            let why = chain.failure.map { ": \($0)" } ?? ""
            throw WebAuthnError(
                .attestationUntrusted,
                "\(input.format) attestation (\(result.type.rawValue)) does not chain to a configured trust anchor\(why)")
        }
        try AuthenticatorPolicy.check(input)
        return AttestationVerdict(
            format: input.format, type: result.type, certificates: result.certificates, trusted: chain.trusted,
            untrustedReason: chain.failure, usedSHA1: input.notes.usedSHA1)
    }
}

/// The relying party's choice of authenticators (after the statement is verified, so a trusted
/// attestation stands behind the AAGUID when the policy requires one).
enum AuthenticatorPolicy {
    static func check(_ input: AttestationInput) throws(WebAuthnError) {
        let policy = input.policy
        let aaguid = input.credential.aaguid
        // Named only when refusing (a registration without a policy reads no name table).
        var name: String { aaguid.providerName.map { "\($0) (\(aaguid))" } ?? "AAGUID \(aaguid)" }
        if let allowed = policy.allowedAAGUIDs, !allowed.contains(aaguid) {
            throw WebAuthnError(.authenticatorNotAllowed, "\(name) is not in allowedAAGUIDs")
        }
        if policy.deniedAAGUIDs.contains(aaguid) {
            throw WebAuthnError(.authenticatorNotAllowed, "\(name) is in deniedAAGUIDs")
        }
        // §6.1.3: BE (backup eligibility) set means the credential may be synced to other devices.
        if policy.requireDeviceBound && input.authenticatorData.backupEligible {
            throw WebAuthnError(.authenticatorNotAllowed, "the credential is backup eligible (a synced passkey); requireDeviceBound is on")
        }
    }
}
