import ArgumentParser
import Foundation
import Hummingbird
import Logging
import PasskeyServer
import PasskeyStore

struct ServerOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "Settings file (default: passkeyd.json in the working directory, if present).")
    var config: String?

    @Option(help: "Database URL (overrides the settings), e.g. sqlite://passkeyd.sqlite.")
    var database: String?

    func load(listen: String? = nil) throws -> ConfigurationLoader.Loaded {
        var loaded: ConfigurationLoader.Loaded
        var loader = ConfigurationLoader()
        // --listen acts like PASSKEYD_LISTEN, so the default origin follows its port.
        if let listen { loader.environment["PASSKEYD_LISTEN"] = listen }
        do {
            loaded = try loader.load(path: config)
        } catch {
            throw ValidationError(error.description)
        }
        if let database { loaded.databaseURL = database }
        return loaded
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the passkey server (web UI and API).")

    @OptionGroup var options: ServerOptions

    @Option(help: "Listen address host:port (overrides the settings).")
    var listen: String?

    func run() async throws {
        let loaded = try options.load(listen: listen)
        var logger = Logger(label: "passkeyd")
        logger.logLevel = ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let store = try Database.open(loaded.databaseURL)
        let applied = try await store.migrate()
        if !applied.isEmpty { logger.info("database migrated", metadata: ["versions": "\(applied)", "url": "\(loaded.databaseURL)"]) }
        let service = try PasskeyService(configuration: loaded.server, store: store, logger: logger)
        let app = PasskeyServer.application(service: service, host: loaded.host, port: loaded.port, logger: logger)
        logger.info("passkeyd listening", metadata: [
            "address": "\(loaded.host):\(loaded.port)", "rpID": "\(loaded.server.rpID)", "origins": "\(loaded.server.webOrigins)",
        ])
        try await app.runService()
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and print the schema version.")

    @OptionGroup var options: ServerOptions

    func run() async throws {
        let loaded = try options.load()
        let store = try Database.open(loaded.databaseURL)
        let applied = try await store.migrate()
        let version = try await store.schemaVersion()
        print(applied.isEmpty ? "schema is up to date at version \(version)" : "applied migrations \(applied.map(String.init).joined(separator: ", ")); schema version \(version)")
    }
}
