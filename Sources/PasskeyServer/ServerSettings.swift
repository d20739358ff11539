import Configuration
import Foundation
import PasskeyCore

/// Everything `passkeyd` reads from `passkeyd.json` and `PASSKEYD_*` variables (which win), through
/// one swift-configuration `ConfigReader`: the domain's ``ServerConfiguration``, the edge's
/// ``EdgeConfiguration``, and the process's own listen address, database and log format. A value
/// that is there but wrong, and a file key that names no setting, stop the start with the
/// setting's name.
///
/// ```swift
/// let settings = try ServerSettings.load(environment: ProcessInfo.processInfo.environment, path: nil)
/// let service = try PasskeyService(configuration: settings.domain, store: store)
/// ```
public struct ServerSettings: Sendable {
    public enum LogFormat: String, Sendable, CaseIterable {
        case json, text
    }

    /// What `serve` does with pending database migrations.
    public enum Migrations: String, Sendable, CaseIterable {
        /// Applies them before it listens (the default; one instance migrates, the others wait).
        case apply
        /// Refuses to start while any is pending: `passkeyd migrate` runs them first, as a job
        /// (a database role without DDL rights serves).
        case check
    }

    public var domain: ServerConfiguration
    public var edge: EdgeConfiguration
    /// `sqlite://PATH` or `postgres://…` (secret: its password never reaches a log line).
    public var databaseURL: String
    public var host: String
    public var port: Int
    /// nil: text on a terminal, JSON lines otherwise.
    public var logFormat: LogFormat?
    /// `apply` unless set.
    public var migrations: Migrations
    /// Every setting read and the value in force (secrets redacted).
    public let ledger: SettingsLedger
    /// Where the settings came from (environment first): a tenant's settings are read over them
    /// (``TenantSettings``).
    public internal(set) var providers: [any FixedSettingsProvider] = []

    /// Reads the settings from `environment` and the settings file: `path`, else
    /// `PASSKEYD_CONFIG`, else `passkeyd.json` in the working directory when there is one.
    public static func load(
        environment: [String: String], path: String?, readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(ConfigurationError) -> ServerSettings {
        // An empty PASSKEYD_CONFIG counts as unset.
        let named = environment["PASSKEYD_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let candidate = path ?? named ?? "passkeyd.json"
        var file: SettingsFile?
        if let data = readFile(candidate) {
            do throws(SettingProblem) {
                file = try SettingsFile(json: data, name: candidate)
            } catch {
                throw ConfigurationError(setting: error.setting, problem: error.problem)
            }
        } else if path != nil || named != nil {
            throw ConfigurationError(setting: "config", problem: "cannot read \(candidate)")
        }
        return try ServerSettings(environment: environment, file: file, readFile: readFile)
    }

    /// Reads the settings from `environment` over `file`; a file key no setting reads is refused.
    public init(
        environment: [String: String], file: SettingsFile?, readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(ConfigurationError) {
        let ledger = SettingsLedger()
        let providers: [any FixedSettingsProvider] = [SettingsEnvironment(environment)] + (file.map { [$0] } ?? [])
        let reader = ConfigReader(providers: providers, accessReporter: ledger)
        try self.init(reader: reader, ledger: ledger, readFile: readFile)
        self.providers = providers
        if let file, let unknown = ledger.unknownKeys(in: file).first {
            let known = ledger.all.map(\.key)
            let hint = known.first { $0.lowercased() == unknown.lowercased() }.map { " (did you mean \($0)?)" } ?? ""
            throw ConfigurationError(setting: file.providerName, problem: "\(unknown) is not a setting\(hint)")
        }
    }

    /// Reads every setting from `reader` (`ledger`: its access reporter, if any).
    public init(
        reader: ConfigReader, ledger: SettingsLedger = SettingsLedger(),
        readFile: (String) -> Data? = { FileManager.default.contents(atPath: $0) }
    ) throws(ConfigurationError) {
        self.ledger = ledger
        let listen = try reader.text("listen", env: "PASSKEYD_LISTEN") ?? "127.0.0.1:8080"
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]), (0...65535).contains(port),
            colon != listen.startIndex
        else {
            throw ConfigurationError(setting: "listen", problem: "\"\(listen)\" is not host:port (e.g. 127.0.0.1:8080)")
        }
        host = String(listen[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        self.port = port
        domain = try ServerConfiguration(reader: reader, defaultOrigin: "http://localhost:\(port == 0 ? 8080 : port)", readFile: readFile)
        edge = try EdgeConfiguration(reader: reader, webOrigins: domain.webOrigins, defaultPublicDirectory: Self.defaultPublicDirectory())
        databaseURL = try reader.text("databaseURL", env: "PASSKEYD_DATABASE_URL", secret: true) ?? "sqlite://passkeyd.sqlite"
        logFormat = try reader.choice("logFormat", env: "PASSKEYD_LOG_FORMAT", as: LogFormat.self)
        migrations = try reader.choice("migrations", env: "PASSKEYD_MIGRATIONS", as: Migrations.self) ?? .apply
    }

    /// Where the web UI's files are when `publicDirectory` is not set: `share/passkeyd/public`
    /// beside the executable's folder (`/usr/bin/passkeyd` → `/usr/share/passkeyd/public`: the
    /// Debian package and the image; `bin/passkeyd` → `share/passkeyd/public` in the release
    /// archive), else `Public/` in the working directory (a source checkout, whose build folder
    /// has no `share/`). An installed server never serves a `Public/` that someone put in its
    /// working directory (the image's /data, the package's /var/lib/passkeyd are writable by the
    /// service). Nil when neither exists.
    public static func defaultPublicDirectory(executable: String? = runningExecutable()) -> String? {
        if let executable {
            let installed = URL(fileURLWithPath: executable).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("share/passkeyd/public").path
            if isDirectory(installed) { return installed }
        }
        return isDirectory("Public") ? "Public" : nil
    }

    /// The running executable's own path, symbolic links resolved (Linux: /proc/self/exe).
    public static func runningExecutable() -> String? {
        #if os(Linux)
            if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        #endif
        return Bundle.main.executableURL?.resolvingSymlinksInPath().path
    }

    private static func isDirectory(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }
}
