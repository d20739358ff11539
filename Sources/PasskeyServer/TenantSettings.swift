import Configuration
import Foundation
import PasskeyCore
import PasskeyModels

/// A tenant's settings: a JSON object with the server's own setting names (`rpID`, `origins`,
/// `appleAppIDs`, `rateLimits.perIP`, …), read with the same structs as the server's settings.
///
/// What a tenant does not set comes from the server's settings (policies, lifetimes, rate
/// budgets, the SMTP relay), except what makes a relying party: its RP ID, name, origins,
/// related origins, apps, issuer and audiences, CORS origins, webhooks, mail sender and links are
/// its own or absent, never another's. Settings of the process (listen address, database, log,
/// proxies, the web UI's folder, metrics, connection limits, the mail relay, outbound webhook
/// policy, FIDO roots) are the server's alone: a tenant's settings naming one are refused.
public enum TenantSettings {
    /// Set per tenant or left empty: never taken from the server's settings.
    static let relyingPartyKeys: Set<String> = [
        "rpID", "rpName", "origins", "relatedOrigins", "appleAppIDs", "androidApps", "tokens.issuer", "tokens.audiences",
        "corsOrigins", "webhooks", "email.from", "enrollURL", "manageURL",
    ]

    /// The process's settings: refused in a tenant's.
    static let serverKeys: Set<String> = [
        "listen", "databaseURL", "logFormat", "migrations", "publicDirectory", "metricsPublic", "metricsToken", "trustedProxies",
        "connections.bodyTimeoutSeconds", "connections.headerTimeoutSeconds", "connections.idleTimeoutSeconds",
        "connections.maxConnections", "compatibilityRoutes", "maxBodySize", "rateLimits.maxKeys", "rateLimits.refusalHoldMilliseconds",
        "email.smtpURL", "email.smtpCAFile",
        "email.smtpAllowPlaintext", "webhookAllowPrivateAddresses", "mdsRootCertificate", "passwordHashConcurrency",
    ]

    /// Reads a tenant's settings over the server's. Throws ``ConfigurationError`` naming the
    /// tenant's setting when a value is wrong, a key is the server's or names no setting, or the
    /// RP ID or origins are missing.
    public static func read(
        tenant: String, json: Data, server: ServerSettings, readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(ConfigurationError) -> (domain: ServerConfiguration, edge: EdgeConfiguration) {
        let name = "tenant \(tenant)"
        let file: SettingsFile
        do throws(SettingProblem) {
            file = try SettingsFile(json: json, name: name)
        } catch {
            throw ConfigurationError(setting: error.setting, problem: error.problem)
        }
        if let key = file.keys.first(where: { serverKeys.contains($0) }) {
            throw ConfigurationError(setting: name, problem: "\(key) is a setting of the server, not of a tenant")
        }
        for required in ["rpID", "origins"] where !file.keys.contains(required) {
            throw ConfigurationError(setting: name, problem: "\(required) is missing")
        }
        let hidden = relyingPartyKeys
        let ledger = SettingsLedger()
        let inherited = server.providers.map { HidingProvider(base: $0, hidden: hidden) as any ConfigProvider }
        let reader = ConfigReader(providers: [file] + inherited, accessReporter: ledger)
        do throws(ConfigurationError) {
            let domain = try ServerConfiguration(reader: reader, readFile: readFile)
            let edge = try EdgeConfiguration(
                reader: reader, webOrigins: domain.webOrigins, defaultPublicDirectory: server.edge.publicDirectory)
            if let unknown = ledger.unknownKeys(in: file).first {
                throw ConfigurationError(setting: name, problem: "\(unknown) is not a setting")
            }
            // What the server checks of its own relying party when it starts (app IDs, …).
            _ = try domain.relyingParty()
            return (domain, edge)
        } catch  where !error.setting.hasPrefix(name) {
            // Named as the tenant's (a missing `email.from` beside the server's mail relay, …).
            throw ConfigurationError(setting: "\(name): \(error.setting)", problem: error.problem)
        }
    }
}

/// A settings provider with some keys taken out: a tenant reads the server's settings through
/// it, without the server's relying party.
struct HidingProvider: FixedSettingsProvider {
    let base: any FixedSettingsProvider
    let hidden: Set<String>

    var providerName: String { base.providerName }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        if hidden.contains(key.components.joined(separator: ".")) { return LookupResult(encodedKey: key.description, value: nil) }
        return try base.value(forKey: key, type: type)
    }
}

/// Host names as tenants are found by: the `Host` (or a trusted proxy's `X-Forwarded-Host`)
/// without its port, lowercase, without a trailing dot. Only ASCII letters, digits, `-` and `.`
/// in labels of 1 to 63 (an IDN arrives as its A-label, `xn--…`), or an IP address; anything
/// else is no host (nil), which matches no tenant.
public enum TenantHost {
    public static func normalize(_ raw: String) -> String? {
        // Byte by byte, one allocation for the answer: this runs on every request of a server
        // with tenants (Foundation's trimming and lowercasing cost ~3% of a sign-in).
        let utf8 = Array(raw.utf8)
        var start = 0, end = utf8.count
        while start < end && (utf8[start] == 0x20 || utf8[start] == 0x09) { start += 1 }
        while end > start && (utf8[end - 1] == 0x20 || utf8[end - 1] == 0x09) { end -= 1 }
        guard start < end, end - start <= 300 else { return nil }
        if utf8[start] == UInt8(ascii: "[") {
            // An IPv6 literal, with or without a port.
            guard let close = utf8[start..<end].firstIndex(of: UInt8(ascii: "]")), close > start + 1 else { return nil }
            let rest = utf8[(close + 1)..<end]
            guard rest.isEmpty || (rest.first == UInt8(ascii: ":") && isPort(rest.dropFirst())) else { return nil }
            let inner = utf8[(start + 1)..<close]
            guard inner.allSatisfy({ isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else { return nil }
            return "[" + String(decoding: inner.map(lower), as: UTF8.self) + "]"
        }
        if let colon = utf8[start..<end].lastIndex(of: UInt8(ascii: ":")) {
            guard isPort(utf8[(colon + 1)..<end]) else { return nil }
            end = colon
        }
        if end > start && utf8[end - 1] == UInt8(ascii: ".") { end -= 1 }
        guard start < end, end - start <= 253 else { return nil }
        var host: [UInt8] = []
        host.reserveCapacity(end - start)
        var labelStart = start
        for index in start...end {
            if index == end || utf8[index] == UInt8(ascii: ".") {
                let length = index - labelStart
                guard (1...63).contains(length), utf8[labelStart] != UInt8(ascii: "-"), utf8[index - 1] != UInt8(ascii: "-") else {
                    return nil
                }
                if index < end { host.append(UInt8(ascii: ".")) }
                labelStart = index + 1
                continue
            }
            let byte = lower(utf8[index])
            guard (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D else { return nil }
            host.append(byte)
        }
        return String(decoding: host, as: UTF8.self)
    }

    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte + 0x20 : byte }

    private static func isHex(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (lower(byte) >= 0x61 && lower(byte) <= 0x66)
    }

    private static func isPort(_ text: ArraySlice<UInt8>) -> Bool {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        return text.reduce(0) { $0 * 10 + Int($1 - 0x30) } <= 65535
    }

    /// The hosts a tenant's web origins name (`https://a.example.com:8443` → `a.example.com`).
    public static func hosts(ofOrigins origins: [String]) -> [String] {
        origins.compactMap { origin -> String? in
            guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme.lowercased()),
                let host = url.host
            else { return nil }
            return normalize(host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host)
        }
    }
}
