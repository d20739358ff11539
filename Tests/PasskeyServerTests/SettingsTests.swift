import Configuration
import Foundation
import PasskeyCore
import PasskeyServer
import Testing
import WebAuthn

/// Settings in one place (issue 42): every setting is read once, by its struct's
/// `init(reader:)`, from the environment over `passkeyd.json`; a bad value or an unknown file key
/// stops the start naming it; secrets are redacted; the README's table lists them all.
@Suite struct SettingsTests {
    static func load(_ environment: [String: String] = [:], file json: String? = nil) throws(ConfigurationError) -> ServerSettings {
        var file: SettingsFile?
        if let json {
            do throws(SettingProblem) {
                file = try SettingsFile(json: Data(json.utf8), name: "passkeyd.json")
            } catch {
                throw ConfigurationError(setting: error.setting, problem: error.problem)
            }
        }
        return try ServerSettings(environment: environment, file: file)
    }

    static func error(_ environment: [String: String] = [:], file: String? = nil) -> ConfigurationError? {
        do {
            _ = try load(environment, file: file)
            return nil
        } catch {
            return error
        }
    }

    /// The README's configuration section, one string per table row.
    static var readmeRows: [String] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = (try? String(contentsOf: readme, encoding: .utf8)) ?? ""
        guard let start = text.range(of: "## Configuration") else { return [] }
        let section = text[start.upperBound...].prefix { _ in true }
        let end = section.range(of: "\n## ").map { section[..<$0.lowerBound] } ?? section
        return end.split(separator: "\n").filter { $0.hasPrefix("| `") }.map(String.init)
    }

    @Test func everySettingIsInTheREADMETable() throws {
        let settings = try Self.load()
        let rows = Self.readmeRows
        #expect(rows.count > 40)
        #expect(settings.ledger.all.count > 70, "\(settings.ledger.all.count) settings read")
        for entry in settings.ledger.all {
            // `rateLimits.perIP` is in the row `rateLimits` `{…, perIP, …}` or a row `rateLimits.perIP`.
            let parts = entry.key.split(separator: ".").map(String.init)
            let row = rows.first { row in
                let name = row.split(separator: "|").first.map(String.init) ?? ""
                if name.contains("`\(entry.key)`") { return true }
                guard parts.count == 2, name.contains("`\(parts[0])`") else { return false }
                return name.range(of: "\\b\(parts[1])\\b", options: .regularExpression) != nil
            }
            #expect(row != nil, "\(entry.key) is not in the README's configuration table")
            if let row, let environment = entry.environment {
                #expect(row.contains("`\(environment)`"), "\(entry.key)'s row does not name \(environment)")
            }
        }
        // And the table names no variable the server does not read.
        let read = Set(settings.ledger.all.compactMap(\.environment))
        for row in rows {
            for match in row.matches(of: /`(PASSKEYD_[A-Z0-9_]+)`/) where !read.contains(String(match.1)) {
                #expect(String(match.1) == "PASSKEYD_CONFIG", "the README names \(match.1), which no setting reads")
            }
        }
    }

    @Test func theEnvironmentWinsOverTheFileAndDefaultsFillTheRest() throws {
        let settings = try Self.load(
            ["PASSKEYD_RATE_LIMIT_PER_IP": "42", "PASSKEYD_COOKIE_SECURE": "on"],
            file: #"{"rateLimits": {"perIP": 7, "perAccount": 3}, "rpID": "example.com", "origins": ["https://example.com"]}"#)
        #expect(settings.domain.rateLimits.perIP == 42)
        #expect(settings.domain.rateLimits.perAccount == 3)
        #expect(settings.domain.rateLimits.windowSeconds == 60)
        #expect(settings.domain.rpID == "example.com")
        #expect(settings.edge.cookieSecure)
        #expect(settings.databaseURL == "sqlite://passkeyd.sqlite")
        // The file's JSON types: a boolean is read as one, a number as a number, never crossed.
        let typed = try Self.load(file: #"{"console": {"enabled": false}, "maxBodySize": 100000, "extensions": {"prf": true}}"#)
        #expect(!typed.domain.console.enabled && typed.domain.extensions.prf && typed.edge.maxBodySize == 100_000)
        #expect(Self.error(file: #"{"console": {"enabled": 1}}"#)?.problem.contains("expected true or false") == true)
        #expect(Self.error(file: #"{"maxBodySize": true}"#)?.problem.contains("expected a whole number") == true)
    }

    @Test func aBlankVariableIsUnset() throws {
        let settings = try Self.load(["PASSKEYD_METRICS_TOKEN": "", "PASSKEYD_ALLOWED_AAGUIDS": " ", "PASSKEYD_RP_ID": ""])
        #expect(settings.edge.metricsToken == nil)
        #expect(settings.domain.attestationPolicy.allowedAAGUIDs == nil)
        #expect(settings.domain.rpID == "localhost")
    }

    @Test(
        arguments: [
            (["PASSKEYD_RATE_LIMIT_PER_IP": "lots"], nil, "PASSKEYD_RATE_LIMIT_PER_IP: \"lots\" is not a whole number"),
            (["PASSKEYD_PRF": "maybe"], nil, "PASSKEYD_PRF: \"maybe\" is not true or false"),
            (["PASSKEYD_CHALLENGE_LIFETIME": "1"], nil, "challengeLifetimeSeconds (PASSKEYD_CHALLENGE_LIFETIME): 1 is outside 10...86400"),
            ([:], #"{"rateLimits": {"perIP": 0}}"#, "rateLimits.perIP (PASSKEYD_RATE_LIMIT_PER_IP): 0 is outside 1...100000000"),
            ([:], #"{"rateLimits": {"perIP": "5"}}"#, "passkeyd.json: rateLimits.perIP: has the wrong type (expected a whole number)"),
            ([:], #"{"rpID": 5}"#, "passkeyd.json: rpID: has the wrong type (expected text)"),
            ([:], #"{"rpId": "example.com"}"#, "passkeyd.json: rpId is not a setting (did you mean rpID?)"),
            ([:], #"{"rateLimits": {"perIp": 5}}"#, "passkeyd.json: rateLimits.perIp is not a setting (did you mean rateLimits.perIP?)"),
            (
                [:], #"{"tokens": {"algorithm": "HS256"}}"#,
                "tokens.algorithm (PASSKEYD_TOKEN_ALGORITHM): \"HS256\" is not one of ES256, EdDSA, RS256"
            ),
            ([:], #"{"webhooks": [5]}"#, "webhooks: Index 0 has the wrong type"),
            ([:], #"{"connections": {"maxConnections": 1.5}}"#, "passkeyd.json: connections.maxConnections: has the wrong type"),
            (["PASSKEYD_COOKIE_SAMESITE": "None"], nil, "cookieSameSite (PASSKEYD_COOKIE_SAMESITE): \"None\" is not one of Lax, Strict"),
            (["PASSKEYD_METRICS_TOKEN": "short"], nil, "metricsToken: use at least 16 characters"),
            (["PASSKEYD_CORS_ORIGINS": "http://*.example.com"], nil, "corsOrigins: \"http://*.example.com\" is not a serialized origin"),
            (["PASSKEYD_LISTEN": "localhost"], nil, "listen: \"localhost\" is not host:port"),
            // An origin a browser never sends would match no ceremony: refused at start.
            (["PASSKEYD_ORIGINS": "http://localhost:8080/"], nil, "origins: \"http://localhost:8080/\" is not a serialized origin"),
            (
                ["PASSKEYD_RELATED_ORIGINS": "https://Shop.example"], nil,
                "relatedOrigins: \"https://Shop.example\" is not a serialized origin"
            ),
        ] as [([String: String], String?, String)])
    func aBadValueNamesItsSettingAndWhatIsWrong(_ environment: [String: String], _ file: String?, _ message: String) {
        let error = Self.error(environment, file: file)
        #expect(error?.description.contains(message) == true, "\(String(describing: error))")
    }

    @Test func androidAppsReadFromEitherForm() throws {
        let fingerprint = (0..<32).map { String(format: "%02X", $0) }.joined(separator: ":")
        let fromFile = try Self.load(
            file: #"{"androidApps": [{"packageName": "com.example", "sha256CertFingerprints": ["\#(fingerprint)"]}]}"#)
        let fromEnvironment = try Self.load(["PASSKEYD_ANDROID_APPS": "com.example=\(fingerprint)"])
        #expect(fromFile.domain.androidApps == [.init(packageName: "com.example", sha256CertFingerprints: [fingerprint])])
        #expect(fromEnvironment.domain.androidApps == fromFile.domain.androidApps)
    }

    @Test func webhooksFromTheFileNeedNoEventsList() throws {
        let settings = try Self.load(
            file: #"{"webhooks": [{"url": "https://hooks.example.com/a", "secret": "0123456789abcdef0123456789"}]}"#)
        #expect(settings.domain.webhooks.map(\.events) == [["*"]])
    }

    /// Secrets are read as secrets: what the ledger (and swift-configuration's access log) keeps
    /// of them is `<redacted>`.
    @Test func secretsAreRedactedWhereverTheReadIsReported() throws {
        let token = "metrics-token-0123456789-secret"
        let hookSecret = "whsec-0123456789abcdef-secret"
        let settings = try Self.load(
            ["PASSKEYD_METRICS_TOKEN": token, "PASSKEYD_DATABASE_URL": "postgres://app:pg-password-secret@db/passkeyd"],
            file: #"{"webhooks": [{"url": "https://hooks.example.com/a", "secret": "\#(hookSecret)"}]}"#)
        #expect(settings.edge.metricsToken == token)
        let recorded = settings.ledger.all.map { "\($0.key)=\($0.value ?? "")" }.joined(separator: "\n")
        for secret in [token, "pg-password-secret", hookSecret] { #expect(!recorded.contains(secret), "\(recorded)") }
        for key in ["metricsToken", "databaseURL", "webhooks"] {
            #expect(settings.ledger.all.first { $0.key == key }?.value == "<redacted>", "\(key)")
        }
    }

    /// A tenant's settings (issue "Tenants") come from another source through the same structs.
    @Test func theSameStructsReadAnotherSource() throws {
        let source = try SettingsFile(
            json: Data(#"{"rpID": "tenant.example", "origins": ["https://tenant.example"], "rateLimits": {"perIP": 9}}"#.utf8),
            name: "tenant")
        let reader = ConfigReader(provider: source)
        let domain = try ServerConfiguration(reader: reader)
        let edge = try EdgeConfiguration(reader: reader, webOrigins: domain.webOrigins)
        #expect(domain.rpID == "tenant.example" && domain.rateLimits.perIP == 9)
        #expect(edge.cookieSecure && edge.sessionCookieName == "__Host-passkeyd_session")
    }

    /// The web UI installed beside the binary wins over a `Public/` in the working directory
    /// (which is writable by the service in the image and the package); a checkout, whose build
    /// folder has no `share/`, serves its `Public/`. The tests run in the checkout: `Public/` is
    /// in their working directory.
    @Test func theInstalledWebUIWinsOverAPublicFolderInTheWorkingDirectory() throws {
        let prefix = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-prefix-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: prefix) }
        let installed = prefix.appendingPathComponent("share/passkeyd/public")
        let executable = prefix.appendingPathComponent("bin/passkeyd").path
        #expect(FileManager.default.fileExists(atPath: "Public/index.html"), "the tests run in the checkout")
        #expect(ServerSettings.defaultPublicDirectory(executable: executable) == "Public")
        try FileManager.default.createDirectory(at: installed, withIntermediateDirectories: true)
        #expect(ServerSettings.defaultPublicDirectory(executable: executable) == installed.path)
        #expect(ServerSettings.defaultPublicDirectory(executable: nil) == "Public")
    }
}
