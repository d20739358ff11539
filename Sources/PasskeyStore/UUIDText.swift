import Foundation

extension UUID {
    /// Calls `body` with the UUID's text as `uuidString` spells it (36 bytes, upper case, in
    /// groups of 8-4-4-4-12 hex digits), written on the stack: a statement binds an ID without
    /// making a String of it.
    func withUppercaseText<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let digits: StaticString = "0123456789ABCDEF"
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { text in
            digits.withUTF8Buffer { digits in
                withUnsafeBytes(of: uuid) { bytes in
                    var at = 0
                    for (index, byte) in bytes.enumerated() {
                        if index == 4 || index == 6 || index == 8 || index == 10 {
                            text[at] = UInt8(ascii: "-")
                            at += 1
                        }
                        text[at] = digits[Int(byte >> 4)]
                        text[at + 1] = digits[Int(byte & 0x0F)]
                        at += 2
                    }
                }
            }
            return try body(UnsafeBufferPointer(text))
        }
    }
}

extension UUID {
    /// A UUID read from its text (8-4-4-4-12 hex digits, either case) without the C string
    /// Foundation's parser makes; any other spelling goes to Foundation's parser.
    init?(text: String) {
        var text = text
        let parsed: uuid_t? = text.withUTF8 { utf8 in
            guard utf8.count == 36 else { return nil }
            var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            let valid = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
                var at = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        guard utf8[at] == UInt8(ascii: "-") else { return false }
                        at += 1
                    }
                    guard let high = ASCIIHex.value(of: utf8[at]), let low = ASCIIHex.value(of: utf8[at + 1]) else { return false }
                    out[index] = high << 4 | low
                    at += 2
                }
                return true
            }
            return valid ? bytes : nil
        }
        if let parsed {
            self.init(uuid: parsed)
        } else {
            self.init(uuidString: text)
        }
    }
}
