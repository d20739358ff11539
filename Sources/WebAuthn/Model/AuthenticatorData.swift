/// Authenticator data (WebAuthn Level 3 §6.1), parsed strictly.
///
/// Byte layout:
/// ```
/// rpIdHash (32) | flags (1) | signCount (4, big-endian)
///   [ attestedCredentialData: aaguid (16) | credentialIdLength (2) | credentialId (L) | credentialPublicKey (COSE_Key, CBOR) ]  if AT
///   [ extensions (CBOR map) ]                                                                                          if ED
/// ```
/// Nothing may follow; a COSE key or extension map must be definite-length CBOR (CTAP2 §6). The
/// extension map's known outputs are checked too (``AuthenticatorExtensionOutputs``).
public struct AuthenticatorData: Sendable {
    /// The flags byte (§6.1, "flags").
    public struct Flags: OptionSet, Sendable, Hashable {
        /// The flags byte as read from authenticator data.
        public let rawValue: UInt8
        /// Wraps a flags byte; reserved bits (1 and 5) are kept as they are.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Bit 0: User Present.
        public static let userPresent = Flags(rawValue: 1 << 0)
        /// Bit 2: User Verified.
        public static let userVerified = Flags(rawValue: 1 << 2)
        /// Bit 3: Backup Eligibility (the credential may be synced: a multi-device passkey).
        public static let backupEligible = Flags(rawValue: 1 << 3)
        /// Bit 4: Backup State (the credential is currently backed up / synced).
        public static let backedUp = Flags(rawValue: 1 << 4)
        /// Bit 6: Attested credential data included.
        public static let attestedCredentialData = Flags(rawValue: 1 << 6)
        /// Bit 7: Extension data included.
        public static let extensionData = Flags(rawValue: 1 << 7)
    }

    /// The largest credential ID WebAuthn allows (§6.1, credentialIdLength: at most 1023 bytes).
    public static let maxCredentialIDLength = 1023

    /// The RP ID hash, `rpIdHash`: SHA-256 of the RP ID the credential is scoped to (32 bytes, §6.1).
    public let rpIDHash: [UInt8]
    /// The flags byte, `flags` (§6.1).
    public let flags: Flags
    /// The signature counter, `signCount` (§6.1, §6.1.1; 4 bytes big-endian). 0 when the authenticator keeps no
    /// counter, as synced passkeys usually do.
    public let signCount: UInt32
    /// The attested credential data (§6.5.1), present exactly when the AT flag is set; `nil` in assertions.
    public let attestedCredentialData: AttestedCredentialData?
    /// The authenticator extension outputs, when ED is set: the CBOR map as read.
    public let extensions: CBORValue?
    /// The outputs of ``extensions`` this library knows, typed and checked while parsing (empty
    /// when ED is clear).
    public let extensionOutputs: AuthenticatorExtensionOutputs
    /// The exact bytes this was parsed from (signatures are over these bytes).
    public let bytes: [UInt8]

    /// UP: the authenticator tested that a user was present (§6.1).
    public var userPresent: Bool { flags.contains(.userPresent) }
    /// UV: the authenticator verified the user, by PIN, password or biometrics (§6.1).
    public var userVerified: Bool { flags.contains(.userVerified) }
    /// BE: the credential may be backed up or synced, a multi-device passkey (§6.1.3).
    public var backupEligible: Bool { flags.contains(.backupEligible) }
    /// BS: the credential is currently backed up (§6.1.3).
    public var backedUp: Bool { flags.contains(.backedUp) }

    /// How to read a flags byte whose ED bit disagrees with the data that follows.
    public enum ExtensionFlagHandling: Sendable {
        /// ED must be set exactly when an extension map follows (the specification).
        case strict
        /// An extension map may follow with ED clear. Only for a registration whose client is
        /// known to rewrite the flags after signing (see `unsafeToleratesRewrittenFlags`).
        case unsafeAllowExtensionsWithoutFlag
    }

    /// Parses authenticator data. Throws `malformed_authenticator_data` (or
    /// `malformed_public_key` for a bad COSE key) on any deviation from the layout above.
    public init(bytes: [UInt8], extensionFlagHandling: ExtensionFlagHandling = .strict) throws(WebAuthnError) {
        var reader = ByteReader(bytes, errorCode: .malformedAuthenticatorData)
        self.bytes = bytes
        rpIDHash = try reader.readBytes(32, "rpIdHash")
        flags = Flags(rawValue: try reader.readByte("flags"))
        signCount = try reader.readUInt32("signCount")

        // §6.3.3 (BE/BS): a credential that is not backup eligible cannot be backed up.
        if flags.contains(.backedUp) && !flags.contains(.backupEligible) {
            throw WebAuthnError(.invalidBackupFlags, "BS is set while BE is not")
        }

        if flags.contains(.attestedCredentialData) {
            // §6.5.1 attested credential data.
            let aaguid = try reader.readBytes(16, "aaguid")
            let idLength = Int(try reader.readUInt16("credentialIdLength"))
            // §6.5.1: a credential ID has at least one byte; an empty one could never be named
            // again (allowCredentials, deletion).
            guard idLength >= 1 else {
                throw WebAuthnError(.malformedAuthenticatorData, "credentialIdLength is 0")
            }
            guard idLength <= Self.maxCredentialIDLength else {
                throw WebAuthnError(.credentialIDTooLong, "credentialIdLength \(idLength) exceeds \(Self.maxCredentialIDLength)")
            }
            let credentialID = try reader.readBytes(idLength, "credentialId")
            let keyBytes = reader.peekRemaining()
            let decoded: (value: CBORValue, length: Int)
            do {
                decoded = try CBORReader.decodePrefix(keyBytes)
            } catch {
                throw WebAuthnError(.malformedPublicKey, "credentialPublicKey is not valid CBOR: \(error.reason)")
            }
            let coseBytes = Array(keyBytes[0..<decoded.length])
            let publicKey = try CredentialPublicKey(cose: decoded.value, bytes: coseBytes)
            try reader.skip(decoded.length, "credentialPublicKey")
            attestedCredentialData = AttestedCredentialData(aaguid: AAGUID(bytes: aaguid), credentialID: credentialID, publicKey: publicKey)
        } else {
            attestedCredentialData = nil
        }

        let extensionsFollow = !reader.isAtEnd
        switch (flags.contains(.extensionData), extensionsFollow, extensionFlagHandling) {
        case (true, true, _), (false, true, .unsafeAllowExtensionsWithoutFlag):
            let rest = try reader.readBytes(reader.remaining, "extensions")
            let value: CBORValue
            do {
                value = try CBORReader.decode(rest)
            } catch {
                throw WebAuthnError(.malformedAuthenticatorData, "extensions are not one CBOR map: \(error.reason)")
            }
            guard case .map = value else {
                throw WebAuthnError(.malformedAuthenticatorData, "extensions are not a CBOR map")
            }
            extensions = value
            extensionOutputs = try AuthenticatorExtensionOutputs(map: value, registration: attestedCredentialData != nil)
        case (true, false, _):
            throw WebAuthnError(.malformedAuthenticatorData, "ED flag set but no extension data follows")
        case (false, true, .strict):
            throw WebAuthnError(.malformedAuthenticatorData, "\(reader.remaining) bytes follow but neither AT nor ED explains them")
        case (false, false, _):
            extensions = nil
            extensionOutputs = AuthenticatorExtensionOutputs()
        }
        try reader.finish("authenticator data")
    }
}

/// Attested credential data (§6.5.1): the new credential, present in registration responses.
public struct AttestedCredentialData: Sendable {
    /// The authenticator model or passkey provider, `aaguid`; all zeros when not disclosed.
    public let aaguid: AAGUID
    /// The credential ID, `credentialId`, as bytes (1 to 1023 of them); the response's `rawId` must equal it.
    public let credentialID: [UInt8]
    /// The credential public key, `credentialPublicKey`, parsed from its COSE_Key encoding.
    public let publicKey: CredentialPublicKey
}
