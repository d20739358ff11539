/// A small, strict JSON reader (RFC 8259) for the payloads on the verification hot path.
///
/// Foundation's `JSONDecoder` costs more than the signature check it guards (measured in
/// docs/PERFORMANCE.md), so responses and client data are read with this instead. Strict where
/// it matters: duplicate object keys are rejected, nesting is capped, strings must be valid
/// UTF-8 with valid escapes, and nothing may follow the top-level value except white space.
///
/// ```swift
/// let value = try JSONReader.parse(Array(#"{"credProps": {"rk": true}}"#.utf8))
/// if case .bool(let rk)? = value["credProps"]?["rk"] { print(rk) }   // true
/// ```
/// For typed access with errors that name the field, read an object with ``JSONObject`` instead.
public enum JSONReader {
    /// Nesting limit: WebAuthn payloads are at most four levels deep.
    public static let maxDepth = 32

    /// Parses `bytes` as exactly one JSON value, white space around it allowed; `malformed_json` otherwise.
    public static func parse(_ bytes: [UInt8]) throws(WebAuthnError) -> JSONValue {
        try parseNode(bytes).value
    }

    /// Parses into the reader's own light tree (objects keep their members in order, no hashing).
    static func parseNode(_ bytes: [UInt8]) throws(WebAuthnError) -> JSONNode {
        let result: Result<JSONNode, WebAuthnError> = bytes.withUnsafeBufferPointer { buffer in
            var parser = Parser(bytes: buffer)
            do throws(WebAuthnError) {
                parser.skipWhitespace()
                let value = try parser.value(depth: 0)
                parser.skipWhitespace()
                guard parser.index == buffer.count else {
                    throw WebAuthnError(.malformedJSON, "unexpected data after the JSON value at offset \(parser.index)")
                }
                return .success(value)
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        func fail(_ reason: String) -> WebAuthnError {
            WebAuthnError(.malformedJSON, "\(reason) at offset \(index)")
        }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0a || bytes[index] == 0x0d || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func value(depth: Int) throws(WebAuthnError) -> JSONNode {
            guard depth <= JSONReader.maxDepth else { throw fail("nesting deeper than \(JSONReader.maxDepth)") }
            guard index < bytes.count else { throw fail("unexpected end of JSON") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            default: return .number(try number())
            }
        }

        mutating func literal(_ word: StaticString) throws(WebAuthnError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw fail("invalid literal") }
            let matches = word.withUTF8Buffer { buffer in
                (0..<count).allSatisfy { bytes[index + $0] == buffer[$0] }
            }
            guard matches else { throw fail("invalid literal") }
            index += count
        }

        mutating func object(depth: Int) throws(WebAuthnError) -> JSONNode {
            index += 1
            var members: [JSONMember] = []
            var seen = Set<String>()
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected an object key") }
                let key = try string()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                skipWhitespace()
                let member = try value(depth: depth + 1)
                // Duplicate keys: a linear scan while the object is small (every WebAuthn
                // object), a set for larger ones so a hostile body cannot make this quadratic.
                if members.count < 16 {
                    for existing in members where existing.key == key { throw fail("duplicate key \"\(key)\"") }
                } else {
                    if seen.isEmpty { for existing in members { seen.insert(existing.key) } }
                    guard seen.insert(key).inserted else { throw fail("duplicate key \"\(key)\"") }
                }
                members.append(JSONMember(key: key, value: member))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws(WebAuthnError) -> JSONNode {
            index += 1
            var elements: [JSONNode] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            while true {
                skipWhitespace()
                elements.append(try value(depth: depth + 1))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                if bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func string() throws(WebAuthnError) -> String {
            index += 1
            let start = index
            // Fast path: no escapes. Pure ASCII (every base64 field) needs no UTF-8 validation.
            var ascii = true
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    if ascii { return String(decoding: text, as: UTF8.self) }
                    guard let string = String(validating: text, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                    return string
                }
                if byte == UInt8(ascii: "\\") { break }
                guard byte >= 0x20 else { throw fail("control character in string") }
                ascii = ascii && byte < 0x80
                index += 1
            }
            var out = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let string = String(validating: out, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                    return string
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw fail("unterminated escape") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0c)
                    case UInt8(ascii: "n"): out.append(0x0a)
                    case UInt8(ascii: "r"): out.append(0x0d)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xd800...0xdbff).contains(scalar) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                                throw fail("unpaired surrogate")
                            }
                            index += 2
                            let low = try hex4()
                            guard (0xdc00...0xdfff).contains(low) else { throw fail("unpaired surrogate") }
                            scalar = 0x10000 + ((scalar - 0xd800) << 10) + (low - 0xdc00)
                        }
                        guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                        out += Array(String(Character(unicode)).utf8)
                    default:
                        throw fail("invalid escape")
                    }
                default:
                    guard byte >= 0x20 else { throw fail("control character in string") }
                    out.append(byte)
                }
            }
            throw fail("unterminated string")
        }

        mutating func hex4() throws(WebAuthnError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("truncated \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                guard let digit = Character(Unicode.Scalar(bytes[index])).hexDigitValue else { throw fail("invalid \\u escape") }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        mutating func number() throws(WebAuthnError) -> Double {
            // RFC 8259 §6: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
            let start = index
            func digits(_ p: inout Parser) -> Int {
                let s = p.index
                while p.index < p.bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(p.bytes[p.index]) { p.index += 1 }
                return p.index - s
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            let intStart = index
            let intDigits = digits(&self)
            guard intDigits > 0, !(intDigits > 1 && bytes[intStart] == UInt8(ascii: "0")) else { throw fail("invalid number") }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw fail("invalid number") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard digits(&self) > 0 else { throw fail("invalid number") }
            }
            guard index - start <= 64, let value = Double(String(decoding: bytes[start..<index], as: UTF8.self)) else {
                throw fail("invalid number")
            }
            return value
        }
    }
}

/// The JSON reader's tree: like ``JSONValue``, but objects are ordered member lists.
enum JSONNode: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONNode])
    case object([JSONMember])

    var value: JSONValue {
        switch self {
        case .null: .null
        case .bool(let b): .bool(b)
        case .number(let n): .number(n)
        case .string(let s): .string(s)
        case .array(let a): .array(a.map(\.value))
        case .object(let members): .object(Dictionary(members.map { ($0.key, $0.value.value) }, uniquingKeysWith: { first, _ in first }))
        }
    }
}

struct JSONMember: Sendable {
    let key: String
    let value: JSONNode
}

/// Typed access to a parsed JSON object, naming the path of any field that is missing or of the
/// wrong type (`response.clientDataJSON is missing`).
///
/// ```swift
/// let json = try JSONObject(bytes: body)                        // malformed_json unless an object
/// let response = try json.object("response")
/// let clientDataJSON = try response.bytes("clientDataJSON").bytes
/// let transports = try response.optionalStringArray("transports") ?? []
/// ```
public struct JSONObject {
    let nodes: [JSONMember]
    /// Where this object sits, dotted from the root (`response`; empty for the root). Error reasons start with it.
    public let path: String

    /// Parses JSON bytes that must hold an object.
    public init(bytes: [UInt8]) throws(WebAuthnError) {
        try self.init(node: JSONReader.parseNode(bytes), path: "")
    }

    init(node: JSONNode, path: String) throws(WebAuthnError) {
        guard case .object(let members) = node else {
            throw WebAuthnError(.malformedJSON, "\(path.isEmpty ? "the body" : path) is not a JSON object")
        }
        self.nodes = members
        self.path = path
    }

    /// The members as plain JSON values.
    public var members: [String: JSONValue] {
        Dictionary(nodes.map { ($0.key, $0.value.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether the member `key` is present, even with a `null` value.
    public func has(_ key: String) -> Bool { node(key) != nil }

    func node(_ key: String) -> JSONNode? {
        for member in nodes where member.key == key { return member.value }
        return nil
    }

    private func name(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The string member `key`; `malformed_json` when it is missing, `null` or not a string.
    public func string(_ key: String) throws(WebAuthnError) -> String {
        guard let value = try optionalString(key) else { throw WebAuthnError(.malformedJSON, "\(name(key)) is missing") }
        return value
    }

    /// The string member `key`, or `nil` when it is missing or `null`; `malformed_json` for another type.
    public func optionalString(_ key: String) throws(WebAuthnError) -> String? {
        switch node(key) {
        case nil, .null?: return nil
        case .string(let s)?: return s
        default: throw WebAuthnError(.malformedJSON, "\(name(key)) has the wrong JSON type")
        }
    }

    /// The boolean member `key`, or `nil` when it is missing or `null`; `malformed_json` for another type.
    public func optionalBool(_ key: String) throws(WebAuthnError) -> Bool? {
        switch node(key) {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        default: throw WebAuthnError(.malformedJSON, "\(name(key)) has the wrong JSON type")
        }
    }

    /// The integer member `key`, or `nil` when it is missing or `null`; `malformed_json` for another type, a
    /// fraction, or a value outside `Int`.
    public func optionalInt(_ key: String) throws(WebAuthnError) -> Int? {
        switch node(key) {
        case nil, .null?: return nil
        case .number(let n)?:
            guard let int = Int(exactly: n) else { throw WebAuthnError(.malformedJSON, "\(name(key)) is not an integer") }
            return int
        default: throw WebAuthnError(.malformedJSON, "\(name(key)) has the wrong JSON type")
        }
    }

    /// A binary field: base64url or standard base64, padded or not.
    public func bytes(_ key: String) throws(WebAuthnError) -> Base64URLBytes {
        guard let value = try optionalBytes(key) else { throw WebAuthnError(.malformedJSON, "\(name(key)) is missing") }
        return value
    }

    /// The binary member `key`, decoded from base64url or base64, or `nil` when it is missing or `null`;
    /// `malformed_json` when it is not a string or does not decode.
    public func optionalBytes(_ key: String) throws(WebAuthnError) -> Base64URLBytes? {
        guard let text = try optionalString(key) else { return nil }
        guard let bytes = Base64URLBytes(encoded: text) else {
            throw WebAuthnError(.malformedJSON, "\(name(key)) is not base64url or base64")
        }
        return bytes
    }

    /// The object member `key`; `malformed_json` when it is missing or not an object (`null` included).
    public func object(_ key: String) throws(WebAuthnError) -> JSONObject {
        guard let value = node(key) else { throw WebAuthnError(.malformedJSON, "\(name(key)) is missing") }
        return try JSONObject(node: value, path: name(key))
    }

    /// The object member `key`, or `nil` when it is missing or `null`; `malformed_json` for another type.
    public func optionalObject(_ key: String) throws(WebAuthnError) -> JSONObject? {
        guard let value = node(key) else { return nil }
        if case .null = value { return nil }
        return try JSONObject(node: value, path: name(key))
    }

    /// The array-of-strings member `key`, or `nil` when it is missing or `null`; `malformed_json` for another
    /// type or a non-string element.
    public func optionalStringArray(_ key: String) throws(WebAuthnError) -> [String]? {
        switch node(key) {
        case nil, .null?: return nil
        case .array(let items)?:
            var out: [String] = []
            for item in items {
                guard case .string(let s) = item else { throw WebAuthnError(.malformedJSON, "\(name(key)) must hold strings") }
                out.append(s)
            }
            return out
        default: throw WebAuthnError(.malformedJSON, "\(name(key)) has the wrong JSON type")
        }
    }
}
