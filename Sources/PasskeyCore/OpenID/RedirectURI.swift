/// What a client may register as a redirect URI or post-logout redirect URI: the one rule the
/// server API, `passkeyd admin clients add` and the console share (all three register through
/// ``AdminService/addClient(name:redirectURIs:postLogoutURIs:isPublic:firstParty:allowSignUp:idTokenAlgorithm:by:)``).
/// The provider sends codes to exactly the registered string, so the string must name the host
/// its reviewer saw, to every browser: `https:a` and `https:/a` are `https://a/` to a browser.
///
/// - RFC 6749 §3.1.2: "The redirection endpoint URI MUST be an absolute URI as defined by
///   [RFC3986] Section 4.3 ... The endpoint URI MUST NOT include a fragment component."
/// - `https://` with a valid, non-empty host and no user info (``URLAuthority``).
/// - `http://` only to loopback, for native apps and development: `localhost`, `127.0.0.1`,
///   `[::1]` (RFC 8252 §7.3).
/// - RFC 8252 §7.1: a private-use scheme "based on a domain name under their control, expressed
///   in reverse order" (it has a dot: `com.example.app:/callback`), with a path or a host after
///   it; an authority, when given, is a valid host without user info.
/// - printable ASCII without the characters RFC 3986 leaves out (space, `"`, `<`, `>`, `\`, `^`,
///   `` ` ``, `{`, `|`, `}`): a browser reads `\` as `/` and drops tabs and line breaks;
/// - at most the authorization endpoint's `redirect_uri` limit, or it could never be sent.
package enum RedirectURI {
    static var maxBytes: Int { OpenIDService.parameterLimits["redirect_uri"] ?? 2048 }
    static let loopbackHosts: Set<String> = ["localhost", "127.0.0.1", "[::1]"]

    /// Why `uri` cannot be registered, or nil when it can.
    package static func refusal(_ uri: String) -> String? {
        guard uri.utf8.count <= maxBytes else { return "it is longer than \(maxBytes) bytes" }
        guard uri.utf8.allSatisfy({ (0x21...0x7E).contains($0) && !Array(#""<>\^`{|}"#.utf8).contains($0) }) else {
            return "it has a space, a control or non-ASCII character, or one of \" < > \\ ^ ` { | }"
        }
        guard !uri.contains("#") else { return "it has a fragment (RFC 6749 §3.1.2)" }
        guard let colon = uri.firstIndex(of: ":"), let first = uri.first, first.isASCII, first.isLetter,
            uri[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return "it is not an absolute URI (scheme:…)" }
        let scheme = uri[..<colon]
        let rest = uri[uri.index(after: colon)...]
        let hierarchy = rest[..<(rest.firstIndex(of: "?") ?? rest.endIndex)]
        switch scheme {
        case "https", "http":
            guard hierarchy.hasPrefix("//") else { return "it has no //host (a browser reads \(scheme):a as \(scheme)://a/)" }
            let authority = hierarchy.dropFirst(2).prefix { $0 != "/" }
            guard !authority.contains("@") else { return "it has user info (user@host)" }
            guard let parsed = URLAuthority(authority) else { return "it has no valid host (a DNS name or an IP address, and a port)" }
            if scheme == "http" && !loopbackHosts.contains(parsed.host) {
                return "http is only for loopback (localhost, 127.0.0.1, [::1]); use https"
            }
            return nil
        default:
            guard scheme.contains(".") else {
                return "the scheme is https, http on loopback, or an app's reverse-domain scheme (com.example.app)"
            }
            var hostOrPath = hierarchy
            if hierarchy.hasPrefix("//") {
                let authority = hierarchy.dropFirst(2).prefix { $0 != "/" }
                guard !authority.contains("@") else { return "it has user info (user@host)" }
                guard authority.isEmpty || URLAuthority(authority) != nil else { return "it has no valid host" }
                // `//` alone is an empty host: what follows it must be a path.
                hostOrPath = authority.isEmpty ? hierarchy[authority.endIndex...] : authority
            }
            guard !hostOrPath.isEmpty else {
                return "it has neither a path nor a host after the scheme (RFC 8252 §7.1: com.example.app:/callback)"
            }
            return nil
        }
    }
}
