import Foundation

/// An email address as SMTP sends it (RFC 5321 §4.1.2 `Mailbox`), checked once where it enters:
/// a local part (dot-string or quoted string; UTF-8 allowed, RFC 6531), `@`, and a domain of
/// LDH labels. A Unicode domain (IDN) is kept in its ASCII form (`xn--` A-labels, RFC 3492
/// Punycode), so every later comparison and every SMTP command sees one spelling.
///
/// Refused: CR, LF or any other control character anywhere; a local part over 64 octets, a
/// domain over 255, an address over 254 (the 256-octet path less its angle brackets, RFC 5321
/// §4.5.3.1); address literals (`[192.0.2.1]`); a domain without a dot.
public struct MailAddress: Sendable, Hashable, CustomStringConvertible {
    /// As entered (NFC), the domain in its ASCII form.
    public let localPart: String
    public let domain: String

    /// `local@domain`.
    public var description: String { "\(localPart)@\(domain)" }

    /// The comparison key: the local part and domain lowercased. RFC 5321 lets a server tell
    /// `Ann@` from `ann@`, but no mail provider people use does, and two accounts must not
    /// claim one mailbox by its case.
    public var key: String { description.lowercased() }

    /// The local part needs SMTPUTF8 (RFC 6531): it is not ASCII.
    public var needsSMTPUTF8: Bool { localPart.utf8.contains { $0 >= 0x80 } }

    /// Why a text is not an address.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Parses `text` (surrounding spaces are dropped; nothing else is changed but NFC).
    public init(_ text: String) throws(Invalid) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 512 else { throw Invalid(reason: "the address is too long") }
        guard !trimmed.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) })
        else { throw Invalid(reason: "the address contains a control character (CR, LF…)") }
        let text = trimmed.precomposedStringWithCanonicalMapping
        // The domain follows the last `@` (a quoted local part may hold one).
        guard let at = text.lastIndex(of: "@") else { throw Invalid(reason: "the address has no @") }
        let local = String(text[..<at])
        let domainText = String(text[text.index(after: at)...])
        try Self.checkLocalPart(local)
        let domain = try Self.asciiDomain(domainText)
        guard local.utf8.count + 1 + domain.utf8.count <= 254 else { throw Invalid(reason: "the address is longer than 254 octets") }
        localPart = local
        self.domain = domain
    }

    // RFC 5321 §4.1.2:
    //   Local-part = Dot-string / Quoted-string
    //   Dot-string = Atom *("."  Atom);  Atom = 1*atext  (RFC 6531: atext =/ UTF8-non-ascii)
    //   Quoted-string = DQUOTE *QcontentSMTP DQUOTE
    //   QcontentSMTP = qtextSMTP / quoted-pairSMTP;  qtextSMTP = %d32-33 / %d35-91 / %d93-126
    //   quoted-pairSMTP = %d92 %d32-126
    static func checkLocalPart(_ local: String) throws(Invalid) {
        let bytes = Array(local.utf8)
        guard !bytes.isEmpty else { throw Invalid(reason: "the address has nothing before the @") }
        guard bytes.count <= 64 else { throw Invalid(reason: "the part before the @ is longer than 64 octets") }
        if bytes.first == 0x22 {
            guard bytes.count >= 2, bytes.last == 0x22 else { throw Invalid(reason: "a quoted local part must end with a quote") }
            var index = 1
            while index < bytes.count - 1 {
                let byte = bytes[index]
                if byte == 0x5C {
                    guard index + 1 < bytes.count - 1, (32...126).contains(bytes[index + 1]) else {
                        throw Invalid(reason: "a backslash in a quoted local part must escape a printable character")
                    }
                    index += 2
                    continue
                }
                guard byte == 32 || byte == 33 || (35...91).contains(byte) || (93...126).contains(byte) || byte >= 0x80 else {
                    throw Invalid(reason: "a quoted local part holds an unescaped quote or backslash")
                }
                index += 1
            }
            return
        }
        let atext = Set("!#$%&'*+-/=?^_`{|}~".utf8)
        var previousDot = true
        for byte in bytes {
            if byte == 0x2E {
                guard !previousDot else { throw Invalid(reason: "the local part has an empty dot-separated part") }
                previousDot = true
                continue
            }
            previousDot = false
            let isAlnum = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            guard isAlnum || atext.contains(byte) || byte >= 0x80 else {
                throw Invalid(reason: "the local part holds a character that needs quoting")
            }
        }
        guard !previousDot else { throw Invalid(reason: "the local part ends with a dot") }
    }

    /// The domain in ASCII: each label lowercased and, when not ASCII, turned into its A-label
    /// (`xn--` + Punycode of its NFC, lowercased form). Labels are LDH (RFC 5321 §4.1.2
    /// `sub-domain = Let-dig [Ldh-str]`), 1–63 octets; the whole at most 255.
    static func asciiDomain(_ text: String) throws(Invalid) -> String {
        guard !text.isEmpty else { throw Invalid(reason: "the address has no domain") }
        guard !text.hasPrefix("[") else { throw Invalid(reason: "address literals are not accepted") }
        // Full stops other than U+002E that IDNA maps to it (ideographic, fullwidth, halfwidth).
        let dotted = text.replacingOccurrences(of: "\u{3002}", with: ".").replacingOccurrences(of: "\u{FF0E}", with: ".")
            .replacingOccurrences(of: "\u{FF61}", with: ".")
        let labels = dotted.lowercased().split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard labels.count >= 2 else { throw Invalid(reason: "the domain has no dot") }
        var ascii: [String] = []
        for label in labels {
            guard !label.isEmpty else { throw Invalid(reason: "the domain has an empty label") }
            var encoded = label
            if label.utf8.contains(where: { $0 >= 0x80 }) {
                guard label.unicodeScalars.allSatisfy({ $0 == "-" || $0.properties.isAlphabetic || $0.properties.numericType != nil })
                else { throw Invalid(reason: "the domain holds a character no host name may hold") }
                guard let punycode = Punycode.encode(label) else { throw Invalid(reason: "the domain cannot be encoded") }
                encoded = "xn--" + punycode
            }
            let bytes = Array(encoded.utf8)
            guard bytes.count <= 63 else { throw Invalid(reason: "a label of the domain is longer than 63 octets") }
            guard bytes.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) || $0 == 0x2D }) else {
                throw Invalid(reason: "the domain holds a character no host name may hold")
            }
            guard bytes.first != 0x2D, bytes.last != 0x2D else { throw Invalid(reason: "a label of the domain starts or ends with -") }
            ascii.append(encoded)
        }
        let domain = ascii.joined(separator: ".")
        guard domain.utf8.count <= 255 else { throw Invalid(reason: "the domain is longer than 255 octets") }
        guard ascii.last?.allSatisfy(\.isNumber) == false else { throw Invalid(reason: "the domain is an IP address") }
        return domain
    }
}

/// Punycode (RFC 3492): a Unicode label as the ASCII of an IDNA A-label, without its `xn--`.
enum Punycode {
    private static let base = 36
    private static let tMin = 1
    private static let tMax = 26
    private static let skew = 38
    private static let damp = 700
    private static let initialBias = 72
    private static let initialN = 128

    /// RFC 3492 §6.3 encoding procedure; nil on overflow.
    static func encode(_ label: String) -> String? {
        let input = label.unicodeScalars.map { Int($0.value) }
        var output: [UInt8] = input.filter { $0 < 0x80 }.map { UInt8($0) }
        let basicCount = output.count
        var handled = basicCount
        if basicCount > 0 { output.append(0x2D) }
        var n = initialN
        var delta = 0
        var bias = initialBias
        while handled < input.count {
            guard let m = input.filter({ $0 >= n }).min() else { return nil }
            let (step, overflow) = (m - n).multipliedReportingOverflow(by: handled + 1)
            guard !overflow, delta <= Int(Int32.max) - step else { return nil }
            delta += step
            n = m
            for c in input {
                if c < n {
                    delta += 1
                    guard delta <= Int(Int32.max) else { return nil }
                }
                guard c == n else { continue }
                var q = delta
                var k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.append(digit(q))
                bias = adapt(delta, numPoints: handled + 1, firstTime: handled == basicCount)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func digit(_ value: Int) -> UInt8 {
        value < 26 ? UInt8(0x61 + value) : UInt8(0x30 + value - 26)
    }

    private static func adapt(_ delta: Int, numPoints: Int, firstTime: Bool) -> Int {
        var delta = firstTime ? delta / damp : delta / 2
        delta += delta / numPoints
        var k = 0
        while delta > ((base - tMin) * tMax) / 2 {
            delta /= base - tMin
            k += base
        }
        return k + (base - tMin + 1) * delta / (delta + skew)
    }
}
