import ArgumentParser
import CAllocator
import Foundation
import Hummingbird
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore
import ServiceLifecycle

struct ServerOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "Settings file (default: passkeyd.json in the working directory, if present).")
    var config: String?

    @Option(help: "Database URL (overrides the settings), e.g. sqlite://passkeyd.sqlite.")
    var database: String?

    @Option(help: "The tenant an admin verb acts on (default: the server's own; see passkeyd tenant list).")
    var tenant: String?

    /// Refuses `--tenant` on a command that acts on the whole server.
    func refuseTenant(_ command: String) throws {
        if tenant != nil { throw ValidationError("--tenant does not apply to passkeyd \(command): it acts on the whole server") }
    }

    func load(listen: String? = nil) throws -> ServerSettings {
        var loaded: ServerSettings
        var environment = ProcessInfo.processInfo.environment
        // --listen acts like PASSKEYD_LISTEN, so the default origin follows its port.
        if let listen { environment["PASSKEYD_LISTEN"] = listen }
        do {
            loaded = try ServerSettings.load(environment: environment, path: config)
        } catch {
            throw ValidationError(error.description)
        }
        if let database { loaded.databaseURL = database }
        return loaded
    }
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the passkey server (web UI and API).")
    /// How long a graceful shutdown may take before it is escalated to cancellation.
    static let gracefulShutdownLimit: Duration = .seconds(20)

    @OptionGroup var options: ServerOptions

    @Option(help: "Listen address host:port (overrides the settings).")
    var listen: String?

    func run() async throws {
        try options.refuseTenant("serve")
        Self.keepFreedMemory()
        let loaded = try options.load(listen: listen)
        let environment = ProcessInfo.processInfo.environment
        let level = environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        // Traces (OTEL_* variables; off by default) before anything that makes spans: the
        // store's engine is traced only when they are on at its start.
        let tracing = OTelTraces.enabled(environment)
        LogFormat.bootstrap(loaded.logFormat, level: level, metadataProvider: tracing ? OTelTraces.logMetadata : nil)
        let logger = Logger(label: "passkeyd")
        let traces: [any Service]
        do {
            traces = try tracing ? [OTelTraces.bootstrap(environment: environment)] : []
        } catch let error as ConfigurationError {
            throw ValidationError(error.description)
        }
        // The PostgreSQL pools run on the store's own task (it replaces them after an outage) and
        // close once the server has stopped; the database is checked and migrated before the
        // server listens.
        let databaseLogger = Logger(label: "passkeyd.database")
        let store = try Database.open(loaded.databaseURL, logger: databaseLogger)
        let url = PostgresStore.redacted(loaded.databaseURL)
        let databaseURL = loaded.databaseURL
        let migrations = loaded.migrations
        let service = try PasskeyService(
            configuration: loaded.domain, store: store, logger: logger,
            sharedLimits: Database.isShared(loaded.databaseURL))
        let summary: Logger.Metadata = [
            "rpID": "\(loaded.domain.rpID)", "origins": "\(loaded.domain.webOrigins)", "database": "\(url)",
            "tracing": "\(tracing ? "on" : "off")", "version": "\(BuildInfo.version)", "commit": "\(BuildInfo.commit)",
            "webUI": "\(loaded.edge.publicDirectory ?? "none")",
        ]
        let app = PasskeyServer.application(
            service: service, edge: loaded.edge, host: loaded.host, port: loaded.port, logger: logger, services: traces,
            beforeServerStarts: {
                let applied = try await Database.prepare(store, url: databaseURL, logger: databaseLogger, migrations: migrations)
                if !applied.isEmpty { logger.info("database migrated", metadata: ["versions": "\(applied)", "url": "\(url)"]) }
            },
            settings: loaded,
            makeTenantService: { configuration, tenantStore in
                // Rate-limit counts in the database when the tenant's is PostgreSQL (shared by
                // the instances), as the server's own.
                try PasskeyService(
                    configuration: configuration, store: tenantStore, logger: logger,
                    sharedLimits: (tenantStore as? SQLStore)?.isShared ?? false,
                    metrics: service.metrics, sharingPoolsWith: service)
            },
            openDatabase: { url in
                // A tenant's own database, as the server's: checked, migrated (or, with
                // `migrations: check`, found up to date) before its first use.
                try await Database.openTenantDatabase(url, logger: databaseLogger, migrations: migrations)
            },
            onServerRunning: { host, port in
                // The address the listener got: with port 0 (tests, a supervisor that reads this
                // line) the system's choice.
                logger.info("passkeyd listening", metadata: summary.merging(["address": "\(host):\(port)"]) { $1 })
            })
        let server = loaded.domain
        if !loaded.edge.cookieSecure {
            logger.warning(
                "session cookies are not Secure (plain-http development origins); serve https origins in production",
                metadata: ["cookie": "\(loaded.edge.sessionCookieName)"])
        }
        if server.rateLimits.oneAddressCanEvict {
            logger.warning(
                "rateLimits.maxKeys is at most 2 × perIP + 1: one address can make enough keys to evict the counters meant to stop it",
                metadata: ["maxKeys": "\(server.rateLimits.maxKeys)", "perIP": "\(server.rateLimits.perIP)"])
        }
        if loaded.edge.publicDirectory == nil {
            logger.warning(
                "no web UI files: neither Public/ in the working directory nor share/passkeyd/public beside the executable's folder; set publicDirectory to serve them (the API works without)"
            )
        }
        if loaded.edge.metricsToken == nil && !loaded.edge.metricsPublic {
            logger.info("/metrics is closed: set metricsToken (or metricsPublic behind a proxy) to open it")
        }
        // SIGTERM / SIGINT: stop accepting, finish the requests in flight, then exit. A graceful
        // shutdown still under way after 20 s (something awaited that never ends) is escalated
        // to cancellation, so the process exits before a supervisor's 30 s (TimeoutStopSec,
        // terminationGracePeriodSeconds) turns into a SIGKILL.
        var group = ServiceGroupConfiguration(
            services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger)
        group.maximumGracefulShutdownDuration = Self.gracefulShutdownLimit
        try await ServiceGroup(configuration: group).run()
        (store as? PostgresStore)?.close()
        logger.info("passkeyd stopped")
    }

    /// glibc hands the free top of a thread's heap back to the kernel as soon as it passes
    /// 128 KiB (`madvise(MADV_DONTNEED)`, whose TLB flush interrupts the other core too): under
    /// load that was one `madvise` per sign-in (`strace`), ~2% of the server's CPU (`perf`).
    /// Keeping up to 16 MiB free per heap costs little memory and ends that churn; allocations
    /// from 1 MiB up still get their own mapping.
    static func keepFreedMemory() {
        passkeyd_tune_allocator(16 << 20, 1 << 20)
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and print the schema version.")

    @OptionGroup var options: ServerOptions

    func run() async throws {
        try options.refuseTenant("migrate")
        let loaded = try options.load()
        let (store, applied) = try await Database.openMigrated(loaded.databaseURL, logger: Logger(label: "passkeyd.database"))
        defer { (store as? PostgresStore)?.close() }
        let version = try await store.schemaVersion()
        print(
            applied.isEmpty
                ? "schema is up to date at version \(version)"
                : "applied migrations \(applied.map(String.init).joined(separator: ", ")); schema version \(version)")
        // The tenants' own databases (`tenant add --database`), each brought to the same schema.
        // One that cannot be migrated does not stop the others; the command fails at the end.
        let urls = Set(try await store.tenantRecords().compactMap(\.database))
        var failed = 0
        for url in urls.sorted() {
            let name = PostgresStore.redacted(url)
            do {
                try Database.requireTenantFile(url)
                let (own, applied) = try await Database.openMigrated(url, logger: Logger(label: "passkeyd.database"))
                defer { (own as? PostgresStore)?.close() }
                let version = try await own.schemaVersion()
                print(
                    applied.isEmpty
                        ? "\(name): schema is up to date at version \(version)"
                        : "\(name): applied migrations \(applied.map(String.init).joined(separator: ", ")); schema version \(version)")
            } catch {
                failed += 1
                FileHandle.standardError.write(Data("\(name): not migrated: \(error)\n".utf8))
            }
        }
        if failed > 0 { throw ExitCode(1) }
    }
}
