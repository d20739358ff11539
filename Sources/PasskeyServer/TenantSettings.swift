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
        "connections.maxConnections", "compatibilityRoutes", "maxBodySize", "rateLimits.maxKeys", "email.smtpURL", "email.smtpCAFile",
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
        let domain = try ServerConfiguration(reader: reader, readFile: readFile)
        let edge = try EdgeConfiguration(reader: reader, webOrigins: domain.webOrigins, defaultPublicDirectory: server.edge.publicDirectory)
        if let unknown = ledger.unknownKeys(in: file).first {
            throw ConfigurationError(setting: name, problem: "\(unknown) is not a setting")
        }
        // What the server checks of its own relying party when it starts (origins under the RP
        // ID, app IDs, …).
        _ = try domain.relyingParty()
        return (domain, edge)
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
        var text = Substring(raw.trimmingCharacters(in: .whitespaces))
        guard !text.isEmpty, text.utf8.count <= 300 else { return nil }
        if text.hasPrefix("[") {
            // An IPv6 literal, with or without a port.
            guard let close = text.firstIndex(of: "]") else { return nil }
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isPort(rest.dropFirst())) else { return nil }
            let inner = text[text.index(after: text.startIndex)..<close]
            guard !inner.isEmpty, inner.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
            return "[" + inner.lowercased() + "]"
        }
        if let colon = text.lastIndex(of: ":") {
            guard isPort(text[text.index(after: colon)...]) else { return nil }
            text = text[..<colon]
        }
        if text.hasSuffix(".") { text = text.dropLast() }
        let host = text.lowercased()
        let labels = host.split(separator: ".", omittingEmptySubsequences: false)
        guard host.utf8.count <= 253, !labels.isEmpty else { return nil }
        for label in labels {
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-",
                label.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D })
            else { return nil }
        }
        return host
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.utf8.count <= 5 && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } && (Int(text) ?? 70_000) <= 65535
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
