import Foundation
import Logging
import PasskeyStore
import ServiceLifecycle

/// Deletes expired ceremonies and sessions, and prunes ended rate-limit windows, once a minute.
package struct ExpirySweeper: Service {
    let store: any PasskeyStore
    /// Pruned on each sweep; nil for a tenant database's sweeper (each tenant's service's
    /// limiter is pruned by the tenant directory).
    let limiter: RateLimiter?
    let logger: Logger
    /// The service's clock (the wall clock in production): what is expired is judged on the same
    /// clock that set the expiry.
    let now: @Sendable () -> Date

    package init(service: PasskeyService, logger: Logger) {
        self.init(store: service.store, limiter: service.limiter, logger: logger, now: service.now)
    }

    /// The sweeper of `store`'s database, every tenant's rows in it (upkeep).
    package init(store: any PasskeyStore, limiter: RateLimiter?, logger: Logger, now: @escaping @Sendable () -> Date) {
        self.store = store
        self.limiter = limiter
        self.logger = logger
        self.now = now
    }

    package func run() async throws {
        // The first sweep comes a minute in: by then the database is migrated (migrations run
        // before the server starts, while this service is already up).
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(60)) }
            guard !Task.isCancelled && !Task.isShuttingDownGracefully else { return }
            limiter?.prune(now: now())
            // The adoption chart's daily rollups: a day is rolled up five minutes after it ends.
            do {
                try await store.rollUpMetrics(before: now().addingTimeInterval(-300))
            } catch {
                logger.warning("adoption rollup failed", metadata: ["error": "\(error)"])
            }
            do {
                let removed = try await store.sweepExpired(now: now())
                if removed > 0 { logger.debug("swept expired rows", metadata: ["count": "\(removed)"]) }
            } catch {
                logger.warning("sweep failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
