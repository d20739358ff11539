/// Base64 for the JSON edge (RFC 4648 §4 and §5). Nothing else in the library sees encoded text.
enum Base64 {
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// 0–63 for an alphabet character, 64 for "-"/"_" (URL-only), 65 for "+"/"/" (standard-only)
    /// after mapping, 255 for anything else.
    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 255, count: 256)
        for (index, char) in urlAlphabet.enumerated() { table[Int(char)] = UInt8(index) }
        table[Int(UInt8(ascii: "+"))] = 62
        table[Int(UInt8(ascii: "/"))] = 63
        return table
    }()

    /// Unpadded base64url, the encoding of every binary field WebAuthn's JSON carries.
    static func encodeURL(_ bytes: [UInt8]) -> String {
        encode(bytes, alphabet: urlAlphabet, pad: false)
    }

    /// Padded standard base64 (what iOS's `base64EncodedString()` produces).
    static func encodeStandard(_ bytes: [UInt8]) -> String {
        encode(bytes, alphabet: standardAlphabet, pad: true)
    }

    /// Unpadded standard base64: the same text as ``encodeURL(_:)`` wherever that has no `-`/`_`.
    static func encodeStandardUnpadded(_ bytes: [UInt8]) -> String {
        encode(bytes, alphabet: standardAlphabet, pad: false)
    }

    /// Written straight into the string's storage (four characters per three bytes, RFC 4648
    /// §4/§5; the last group padded with `=` or cut short).
    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        let rest = bytes.count % 3
        let count = bytes.count / 3 * 4 + (rest == 0 ? 0 : pad ? 4 : rest + 1)
        if count == 0 { return "" }
        return String(unsafeUninitializedCapacity: count) { out in
            bytes.withUnsafeBufferPointer { input in
                alphabet.withUnsafeBufferPointer { table in
                    var index = 0
                    var at = 0
                    while index + 3 <= input.count {
                        let n = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                        out[at] = table[Int(n >> 18 & 63)]
                        out[at + 1] = table[Int(n >> 12 & 63)]
                        out[at + 2] = table[Int(n >> 6 & 63)]
                        out[at + 3] = table[Int(n & 63)]
                        index += 3
                        at += 4
                    }
                    if rest > 0 {
                        let n = UInt32(input[index]) << 16 | (rest == 2 ? UInt32(input[index + 1]) << 8 : 0)
                        out[at] = table[Int(n >> 18 & 63)]
                        out[at + 1] = table[Int(n >> 12 & 63)]
                        if rest == 2 {
                            out[at + 2] = table[Int(n >> 6 & 63)]
                        } else if pad {
                            out[at + 2] = 61
                        }
                        if pad { out[at + 3] = 61 }
                    }
                }
            }
            return count
        }
    }

    /// Which spellings a decoder accepts.
    enum Flavor {
        /// base64url without padding only (WebAuthn's own encoding, e.g. inside clientDataJSON).
        case urlUnpadded
        /// base64url or standard base64, padded or not, but one alphabet per string (what native
        /// apps send for binary fields).
        case any
    }

    /// Decodes strictly: only alphabet characters, correct padding if any, zero trailing bits.
    static func decode(_ text: String, flavor: Flavor) -> [UInt8]? {
        var text = text
        return text.withUTF8 { decode(utf8: $0, flavor: flavor) }
    }

    static func decode(utf8 input: UnsafeBufferPointer<UInt8>, flavor: Flavor) -> [UInt8]? {
        var count = input.count
        if flavor == .any {
            // Padding, when present, must complete the last quantum exactly.
            var padding = 0
            while count > 0 && input[count - 1] == UInt8(ascii: "=") {
                count -= 1
                padding += 1
            }
            if padding > 0 && (padding > 2 || (count + padding) % 4 != 0) { return nil }
        }
        if count % 4 == 1 { return nil }
        let outputCount = count * 3 / 4
        // Validation state: the OR of every decoded value (>= 64 means an invalid character) and
        // which alphabet-specific characters appeared (1: "-" "_", 2: "+" "/").
        var invalid: UInt8 = 0
        var alphabets: UInt8 = 0
        let output = decodeTable.withUnsafeBufferPointer { table in
            [UInt8](unsafeUninitializedCapacity: outputCount) { out, initialized in
                @inline(__always) func value(_ index: Int) -> UInt32 {
                    let char = input[index]
                    let v = table[Int(char)]
                    invalid |= v & 0xc0
                    if v >= 62 { alphabets |= (char == UInt8(ascii: "-") || char == UInt8(ascii: "_")) ? 1 : 2 }
                    return UInt32(v & 0x3f)
                }
                var index = 0
                var written = 0
                while index + 4 <= count {
                    let n = value(index) << 18 | value(index + 1) << 12 | value(index + 2) << 6 | value(index + 3)
                    out[written] = UInt8(truncatingIfNeeded: n >> 16)
                    out[written + 1] = UInt8(truncatingIfNeeded: n >> 8)
                    out[written + 2] = UInt8(truncatingIfNeeded: n)
                    index += 4
                    written += 3
                }
                switch count - index {
                case 2:
                    let a = value(index), b = value(index + 1)
                    // The unused low bits of the last character must be zero (canonical encoding).
                    if b & 0x0f != 0 { invalid |= 0x80 }
                    out[written] = UInt8(truncatingIfNeeded: (a << 18 | b << 12) >> 16)
                    written += 1
                case 3:
                    let a = value(index), b = value(index + 1), c = value(index + 2)
                    if c & 0x03 != 0 { invalid |= 0x80 }
                    let n = a << 18 | b << 12 | c << 6
                    out[written] = UInt8(truncatingIfNeeded: n >> 16)
                    out[written + 1] = UInt8(truncatingIfNeeded: n >> 8)
                    written += 2
                default:
                    break
                }
                initialized = written
            }
        }
        if invalid != 0 || alphabets == 3 || (flavor == .urlUnpadded && alphabets & 2 != 0) { return nil }
        return output
    }
}
