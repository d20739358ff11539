/// The one throwing reader every binary parser in this library goes through.
///
/// It never traps: every read checks the remaining length first, and every length taken from the
/// input goes through `Int(exactly:)` before it is used. Parsers call ``finish(_:)`` so that a
/// top-level structure must consume all of its input.
struct ByteReader {
    private let bytes: [UInt8]
    private(set) var offset: Int
    /// The code thrown on truncation or trailing bytes (the parser's "malformed_…" code).
    let errorCode: WebAuthnError.Code

    init(_ bytes: [UInt8], errorCode: WebAuthnError.Code) {
        self.bytes = bytes
        self.offset = 0
        self.errorCode = errorCode
    }

    var remaining: Int { bytes.count - offset }
    var isAtEnd: Bool { offset == bytes.count }

    mutating func readByte(_ what: @autoclosure () -> String) throws(WebAuthnError) -> UInt8 {
        guard offset < bytes.count else {
            throw WebAuthnError(errorCode, "truncated: \(what()) needs 1 byte at offset \(offset)")
        }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func readBytes(_ count: Int, _ what: @autoclosure () -> String) throws(WebAuthnError) -> [UInt8] {
        guard count >= 0, count <= remaining else {
            throw WebAuthnError(errorCode, "truncated: \(what()) needs \(count) bytes at offset \(offset), \(remaining) left")
        }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    /// Reads a big-endian unsigned integer of `width` bytes (1...8).
    mutating func readUInt(width: Int, _ what: @autoclosure () -> String) throws(WebAuthnError) -> UInt64 {
        guard width >= 1, width <= 8, width <= remaining else {
            throw WebAuthnError(errorCode, "truncated: \(what()) needs \(width) bytes at offset \(offset), \(remaining) left")
        }
        var value: UInt64 = 0
        for index in offset..<(offset + width) {
            value = (value << 8) | UInt64(bytes[index])
        }
        offset += width
        return value
    }

    mutating func readUInt16(_ what: @autoclosure () -> String) throws(WebAuthnError) -> UInt16 {
        UInt16(truncatingIfNeeded: try readUInt(width: 2, what()))
    }

    mutating func readUInt32(_ what: @autoclosure () -> String) throws(WebAuthnError) -> UInt32 {
        UInt32(truncatingIfNeeded: try readUInt(width: 4, what()))
    }

    /// Everything not read yet, without consuming it.
    func peekRemaining() -> [UInt8] { Array(bytes[offset...]) }

    mutating func skip(_ count: Int, _ what: @autoclosure () -> String) throws(WebAuthnError) {
        guard count >= 0, count <= remaining else {
            throw WebAuthnError(errorCode, "truncated: \(what()) needs \(count) bytes at offset \(offset), \(remaining) left")
        }
        offset += count
    }

    /// The bytes from `start` up to the current offset (used to keep the exact encoding of a
    /// sub-structure, such as the COSE key inside authenticator data).
    func slice(from start: Int) -> [UInt8] {
        guard start >= 0, start <= offset else { return [] }
        return Array(bytes[start..<offset])
    }

    /// Every top-level parse ends here: no trailing bytes.
    func finish(_ what: @autoclosure () -> String) throws(WebAuthnError) {
        guard isAtEnd else {
            throw WebAuthnError(errorCode, "\(remaining) trailing bytes after \(what())")
        }
    }
}
