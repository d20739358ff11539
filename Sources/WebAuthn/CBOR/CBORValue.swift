/// One CBOR data item (RFC 8949), as read by ``CBORReader`` or written by ``CBORWriter``.
///
/// Maps keep their pairs in encoded order; duplicate keys never reach a `CBORValue` because the
/// reader rejects them.
public indirect enum CBORValue: Sendable, Hashable {
    /// An unsigned integer (major type 0).
    case unsigned(UInt64)
    /// A negative integer, stored as CBOR does: the value is `-1 - n`.
    case negative(UInt64)
    /// A byte string (major type 2).
    case bytes([UInt8])
    /// A text string (major type 3).
    case text(String)
    /// An array (major type 4).
    case array([CBORValue])
    /// A map (major type 5): its pairs in encoded order.
    case map([CBORMapEntry])
    /// A tagged item (major type 6): the tag number and its content.
    case tagged(UInt64, CBORValue)
    /// A simple value (major type 7) other than false, true, null and undefined.
    case simple(UInt8)
    /// `false` or `true` (simple values 20 and 21).
    case bool(Bool)
    /// `null` (simple value 22).
    case null
    /// `undefined` (simple value 23).
    case undefined
    /// A half-, single- or double-precision float (major type 7), widened to `Double`.
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

    /// The bytes of a byte string; `nil` for any other item.
    public var bytesValue: [UInt8]? {
        if case .bytes(let b) = self { return b }
        return nil
    }

    /// The string of a text string; `nil` for any other item.
    public var textValue: String? {
        if case .text(let t) = self { return t }
        return nil
    }

    /// The elements of an array; `nil` for any other item.
    public var arrayValue: [CBORValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The pairs of a map, in encoded order; `nil` for any other item.
    public var mapValue: [CBORMapEntry]? {
        if case .map(let m) = self { return m }
        return nil
    }

    /// Looks a key up in a map value (linear: WebAuthn maps hold a handful of entries).
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let entries) = self else { return nil }
        return entries.first { $0.key == key }?.value
    }

    /// Looks a text-string key up in a map value (`attObj[text: "fmt"]`); `nil` when absent or not a map.
    public subscript(text key: String) -> CBORValue? { self[.text(key)] }
    /// Looks an integer key up in a map value (`coseKey[int: 3]`, the alg); `nil` when absent or not a map.
    public subscript(int key: Int64) -> CBORValue? { self[.int(key)] }
}

/// A key/value pair of a CBOR map.
public struct CBORMapEntry: Sendable, Hashable {
    /// The key item.
    public var key: CBORValue
    /// The value item.
    public var value: CBORValue
    /// A pair: `CBORMapEntry(.int(3), .int(-7))`.
    public init(_ key: CBORValue, _ value: CBORValue) {
        self.key = key
        self.value = value
    }
}
