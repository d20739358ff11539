/// An Authenticator Attestation GUID (§6.5.1): 16 bytes naming the authenticator model or passkey
/// provider. All zeros means "not disclosed".
public struct AAGUID: Sendable, Hashable, CustomStringConvertible {
    /// The AAGUID bytes as they appear in attested credential data: 16 when read by ``AuthenticatorData``.
    public let bytes: [UInt8]

    /// Wraps AAGUID bytes (§6.5.1). The count is not checked; ``description`` expects 16.
    public init(bytes: [UInt8]) { self.bytes = bytes }

    /// Parses the canonical `8-4-4-4-12` hexadecimal form (either case).
    public init?(_ string: String) {
        let hex = string.filter { $0 != "-" }
        guard string.count == 36, hex.count == 32 else { return nil }
        var out: [UInt8] = []
        var iterator = hex.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            guard let h = high.hexDigitValue, let l = low.hexDigitValue else { return nil }
            out.append(UInt8(h << 4 | l))
        }
        bytes = out
    }

    /// Whether every byte is zero: the authenticator did not disclose its model (usual with `none` attestation).
    public var isZero: Bool { bytes.allSatisfy { $0 == 0 } }

    /// The canonical lower-case `8-4-4-4-12` form.
    public var description: String {
        let hex = bytes.hexString
        guard hex.count == 32 else { return hex }
        let chars = Array(hex)
        return [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { String(chars[$0]) }.joined(separator: "-")
    }

    /// The passkey provider's name for this AAGUID (from the community AAGUID list shipped with
    /// passkeyd), or `nil` when unknown.
    public var providerName: String? { ProviderNames.table[description] }
}
