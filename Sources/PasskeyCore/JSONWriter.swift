import Foundation
import WebAuthn

/// The hot answers (sign-in and sign-up options and results) written straight into bytes:
/// Foundation's `JSONEncoder` builds a tree of boxed values and sorts its keys on every answer,
/// ~5–9% of a ceremony's server CPU. The output is byte for byte what the edge's `JSONEncoder` writes (keys sorted,
/// slashes unescaped, ISO 8601 dates in whole seconds): a test compares the two on every type.
package protocol JSONWritable {
    func write(to json: inout JSONWriter)
}

package struct JSONWriter {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    /// `{…}`: `body` writes the members, keys in sorted order.
    package mutating func object(_ body: (inout Members) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        var members = Members(writer: self)
        self = JSONWriter()  // `members` owns the buffer meanwhile (no copy)
        body(&members)
        self = members.writer
        bytes.append(UInt8(ascii: "}"))
    }

    package mutating func array<T>(_ elements: [T], _ element: (inout JSONWriter, T) -> Void) {
        bytes.append(UInt8(ascii: "["))
        for (index, value) in elements.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            element(&self, value)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A JSON string: runs of bytes that need no escape are copied whole (the answers' strings
    /// are mostly base64url and names), the rest escaped as RFC 8259 §7 allows.
    package mutating func string(_ text: String) { Self.appendString(text, to: &bytes) }

    /// `text` as a JSON string onto `bytes`; with `escapingLessThan`, `<` as `\u003c` too (no
    /// `</script>` in a hand-built body, ``JSONText``).
    package static func appendString(_ text: String, to bytes: inout [UInt8], escapingLessThan: Bool = false) {
        var text = text
        text.withUTF8 { utf8 in
            bytes.reserveCapacity(bytes.count + utf8.count + 2)
            bytes.append(UInt8(ascii: "\""))
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
                    && !(escapingLessThan && byte == UInt8(ascii: "<"))
                {
                    continue
                }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                escape(byte, to: &bytes)
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
            bytes.append(UInt8(ascii: "\""))
        }
    }

    private static func escape(_ byte: UInt8, to bytes: inout [UInt8]) {
        func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? 48 + value : 87 + value }
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
            bytes.append(contentsOf: "u00".utf8)
            bytes.append(hexDigit(byte >> 4))
            bytes.append(hexDigit(byte & 0x0F))
        }
    }

    package mutating func integer(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var count = 0
            repeat {
                buffer[19 - count] = UInt8(48 + magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[(20 - count)...]))
        }
    }

    package mutating func bool(_ value: Bool) { bytes.append(contentsOf: (value ? "true" : "false").utf8) }
    package mutating func null() { bytes.append(contentsOf: "null".utf8) }

    /// Credential descriptors (`allowCredentials`, `excludeCredentials`).
    package mutating func descriptors(_ descriptors: [PublicKeyCredentialDescriptorJSON]) {
        array(descriptors) { writer, descriptor in
            writer.object { fields in
                fields.string("id", descriptor.id.base64URL)
                if let transports = descriptor.transports { fields.strings("transports", transports) }
                fields.string("type", descriptor.type)
            }
        }
    }

    /// ISO 8601 in UTC, whole seconds (`2026-11-23T22:17:47Z`), as `.iso8601` writes it.
    package mutating func date(_ date: Date) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        bytes.append(UInt8(ascii: "\""))
        integer(Int(parts.tm_year) + 1900)
        two(UInt8(ascii: "-"), parts.tm_mon + 1)
        two(UInt8(ascii: "-"), parts.tm_mday)
        two(UInt8(ascii: "T"), parts.tm_hour)
        two(UInt8(ascii: ":"), parts.tm_min)
        two(UInt8(ascii: ":"), parts.tm_sec)
        bytes.append(UInt8(ascii: "Z"))
        bytes.append(UInt8(ascii: "\""))
    }

    /// A separator and a two-digit number.
    private mutating func two(_ separator: UInt8, _ value: Int32) {
        bytes.append(separator)
        bytes.append(UInt8(48 + value / 10))
        bytes.append(UInt8(48 + value % 10))
    }

    /// A `JSONValue` (extension inputs): objects with sorted keys; numbers as `JSONEncoder`
    /// writes a `Double` when integral, else through `JSONEncoder` itself.
    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .string(let text): string(text)
        case .number(let number):
            if number.rounded() == number, abs(number) < 1e15 {
                integer(Int(number))
            } else {
                bytes += (try? JSONEncoder().encode(number)).map(Array.init) ?? Array("null".utf8)
            }
        case .array(let elements): array(elements) { $0.value($1) }
        case .object(let members):
            object { writer in
                for key in members.keys.sorted() {
                    writer.member(key) { $0.value(members[key]!) }
                }
            }
        }
    }

    /// The members of one object; commas are placed here.
    package struct Members {
        fileprivate var writer: JSONWriter
        private var first = true

        fileprivate init(writer: JSONWriter) { self.writer = writer }

        package mutating func member(_ key: String, _ value: (inout JSONWriter) -> Void) {
            if !first { writer.bytes.append(UInt8(ascii: ",")) }
            first = false
            writer.string(key)
            writer.bytes.append(UInt8(ascii: ":"))
            value(&writer)
        }

        package mutating func string(_ key: String, _ text: String) { member(key) { $0.string(text) } }
        package mutating func optionalString(_ key: String, _ text: String?) { if let text { string(key, text) } }
        package mutating func strings(_ key: String, _ texts: [String]) { member(key) { $0.array(texts) { $0.string($1) } } }
        package mutating func date(_ key: String, _ date: Date) { member(key) { $0.date(date) } }
        package mutating func bool(_ key: String, _ flag: Bool) { member(key) { $0.bool(flag) } }
    }
}
