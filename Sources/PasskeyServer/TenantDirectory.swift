import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PasskeyCore
import PasskeyModels
import PasskeyStore
import ServiceLifecycle
import Synchronization

/// The tenants one server serves, found by the request's host before any other work (issue 44).
///
/// The default tenant is the server's own settings, served on the hosts of its origins. Each
/// added tenant (`passkeyd tenant add`) has its hosts and its settings in the database; its
/// service (``PasskeyService`` on a store scoped to it) and its routes are built on its first
/// request and kept until its settings change. A tenant's routes hold its service alone, and its
/// service a store that reads and writes only its rows: nothing a request on one host does can
/// name another tenant's data.
///
/// With no tenant added every host is the default tenant's (a server without tenants behaves
/// as before them). Once one is, a host that is no tenant's gets 404 `unknown_tenant` and
/// nothing else, except `/healthz`, `/readyz` and `/metrics`, the process's own.
///
/// Every instance polls the registry's version (``PasskeyStore/tenantsVersion()``) every
/// ``pollInterval``: a tenant added, changed or removed on one instance is served by all within it.
public final class TenantDirectory: Service, Sendable {
    public typealias Responder = RouterResponder<PasskeyRequestContext>
    /// Builds a tenant's service from its configuration and its scoped store.
    public typealias ServiceMaker = @Sendable (ServerConfiguration, any PasskeyStore) throws -> PasskeyService

    public static let pollInterval = Duration.seconds(2)

    /// The server's settings (nil: no tenants but the default, for in-process tests).
    let server: ServerSettings?
    let trustedProxies: [String]
    let defaultService: PasskeyService
    let defaultResponder: Responder
    let defaultHosts: Set<String>
    let makeService: ServiceMaker
    /// The tenants' own databases (`--database`), and the server's.
    let databases: TenantDatabases
    let logger: Logger

    private struct Built: Sendable {
        let record: TenantRecord
        let service: PasskeyService
        let responder: Responder
    }

    private struct State: Sendable {
        var version: Int64 = -1
        /// host → tenant
        var hosts: [String: String] = [:]
        var records: [String: TenantRecord] = [:]
        var built: [String: Built] = [:]
        /// Tenants whose build failed and was logged since the registry last moved.
        var failed: Set<String> = []
        /// Databases no tenant names any more, whose upkeep is stopping and pools closing.
        var closing: Set<String> = []
    }

    private let state = Mutex(State())
    /// Whether any tenant is added: the fast path of every request of a server without tenants
    /// (no host read, no lock).
    private let anyTenant = Atomic(false)

    public init(
        server: ServerSettings?, edge: EdgeConfiguration, defaultService: PasskeyService, defaultResponder: Responder, logger: Logger,
        makeService: ServiceMaker? = nil, databases: TenantDatabases? = nil
    ) {
        self.server = server
        self.trustedProxies = edge.trustedProxies
        self.defaultService = defaultService
        self.defaultResponder = defaultResponder
        self.defaultHosts = Set(TenantHost.hosts(ofOrigins: defaultService.configuration.webOrigins))
        self.logger = logger
        self.databases = databases ?? TenantDatabases(main: defaultService.store, opener: nil, now: defaultService.now)
        self.makeService =
            makeService ?? { [defaultService] configuration, store in
                try PasskeyService(
                    configuration: configuration, store: store, logger: logger, metrics: defaultService.metrics,
                    sharingPoolsWith: defaultService)
            }
    }

    var store: any PasskeyStore { defaultService.store }

    /// Reads the registry again when its version moved: hosts re-mapped; a tenant whose settings
    /// or hosts changed, or that was removed, loses its built service (the next request builds
    /// it anew, or finds no tenant).
    public func reload() async throws {
        guard server != nil else { return }
        let version = try await store.tenantsVersion()
        guard version != state.withLock({ $0.version }) else { return }
        let records = try await store.tenantRecords()
        state.withLock { state in
            state.version = version
            state.failed = []
            state.records = Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0) })
            state.hosts = [:]
            // The default tenant's hosts stay its own, whatever a tenant's record says (the CLI
            // checks against its own settings, which may not be the server's).
            for record in records { for host in record.hosts where !defaultHosts.contains(host) { state.hosts[host] = record.id } }
            state.built = state.built.filter { id, built in state.records[id] == built.record }
        }
        // Once tenants have been added (the registry's version moved), hosts stay strict even
        // when the last one is removed: its hosts answer unknown_tenant, not the default tenant.
        anyTenant.store(!records.isEmpty || version > 0, ordering: .releasing)
        logger.debug("tenants read", metadata: ["version": "\(version)", "tenants": "\(records.count)"])
    }

    public func run() async throws {
        // Without the server's settings there is nothing to poll; returning would end the
        // service group (the server with it), so this waits for the shutdown instead.
        guard server != nil else {
            try? await gracefulShutdown()
            return
        }
        // One upkeep task per database a tenant names (opening it, retrying while it cannot be
        // opened, then its workers), beside the poll: a database that is slow or down never
        // holds up the registry's reload or another tenant.
        var upkeeps: [String: Task<Void, Never>] = [:]
        var polls = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                try await reload()
            } catch {
                logger.warning("tenants not read", metadata: ["error": "\(error)"])
            }
            let named = Set(state.withLock { $0.records.values.compactMap(\.database) })
            for (url, task) in upkeeps where !named.contains(url) {
                // No tenant names it any more: its workers stop and its pools close, beside the
                // poll (an open under way is waited out there, never here).
                upkeeps[url] = nil
                task.cancel()
                state.withLock { _ = $0.closing.insert(url) }
                Task { [self] in
                    await task.value
                    await databases.close(url)
                    state.withLock { _ = $0.closing.remove(url) }
                }
            }
            // A database named again while its pools still close gets its upkeep on a later poll.
            let closing = state.withLock { $0.closing }
            for url in named where upkeeps[url] == nil && !closing.contains(url) {
                upkeeps[url] = Task { await keepUp(url) }
            }
            polls += 1
            // Once a minute: the tenants' in-process rate-limit windows pruned (the default
            // service's are the expiry sweeper's).
            if polls % 30 == 0 {
                let now = defaultService.now()
                for built in state.withLock({ Array($0.built.values) }) { built.service.limiter.prune(now: now) }
            }
            // As often as the default tenant's MetadataRefresher: the FIDO metadata of the
            // tenants built so far.
            if polls % Self.metadataPolls == 0 { await refreshMetadata() }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: Self.pollInterval) }
        }
        // The upkeep tasks see a graceful shutdown too (they inherit it) and end their rounds;
        // cancelled as well, they end even when this service is cancelled without one.
        for task in upkeeps.values { task.cancel() }
        for task in upkeeps.values { await task.value }
        await databases.close()
    }

    /// A tenant database's upkeep: opens it (retrying every ``TenantDatabases/retryAfter``
    /// while it cannot be, logged on the first failure and once a minute after), then runs its
    /// workers until the server stops or no tenant names it.
    func keepUp(_ url: String) async {
        let shown = PostgresStore.redacted(url)
        var failures = 0
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            do {
                let store = try await databases.store(for: url)
                logger.info("tenant database opened", metadata: ["database": "\(shown)"])
                await TenantDatabaseUpkeep(store: store, server: defaultService, logger: logger).run()
                return
            } catch {
                if failures % 12 == 0 {
                    logger.error(
                        "tenant database cannot be used; its tenants answer 503 until it can",
                        metadata: ["database": "\(shown)", "error": "\(error)", "failures": "\(failures + 1)"])
                }
                failures += 1
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(TenantDatabases.retryAfter) + .milliseconds(100)) }
        }
    }

    /// Opens (and migrates) every database a tenant names, all at once, waiting at most `wait`
    /// (when the server starts: those ready by then are migrated before it listens; the rest go
    /// on opening, and their tenants answer 503 until they are ready).
    func openDatabases(waitingAtMost wait: Duration = .seconds(10)) async {
        let urls = Set(state.withLock { $0.records.values.compactMap(\.database) })
        guard !urls.isEmpty else { return }
        let done = OpenCount()
        for url in urls {
            Task { [databases] in
                _ = try? await databases.store(for: url)
                done.count.add(1, ordering: .relaxed)
            }
        }
        let deadline = ContinuousClock.now + wait
        while done.count.load(ordering: .relaxed) < urls.count && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Polls between two metadata refreshes (``PasskeyService/metadataRefreshInterval``).
    static var metadataPolls: Int {
        max(1, Int(PasskeyService.metadataRefreshInterval.components.seconds / pollInterval.components.seconds))
    }

    /// Reloads the FIDO metadata of every tenant built so far, as the default tenant's
    /// `MetadataRefresher` does for its own: each service reads the stored BLOB's number and
    /// takes a newer BLOB (a revoked model is then refused in every tenant).
    func refreshMetadata() async {
        for service in builtServices { await service.refreshMetadata(from: store) }
    }

    /// Where a request goes.
    enum Route: Equatable {
        case defaultTenant
        case tenant(String)
        case unknown
    }

    /// The tenant a request is for, by its host (``host(of:peer:)``).
    func route(_ request: Request, peer: String?) -> Route {
        guard anyTenant.load(ordering: .acquiring) else { return .defaultTenant }
        return route(host: host(of: request, peer: peer), path: request.uri.path)
    }

    /// The tenant `host` (normalized, see ``TenantHost``) is served for.
    func route(host: String?, path: String) -> Route {
        if let host, defaultHosts.contains(host) { return .defaultTenant }
        let hosts = state.withLock { $0.hosts }
        if let host, let tenant = hosts[host] { return .tenant(tenant) }
        // The process's own endpoints answer on any host (load balancers ask by address).
        if ["/healthz", "/readyz", "/metrics"].contains(path) { return .defaultTenant }
        return .unknown
    }

    /// The request's host: `X-Forwarded-Host` when the peer is a trusted proxy (its last
    /// value, the one that proxy wrote), else the `Host` (HTTP/1.1) or `:authority`.
    func host(of request: Request, peer: String?) -> String? {
        if let peer, trustedProxies.contains(peer),
            let forwarded = request.headers[values: .xForwardedHost].last?.split(separator: ",").last
        {
            return TenantHost.normalize(String(forwarded))
        }
        guard let authority = request.head.authority else { return nil }
        return TenantHost.normalize(authority)
    }

    /// A tenant's routes, built on first use; nil when it is not (or no longer) a tenant.
    func responder(tenant id: String) async throws -> Responder? {
        // A built tenant stays built until a reload finds its record changed (reload() drops it).
        let (record, built) = state.withLock { state in state.built[id].map { (nil, $0) } ?? (state.records[id], nil) }
        if let built { return built.responder }
        guard let record, let server else { return nil }
        let (domain, edge) = try TenantSettings.read(tenant: id, json: Data(record.settings.utf8), server: server)
        let service = try makeService(domain, try await databases.store(for: record.database).scoped(to: id))
        try await service.prepareIntegrations()
        await service.refreshMetadata(from: store)
        let responder = PasskeyServer.router(service: service, edge: edge).buildResponder()
        state.withLock { state in
            // Kept only while the registry still holds this version of the tenant.
            if state.records[id] == record && state.built[id] == nil {
                state.built[id] = Built(record: record, service: service, responder: responder)
            }
        }
        return responder
    }

    /// Whether this is the first failure to build tenant `id` since the registry last moved.
    func firstFailure(of id: String) -> Bool { state.withLock { $0.failed.insert(id).inserted } }

    /// The services built so far (metadata refreshes, tests).
    var builtServices: [PasskeyService] { state.withLock { $0.built.values.map(\.service) } }
}

/// How many of the databases opened at the start are done.
private final class OpenCount: Sendable {
    let count = Atomic(0)
}

extension HTTPField.Name {
    static let xForwardedHost = Self("X-Forwarded-Host")!
}

/// The application's responder: finds the request's tenant, then hands it to that tenant's routes.
struct TenantResponder: HTTPResponder {
    let directory: TenantDirectory

    func respond(to request: Request, context: PasskeyRequestContext) async throws -> Response {
        switch directory.route(request, peer: context.peerAddress) {
        case .defaultTenant:
            return try await directory.defaultResponder.respond(to: request, context: context)
        case .tenant(let id):
            let responder: TenantDirectory.Responder?
            do {
                responder = try await directory.responder(tenant: id)
            } catch {
                // A database that is down is logged by its upkeep (once a minute), not once per
                // request: requests to its tenant's hosts cannot flood the log.
                // Settings the server cannot serve (a registry row written by another release, the
                // server's settings changed under it): logged once per version of the registry.
                let level: Logger.Level =
                    (error as? StoreError)?.code == .unavailable || !directory.firstFailure(of: id) ? .debug : .error
                directory.logger.log(level: level, "tenant not served", metadata: ["tenant": "\(id)", "error": "\(error)"])
                return Self.answer(.serviceUnavailable, "tenant_unavailable", "This service cannot answer right now.")
            }
            guard let responder else { return Self.unknownTenant }
            return try await responder.respond(to: request, context: context)
        case .unknown:
            return Self.unknownTenant
        }
    }

    static let unknownTenant = answer(.notFound, "unknown_tenant", "No service is configured for this host.")

    static func answer(_ status: HTTPResponse.Status, _ code: String, _ message: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        headers[.xContentTypeOptions] = "nosniff"
        let body = #"{"error":{"code":"# + JSONText.quote(code) + #","message":"# + JSONText.quote(message) + "}}"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}
