import Foundation
import Testing
import WebAuthnTesting

/// `passkeyd serve` and `passkeyd migrate` refuse bad settings with a message naming the setting.
@Suite("passkeyd serve / migrate configuration")
struct ServeCommandTests {
    static func run(_ arguments: [String], environment: [String: String], in directory: URL) throws -> CLI.Result {
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PASSKEYD_") }
        env.merge(environment) { _, new in new }
        // A watchdog, not a bound: a setting that should stop the start but does not leaves a
        // server running, killed here so the test fails instead of hanging.
        return try Subprocess.run(CLI.binary, arguments, environment: env, directory: directory, timeout: .seconds(60))
    }

    static func temporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    @Test(arguments: [
        (["PASSKEYD_RP_ID": "Not A Domain"], "rpID"),
        (["PASSKEYD_ORIGINS": "http://example.com"], "origins"),
        (["PASSKEYD_USER_VERIFICATION": "sometimes"], "userVerification"),
        (["PASSKEYD_ALLOWED_AAGUIDS": "nonsense"], "allowedAAGUIDs"),
        (["PASSKEYD_DENIED_AAGUIDS": "ee882879-721c-4913-9775-3dfcce97072a,x"], "deniedAAGUIDs"),
        (["PASSKEYD_REQUIRE_DEVICE_BOUND": "maybe"], "PASSKEYD_REQUIRE_DEVICE_BOUND"),
        (["PASSKEYD_AUTHENTICATION_USER_VERIFICATION": "sometimes"], "authenticationUserVerification"),
        (["PASSKEYD_LISTEN": "localhost"], "listen"),
        (["PASSKEYD_SESSION_LIFETIME": "ten"], "PASSKEYD_SESSION_LIFETIME"),
        (["PASSKEYD_CHALLENGE_LIFETIME": "1"], "challengeLifetimeSeconds"),
        (["PASSKEYD_ANDROID_APPS": "com.example=AB:CD"], "androidApps"),
        (["PASSKEYD_APPLE_APP_IDS": "com.example.app"], "appleAppIDs"),
        (["PASSKEYD_REQUIRE_TRUSTED_ATTESTATION": "true"], "requireTrustedAttestation"),
        (["PASSKEYD_COOKIE_SECURE": "maybe"], "PASSKEYD_COOKIE_SECURE"),
        (["PASSKEYD_DATABASE_URL": "mysql://db"], "databaseURL"),
        (["PASSKEYD_CORS_ORIGINS": "http://*.example.com"], "corsOrigins"),
        (["PASSKEYD_CORS_ORIGINS": "https://app.example.com,null"], "corsOrigins"),
        (["PASSKEYD_CORS_ORIGINS": "https://app.example.com/path"], "corsOrigins"),
        (["PASSKEYD_CORS_ORIGINS": "https://user@app.example.com"], "corsOrigins"),
    ])
    func badSettingsStopTheStartAndNameTheSetting(_ environment: [String: String], _ setting: String) throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Self.run(["serve"], environment: environment, in: directory)
        #expect(result.status != 0)
        #expect(result.stderr.contains(setting), "\(environment): \(result.stderr)")
    }

    @Test func aBadSettingsFileIsNamed() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(#"{"rpID": 5}"#.utf8).write(to: directory.appendingPathComponent("passkeyd.json"))
        let result = try Self.run(["migrate"], environment: [:], in: directory)
        #expect(result.status != 0 && result.stderr.contains("passkeyd.json") && result.stderr.contains("rpID"), "\(result.stderr)")
    }

    /// swift-configuration writes every setting read to `CONFIG_ACCESS_LOG_FILE` when it is set:
    /// secrets are read as secrets, so the file has them redacted (issue 42).
    @Test func theConfigurationAccessLogRedactsSecrets() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("access.log")
        let secrets = ["metrics-token-0123456789-secret", "pg-password-secret", "hook-secret-0123456789-abcdef"]
        try Data(#"{"webhooks": [{"url": "https://hooks.example.com/a", "secret": "\#(secrets[2])"}]}"#.utf8)
            .write(to: directory.appendingPathComponent("passkeyd.json"))
        let result = try Self.run(
            ["migrate", "--database", "sqlite://db.sqlite"],
            environment: [
                "CONFIG_ACCESS_LOG_FILE": log.path, "PASSKEYD_METRICS_TOKEN": secrets[0], "PASSKEYD_RP_NAME": "visible-name",
                "PASSKEYD_DATABASE_URL": "postgres://app:\(secrets[1])@db.invalid/passkeyd",
            ], in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let text = try String(contentsOf: log, encoding: .utf8)
        #expect(text.contains("visible-name") && text.contains("metricsToken"), "\(text)")
        for secret in secrets { #expect(!text.contains(secret), "\(secret) in \(text)") }
        #expect(!result.stdout.contains(secrets[1]) && !result.stderr.contains(secrets[1]))
    }

    @Test func migrateCreatesTheSchemaOnceAndReportsItsVersion() throws {
        let directory = try Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let first = try Self.run(["migrate", "--database", "sqlite://db.sqlite"], environment: [:], in: directory)
        #expect(first.status == 0 && first.stdout.contains("applied migrations 1, 2"), "\(first.stdout) \(first.stderr)")
        let second = try Self.run(["migrate", "--database", "sqlite://db.sqlite"], environment: [:], in: directory)
        #expect(second.status == 0 && second.stdout.contains("up to date at version 18"), "\(second.stdout)")
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("db.sqlite").path))
    }
}
