import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where passkeyd may send requests of its own (webhook deliveries; it fetches nothing else): a
/// URL is checked when it is registered, and the address each connection actually reaches is
/// checked again after DNS resolution (see ``WebhookClient``), so a name that later resolves
/// inward, or an address spelled oddly, never reaches the inside of the operator's network.
///
/// Refused unless ``allowsPrivateAddresses`` (an operator's explicit choice, for local
/// development and receivers on a private network): plain `http`, loopback, private (RFC 1918),
/// shared (CGNAT, RFC 6598), link-local (cloud metadata at 169.254.169.254), unique local IPv6
/// (fc00::/7), unspecified, multicast, broadcast, reserved, documentation and benchmarking ranges,
/// every other block IANA's special-purpose registries (RFC 6890 and updates) list as not globally
/// reachable (the globally reachable AS112 and AMT anycast blocks are allowed), IPv4-mapped, -compatible
/// and -translated IPv6, `localhost` and single-label names, and any IPv4 spelling
/// but the four dotted decimals (`2130706433`, `127.1`, `0x7f.1`, `0177.0.0.1`).
///
/// ```swift
/// let policy = OutboundURLPolicy()
/// _ = try policy.check(url: "https://hooks.example.com/passkeyd")  // fine
/// _ = try policy.check(url: "http://169.254.169.254/latest/")     // throws: https required
/// ```
public struct OutboundURLPolicy: Sendable, Hashable {
    /// Private, loopback and other inside addresses, and plain `http`, are allowed: for local
    /// development and tests (`webhookAllowPrivateAddresses`).
    public var allowsPrivateAddresses: Bool

    public init(allowsPrivateAddresses: Bool = false) {
        self.allowsPrivateAddresses = allowsPrivateAddresses
    }

    /// Anything goes but redirects: loopback receivers in tests and development.
    public static let unsafeAllowingPrivateAddresses = OutboundURLPolicy(allowsPrivateAddresses: true)

    /// Why a URL or an address is refused: which rule it broke, in words for the operator.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
        package init(description: String) { self.description = description }
    }

    /// Where a checked URL points: its host (a name, or the literal address's text) and port,
    /// and the address's bytes when the host is a literal address.
    public struct Destination: Sendable, Hashable {
        public let scheme: String
        public let host: String
        public let port: Int
        public let address: [UInt8]?
    }

    /// Checks a URL by its text alone: scheme, host spelling, and a literal address's range.
    /// A name passes here; the addresses it resolves to are checked when connecting.
    public func check(url text: String) throws(Refusal) -> Destination {
        guard text.utf8.count <= 2048, let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            let rawHost = url.host, !rawHost.isEmpty
        else { throw Refusal(description: "\"\(text.prefix(100))\" is not an absolute http(s) URL") }
        guard scheme == "https" || scheme == "http" else { throw Refusal(description: "the scheme must be https, not \(scheme)") }
        guard scheme == "https" || allowsPrivateAddresses else {
            throw Refusal(description: "https is required (plain http only with webhookAllowPrivateAddresses)")
        }
        guard url.fragment == nil else { throw Refusal(description: "a webhook URL has no fragment") }
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65535).contains(port) else { throw Refusal(description: "port \(port) is out of range") }
        var host = rawHost.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let address = try Self.literalAddress(host)
        if let address {
            try check(address: address)
        } else if !allowsPrivateAddresses {
            let name = host.hasSuffix(".") ? String(host.dropLast()) : host
            if name == "localhost" || name.hasSuffix(".localhost") {
                throw Refusal(description: "\(host) is a loopback name")
            }
            guard name.contains(".") else {
                throw Refusal(description: "\(host) is a single-label name (resolved through local search domains)")
            }
        }
        return Destination(scheme: scheme, host: host, port: port, address: address)
    }

    /// Refuses an address (4 or 16 bytes, network order) in an inside or special range.
    public func check(address: [UInt8]) throws(Refusal) {
        guard !allowsPrivateAddresses, let reason = Self.specialUse(address) else { return }
        throw Refusal(description: "\(Self.text(address)) is \(reason)")
    }

    /// The bytes of a literal address host, nil for a name; a host whose last label is a number
    /// (how browsers and `inet_aton` read IPv4) must be four dotted decimals.
    package static func literalAddress(_ host: String) throws(Refusal) -> [UInt8]? {
        if host.contains(":") || host.contains("%") {
            guard !host.contains("%") else { throw Refusal(description: "\(host) has a zone or escape in its address") }
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else { throw Refusal(description: "\(host) is not an IPv6 address") }
            return withUnsafeBytes(of: &address) { Array($0) }
        }
        guard host.utf8.allSatisfy({ $0 < 0x80 }), host.utf8.count <= 253 else {
            throw Refusal(description: "the host must be ASCII (IDNA A-labels), at most 253 bytes")
        }
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        let last = labels.last == "" && labels.count > 1 ? labels[labels.count - 2] : labels.last ?? ""
        let looksNumeric =
            !last.isEmpty
            && (last.allSatisfy(\.isASCIIDigit)
                || ((last.hasPrefix("0x") || last.hasPrefix("0X")) && last.dropFirst(2).allSatisfy(\.isHexDigit)))
        guard looksNumeric else {
            guard labels.dropLast(labels.last == "" ? 1 : 0).allSatisfy(Self.isHostLabel) else {
                throw Refusal(description: "\(host) is not a valid host name")
            }
            return nil
        }
        let parts = host.hasSuffix(".") ? labels.dropLast() : labels[...]
        let octets = parts.compactMap { part -> UInt8? in
            guard (1...3).contains(part.count), part.allSatisfy(\.isASCIIDigit), part == "0" || !part.hasPrefix("0") else { return nil }
            return UInt8(part)
        }
        guard parts.count == 4, octets.count == 4 else {
            throw Refusal(description: "\(host) is an IPv4 address in an ambiguous spelling: write four dotted decimals")
        }
        return octets
    }

    private static func isHostLabel(_ label: Substring) -> Bool {
        (1...63).contains(label.count) && label.first != "-" && label.last != "-"
            && label.allSatisfy { $0.isASCIIDigit || ("a"..."z").contains($0) || $0 == "-" || $0 == "_" }
    }

    /// What an address is for, when it is not a global unicast one; nil when it is.
    package static func specialUse(_ address: [UInt8]) -> String? {
        if address.count == 4 { return specialUseIPv4(address[0], address[1], address[2], address[3]) }
        guard address.count == 16 else { return "not an IP address" }
        let head = address.prefix(12)
        if address.allSatisfy({ $0 == 0 }) { return "the unspecified address" }
        if address.dropLast().allSatisfy({ $0 == 0 }) && address[15] == 1 { return "loopback" }
        if head.prefix(10).allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF { return "an IPv4-mapped address" }
        if head.allSatisfy({ $0 == 0 }) { return "an IPv4-compatible address" }
        if address.starts(with: [0x00, 0x64, 0xFF, 0x9B]) { return "an IPv4-translated (NAT64) address" }
        if address[0] == 0xFF { return "multicast" }
        if address[0] & 0xFE == 0xFC { return "a unique local address (fc00::/7)" }
        if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return "link-local" }
        if address[0] == 0xFE && address[1] & 0xC0 == 0xC0 { return "site-local" }
        if address.starts(with: [0x20, 0x01, 0x0D, 0xB8]) { return "a documentation address (2001:db8::/32)" }
        if address[0] == 0x3F && address[1] == 0xFF && address[2] & 0xF0 == 0 { return "a documentation address (3fff::/20)" }
        if address.starts(with: [0x20, 0x02]) { return "a 6to4 address (it embeds an IPv4 address)" }
        if address.starts(with: [0x20, 0x01, 0x00, 0x00]) { return "a Teredo address (it embeds an IPv4 address)" }
        // The rest of 2001::/23 (IETF protocol assignments: benchmarking 2001:2::/48, ORCHID,
        // AMT, AS112, service anycast): protocol plumbing, never a webhook receiver.
        if address[0] == 0x20 && address[1] == 0x01 && address[2] & 0xFE == 0 {
            return "an IETF protocol assignment (2001::/23, benchmarking 2001:2::/48 among them)"
        }
        // Everything outside 2000::/3 (IANA's global unicast space) is special or unassigned:
        // 100::/64 discard, 5f00::/16 SRv6 SIDs, and the rest.
        if address[0] & 0xE0 != 0x20 { return "not a global unicast address" }
        return nil
    }

    private static func specialUseIPv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> String? {
        switch (a, b, c) {
        case (0, _, _): "the unspecified network (0.0.0.0/8)"
        case (10, _, _), (172, 16...31, _), (192, 168, _): "private (RFC 1918)"
        case (100, 64...127, _): "shared address space (CGNAT, 100.64.0.0/10)"
        case (127, _, _): "loopback"
        case (169, 254, _): "link-local (cloud metadata lives here)"
        case (192, 0, 0): "IETF protocol assignments (192.0.0.0/24)"
        case (192, 0, 2), (198, 51, 100), (203, 0, 113): "a documentation address"
        case (192, 88, 99): "the deprecated 6to4 relay anycast (192.88.99.0/24)"
        case (198, 18...19, _): "benchmarking (198.18.0.0/15)"
        case (224...239, _, _): "multicast"
        case (255, 255, 255) where d == 255: "broadcast"
        case (240...255, _, _): "reserved (240.0.0.0/4)"
        default: nil
        }
    }

    /// An address as text (`inet_ntop`'s form).
    package static func text(_ address: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = address.count == 4 ? AF_INET : AF_INET6
        guard address.count == 4 || address.count == 16,
            address.withUnsafeBytes({ inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }) != nil
        else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
