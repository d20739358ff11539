/// Binary data at the JSON edge.
///
/// Encodes as unpadded base64url (W3C WebAuthn Level 3 JSON). Decodes base64url or standard
/// base64, padded or not, because native apps differ (iOS apps commonly send
/// `base64EncodedString()`); the decoded bytes are what every check compares.
public struct Base64URLBytes: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The decoded bytes: what every check compares and what stores keep.
    public var bytes: [UInt8]

    /// Wraps raw bytes; they encode as unpadded base64url.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Decodes base64url or standard base64 (padded or not); `nil` for anything else.
    public init?(encoded: String) {
        guard let bytes = Base64.decode(encoded, flavor: .any) else { return nil }
        self.bytes = bytes
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let bytes = Base64.decode(text, flavor: .any) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not base64url or base64")
        }
        self.bytes = bytes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Base64.encodeURL(bytes))
    }

    /// Unpadded base64url.
    public var base64URL: String { Base64.encodeURL(bytes) }
    /// Padded standard base64.
    public var base64: String { Base64.encodeStandard(bytes) }
    /// Unpadded standard base64: what `window.atob` decodes; equal to ``base64URL`` when that has no `-`/`_`.
    public var base64Unpadded: String { Base64.encodeStandardUnpadded(bytes) }
    /// The unpadded base64url text, as ``base64URL``.
    public var description: String { base64URL }
}
