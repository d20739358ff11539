/// The authenticator extension outputs in authenticator data (§6.1 `extensions`, present when ED
/// is set): a CBOR map keyed by extension identifier. The outputs this library knows are typed and
/// checked; others are ignored (§7.1 step 28 / §7.2 step 23 of the editor's draft, anchors
/// `reg-ceremony-verify-extension-outputs` / `authn-ceremony-verify-extension-outputs`: a relying
/// party must be prepared for extensions it did not ask for).
public struct AuthenticatorExtensionOutputs: Sendable, Hashable {
    /// `credProtect` (CTAP 2.1 §12.1): the protection level the authenticator applied, 1 to 3.
    public var credProtect: CredentialProtectionPolicy?
    /// `minPinLength` (CTAP 2.1 §12.4): the authenticator's minimum PIN length.
    public var minPinLength: Int?
    /// `hmac-secret` at registration (CTAP 2.1 §12.5): the credential supports the PRF.
    public var hmacSecret: Bool?
    /// `hmac-secret` in an assertion: the PRF outputs, encrypted for the client (32 or 64 bytes,
    /// plus a 16-byte IV under PIN/UV protocol 2). Opaque to the relying party.
    public var hmacSecretOutput: [UInt8]?
    /// `credBlob` at registration (CTAP 2.1 §12.2): whether the authenticator stored the blob.
    public var credBlobStored: Bool?

    /// No outputs.
    public init() {}

    /// Reads the extension map of authenticator data. `registration` (AT set) decides the shape of
    /// `hmac-secret` and `credBlob`. Throws `malformed_authenticator_data` when the map has a key
    /// that is not text, or a known output of the wrong type or range.
    public init(map: CBORValue, registration: Bool) throws(WebAuthnError) {
        guard case .map(let entries) = map else {
            throw WebAuthnError(.malformedAuthenticatorData, "extensions are not a CBOR map")
        }
        for entry in entries {
            // §9: extension identifiers are text strings.
            guard case .text(let identifier) = entry.key else {
                throw WebAuthnError(.malformedAuthenticatorData, "an extension identifier is not a text string")
            }
            let value = entry.value
            switch identifier {
            case "credProtect":
                guard let level = value.intValue, let policy = CredentialProtectionPolicy(level: Int(level)) else {
                    throw WebAuthnError(.malformedAuthenticatorData, "extensions.credProtect is not 1, 2 or 3")
                }
                credProtect = policy
            case "minPinLength":
                // CTAP 2.1 §6.4: a PIN is 4 to 63 bytes; the output is an unsigned integer.
                guard case .unsigned(let length) = value, length <= 255 else {
                    throw WebAuthnError(.malformedAuthenticatorData, "extensions.minPinLength is not an unsigned integer up to 255")
                }
                minPinLength = Int(length)
            case "hmac-secret":
                if registration {
                    guard case .bool(let flag) = value else {
                        throw WebAuthnError(.malformedAuthenticatorData, "extensions.hmac-secret is not a boolean at registration")
                    }
                    hmacSecret = flag
                } else {
                    guard case .bytes(let output) = value, [32, 48, 64, 80].contains(output.count) else {
                        throw WebAuthnError(.malformedAuthenticatorData, "extensions.hmac-secret is not 32, 48, 64 or 80 bytes")
                    }
                    hmacSecretOutput = output
                }
            case "credBlob":
                if registration {
                    guard case .bool(let flag) = value else {
                        throw WebAuthnError(.malformedAuthenticatorData, "extensions.credBlob is not a boolean at registration")
                    }
                    credBlobStored = flag
                } else {
                    guard case .bytes = value else {
                        throw WebAuthnError(.malformedAuthenticatorData, "extensions.credBlob is not a byte string")
                    }
                }
            default:
                continue
            }
        }
    }
}
