import Foundation

/// A mail as passkeyd writes it: one sender, one recipient, a subject, a plain-text and an HTML
/// body. ``rendered(messageID:date:)`` gives its RFC 5322 bytes: every header value that is not
/// plain printable ASCII becomes RFC 2047 encoded words, display names are quoted or encoded
/// (never copied), and any CR, LF or other control character in a header value becomes a space,
/// so no value can start a header of its own. The body is `multipart/alternative` (RFC 2046)
/// with both parts quoted-printable (RFC 2045 §6.7): 7-bit lines of at most 76 characters.
public struct MailMessage: Sendable, Hashable {
    public var fromName: String
    public var from: MailAddress
    public var to: MailAddress
    public var subject: String
    public var text: String
    public var html: String
    /// `Content-Language` (RFC 3282), e.g. `fr`.
    public var language: String?

    public init(
        fromName: String, from: MailAddress, to: MailAddress, subject: String, text: String, html: String, language: String? = nil
    ) {
        self.fromName = fromName
        self.from = from
        self.to = to
        self.subject = subject
        self.text = text
        self.html = html
        self.language = language
    }

    /// The message's bytes, lines ending in CRLF. `messageID` is the part inside `<…@domain>`
    /// (letters, digits, `-` and `.`); a resend of one outbox row keeps it, so the receiver can
    /// tell the two apart.
    public func rendered(messageID: String, date: Date) -> [UInt8] {
        let boundary = "=_passkeyd_" + String(messageID.filter { $0.isASCII && ($0.isLetter || $0.isNumber) }.prefix(40))
        var lines: [String] = []
        lines.append("Date: " + Self.rfc5322Date(date))
        lines.append(Self.header("From", mailbox(name: fromName, address: from)))
        lines.append(Self.header("To", mailbox(name: nil, address: to)))
        lines.append(Self.header("Subject", Self.encodedText(subject)))
        lines.append(
            "Message-ID: <\(messageID.filter { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") })@\(from.domain)>")
        lines.append("MIME-Version: 1.0")
        // RFC 3834: an automatic mail, so that auto-responders stay silent.
        lines.append("Auto-Submitted: auto-generated")
        if let language, language.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "-") }), !language.isEmpty {
            lines.append("Content-Language: \(language)")
        }
        lines.append("Content-Type: multipart/alternative; boundary=\"\(boundary)\"")
        lines.append("")
        for (type, body) in [("text/plain", text), ("text/html", html)] {
            lines.append("--\(boundary)")
            lines.append("Content-Type: \(type); charset=utf-8")
            lines.append("Content-Transfer-Encoding: quoted-printable")
            lines.append("")
            lines.append(contentsOf: Self.quotedPrintable(body))
        }
        lines.append("--\(boundary)--")
        return Array((lines.joined(separator: "\r\n") + "\r\n").utf8)
    }

    /// `"Name" <local@domain>` (RFC 5322 §3.4): the name as a quoted string when printable
    /// ASCII, else as encoded words; the address raw (a UTF-8 local part is for an SMTPUTF8
    /// session, RFC 6532).
    func mailbox(name: String?, address: MailAddress) -> String {
        let cleaned = Self.singleLine(name ?? "")
        guard !cleaned.isEmpty else { return "<\(address)>" }
        if cleaned.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 0x20 }) {
            let escaped = cleaned.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            return "\"\(escaped)\" <\(address)>"
        }
        return Self.encodedWords(cleaned) + " <\(address)>"
    }

    /// A header line, folded (RFC 5322 §2.2.3) at spaces so no line passes 78 characters where
    /// a space allows.
    static func header(_ name: String, _ value: String) -> String {
        var lines: [String] = []
        var current = name + ":"
        for word in value.split(separator: " ", omittingEmptySubsequences: false) {
            if current.count + 1 + word.count > 78 && current.count > name.count + 1 {
                lines.append(current)
                current = " " + word
            } else {
                current += " " + word
            }
        }
        lines.append(current)
        return lines.joined(separator: "\r\n")
    }

    /// Header text: as is when printable ASCII, else RFC 2047 encoded words.
    static func encodedText(_ text: String) -> String {
        let cleaned = singleLine(text)
        if cleaned.unicodeScalars.allSatisfy({ $0.isASCII }) && !cleaned.contains("=?") { return cleaned }
        return encodedWords(cleaned)
    }

    /// RFC 2047 §4.1 "B" encoded words of UTF-8, each at most 75 characters
    /// (`=?utf-8?b?` + base64 + `?=`), never splitting a character, separated by spaces.
    static func encodedWords(_ text: String) -> String {
        var words: [String] = []
        var chunk: [UInt8] = []
        // 45 bytes make 60 base64 characters: 12 + 60 = 72 per word.
        for character in text {
            let bytes = Array(String(character).utf8)
            if chunk.count + bytes.count > 45 && !chunk.isEmpty {
                words.append("=?utf-8?b?" + Data(chunk).base64EncodedString() + "?=")
                chunk = []
            }
            // A character longer than a word's 45 bytes (a long run of combining marks) is left
            // out rather than cut: a word holds only whole characters.
            if bytes.count <= 45 { chunk += bytes }
        }
        if !chunk.isEmpty || words.isEmpty { words.append("=?utf-8?b?" + Data(chunk).base64EncodedString() + "?=") }
        return words.joined(separator: " ")
    }

    /// One line: every control character (CR and LF included) a space, at most 900 characters.
    static func singleLine(_ text: String) -> String {
        let scalars = text.unicodeScalars.map { scalar -> Unicode.Scalar in
            scalar.value < 0x20 || scalar.value == 0x7F || (0x80..<0xA0).contains(scalar.value) || scalar == "\u{2028}"
                || scalar == "\u{2029}" ? " " : scalar
        }
        var result = String(String.UnicodeScalarView(scalars)).trimmingCharacters(in: .whitespaces)
        if result.count > 900 { result = String(result.prefix(900)) }
        return result
    }

    /// RFC 2045 §6.7 quoted-printable lines of `text` (its line breaks become CRLF): at most 76
    /// characters, soft breaks (`=`) inside long lines, `=`, non-ASCII and a line's trailing
    /// space or tab encoded; a line starting with `.` or `From ` is encoded too, so that no
    /// relay rewrites it.
    static func quotedPrintable(_ text: String) -> [String] {
        var output: [String] = []
        let hex = Array("0123456789ABCDEF".utf8)
        for line in text.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false)
        {
            let bytes = Array(line.utf8)
            var encoded: [[UInt8]] = []
            for (index, byte) in bytes.enumerated() {
                let last = index == bytes.count - 1
                let atStart = index == 0 && (byte == 0x2E || (byte == 0x46 && line.hasPrefix("From ")))
                let plain = (33...126).contains(byte) && byte != 0x3D && !atStart
                let space = (byte == 0x20 || byte == 0x09) && !last
                encoded.append(plain || space ? [byte] : [0x3D, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            }
            var current: [UInt8] = []
            for piece in encoded {
                if current.count + piece.count > 75 {
                    output.append(String(decoding: current + [0x3D], as: UTF8.self))
                    current = []
                }
                current += piece
            }
            output.append(String(decoding: current, as: UTF8.self))
        }
        return output
    }

    /// `Sun, 29 Nov 2026 09:40:00 +0000` (RFC 5322 §3.3), in UTC.
    static func rfc5322Date(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second, .weekday], from: date)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int?) -> String { String(format: "%02d", value ?? 0) }
        return "\(days[((parts.weekday ?? 1) - 1) % 7]), \(parts.day ?? 1) \(months[((parts.month ?? 1) - 1) % 12]) \(parts.year ?? 1970) "
            + "\(two(parts.hour)):\(two(parts.minute)):\(two(parts.second)) +0000"
    }
}
