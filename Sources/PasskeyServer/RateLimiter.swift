import Foundation
import PasskeyStore
import Synchronization

/// Fixed-window request limits per key (an IP address, an account, a username). With one
/// instance the counts live in memory; with several (PostgreSQL) they live in the store, so every
/// instance sees the same counts.
public final class RateLimiter: Sendable {
    public enum Decision: Sendable, Equatable {
        case allowed
        /// Over the limit: try again in this many seconds.
        case limited(retryAfter: Int)
    }

    private enum Backend: Sendable {
        case memory
        case store(any PasskeyStore)
    }

    private let backend: Backend
    private let windowMillis: Int64
    private let counts = Mutex<[String: (window: Int64, hits: Int)]>([:])
    /// Memory bound: past this many keys, windows that ended are dropped.
    private static let maxKeys = 200_000

    public init(window: Duration, store: (any PasskeyStore)?) {
        windowMillis = max(1000, Int64(window.components.seconds) * 1000)
        backend = store.map(Backend.store) ?? .memory
    }

    /// Counts one request for `key` against `limit` per window.
    public func hit(_ key: String, limit: Int, now: Date) async throws -> Decision {
        let nowMillis = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        let window = nowMillis - nowMillis % windowMillis
        let hits: Int
        switch backend {
        case .memory:
            hits = counts.withLock { table in
                if table.count > Self.maxKeys { table = table.filter { $0.value.window == window } }
                var entry = table[key] ?? (window, 0)
                if entry.window != window { entry = (window, 0) }
                entry.hits += 1
                table[key] = entry
                return entry.hits
            }
        case .store(let store):
            let start = Date(timeIntervalSince1970: Double(window) / 1000)
            hits = try await store.countHit(key: key, windowStart: start, expiresAt: start.addingTimeInterval(Double(windowMillis) / 1000))
        }
        guard hits > limit else { return .allowed }
        let remaining = window + windowMillis - nowMillis
        return .limited(retryAfter: Int((remaining + 999) / 1000))
    }
}
