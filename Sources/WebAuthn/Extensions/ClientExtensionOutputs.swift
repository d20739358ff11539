/// The client extension outputs a relying party reads from `clientExtensionResults` (§5.7.2),
/// parsed strictly and bounded: the members this library knows are typed, every other member is
/// ignored (clients add extensions the relying party never asked for) and kept nowhere.
///
/// Never kept, by design: `prf.results` (the PRF output is the client's secret: its presence is
/// refused with `prf_output_posted`) and `largeBlob.blob` (the application's data, read by the
/// client for itself).
public struct ClientExtensionOutputs: Sendable, Hashable {
    /// The most a `clientExtensionResults` may weigh, counted as its keys' and strings' UTF-8 bytes
    /// plus one per value: the known outputs take well under 200. A large blob read back
    /// (`largeBlob.blob`) is not counted: it is the client's, and ignored.
    public static let maxBytes = 4096
    /// The deepest nesting below `clientExtensionResults` (`largeBlob.blob` is depth 2).
    public static let maxDepth = 4

    /// `credProps.rk` (§10.1.3): whether the credential is discoverable; `nil` when not reported.
    public var discoverable: Bool?
    /// `prf.enabled` (§10.1.4, registration): whether the credential supports the PRF; `nil` when not reported.
    public var prfEnabled: Bool?
    /// `largeBlob.supported` (§10.1.5, registration); `nil` when not reported.
    public var largeBlobSupported: Bool?
    /// `largeBlob.written` (§10.1.5, authentication); `nil` when not reported.
    public var largeBlobWritten: Bool?

    /// No outputs.
    public init() {}

    /// Reads `clientExtensionResults`; `nil` (absent) reads as no outputs.
    ///
    /// Throws `malformed_extension_results` when it is over ``maxBytes`` or ``maxDepth``, or a known
    /// member has the wrong type; `prf_output_posted` when `prf.results` is present.
    public init(_ results: [String: JSONValue]?) throws(WebAuthnError) {
        guard let results, !results.isEmpty else { return }
        var budget = Self.maxBytes
        for (key, value) in results {
            budget -= key.utf8.count
            // `largeBlob.blob` (a read, up to the authenticator's capacity) is the application's
            // data: not counted, and never kept (the body's own limit bounds it).
            if key == "largeBlob", case .object(var members) = value {
                members["blob"] = nil
                try Self.measure(.object(members), depth: 1, budget: &budget)
            } else {
                try Self.measure(value, depth: 1, budget: &budget)
            }
        }
        if let value = results["credProps"] {
            let props = try Self.object(value, "credProps")
            discoverable = try Self.bool(props["rk"], "credProps.rk")
        }
        if let value = results["prf"] {
            let prf = try Self.object(value, "prf")
            // §10.1.4: the outputs are the client's; a relying party never sees them.
            if let outputs = prf["results"], outputs != .null {
                throw WebAuthnError(
                    .prfOutputPosted, "clientExtensionResults.prf.results is the client's secret: remove it before sending the response")
            }
            prfEnabled = try Self.bool(prf["enabled"], "prf.enabled")
        }
        if let value = results["largeBlob"] {
            let largeBlob = try Self.object(value, "largeBlob")
            largeBlobSupported = try Self.bool(largeBlob["supported"], "largeBlob.supported")
            largeBlobWritten = try Self.bool(largeBlob["written"], "largeBlob.written")
            // `blob` (a read) is the application's data: never kept.
        }
    }

    private static func measure(_ value: JSONValue, depth: Int, budget: inout Int) throws(WebAuthnError) {
        guard depth <= maxDepth else {
            throw WebAuthnError(.malformedExtensionResults, "clientExtensionResults nests deeper than \(maxDepth)")
        }
        budget -= 1
        switch value {
        case .string(let text): budget -= text.utf8.count
        case .array(let items):
            for item in items { try measure(item, depth: depth + 1, budget: &budget) }
        case .object(let members):
            for (key, member) in members {
                budget -= key.utf8.count
                try measure(member, depth: depth + 1, budget: &budget)
            }
        case .null, .bool, .number: break
        }
        guard budget >= 0 else {
            throw WebAuthnError(.malformedExtensionResults, "clientExtensionResults is larger than \(maxBytes) bytes")
        }
    }

    private static func object(_ value: JSONValue, _ name: String) throws(WebAuthnError) -> [String: JSONValue] {
        guard case .object(let members) = value else {
            throw WebAuthnError(.malformedExtensionResults, "clientExtensionResults.\(name) is not an object")
        }
        return members
    }

    private static func bool(_ value: JSONValue?, _ name: String) throws(WebAuthnError) -> Bool? {
        switch value {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        default: throw WebAuthnError(.malformedExtensionResults, "clientExtensionResults.\(name) is not a boolean")
        }
    }
}
