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

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index + 3 <= bytes.count {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            index += 3
        }
        let rest = bytes.count - index
        if rest == 1 {
            let n = UInt32(bytes[index]) << 16
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)]]
            if pad { out += [61, 61] }
        } else if rest == 2 {
            let n = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)]]
            if pad { out.append(61) }
        }
        return String(decoding: out, as: UTF8.self)
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
        var chars = Array(text.utf8)
        if flavor == .any {
            // Padding, when present, must complete the last quantum exactly.
            var padding = 0
            while chars.last == UInt8(ascii: "=") {
                chars.removeLast()
                padding += 1
            }
            if padding > 0 && (padding > 2 || (chars.count + padding) % 4 != 0) { return nil }
            let hasURL = chars.contains(UInt8(ascii: "-")) || chars.contains(UInt8(ascii: "_"))
            let hasStandard = chars.contains(UInt8(ascii: "+")) || chars.contains(UInt8(ascii: "/"))
            if hasURL && hasStandard { return nil }
        } else if chars.contains(UInt8(ascii: "+")) || chars.contains(UInt8(ascii: "/")) {
            return nil
        }
        if chars.count % 4 == 1 { return nil }

        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for char in chars {
            let value = decodeTable[Int(char)]
            guard value < 64 else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        // The unused low bits of the last character must be zero (canonical encoding).
        if bits > 0 && accumulator & ((1 << UInt32(bits)) - 1) != 0 { return nil }
        return out
    }
}
