import Crypto

/// Compares two byte strings in time that depends only on their lengths (challenges, hashes, IDs).
@inline(never)
func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
    guard lhs.count == rhs.count else { return false }
    var difference: UInt8 = 0
    for index in lhs.indices {
        difference |= lhs[index] ^ rhs[index]
    }
    return difference == 0
}

func sha256(_ bytes: [UInt8]) -> [UInt8] {
    Array(SHA256.hash(data: bytes))
}

extension Array where Element == UInt8 {
    /// Lower-case hexadecimal, for logs and inspection.
    var hexString: String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for byte in self {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
