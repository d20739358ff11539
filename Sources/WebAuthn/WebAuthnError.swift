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
        /// The code as clients and logs see it, e.g. `challenge_mismatch`.
        public let rawValue: String
        /// Makes a code from its snake_case string; the named constants below are the codes this library throws.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw code string.
        public var description: String { rawValue }
    }

    /// The stable code; switch on it, or compare the error with `==` against a code.
    public let code: Code
    /// What went wrong, for the developer reading a log. Not localised, not stable.
    public let reason: String
    /// The `#fileID` of the throw site (`WebAuthn/AuthenticatorData.swift`), for logs.
    public let file: String
    /// The line of the throw site, for logs.
    public let line: Int

    /// Makes an error from a code and a developer-facing reason; `file` and `line` default to the call site.
    public init(_ code: Code, _ reason: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.reason = reason
        self.file = file
        self.line = line
    }

    public static func == (lhs: WebAuthnError, rhs: WebAuthnError) -> Bool { lhs.code == rhs.code }

    /// Matches an error against a bare code: `catch let e as WebAuthnError where e == .challengeMismatch`.
    public static func == (lhs: WebAuthnError, rhs: Code) -> Bool { lhs.code == rhs }

    /// One line for logs: `code: reason (file:line)`.
    public var description: String { "\(code.rawValue): \(reason) (\(file):\(line))" }
}

extension WebAuthnError.Code {
    // Malformed input: the bytes or JSON could not be read.
    /// Thrown by ``CBORReader``: truncated or trailing bytes, a limit exceeded, a forbidden indefinite length, a duplicate
    /// map key, invalid UTF-8 or a reserved encoding. Parsers of WebAuthn structures rethrow it under their own code.
    public static let malformedCBOR = Self(rawValue: "malformed_cbor")
    /// JSON that is not well formed (``JSONReader``), or a member that is missing, of the wrong type, or binary but not
    /// base64url or base64 (``JSONObject``, ``JSONEdge``).
    public static let malformedJSON = Self(rawValue: "malformed_json")
    /// Reserved; not thrown by this version. A binary JSON member that does not decode is `malformed_json`; a
    /// clientData challenge that is not unpadded base64url is `malformed_client_data`.
    public static let malformedBase64 = Self(rawValue: "malformed_base64")
    /// clientDataJSON is over 64 KiB or not the JSON object of §5.8.1 (a member missing or mistyped), its `challenge`
    /// is not unpadded base64url, or its `tokenBinding.status` is not a valid status.
    public static let malformedClientData = Self(rawValue: "malformed_client_data")
    /// Authenticator data breaks the §6.1 layout: truncated, trailing bytes, a zero-length credential ID, an ED flag that
    /// disagrees with the data, or extensions that are not one CBOR map. Also: registration data without AT.
    public static let malformedAuthenticatorData = Self(rawValue: "malformed_authenticator_data")
    /// The attestation object (§6.5.4) is empty, not CBOR, not a map, or lacks a text `fmt`, a map `attStmt` or a
    /// byte-string `authData`.
    public static let malformedAttestationObject = Self(rawValue: "malformed_attestation_object")
    /// The credential public key is not a usable COSE_Key (RFC 9052 §7): not CBOR, not a map, a parameter missing or
    /// mistyped, wrong coordinate or modulus sizes, or not a valid public key for its algorithm.
    public static let malformedPublicKey = Self(rawValue: "malformed_public_key")
    /// Reserved; not thrown by this version. A signature that cannot be decoded (bad ECDSA DER, wrong length) is
    /// `signature_invalid`.
    public static let malformedSignature = Self(rawValue: "malformed_signature")
    /// The credential's `type` is not `public-key` (§7.1 step 3 / §7.2 step 3).
    public static let malformedCredential = Self(rawValue: "malformed_credential")

    // Ceremony checks (WebAuthn Level 3 §7.1 / §7.2).
    /// `clientData.type` is not `webauthn.create` (registration) or `webauthn.get` (authentication) (§7.1 step 7 /
    /// §7.2 step 11).
    public static let typeMismatch = Self(rawValue: "type_mismatch")
    /// `clientData.challenge` is not the challenge issued for this ceremony (§7.1 step 8 / §7.2 step 12).
    public static let challengeMismatch = Self(rawValue: "challenge_mismatch")
    /// `clientData.origin` is not one of the configured origins (§7.1 step 9 / §7.2 step 13).
    public static let originNotAllowed = Self(rawValue: "origin_not_allowed")
    /// `clientData.crossOrigin` is `true` but the relying party does not allow cross-origin iframes (§7.1 step 10 /
    /// §7.2 step 14).
    public static let crossOriginNotAllowed = Self(rawValue: "cross_origin_not_allowed")
    /// `clientData.topOrigin` is present but cross-origin use is off or it is not a configured top-level origin.
    public static let topOriginNotAllowed = Self(rawValue: "top_origin_not_allowed")
    /// `rpIdHash` in authenticator data is not SHA-256 of the configured RP ID (§7.1 step 13 / §7.2 step 15).
    public static let rpIDHashMismatch = Self(rawValue: "rp_id_hash_mismatch")
    /// The UP flag is clear while presence is required (§7.1 step 14 / §7.2 step 16); a conditional create skips the check.
    public static let userNotPresent = Self(rawValue: "user_not_present")
    /// User verification was required for the ceremony but the UV flag is clear (§7.1 step 15 / §7.2 step 17).
    public static let userNotVerified = Self(rawValue: "user_not_verified")
    /// Authenticator data has BS (backed up) set while BE (backup eligible) is clear (§6.1.3); thrown while parsing.
    public static let invalidBackupFlags = Self(rawValue: "invalid_backup_flags")
    /// The BE flag differs from the value recorded for the credential at registration (§7.2 step 19).
    public static let backupEligibilityChanged = Self(rawValue: "backup_eligibility_changed")
    /// A COSE key type, curve or algorithm this library does not verify; a credential algorithm not in the configured
    /// algorithms (§7.1 step 19); or an RS1 (SHA-1) attestation statement while ``AttestationPolicy/allowSHA1Attestation`` is off.
    public static let unsupportedAlgorithm = Self(rawValue: "unsupported_algorithm")
    /// `id` does not encode `rawId`, `rawId` is not the attested credential ID, or the stored credential passed in
    /// is not the one that signed.
    public static let credentialIDMismatch = Self(rawValue: "credential_id_mismatch")
    /// The asserting credential is not in the ceremony's `allowCredentials` (§7.2 step 5).
    public static let credentialNotAllowed = Self(rawValue: "credential_not_allowed")
    /// `response.userHandle` names another account than the credential's, or is absent where a discoverable sign-in
    /// needs it (§7.2 step 6).
    public static let userHandleMismatch = Self(rawValue: "user_handle_mismatch")
    /// The signature does not verify with the credential public key (§7.2 step 22), or cannot be decoded.
    public static let signatureInvalid = Self(rawValue: "signature_invalid")
    /// The signature counter did not increase while one of the counters is non-zero (§7.2 step 23) and the policy is
    /// ``SignCountPolicy/reject``.
    public static let counterRegression = Self(rawValue: "counter_regression")
    /// Attested credential data declares a credential ID over ``AuthenticatorData/maxCredentialIDLength`` (1023)
    /// bytes (§6.5.1).
    public static let credentialIDTooLong = Self(rawValue: "credential_id_too_long")

    // Attestation (§8).
    /// `fmt` is not a format this library verifies (§7.1 step 21): `none`, `packed`, `tpm`, `android-key`,
    /// `android-safetynet`, `fido-u2f` and `apple` are.
    public static let unsupportedAttestationFormat = Self(rawValue: "unsupported_attestation_format")
    /// The attestation statement fails its format's verification procedure (§8), or its x5c chain is malformed: a
    /// link not signed by the next certificate, a non-CA issuer, an unknown critical extension.
    public static let attestationInvalid = Self(rawValue: "attestation_invalid")
    /// Trust anchors are configured and an x5c certificate is outside its validity period, or
    /// ``AttestationPolicy/requireTrustedAttestation`` is set and the chain does not lead to an anchor (§7.1 steps 23–24).
    public static let attestationUntrusted = Self(rawValue: "attestation_untrusted")
    /// The statement's format is not in ``AttestationPolicy/allowedFormats``.
    public static let attestationNotAllowed = Self(rawValue: "attestation_not_allowed")
    /// The relying party's authenticator policy refuses this authenticator at registration: its AAGUID is not in
    /// ``AttestationPolicy/allowedAAGUIDs`` or is in ``AttestationPolicy/deniedAAGUIDs``, the credential is
    /// backup eligible under ``AttestationPolicy/requireDeviceBound``, or FIDO metadata reports the authenticator
    /// compromised or revoked.
    public static let authenticatorNotAllowed = Self(rawValue: "authenticator_not_allowed")

    // Extensions (§9, §10; checked in the editor's draft's §7.1 step 28 "reg-ceremony-verify-extension-outputs"
    // and §7.2 step 23 "authn-ceremony-verify-extension-outputs").
    /// `clientExtensionResults` is not an object, is over ``ClientExtensionOutputs/maxBytes`` or
    /// ``ClientExtensionOutputs/maxDepth``, or a member this library knows (`credProps`, `prf`, `largeBlob`) has the
    /// wrong type. Unknown members are ignored.
    public static let malformedExtensionResults = Self(rawValue: "malformed_extension_results")
    /// `clientExtensionResults.prf.results` was posted: the PRF output is the client's secret (§10.1.4) and a relying
    /// party never receives it. Remove it before sending the response.
    public static let prfOutputPosted = Self(rawValue: "prf_output_posted")
    /// The ceremony required a credProtect level (CTAP 2.1 §12.1) of this credential and the authenticator data does
    /// not report at least that level.
    public static let credentialProtectionNotApplied = Self(rawValue: "credential_protection_not_applied")
    /// The ceremony asked for `largeBlob` with `support: "required"` (§10.1.5) and the client did not report
    /// `largeBlob.supported: true`.
    public static let largeBlobUnsupported = Self(rawValue: "large_blob_unsupported")

    // FIDO Metadata Service (MDS3).
    /// A FIDO metadata BLOB (MDS3 §3.2) is refused: too large, not a compact JWS, a header without a usable `x5c`
    /// (an `x5u` alone cannot be fetched offline), an unsupported `alg`, a chain that does not lead to a configured MDS
    /// root at the verification time, a signature that does not verify, or a payload that is not the MDS3 shape.
    public static let metadataInvalid = Self(rawValue: "metadata_invalid")

    // Configuration of the relying party.
    /// The relying party's configuration is unusable (RP ID, origins, algorithms, timeout) or trust-anchor PEM
    /// cannot be read. A server fault, never the client's.
    public static let invalidConfiguration = Self(rawValue: "invalid_configuration")
}

extension WebAuthnError {
    static func malformedCBOR(_ reason: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.malformedCBOR, reason, file: file, line: line)
    }
}
