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
