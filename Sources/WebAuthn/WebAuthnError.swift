/// The one error type of the `WebAuthn` library.
///
/// Every failure carries a stable ``code`` (safe to show to clients and to switch on), a
/// developer-facing ``reason`` (for logs; may mention byte offsets or field names, never secrets)
/// and the place it was thrown. Two errors are equal when their codes are equal, so tests and
/// callers compare on the code alone:
///
/// ```swift
/// do { _ = try relyingParty.finishAuthentication(...) }
/// catch let error as WebAuthnError where error == .signatureInvalid { ... }
/// ```
public struct WebAuthnError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable, machine-readable error code (snake_case). New codes may be added; none is renamed.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
    }

    public let code: Code
    /// What went wrong, for the developer reading a log. Not localised, not stable.
    public let reason: String
    public let file: String
    public let line: Int

    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public static func == (lhs: WebAuthnError, rhs: WebAuthnError) -> Bool { lhs.code == rhs.code }

    /// Matches an error against a bare code: `catch let e as WebAuthnError where e == .challengeMismatch`.
    public static func == (lhs: WebAuthnError, rhs: Code) -> Bool { lhs.code == rhs }

    public var description: String { "\(code.rawValue): \(reason) (\(file):\(line))" }
}

extension WebAuthnError.Code {
    // Malformed input: the bytes or JSON could not be read.
    public static let malformedCBOR = Self(rawValue: "malformed_cbor")
    public static let malformedJSON = Self(rawValue: "malformed_json")
    public static let malformedBase64 = Self(rawValue: "malformed_base64")
    public static let malformedClientData = Self(rawValue: "malformed_client_data")
    public static let malformedAuthenticatorData = Self(rawValue: "malformed_authenticator_data")
    public static let malformedAttestationObject = Self(rawValue: "malformed_attestation_object")
    public static let malformedPublicKey = Self(rawValue: "malformed_public_key")
    public static let malformedSignature = Self(rawValue: "malformed_signature")
    public static let malformedCredential = Self(rawValue: "malformed_credential")

    // Ceremony checks (WebAuthn Level 3 §7.1 / §7.2).
    public static let typeMismatch = Self(rawValue: "type_mismatch")
    public static let challengeMismatch = Self(rawValue: "challenge_mismatch")
    public static let originNotAllowed = Self(rawValue: "origin_not_allowed")
    public static let crossOriginNotAllowed = Self(rawValue: "cross_origin_not_allowed")
    public static let topOriginNotAllowed = Self(rawValue: "top_origin_not_allowed")
    public static let rpIDHashMismatch = Self(rawValue: "rp_id_hash_mismatch")
    public static let userNotPresent = Self(rawValue: "user_not_present")
    public static let userNotVerified = Self(rawValue: "user_not_verified")
    public static let invalidBackupFlags = Self(rawValue: "invalid_backup_flags")
    public static let backupEligibilityChanged = Self(rawValue: "backup_eligibility_changed")
    public static let unsupportedAlgorithm = Self(rawValue: "unsupported_algorithm")
    public static let credentialIDMismatch = Self(rawValue: "credential_id_mismatch")
    public static let credentialNotAllowed = Self(rawValue: "credential_not_allowed")
    public static let userHandleMismatch = Self(rawValue: "user_handle_mismatch")
    public static let signatureInvalid = Self(rawValue: "signature_invalid")
    public static let counterRegression = Self(rawValue: "counter_regression")
    public static let credentialIDTooLong = Self(rawValue: "credential_id_too_long")

    // Attestation (§8).
    public static let unsupportedAttestationFormat = Self(rawValue: "unsupported_attestation_format")
    public static let attestationInvalid = Self(rawValue: "attestation_invalid")
    public static let attestationUntrusted = Self(rawValue: "attestation_untrusted")
    public static let attestationNotAllowed = Self(rawValue: "attestation_not_allowed")

    // Configuration of the relying party.
    public static let invalidConfiguration = Self(rawValue: "invalid_configuration")
}

extension WebAuthnError {
    static func malformedCBOR(_ reason: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.malformedCBOR, reason, file: file, line: line)
    }
}
