import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PasskeyCore
import PasskeyModels
import PasskeyRuntime
import ServiceLifecycle

/// The composition root: the whole server, read top to bottom.
public enum PasskeyServer {
    /// Builds the HTTP application for `service`, listening on `host:port`.
    /// - Parameters:
    ///   - edge: the HTTP edge's settings (cookies, limits, CORS, files, metrics, proxies).
    ///   - services: run in the application's service group with the server (a database pool).
    ///   - beforeServerStarts: runs once those are up and before the server listens (migrations).
    ///   - onServerRunning: runs once the server listens, with the address it got (port 0 asks
    ///     the system for a free port); an IPv6 host comes in brackets.
    ///   - settings: the server's settings, which tenants' settings are read over; nil: the
    ///     default tenant alone (in-process tests).
    ///   - makeTenantService: builds a tenant's service (nil: like the default one's).
    ///   - openDatabase: opens and migrates a tenant's own database (`passkeyd tenant add
    ///     --database`); nil: no tenant may have one.
    public static func application(
        service: PasskeyService, edge: EdgeConfiguration = EdgeConfiguration(), host: String = "127.0.0.1", port: Int = 8080,
        logger: Logger = Logger(label: "passkeyd"),
        services: [any Service] = [], beforeServerStarts: (@Sendable () async throws -> Void)? = nil,
        settings: ServerSettings? = nil, makeTenantService: TenantDirectory.ServiceMaker? = nil,
        openDatabase: TenantDatabases.Opener? = nil,
        onServerRunning: @escaping @Sendable (_ host: String, _ port: Int) async -> Void = { _, _ in }
    ) -> some ApplicationProtocol {
        let limits = ConnectionLimits(configuration: edge.connections, trustedProxies: edge.trustedProxies, metrics: service.metrics)
        // Every request finds its tenant first (TenantDirectory); the default tenant's routes are
        // the server's own settings'.
        let databases = TenantDatabases(main: service.store, opener: openDatabase, now: service.now)
        let tenants = TenantDirectory(
            server: settings, edge: edge, defaultService: service,
            defaultResponder: router(
                service: service, edge: edge,
                tenants: settings.map {
                    TenantAdmin(store: service.store, server: $0, namesFiles: false, databases: databases, now: service.now)
                }
            ).buildResponder(),
            logger: logger, makeService: makeTenantService, databases: databases)
        var app = Application(
            responder: TenantResponder(directory: tenants),
            server: HTTPServerBuilder { responder in
                let http1 = HTTP1Channel(
                    responder: responder, configuration: .init(additionalChannelHandlers: [ConnectionGuardHandler(limits: limits)]))
                // Handlers run on their connection's event loop: SQLite answers on the calling
                // thread, and PostgreSQL on that loop's own pool (see PostgresEngine).
                return EventLoopHTTP1Channel(http1: http1)
            },
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                let address = channel.localAddress
                let ip = address?.ipAddress ?? host
                // An IPv6 address in brackets, so that "host:port" reads one way (`[::1]:8080`).
                await onServerRunning(ip.contains(":") ? "[\(ip)]" : ip, address?.port ?? port)
            },
            logger: logger)
        for extra in services { app.addServices(extra) }
        // The registry's poll, when tenants can be added (a service that returned would end the
        // whole service group, the server with it).
        if settings != nil { app.addServices(tenants) }
        app.beforeServerStarts {
            try await beforeServerStarts?()
            if settings != nil {
                try await tenants.reload()
                // The tenants' own databases migrated before the server listens (one that
                // cannot be opened is logged; its tenant answers 503 until it can).
                await tenants.openDatabases()
            }
            try await service.prepareIntegrations()
            await service.refreshMetadata()
            try await announceBootstrap(service: service, logger: logger)
        }
        app.addServices(ExpirySweeper(service: service, logger: logger))
        app.addServices(
            WebhookDispatcher(service: service, logger: logger) { WebhookClient(policy: $0, connectTimeout: $1, requestTimeout: $2) })
        app.addServices(MetadataRefresher(service: service))
        if let mail = MailDispatcher.make(service: service, logger: logger) { app.addServices(mail) }
        return app
    }

    /// Every route and the middleware around it. `tenants`: the tenants' administration, on the
    /// default tenant's routes of a server that serves tenants (the server API's
    /// `/api/admin/tenants`, the console's server operators).
    public static func router(
        service: PasskeyService, edge: EdgeConfiguration = EdgeConfiguration(), tenants: TenantAdmin? = nil
    ) -> Router<PasskeyRequestContext> {
        let configuration = service.configuration
        let router = Router(context: PasskeyRequestContext.self)
        // Outermost first: a span per request when tracing is on; every answer (errors included)
        // is logged and carries the security headers; then one spelling per path, then no
        // cross-site writes.
        if Spans.enabled { router.add(middleware: TracingMiddleware()) }
        router.add(middleware: ClientMiddleware(trustedProxies: edge.trustedProxies))
        router.add(middleware: RequestLogMiddleware(metrics: service.metrics))
        router.add(middleware: SecurityHeadersMiddleware())
        router.add(middleware: CORSMiddleware(origins: Set(edge.corsOrigins)))
        router.add(middleware: ErrorMiddleware(metrics: service.metrics))
        router.add(middleware: CanonicalPathMiddleware())
        router.add(middleware: OriginCheckMiddleware(allowed: edge.allowedRequestOrigins(configuration)))
        if let directory = edge.publicDirectory {
            router.add(middleware: WholeFilesMiddleware())
            router.add(middleware: FileMiddleware(directory, searchForIndexHtml: true))
        }

        router.addRoutes(NativeAPI(service: service, edge: edge).routes, atPath: "/api/auth")
        router.addRoutes(EmailAPI(service: service, edge: edge).routes, atPath: "/api/auth")
        if edge.compatibilityRoutes {
            router.addRoutes(CompatibilityAPI(service: service, edge: edge).routes)
        }
        router.addRoutes(ServerAPI(service: service, edge: edge, tenants: tenants).routes, atPath: "/api/admin")
        if configuration.console.enabled {
            router.addRoutes(ConsoleAPI(service: service, edge: edge, tenants: tenants).routes, atPath: "/admin/api")
        }
        router.addRoutes(OpenIDProvider(service: service, edge: edge).routes)
        router.group("api/auth/introspect").add(middleware: APIKeyMiddleware(service: service, scope: "introspect"))
            .post { request, _ in
                try HTTP.json(try await service.introspect(try await introspectionToken(request, limit: edge.maxBodySize)))
            }
        router.get(".well-known/jwks.json") { _, _ in
            var headers = HTTPFields()
            headers[.contentType] = "application/jwk-set+json"
            // A verifier caches the set at most as long as a new key waits before it signs.
            headers[.cacheControl] = "public, max-age=\(configuration.tokens.publishSeconds)"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try await service.tokens.jwks())))
        }
        WellKnown(configuration: configuration).register(on: router)
        router.get("openapi.json") { _, _ in OpenAPIDocument.response() }
        // Liveness: the process answers. Readiness: the database answers too (stale FIDO metadata
        // is a warning, not a reason to take the instance out of service).
        router.get("healthz") { _, _ in "ok\n" }
        router.get("readyz") { _, _ in
            guard await service.ready() else { throw APIError.from(StoreError(.unavailable, "ping failed")) }
            return "ready\n" + (service.metadataWarning.map { $0 + "\n" } ?? "")
        }
        // Closed unless the operator opens it (a token, or metricsPublic behind a proxy).
        if edge.metricsToken != nil || edge.metricsPublic {
            router.get("metrics") { request, _ in try await metrics(request, token: edge.metricsToken, service: service) }
        }
        return router
    }

    /// With no administrator yet, a one-time link for the first one, written to standard error
    /// (not to the log lines, which are often shipped elsewhere; the log says where to look).
    static func announceBootstrap(service: PasskeyService, logger: Logger) async throws {
        guard service.configuration.console.enabled else { return }
        let console = ConsoleService(service: service)
        guard let (token, expiresAt) = try await console.issueBootstrapToken(by: "passkeyd serve") else { return }
        let minutes = Int(expiresAt.timeIntervalSince(service.now()) / 60)
        let text =
            "\npasskeyd: no administrator yet. Open this link within \(minutes) minutes to create the first one (it works once):\n"
            + "  \(console.bootstrapLink(token))\n\n"
        FileHandle.standardError.write(Data(text.utf8))
        logger.notice(
            "no administrator yet: a one-time bootstrap link was written to standard error",
            metadata: ["expiresAt": "\(expiresAt)", "grant": "passkeyd admin grant NAME --role admin"])
    }

    /// Prometheus text exposition; behind a bearer token when `metricsToken` is set.
    static func metrics(_ request: Request, token: String?, service: PasskeyService) async throws -> Response {
        if let token {
            // Digests compare in constant time.
            let supplied = SHA256.hash(data: Array((request.headers[.authorization] ?? "").utf8))
            guard supplied == SHA256.hash(data: Array("Bearer \(token)".utf8)) else { throw APIError.metricsUnauthorized }
        }
        let text = try await service.renderMetrics()
        var headers = HTTPFields()
        headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
