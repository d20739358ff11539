import HTTPTypes

/// A request's W3C Trace Context headers (Trace Context Level 1, its sections named in quotes),
/// checked before the tracer reads them. The tracer is given these two values and nothing else
/// of the request: swift-otel logs the whole carrier when it cannot read one, every header and
/// cookie with it.
///
/// - `traceparent`: version `00`, 55 characters of lower-case hex fields, neither id all zeros;
///   otherwise none, and the request starts a trace of its own ("trace-id": "If the
///   trace-id value is invalid (for example if it contains non-allowed characters or all zeros),
///   vendors MUST ignore the traceparent"). A later version is not read.
/// - `tracestate`: only beside a `traceparent` ("tracestate Header": "If the vendor failed to parse
///   traceparent, it MUST NOT attempt to parse tracestate"); held to its list's grammar and
///   limits, and dropped alone when it breaks them ("failure to parse tracestate MUST NOT
///   affect the parsing of traceparent").
struct TraceContextHeaders {
    var traceParent: String?
    var traceState: String?

    /// "list": "There can be a maximum of 32 list-members in a list."
    static let maximumMembers = 32
    /// "tracestate Limits": "Vendors SHOULD propagate at least 512 characters of a combined header."
    static let maximumLength = 512
    /// "tracestate Limits": "Entries larger than 128 characters long SHOULD be removed first."
    static let largeMember = 128

    init(_ headers: HTTPFields) {
        // Several fields of one name are combined as RFC 9110 §5.3 says (`a, b`): two
        // traceparent fields make no valid one.
        guard let parent = headers[.traceParent], Self.isValidTraceParent(parent) else { return }
        traceParent = parent
        traceState = headers[.traceState].flatMap(Self.limitedTraceState)
    }

    /// The carrier the tracer extracts from.
    var carrier: [String: String] {
        var carrier: [String: String] = [:]
        carrier["traceparent"] = traceParent
        carrier["tracestate"] = traceState
        return carrier
    }

    /// "traceparent Header Field Values": `version "-" trace-id "-" parent-id "-" trace-flags`, version
    /// `00`; an all-zero trace-id or parent-id is invalid ("trace-id", "parent-id").
    static func isValidTraceParent(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 55, bytes[0] == UInt8(ascii: "0"), bytes[1] == UInt8(ascii: "0") else { return false }
        for (index, byte) in bytes.enumerated() {
            let dash = index == 2 || index == 35 || index == 52
            let hex = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66)
            guard dash ? byte == UInt8(ascii: "-") : hex else { return false }
        }
        return bytes[3..<35].contains { $0 != UInt8(ascii: "0") } && bytes[36..<52].contains { $0 != UInt8(ascii: "0") }
    }

    /// The list members of a `tracestate` (combined over its fields), written without optional
    /// white space, at most ``maximumLength`` characters; nil when none is left or the list is
    /// invalid.
    ///
    /// "list": `list = list-member 0*31( OWS "," OWS list-member )`; "Empty and whitespace-only
    /// list members are allowed" (and count as members). More than 32 members, a member its
    /// grammar refuses, or a key twice ("Only one entry per key is allowed", "Combined Header Value") drop the
    /// whole header.
    ///
    /// "tracestate Limits": "In a situation where tracestate needs to be truncated due to size
    /// limitations, the vendor MUST truncate whole entries. Entries larger than 128 characters
    /// long SHOULD be removed first. Then entries SHOULD be removed starting from the end of
    /// tracestate." The length "includes commas required to separate list items" and no OWS.
    static func limitedTraceState(_ text: String) -> String? {
        // At most 33 pieces: a 33rd means a 33rd member, however long the rest.
        let pieces = text.utf8.split(separator: UInt8(ascii: ","), maxSplits: maximumMembers, omittingEmptySubsequences: false)
        guard pieces.count <= maximumMembers else { return nil }
        var members: [Substring] = []
        var keys: Set<Substring> = []
        for piece in pieces {
            let member = Substring(piece).trimmingOWS()
            if member.isEmpty { continue }
            guard let equals = member.firstIndex(of: "="), isKey(member[..<equals].utf8),
                isValue(member[member.index(after: equals)...].utf8), keys.insert(member[..<equals]).inserted
            else { return nil }
            members.append(member)
        }
        func length(_ members: [Substring]) -> Int { members.reduce(0) { $0 + $1.utf8.count } + max(members.count - 1, 0) }
        if length(members) > maximumLength {
            members.removeAll { $0.utf8.count > largeMember }
            while length(members) > maximumLength { members.removeLast() }
        }
        return members.isEmpty ? nil : members.joined(separator: ",")
    }

    /// "Key": `key = simple-key / multi-tenant-key`;
    /// `simple-key = lcalpha 0*255( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )`;
    /// `multi-tenant-key = tenant-id "@" system-id`;
    /// `tenant-id = ( lcalpha / DIGIT ) 0*240( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )`;
    /// `system-id = lcalpha 0*13( lcalpha / DIGIT / "_" / "-"/ "*" / "/" )`.
    static func isKey(_ key: Substring.UTF8View) -> Bool {
        func isLowerAlpha(_ byte: UInt8) -> Bool { byte >= 0x61 && byte <= 0x7A }
        func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
        func isKeyCharacter(_ byte: UInt8) -> Bool {
            isLowerAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "*")
                || byte == UInt8(ascii: "/")
        }
        guard let at = key.firstIndex(of: UInt8(ascii: "@")) else {
            guard let first = key.first, isLowerAlpha(first), key.count <= 256 else { return false }
            return key.dropFirst().allSatisfy(isKeyCharacter)
        }
        let tenant = key[..<at], system = key[key.index(after: at)...]
        guard let tenantFirst = tenant.first, isLowerAlpha(tenantFirst) || isDigit(tenantFirst), tenant.count <= 241,
            tenant.dropFirst().allSatisfy(isKeyCharacter),
            let systemFirst = system.first, isLowerAlpha(systemFirst), system.count <= 14, system.dropFirst().allSatisfy(isKeyCharacter)
        else { return false }
        return true
    }

    /// "Value": `value = 0*255(chr) nblk-chr`; `nblk-chr = %x21-2B / %x2D-3C / %x3E-7E`;
    /// `chr = %x20 / nblk-chr`.
    static func isValue(_ value: Substring.UTF8View) -> Bool {
        func isNonBlank(_ byte: UInt8) -> Bool { byte >= 0x21 && byte <= 0x7E && byte != UInt8(ascii: ",") && byte != UInt8(ascii: "=") }
        guard let last = value.last, isNonBlank(last), value.count <= 256 else { return false }
        return value.allSatisfy { $0 == 0x20 || isNonBlank($0) }
    }
}

extension HTTPField.Name {
    fileprivate static let traceParent = HTTPField.Name("traceparent")!
    fileprivate static let traceState = HTTPField.Name("tracestate")!
}

extension Substring {
    /// Without the optional white space (`OWS`, spaces and tabs) at either end.
    fileprivate func trimmingOWS() -> Substring {
        let isOWS: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isOWS($0) }), let last = lastIndex(where: { !isOWS($0) }) else { return self[endIndex...] }
        return self[first...last]
    }
}
