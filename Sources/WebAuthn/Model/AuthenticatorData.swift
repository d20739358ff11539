/// Authenticator data (WebAuthn Level 3 §6.1), parsed strictly.
///
/// Byte layout:
/// ```
/// rpIdHash (32) | flags (1) | signCount (4, big-endian)
///   [ attestedCredentialData: aaguid (16) | credentialIdLength (2) | credentialId (L) | credentialPublicKey (COSE_Key, CBOR) ]  if AT
///   [ extensions (CBOR map) ]                                                                                          if ED
/// ```
/// Nothing may follow; a COSE key or extension map must be definite-length CBOR (CTAP2 §6).
public struct AuthenticatorData: Sendable {
    /// The flags byte (§6.1, "flags").
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
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

    public let rpIDHash: [UInt8]
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredentialData: AttestedCredentialData?
    /// The authenticator extension outputs, when ED is set.
    public let extensions: CBORValue?
    /// The exact bytes this was parsed from (signatures are over these bytes).
    public let bytes: [UInt8]

    public var userPresent: Bool { flags.contains(.userPresent) }
    public var userVerified: Bool { flags.contains(.userVerified) }
    public var backupEligible: Bool { flags.contains(.backupEligible) }
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
        case (true, false, _):
            throw WebAuthnError(.malformedAuthenticatorData, "ED flag set but no extension data follows")
        case (false, true, .strict):
            throw WebAuthnError(.malformedAuthenticatorData, "\(reader.remaining) bytes follow but neither AT nor ED explains them")
        case (false, false, _):
            extensions = nil
        }
        try reader.finish("authenticator data")
    }
}

/// Attested credential data (§6.5.1): the new credential, present in registration responses.
public struct AttestedCredentialData: Sendable {
    public let aaguid: AAGUID
    public let credentialID: [UInt8]
    public let publicKey: CredentialPublicKey
}
