import Foundation
import Logging
import PasskeyCore
import PasskeyModels
import PasskeyStore
import ServiceLifecycle
import Synchronization

/// The databases of tenants that keep their rows apart (`passkeyd tenant add --database URL`),
/// each opened once per process and migrated before its first use; the server's own database for
/// every other tenant.
///
/// The registry (the tenants, their hosts and settings) and the FIDO metadata stay in the
/// server's database; everything a tenant of its own database owns (accounts, passkeys,
/// sessions, keys, outboxes, audit) is in its database, under its name, so the same isolation
/// holds there (row-level security on PostgreSQL included). A database that cannot be opened is
/// tried again at most every ``retryAfter`` (its tenant answers 503 `tenant_unavailable`
/// meanwhile); the other tenants are not held up.
public final class TenantDatabases: Sendable {
    /// Opens the store a URL names and brings its schema up to date (or checks it is, with
    /// `migrations: check`).
    public typealias Opener = @Sendable (String) async throws -> any PasskeyStore

    public static let retryAfter: TimeInterval = 5

    /// The server's database.
    public let main: any PasskeyStore
    let opener: Opener?
    let now: @Sendable () -> Date

    private struct State: Sendable {
        var opening: [String: Task<any PasskeyStore, any Error>] = [:]
        /// url → when it may be tried again
        var failed: [String: Date] = [:]
    }

    private let state = Mutex(State())

    /// `opener` nil: no tenant may have a database of its own (in-process tests).
    public init(main: any PasskeyStore, opener: Opener?, now: @escaping @Sendable () -> Date = { Date() }) {
        self.main = main
        self.opener = opener
        self.now = now
    }

    /// The database `url` names (nil: the server's), opened and migrated on first use.
    public func store(for url: String?) async throws -> any PasskeyStore {
        guard let url else { return main }
        guard let opener else { throw StoreError(.invalidDatabase, "this process does not open tenants' own databases") }
        let time = now()
        let task: Task<any PasskeyStore, any Error> = try state.withLock { state in
            if let task = state.opening[url] { return task }
            if let until = state.failed[url], until > time {
                throw StoreError(
                    .unavailable, "the tenant's database \(PostgresStore.redacted(url)) could not be opened; tried again shortly")
            }
            let task = Task { try await opener(url) }
            state.opening[url] = task
            return task
        }
        do {
            return try await task.value
        } catch {
            // Counted from the failure (an unreachable server fails after its deadline).
            let failedAt = now()
            state.withLock { state in
                if state.opening[url] == task {
                    state.opening[url] = nil
                    state.failed[url] = failedAt.addingTimeInterval(Self.retryAfter)
                }
            }
            if let error = error as? StoreError { throw error }
            // A URL that names no database, a schema this release cannot use, …
            throw StoreError(.unavailable, "the tenant's database \(PostgresStore.redacted(url)) cannot be used: \(error)")
        }
    }

    /// Whether `url` failed to open less than ``retryAfter`` ago.
    public func failedRecently(_ url: String) -> Bool {
        let time = now()
        return state.withLock { ($0.failed[url] ?? .distantPast) > time }
    }

    /// The databases opened so far (their URLs).
    public var opened: [String] { state.withLock { Array($0.opening.keys).sorted() } }

    /// Forgets `url` and closes its pools (no tenant names it any more).
    public func close(_ url: String) async {
        let task = state.withLock { state in
            state.failed[url] = nil
            return state.opening.removeValue(forKey: url)
        }
        (try? await task?.value as? PostgresStore)?.close()
    }

    /// Closes the PostgreSQL pools of the databases opened (once the server has stopped).
    public func close() async {
        let tasks = state.withLock { state in
            defer { state.opening = [:] }
            return Array(state.opening.values)
        }
        for task in tasks { (try? await task.value as? PostgresStore)?.close() }
    }
}

/// The upkeep of a tenant's own database, as the server's database has its own: expired rows
/// swept and the adoption rollups made once a minute, webhooks delivered, mail sent through the
/// server's relay. Runs until the server stops.
struct TenantDatabaseUpkeep {
    let store: any PasskeyStore
    /// The default tenant's service: the server's clock, metrics, webhook rule and mail relay.
    let server: PasskeyService
    let logger: Logger

    func run() async {
        await withDiscardingTaskGroup { group in
            let sweeper = ExpirySweeper(store: store, limiter: nil, logger: logger, now: server.now)
            group.addTask { try? await sweeper.run() }
            let webhooks = WebhookDispatcher(
                store: store, metrics: server.metrics, logger: logger, policy: server.configuration.webhookPolicy, now: server.now
            ) { WebhookClient(policy: $0, connectTimeout: $1, requestTimeout: $2) }
            group.addTask { try? await webhooks.run() }
            if let mail = MailDispatcher.make(service: server, logger: logger, store: store) {
                group.addTask { try? await mail.run() }
            }
        }
    }
}
