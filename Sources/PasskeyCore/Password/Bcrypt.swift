import Crypto
import Foundation
import WebAuthn

/// bcrypt (Provos and Mazières, 1999), as OpenBSD defines it: the `$2b$` form (and `$2a$`,
/// `$2y$`, which hash the same for every password under 256 bytes). passkeyd checks the
/// bcrypt hashes an existing user table brings along; passwords are a bridge to passkeys.
///
/// The password's UTF-8 bytes and a terminating NUL form the key; like every bcrypt, only the
/// first 72 bytes count.
public struct Bcrypt: Sendable, Hashable {
    public let cost: Int
    public let salt: [UInt8]
    public let digest: [UInt8]
    public let variant: String

    package static let alphabet = Array("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
    package static let costs = 4...31
    /// The highest cost `passkeyd import` accepts (each check costs 2^cost rounds).
    public static let maxImportCost = 14
    /// The highest cost a stored hash may have: before scrypt (issue 35) passkeyd itself hashed
    /// changed passwords at `passwordHashCost`, which allowed up to 16, so such hashes still verify.
    public static let maxStoredCost = 16

    /// Parses `$2b$12$` + 22 salt characters + 31 hash characters.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 60, bytes[0] == 0x24, bytes[1] == 0x32, [0x61, 0x62, 0x79].contains(bytes[2]), bytes[3] == 0x24,
            bytes[6] == 0x24, let tens = Int(exactly: bytes[4]).map({ $0 - 0x30 }), let ones = Int(exactly: bytes[5]).map({ $0 - 0x30 }),
            (0...9).contains(tens), (0...9).contains(ones), Self.costs.contains(tens * 10 + ones),
            let salt = Self.decode(bytes[7..<29], count: 16), let digest = Self.decode(bytes[29..<60], count: 23)
        else { return nil }
        cost = tens * 10 + ones
        self.salt = salt
        self.digest = digest
        variant = String(decoding: bytes[1..<3], as: UTF8.self)
    }

    /// A new `$2b$` hash of `password`, as another system's user table holds one: what the
    /// tests import. passkeyd itself never makes bcrypt hashes (it verifies imported ones and
    /// replaces them with scrypt), so this is not part of the public API.
    package init(hashing password: String, cost: Int) {
        precondition(Self.costs.contains(cost), "bcrypt cost is 4...31")
        self.cost = cost
        salt = RelyingParty.randomBytes(16)
        digest = Self.hash(Array(password.utf8), salt: salt, cost: cost)
        variant = "2b"
    }

    /// The `$2b$…` text.
    public var text: String {
        "$\(variant)$" + (cost < 10 ? "0\(cost)" : "\(cost)") + "$" + Self.encode(salt) + Self.encode(digest)
    }

    /// Whether `password` is the one this hash was made from (compared in constant time).
    public func verify(_ password: String) -> Bool {
        let candidate = Self.hash(Array(password.utf8), salt: salt, cost: cost)
        return SHA256.hash(data: candidate) == SHA256.hash(data: digest) && candidate.count == digest.count
    }

    // MARK: The algorithm

    package static func hash(_ password: [UInt8], salt: [UInt8], cost: Int) -> [UInt8] {
        var key = password + [0]
        if key.count > 72 { key = Array(key.prefix(72)) }
        var state = Blowfish()
        // EksBlowfishSetup: the expensive key schedule.
        state.expand(key: key, salt: salt)
        for _ in 0..<(1 << cost) {
            state.expand(key: key, salt: nil)
            state.expand(key: salt, salt: nil)
        }
        // Encrypt "OrpheanBeholderScryDoubt" 64 times.
        var words: [UInt32] = [0x4F72_7068, 0x6561_6E42, 0x6568_6F6C, 0x6465_7253, 0x6372_7944, 0x6F75_6274]
        for _ in 0..<64 {
            for block in 0..<3 {
                (words[2 * block], words[2 * block + 1]) = state.encrypt(words[2 * block], words[2 * block + 1])
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(24)
        for word in words { out += [UInt8(word >> 24), UInt8(word >> 16 & 0xFF), UInt8(word >> 8 & 0xFF), UInt8(word & 0xFF)] }
        return Array(out.prefix(23))
    }

    /// bcrypt's own base64: its alphabet, no padding.
    package static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let a = bytes[index], b = index + 1 < bytes.count ? bytes[index + 1] : 0, c = index + 2 < bytes.count ? bytes[index + 2] : 0
            out.append(alphabet[Int(a >> 2)])
            out.append(alphabet[Int((a & 0x03) << 4 | b >> 4)])
            if index + 1 < bytes.count { out.append(alphabet[Int((b & 0x0F) << 2 | c >> 6)]) }
            if index + 2 < bytes.count { out.append(alphabet[Int(c & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    package static func decode(_ text: ArraySlice<UInt8>, count: Int) -> [UInt8]? {
        var values: [UInt8] = []
        for character in text {
            guard let value = alphabet.firstIndex(of: character) else { return nil }
            values.append(UInt8(value))
        }
        var out: [UInt8] = []
        var index = 0
        while index < values.count && out.count < count {
            let a = values[index], b = index + 1 < values.count ? values[index + 1] : 0
            let c = index + 2 < values.count ? values[index + 2] : 0, d = index + 3 < values.count ? values[index + 3] : 0
            out.append(a << 2 | b >> 4)
            if out.count < count, index + 2 < values.count { out.append((b & 0x0F) << 4 | c >> 2) }
            if out.count < count, index + 3 < values.count { out.append((c & 0x03) << 6 | d) }
            index += 4
        }
        return out.count == count ? out : nil
    }
}

/// The Blowfish state bcrypt keys and runs.
package struct Blowfish {
    package var p: [UInt32] = BlowfishConstants.p
    package var s: [UInt32] = BlowfishConstants.s

    /// Blowfish_expandstate (or expand0state when `salt` is nil): the key XORed into P, then P
    /// and the S-boxes replaced by successive encryptions, each input XORed with the salt.
    package mutating func expand(key: [UInt8], salt: [UInt8]?) {
        var position = 0
        for i in 0..<18 { p[i] ^= Self.word(key, &position) }
        var left: UInt32 = 0, right: UInt32 = 0
        var saltPosition = 0
        p.withUnsafeMutableBufferPointer { p in
            s.withUnsafeMutableBufferPointer { s in
                var i = 0
                while i < 18 {
                    if let salt {
                        left ^= Self.word(salt, &saltPosition)
                        right ^= Self.word(salt, &saltPosition)
                    }
                    (left, right) = Self.encrypt(left, right, p, s)
                    p[i] = left
                    p[i + 1] = right
                    i += 2
                }
                i = 0
                while i < 1024 {
                    if let salt {
                        left ^= Self.word(salt, &saltPosition)
                        right ^= Self.word(salt, &saltPosition)
                    }
                    (left, right) = Self.encrypt(left, right, p, s)
                    s[i] = left
                    s[i + 1] = right
                    i += 2
                }
            }
        }
    }

    package func encrypt(_ left: UInt32, _ right: UInt32) -> (UInt32, UInt32) {
        p.withUnsafeBufferPointer { p in s.withUnsafeBufferPointer { s in Self.encrypt(left, right, p, s) } }
    }

    @inline(__always)
    package static func encrypt(_ left: UInt32, _ right: UInt32, _ p: UnsafeBufferPointer<UInt32>, _ s: UnsafeBufferPointer<UInt32>) -> (
        UInt32, UInt32
    ) {
        var l = left ^ p[0], r = right
        var round = 1
        while round <= 16 {
            r ^= f(l, s) ^ p[round]
            l ^= f(r, s) ^ p[round + 1]
            round += 2
        }
        return (r ^ p[17], l)
    }

    @inline(__always)
    package static func encrypt(
        _ left: UInt32, _ right: UInt32, _ p: UnsafeMutableBufferPointer<UInt32>, _ s: UnsafeMutableBufferPointer<UInt32>
    )
        -> (UInt32, UInt32)
    {
        encrypt(left, right, UnsafeBufferPointer(p), UnsafeBufferPointer(s))
    }

    @inline(__always)
    package static func f(_ x: UInt32, _ s: UnsafeBufferPointer<UInt32>) -> UInt32 {
        ((s[Int(x >> 24)] &+ s[256 + Int(x >> 16 & 0xFF)]) ^ s[512 + Int(x >> 8 & 0xFF)]) &+ s[768 + Int(x & 0xFF)]
    }

    /// Four bytes of `data` as a big-endian word, wrapping around (Blowfish_stream2word).
    @inline(__always)
    package static func word(_ data: [UInt8], _ position: inout Int) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            if position >= data.count { position = 0 }
            value = value << 8 | UInt32(data[position])
            position += 1
        }
        return value
    }
}
