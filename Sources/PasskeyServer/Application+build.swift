import Foundation
import Hummingbird
import Logging
import PasskeyStore
import ServiceLifecycle

/// The composition root: the whole server, read top to bottom.
public enum PasskeyServer {
    /// Builds the HTTP application for `service`, listening on `host:port`.
    public static func application(service: PasskeyService, host: String = "127.0.0.1", port: Int = 8080,
                                   logger: Logger = Logger(label: "passkeyd")) -> some ApplicationProtocol {
        let router = Router(context: PasskeyRequestContext.self)
        router.add(middleware: ErrorMiddleware())
        router.add(middleware: SecurityHeadersMiddleware())
        router.add(middleware: LogRequestsMiddleware(.debug))
        if let directory = service.configuration.publicDirectory {
            router.add(middleware: FileMiddleware(directory, searchForIndexHtml: true))
        }

        NativeAPI(service: service).register(on: router)
        if service.configuration.compatibilityRoutes {
            CompatibilityAPI(service: service).register(on: router)
        }
        WellKnown(configuration: service.configuration).register(on: router)
        router.get("openapi.json") { _, _ in OpenAPIDocument.response() }
        router.get("healthz") { _, _ in "ok\n" }

        var app = Application(router: router, configuration: .init(address: .hostname(host, port: port), serverName: nil), logger: logger)
        app.addServices(ExpirySweeper(store: service.store, logger: logger))
        return app
    }
}

/// Deletes expired ceremonies and sessions once a minute.
struct ExpirySweeper: Service {
    let store: any PasskeyStore
    let logger: Logger

    func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let removed = try await store.sweepExpired(now: Date())
                if removed > 0 { logger.debug("swept expired rows", metadata: ["count": "\(removed)"]) }
            } catch {
                logger.warning("sweep failed", metadata: ["error": "\(error)"])
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(60)) }
        }
    }
}
