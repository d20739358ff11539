import Foundation
import X509

/// One `MetadataBLOBPayloadEntry` (MDS3 §3.1.1) of an authenticator model with an AAGUID: the
/// parts of it a relying party uses.
public struct MetadataEntry: Sendable {
    /// `aaguid`: the authenticator model.
    public let aaguid: AAGUID
    /// `metadataStatement.description`: the model's name, e.g. "YubiKey 5 Series with NFC".
    public let description: String?
    /// `metadataStatement.icon`: a `data:image/…` URL of the model's icon (others are dropped).
    public let icon: String?
    /// `metadataStatement.attestationRootCertificates`: the roots its attestation chains lead to.
    public let attestationRootCertificates: [Certificate]
    /// `statusReports`: the certification and security history of the model, as listed.
    public let statusReports: [StatusReport]
    /// `timeOfLastStatusChange` (`YYYY-MM-DD`), as the BLOB spells it.
    public let timeOfLastStatusChange: String?

    /// The status report in force: the one with the latest `effectiveDate` (a report without a
    /// date counts as the earliest; of equal dates, the one listed last).
    public var latestStatus: StatusReport? {
        var latest: StatusReport?
        for report in statusReports where latest == nil || (report.effectiveDate ?? .distantPast) >= (latest?.effectiveDate ?? .distantPast)
        {
            latest = report
        }
        return latest
    }

    /// The status that makes a relying party refuse new registrations of this model at `time`:
    /// the latest report in effect then (`effectiveDate` not after `time`; undated reports are in
    /// effect) whose status is one of ``AuthenticatorStatus/refusing``; `nil` when there is none.
    ///
    /// Refusing statuses are sticky: a later `UPDATE_AVAILABLE` or a new certification does not
    /// lift a compromise or a revocation, since the devices already in people's hands keep the
    /// flaw (a fixed model ships with a new AAGUID). A report dated in the future is not in effect yet.
    public func refusal(at time: Date = Date()) -> StatusReport? {
        var found: StatusReport?
        for report in statusReports where report.status.refusesRegistration && (report.effectiveDate ?? .distantPast) <= time {
            if found == nil || (report.effectiveDate ?? .distantPast) >= (found?.effectiveDate ?? .distantPast) { found = report }
        }
        return found
    }

    /// ``refusal(at:)`` now, as a status.
    public var refusal: AuthenticatorStatus? { refusal(at: Date())?.status }

    /// Makes an entry (tests and callers that assemble metadata themselves).
    public init(
        aaguid: AAGUID, description: String? = nil, icon: String? = nil, attestationRootCertificates: [Certificate] = [],
        statusReports: [StatusReport] = [], timeOfLastStatusChange: String? = nil
    ) {
        self.aaguid = aaguid
        self.description = description
        self.icon = icon
        self.attestationRootCertificates = attestationRootCertificates
        self.statusReports = statusReports
        self.timeOfLastStatusChange = timeOfLastStatusChange
    }
}

/// A `StatusReport` (MDS3 §3.1.3): one event in an authenticator model's history.
public struct StatusReport: Sendable, Hashable {
    /// `status`.
    public let status: AuthenticatorStatus
    /// `effectiveDate` (00:00 UTC of that day), when given.
    public let effectiveDate: Date?

    public init(status: AuthenticatorStatus, effectiveDate: Date? = nil) {
        self.status = status
        self.effectiveDate = effectiveDate
    }
}

/// `AuthenticatorStatus` (MDS3 §3.1.4). Unknown values are kept as they are spelled.
public struct AuthenticatorStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The status as the BLOB spells it, e.g. `FIDO_CERTIFIED_L1`.
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// "The FIDO Alliance has determined that this authenticator should not be trusted for any reason."
    public static let revoked = Self(rawValue: "REVOKED")
    /// "Indicates that malware is able to bypass the user verification."
    public static let userVerificationBypass = Self(rawValue: "USER_VERIFICATION_BYPASS")
    /// "Indicates that an attestation key for this authenticator is known to be compromised."
    public static let attestationKeyCompromise = Self(rawValue: "ATTESTATION_KEY_COMPROMISE")
    /// "This authenticator has identified weaknesses that allow registered keys to be compromised
    /// and should not be trusted" (remotely).
    public static let userKeyRemoteCompromise = Self(rawValue: "USER_KEY_REMOTE_COMPROMISE")
    /// "This authenticator has known weaknesses in its key protection mechanism(s) that allow user
    /// keys to be extracted by an adversary in physical possession of the device."
    public static let userKeyPhysicalCompromise = Self(rawValue: "USER_KEY_PHYSICAL_COMPROMISE")

    /// The statuses passkeyd refuses registrations for (MDS3 §3.2 step 7c leaves the choice to
    /// the relying party; these are the ones that say the authenticator cannot be trusted).
    public static let refusing: Set<AuthenticatorStatus> = [
        .revoked, .userVerificationBypass, .attestationKeyCompromise, .userKeyRemoteCompromise, .userKeyPhysicalCompromise,
    ]

    /// Whether a model whose latest report has this status is refused.
    public var refusesRegistration: Bool { Self.refusing.contains(self) }
}
