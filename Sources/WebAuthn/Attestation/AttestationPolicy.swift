import Foundation
import SwiftASN1
import X509

/// How a relying party judges attestation statements (WebAuthn Level 3 §7.1 steps 21–24).
///
/// The default accepts any valid statement (including `none`) without requiring trust: the right
/// setting for consumer passkeys, where attestation conveyance is `none`. Operators who need to
/// know the authenticator model configure ``trustAnchors`` and ``requireTrustedAttestation``.
public struct AttestationPolicy: Sendable {
    /// Root certificates an attestation certificate chain (x5c) must lead to. Empty: statements
    /// are verified, chains are checked link by link, and the result is reported as untrusted.
    public var trustAnchors: [Certificate]
    /// Reject registrations whose attestation does not chain to ``trustAnchors`` (including
    /// `none` and self attestation).
    public var requireTrustedAttestation: Bool
    /// Statement formats accepted; `nil` accepts every format this library verifies.
    public var allowedFormats: Set<String>?
    /// Android SafetyNet: require `ctsProfileMatch` (on by default, as Google recommends).
    public var requireSafetyNetCTSProfileMatch: Bool
    /// Accept attestation statements signed with RS1 (RSASSA-PKCS1-v1_5 with SHA-1, COSE -65535).
    /// On by default: older TPM
    /// firmware behind Windows Hello still signs this way, and py_webauthn, SimpleWebAuthn,
    /// java-webauthn-server and go-webauthn register such credentials. The verdict says so
    /// (``AttestationVerdict/usedSHA1``); turn this off to refuse them (`unsupported_algorithm`).
    /// This is about the statement only: a credential key using RS1 is accepted only when RS1 is
    /// in the relying party's algorithms.
    public var allowSHA1Attestation: Bool
    /// Authenticator models (AAGUIDs) allowed to register; `nil` allows every model. An AAGUID is
    /// only as trustworthy as the attestation that carries it: with `none` attestation any client
    /// can claim any AAGUID, so pair a list with ``requireTrustedAttestation``.
    public var allowedAAGUIDs: Set<AAGUID>?
    /// Authenticator models refused at registration.
    public var deniedAAGUIDs: Set<AAGUID>
    /// Refuse backup-eligible credentials (synced passkeys), for relying parties that need the
    /// key to stay on one device (§6.1.3, flag BE).
    public var requireDeviceBound: Bool
    /// A verified FIDO metadata BLOB (MDS3): refuses authenticators reported compromised or
    /// revoked, and adds each entry's attestation roots as anchors for its AAGUID
    /// (``trustAnchors(for:)``). `nil`: no metadata.
    public var metadata: FIDOMetadata? = nil

    /// Makes a policy. The defaults are the consumer-passkey setting: no anchors, trust not required, every format
    /// and authenticator accepted, SafetyNet `ctsProfileMatch` required, SHA-1 statements accepted and flagged.
    public init(
        trustAnchors: [Certificate] = [], requireTrustedAttestation: Bool = false, allowedFormats: Set<String>? = nil,
        requireSafetyNetCTSProfileMatch: Bool = true, allowSHA1Attestation: Bool = true, allowedAAGUIDs: Set<AAGUID>? = nil,
        deniedAAGUIDs: Set<AAGUID> = [], requireDeviceBound: Bool = false
    ) {
        self.trustAnchors = trustAnchors
        self.requireTrustedAttestation = requireTrustedAttestation
        self.allowedFormats = allowedFormats
        self.requireSafetyNetCTSProfileMatch = requireSafetyNetCTSProfileMatch
        self.allowSHA1Attestation = allowSHA1Attestation
        self.allowedAAGUIDs = allowedAAGUIDs
        self.deniedAAGUIDs = deniedAAGUIDs
        self.requireDeviceBound = requireDeviceBound
    }

    /// Parses PEM text holding one or more certificates.
    public static func certificates(pem: String) throws(WebAuthnError) -> [Certificate] {
        do {
            let documents = try PEMDocument.parseMultiple(pemString: pem)
            return try documents.map { try Certificate(pemDocument: $0) }
        } catch {
            throw WebAuthnError(.invalidConfiguration, "trust anchor PEM could not be read: \(error)")
        }
    }
}

/// The attestation type a statement established (§6.5.3).
public enum AttestationType: String, Sendable, Codable {
    /// No attestation: the `none` format (§6.5.3).
    case none
    /// Self attestation: `packed` without x5c, signed with the credential private key itself (§6.5.3).
    case `self` = "self"
    /// Basic attestation: signed by an attestation key whose certificate is in x5c (`packed` with x5c, `fido-u2f`,
    /// `android-key`, `android-safetynet`) (§6.5.3).
    case basic
    /// Attestation CA: a TPM attestation identity key certified by a CA (`tpm`) (§6.5.3). Encoded `attca`.
    case attCA = "attca"
    /// Anonymization CA: a per-credential certificate from an anonymizing CA (`apple`) (§6.5.3). Encoded `anonca`.
    case anonCA = "anonca"
}

/// What the attestation check concluded.
public struct AttestationVerdict: Sendable {
    /// The statement format identifier (`none`, `packed`, `tpm`, …).
    public let format: String
    /// The attestation type the statement established (§6.5.3).
    public let type: AttestationType
    /// The attestation certificate chain as sent (leaf first); empty for none/self.
    public let certificates: [Certificate]
    /// Whether the chain leads to one of the configured trust anchors.
    public let trusted: Bool
    /// Why the chain does not lead to an anchor, when anchors were configured and it does not.
    public let untrustedReason: String?
    /// The statement is signed with RS1, SHA-1 (see ``AttestationPolicy/allowSHA1Attestation``).
    public let usedSHA1: Bool
}
