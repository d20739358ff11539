import Foundation

/// The authority of an address an operator or administrator registers (a client's redirect URI,
/// a CORS origin), read strictly: `host[:port]` (RFC 3986 §3.2) and nothing else, so that the
/// host passkeyd checks is the host every browser will go to.
///
/// - no user info (`user@host`, §3.2.1): `https://good.example@evil.example/` goes to evil;
/// - a host that is a DNS name (ASCII letters, digits, `-`, `_`; IDNA A-labels for others), four
///   dotted decimals, or an IPv6 address in brackets without a zone: never empty, never `*`, no
///   percent escape, and no other spelling of an IPv4 address (`0x7f.1`, `2130706433`), which a
///   browser would read as a number (the rule ``OutboundURLPolicy`` applies to webhooks);
/// - a port of 1 to 65535 written without leading zeros, or none.
package struct URLAuthority: Sendable, Equatable {
    /// The host as written, lowercased (an IPv6 address keeps its brackets).
    package let host: String
    package let port: Int?

    package init?(_ text: Substring) {
        let hostText: Substring
        let rest: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let inner = text[text.index(after: text.startIndex)..<close]
            guard inner.contains(":"), inner.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }),
                Self.isHost(String(inner).lowercased())
            else { return nil }
            hostText = text[...close]
            rest = text[text.index(after: close)...]
        } else {
            let colon = text.firstIndex(of: ":") ?? text.endIndex
            hostText = text[..<colon]
            rest = text[colon...]
            guard !hostText.isEmpty, Self.isHost(String(hostText).lowercased()) else { return nil }
        }
        if rest.isEmpty {
            port = nil
        } else {
            let digits = rest.dropFirst()
            guard rest.first == ":", (1...5).contains(digits.count), digits.allSatisfy({ ("0"..."9").contains($0) }), digits.first != "0",
                let number = Int(digits), number <= 65_535
            else { return nil }
            port = number
        }
        host = hostText.lowercased()
    }

    /// A name or an address in one of its accepted spellings (without brackets).
    private static func isHost(_ text: String) -> Bool {
        do {
            _ = try OutboundURLPolicy.literalAddress(text)
            return true
        } catch {
            return false
        }
    }
}
