/// One CBOR data item (RFC 8949), as read by ``CBORReader`` or written by ``CBORWriter``.
///
/// Maps keep their pairs in encoded order; duplicate keys never reach a `CBORValue` because the
/// reader rejects them.
public indirect enum CBORValue: Sendable, Hashable {
    case unsigned(UInt64)
    /// A negative integer, stored as CBOR does: the value is `-1 - n`.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBORValue])
    case map([CBORMapEntry])
    case tagged(UInt64, CBORValue)
    case simple(UInt8)
    case bool(Bool)
    case null
    case undefined
    case float(Double)

    /// An integer key or value: `.int(-7)`.
    public static func int(_ value: Int64) -> CBORValue {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-1 - value))
    }

    /// The value as a Swift integer, when it is a CBOR integer that fits in `Int64`.
    public var intValue: Int64? {
        switch self {
        case .unsigned(let n): return Int64(exactly: n)
        case .negative(let n):
            guard let m = Int64(exactly: n) else { return nil }
            return -1 - m
        default: return nil
        }
    }

    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    public var textValue: String? {
        if case .text(let t) = self { return t }
        return nil
    }

    public var arrayValue: [CBORValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    public var mapValue: [CBORMapEntry]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// Looks a key up in a map value (linear: WebAuthn maps hold a handful of entries).
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == key }?.value
    }

    public subscript(text key: String) -> CBORValue? { self[.text(key)] }
    public subscript(int key: Int64) -> CBORValue? { self[.int(key)] }
}

/// A key/value pair of a CBOR map.
public struct CBORMapEntry: Sendable, Hashable {
    public var key: CBORValue
    public var value: CBORValue
    public init(_ key: CBORValue, _ value: CBORValue) {
        self.key = key
        self.value = value
    }
}
