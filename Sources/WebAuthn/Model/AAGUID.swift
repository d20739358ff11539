/// An Authenticator Attestation GUID (§6.5.1): 16 bytes naming the authenticator model or passkey
/// provider. All zeros means "not disclosed".
public struct AAGUID: Sendable, Hashable, CustomStringConvertible {
    /// The AAGUID bytes as they appear in attested credential data: 16 when read by ``AuthenticatorData``.
    public let bytes: [UInt8]

    /// Wraps AAGUID bytes (§6.5.1). The count is not checked; ``description`` expects 16.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Parses the hexadecimal form: 32 hex digits (either case) and 4 dashes, 36 ASCII
    /// characters in all (`8-4-4-4-12` canonically). Read byte by byte: a passkey's AAGUID is
    /// parsed each time it is shown.
    public init?(_ string: String) {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        var dashes = 0
        var high: UInt8?
        for byte in string.utf8 {
            if byte == UInt8(ascii: "-") {
                dashes += 1
                continue
            }
            guard let value = Self.hexValue(byte), out.count < 16 else { return nil }
            if let first = high {
                out.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        guard dashes == 4, out.count == 16, high == nil else { return nil }
        bytes = out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Whether every byte is zero: the authenticator did not disclose its model (usual with `none` attestation).
    public var isZero: Bool { bytes.allSatisfy { $0 == 0 } }

    /// The canonical lower-case `8-4-4-4-12` form (written straight into the string's storage:
    /// it names the provider of every passkey listed).
    public var description: String {
        guard bytes.count == 16 else { return bytes.hexString }
        return String(unsafeUninitializedCapacity: 36) { out in
            let digits: StaticString = "0123456789abcdef"
            var index = 0
            for (position, byte) in bytes.enumerated() {
                if position == 4 || position == 6 || position == 8 || position == 10 {
                    out[index] = UInt8(ascii: "-")
                    index += 1
                }
                out[index] = digits.utf8Start[Int(byte >> 4)]
                out[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                index += 2
            }
            return index
        }
    }

    /// The passkey provider's name for this AAGUID (from the community AAGUID list shipped with
    /// passkeyd), or `nil` when unknown.
    public var providerName: String? { ProviderNames.table[description] }
}
