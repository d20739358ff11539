/// A strict, bounded CBOR reader (RFC 8949) for untrusted authenticator output.
///
/// - Nesting is capped (``Limits/maxDepth``), and so is the total number of data items
///   (``Limits/maxItems``); a declared length can never exceed the bytes that remain, so no
///   allocation is sized by an attacker beyond the input itself.
/// - Map keys must be unique (RFC 8949 §5.6: duplicate keys make a map invalid for WebAuthn).
/// - Text strings must be valid UTF-8.
/// - Indefinite lengths are rejected unless the caller allows them. CTAP2 §6 (canonical CBOR)
///   forbids them in everything an authenticator produces (COSE keys, extension maps); a client
///   platform builds the outer attestation object and some encode it with indefinite lengths, so
///   that one parse allows them.
/// - ``decode(_:limits:)`` rejects trailing bytes; ``decodePrefix(_:limits:)`` reports how
///   many bytes one item took (authenticator data holds a COSE key followed by more data).
///
/// Initial byte layout: `major type (3 bits) | additional info (5 bits)`; additional info 0–23 is
/// the value itself, 24/25/26/27 mean 1/2/4/8 following bytes, 28–30 are reserved, 31 marks an
/// indefinite length (or "break" for major type 7).
///
/// ```swift
/// let key = try CBORReader.decode(coseKeyBytes)              // strict: CTAP2 limits
/// let alg = key[int: 3]?.intValue                            // COSE_Key "alg", e.g. -7
/// let attObj = try CBORReader.decode(bytes, limits: .init(allowIndefiniteLength: true))
/// let fmt = attObj[text: "fmt"]?.textValue                   // "packed"
/// ```
public struct CBORReader {
    /// Bounds applied while reading.
    public struct Limits: Sendable {
        /// The deepest nesting accepted; the top-level item is at depth 0 (default 16).
        public var maxDepth: Int
        /// The most data items one decode may read; every element, key, value, tag content and string chunk counts
        /// (default 4096).
        public var maxItems: Int
        /// Whether indefinite-length strings, arrays and maps (RFC 8949 §3.2.2–3.2.3) are accepted; `false` by
        /// default, as CTAP2 canonical CBOR requires.
        public var allowIndefiniteLength: Bool
        /// Limits with the CTAP2 defaults unless overridden.
        public init(maxDepth: Int = 16, maxItems: Int = 4096, allowIndefiniteLength: Bool = false) {
            self.maxDepth = maxDepth
            self.maxItems = maxItems
            self.allowIndefiniteLength = allowIndefiniteLength
        }
        /// The CTAP2 limits: definite lengths only.
        public static let strict = Limits()
    }

    private var reader: ByteReader
    private let limits: Limits
    private var items = 0

    private init(_ bytes: [UInt8], limits: Limits) {
        self.reader = ByteReader(bytes, errorCode: .malformedCBOR)
        self.limits = limits
    }

    /// Decodes exactly one data item that spans all of `bytes`.
    public static func decode(_ bytes: [UInt8], limits: Limits = .strict) throws(WebAuthnError) -> CBORValue {
        var decoder = CBORReader(bytes, limits: limits)
        let value = try decoder.readItem(depth: 0)
        try decoder.reader.finish("CBOR data item")
        return value
    }

    /// Decodes one data item at the start of `bytes` and returns it with the number of bytes it
    /// used; any bytes after it are left to the caller.
    public static func decodePrefix(_ bytes: [UInt8], limits: Limits = .strict) throws(WebAuthnError) -> (value: CBORValue, length: Int) {
        var decoder = CBORReader(bytes, limits: limits)
        let value = try decoder.readItem(depth: 0)
        return (value, decoder.reader.offset)
    }

    private enum Head {
        case value(major: UInt8, info: UInt8, argument: UInt64)
        case indefinite(major: UInt8)
        case breakMarker
    }

    private mutating func readHead() throws(WebAuthnError) -> Head {
        let initial = try reader.readByte("initial byte")
        let major = initial >> 5
        let info = initial & 0x1f
        switch info {
        case 0...23:
            return .value(major: major, info: info, argument: UInt64(info))
        case 24, 25, 26, 27:
            let width = 1 << Int(info - 24)
            let argument = try reader.readUInt(width: width, "argument of major type \(major)")
            // Preferred serialisation is not required, but a 1-byte argument below 24 is
            // malformed for simple values (RFC 8949 §3.3).
            if major == 7 && info == 24 && argument < 32 {
                throw .malformedCBOR("simple value \(argument) encoded in two bytes")
            }
            return .value(major: major, info: info, argument: argument)
        case 31:
            if major == 7 { return .breakMarker }
            guard major == 2 || major == 3 || major == 4 || major == 5 else {
                throw .malformedCBOR("indefinite length for major type \(major)")
            }
            return .indefinite(major: major)
        default:
            throw .malformedCBOR("reserved additional information \(info) at offset \(reader.offset - 1)")
        }
    }

    private mutating func countItem() throws(WebAuthnError) {
        items += 1
        guard items <= limits.maxItems else {
            throw .malformedCBOR("more than \(limits.maxItems) data items")
        }
    }

    /// A declared length, checked against what is left: every item takes at least one byte.
    private func checkedLength(_ argument: UInt64, minimumItemSize: Int, _ what: String) throws(WebAuthnError) -> Int {
        guard let length = Int(exactly: argument), length <= reader.remaining / minimumItemSize else {
            throw .malformedCBOR("\(what) length \(argument) exceeds the \(reader.remaining) bytes left")
        }
        return length
    }

    private mutating func readItem(depth: Int) throws(WebAuthnError) -> CBORValue {
        guard depth <= limits.maxDepth else {
            throw .malformedCBOR("nesting deeper than \(limits.maxDepth)")
        }
        try countItem()
        switch try readHead() {
        case .breakMarker:
            throw .malformedCBOR("unexpected break at offset \(reader.offset - 1)")
        case .indefinite(let major):
            guard limits.allowIndefiniteLength else {
                throw .malformedCBOR("indefinite-length item (not allowed by CTAP2 canonical CBOR)")
            }
            return try readIndefinite(major: major, depth: depth)
        case .value(let major, let info, let argument):
            return try readDefinite(major: major, info: info, argument: argument, depth: depth)
        }
    }

    private mutating func readDefinite(major: UInt8, info: UInt8, argument: UInt64, depth: Int) throws(WebAuthnError) -> CBORValue {
        switch major {
        case 0:
            return .unsigned(argument)
        case 1:
            return .negative(argument)
        case 2:
            let length = try checkedLength(argument, minimumItemSize: 1, "byte string")
            return .bytes(try reader.readBytes(length, "byte string"))
        case 3:
            let length = try checkedLength(argument, minimumItemSize: 1, "text string")
            return .text(try Self.utf8(try reader.readBytes(length, "text string")))
        case 4:
            let count = try checkedLength(argument, minimumItemSize: 1, "array")
            var elements: [CBORValue] = []
            elements.reserveCapacity(count)
            for _ in 0..<count {
                elements.append(try readItem(depth: depth + 1))
            }
            return .array(elements)
        case 5:
            let count = try checkedLength(argument, minimumItemSize: 2, "map")
            var entries: [CBORMapEntry] = []
            var keys = Set<CBORValue>()
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let key = try readItem(depth: depth + 1)
                let value = try readItem(depth: depth + 1)
                try Self.append(CBORMapEntry(key, value), to: &entries, keys: &keys)
            }
            return .map(entries)
        case 6:
            return .tagged(argument, try readItem(depth: depth + 1))
        default:
            return try Self.simpleOrFloat(info: info, argument: argument)
        }
    }

    private mutating func readIndefinite(major: UInt8, depth: Int) throws(WebAuthnError) -> CBORValue {
        switch major {
        case 2, 3:
            // RFC 8949 §3.2.3: chunks are definite-length strings of the same major type.
            var joined: [UInt8] = []
            while true {
                try countItem()
                switch try readHead() {
                case .breakMarker:
                    return major == 2 ? .bytes(joined) : .text(try Self.utf8(joined))
                case .value(let chunkMajor, _, let argument) where chunkMajor == major:
                    let length = try checkedLength(argument, minimumItemSize: 1, "string chunk")
                    let chunk = try reader.readBytes(length, "string chunk")
                    if major == 3 { _ = try Self.utf8(chunk) }
                    joined += chunk
                default:
                    throw .malformedCBOR("invalid chunk in indefinite-length string")
                }
            }
        case 4:
            var elements: [CBORValue] = []
            while true {
                if try peekBreak() { return .array(elements) }
                elements.append(try readItem(depth: depth + 1))
            }
        default:
            var entries: [CBORMapEntry] = []
            var keys = Set<CBORValue>()
            while true {
                if try peekBreak() { return .map(entries) }
                let key = try readItem(depth: depth + 1)
                let value = try readItem(depth: depth + 1)
                try Self.append(CBORMapEntry(key, value), to: &entries, keys: &keys)
            }
        }
    }

    private mutating func peekBreak() throws(WebAuthnError) -> Bool {
        var probe = reader
        if try probe.readByte("item or break") == 0xff {
            reader = probe
            return true
        }
        return false
    }

    /// RFC 8949 §5.6: a map with duplicate keys is not valid. A linear scan while the map is
    /// small (every WebAuthn map), a set of keys past 16 entries so a hostile map of thousands
    /// of keys cannot make parsing quadratic.
    private static func append(_ entry: CBORMapEntry, to entries: inout [CBORMapEntry], keys: inout Set<CBORValue>) throws(WebAuthnError) {
        if entries.count < 16 {
            for existing in entries where existing.key == entry.key {
                throw .malformedCBOR("duplicate map key \(entry.key)")
            }
        } else {
            if keys.isEmpty { keys = Set(entries.map(\.key)) }
            guard keys.insert(entry.key).inserted else { throw .malformedCBOR("duplicate map key \(entry.key)") }
        }
        entries.append(entry)
    }

    private static func utf8(_ bytes: [UInt8]) throws(WebAuthnError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw .malformedCBOR("text string is not valid UTF-8")
        }
        return text
    }

    private static func simpleOrFloat(info: UInt8, argument: UInt64) throws(WebAuthnError) -> CBORValue {
        switch info {
        case 25:
            return .float(Double(Float16Bits(UInt16(truncatingIfNeeded: argument)).value))
        case 26:
            return .float(Double(Float(bitPattern: UInt32(truncatingIfNeeded: argument))))
        case 27:
            return .float(Double(bitPattern: argument))
        default:
            switch argument {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            case 23: return .undefined
            default: return .simple(UInt8(truncatingIfNeeded: argument))
            }
        }
    }
}

/// IEEE 754 half precision, decoded by hand (Float16 is not available on every platform).
private struct Float16Bits {
    let bits: UInt16
    init(_ bits: UInt16) { self.bits = bits }
    var value: Float {
        let sign: Float = bits & 0x8000 != 0 ? -1 : 1
        let exponent = Int((bits >> 10) & 0x1f)
        let mantissa = Float(bits & 0x3ff)
        switch exponent {
        case 0: return sign * mantissa * Float(pow2: -24)
        case 31: return mantissa == 0 ? sign * .infinity : .nan
        default: return sign * (1 + mantissa / 1024) * Float(pow2: exponent - 15)
        }
    }
}

private extension Float {
    init(pow2 exponent: Int) {
        self = Float(sign: .plus, exponent: exponent, significand: 1)
    }
}
