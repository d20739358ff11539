import Crypto
import Foundation
import PasskeyStore
import Synchronization

/// Fixed-window counters per key (an address, an account and address pair, an account). With
/// one instance the counts live in memory; with several (PostgreSQL) they live in the store, so
/// every instance sees the same counts.
///
/// Memory is bounded whatever the traffic: keys are kept as 16-byte digests (a 60 KB key costs
/// what a short one does), at most ``maxKeys`` are held, windows that ended are pruned by the
/// expiry sweeper, and when the table is full the key that was first counted longest ago is
/// evicted. Eviction forgets that key's count, so a key's limit holds as long as fewer than
/// `maxKeys` keys are counted in one window. One address makes at most `2 × perIP + 1` keys a
/// window (its own, and for each password or recovery attempt an account-and-address key and an
/// account key), so reaching that takes `maxKeys / (2 × perIP + 1)` addresses.
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

    /// A key's digest: the first 16 bytes of SHA-256.
    package struct Digest: Hashable, Sendable {
        package let high: UInt64
        package let low: UInt64

        package init(_ key: String) {
            let hash = SHA256.hash(data: Array(key.utf8))
            var high: UInt64 = 0, low: UInt64 = 0
            for (index, byte) in hash.enumerated() where index < 16 {
                if index < 8 { high = high << 8 | UInt64(byte) } else { low = low << 8 | UInt64(byte) }
            }
            self.high = high
            self.low = low
        }

        package var hex: String { String(high, radix: 16) + ":" + String(low, radix: 16) }
    }

    private struct Entry {
        var window: Int64
        var hits: Int
        /// Insertion order, for eviction.
        var sequence: UInt64
    }

    private struct Table {
        var entries: [Digest: Entry] = [:]
        /// Keys in the order they were (re)started; stale positions are skipped.
        var order: [(Digest, UInt64)] = []
        var orderStart = 0
        var sequence: UInt64 = 0
    }

    private let backend: Backend
    private let windowMillis: Int64
    private let table = Mutex(Table())
    /// Store backend: the keys this process saw past their limit in the current window. Hits only
    /// grow within a window, so the next hit on such a key is refused here, without a database
    /// write: a flood's refusals cost the database nothing after the first (issue 44, the noisy
    /// neighbour). Emptied when a window starts; a refund on a key takes it out.
    private let overLimit = Mutex((window: Int64(0), keys: Set<Digest>()))
    /// Most keys held in memory (≈ 100 bytes each: ~10 MB at the default).
    public let maxKeys: Int

    public init(window: Duration, store: (any PasskeyStore)?, maxKeys: Int = 100_000) {
        windowMillis = max(1000, Int64(window.components.seconds) * 1000)
        backend = store.map(Backend.store) ?? .memory
        self.maxKeys = max(16, maxKeys)
    }

    /// Keys held in memory now.
    public var keyCount: Int { table.withLock { $0.entries.count } }

    private func window(_ now: Date) -> (start: Int64, nowMillis: Int64) {
        let nowMillis = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
        return (nowMillis - nowMillis % windowMillis, nowMillis)
    }

    private func retryAfter(_ start: Int64, _ nowMillis: Int64) -> Int {
        Int((start + windowMillis - nowMillis + 999) / 1000)
    }

    /// Counts one hit on `key` and decides against `limit` per window.
    public func hit(_ key: String, limit: Int, now: Date) async throws -> Decision {
        try await hitNotingRepeats(key, limit: limit, now: now).decision
    }

    /// ``hit(_:limit:now:)``, and whether `key` was past its limit before this hit: it was
    /// refused earlier in this window and asked again (``RefusalHold``).
    package func hitNotingRepeats(_ key: String, limit: Int, now: Date) async throws -> (decision: Decision, repeated: Bool) {
        let (start, nowMillis) = window(now)
        guard case .store = backend else {
            let hits = try await add(key, start: start)
            return hits > limit ? (.limited(retryAfter: retryAfter(start, nowMillis)), hits > limit + 1) : (.allowed, false)
        }
        let digest = Digest(key)
        let known = overLimit.withLock { memo in
            if memo.window != start { memo = (start, []) }
            return memo.keys.contains(digest)
        }
        if known { return (.limited(retryAfter: retryAfter(start, nowMillis)), true) }
        let hits = try await add(key, start: start)
        guard hits > limit else { return (.allowed, false) }
        overLimit.withLock { memo in
            if memo.window == start && memo.keys.count < maxKeys { memo.keys.insert(digest) }
        }
        // Past `limit + 1`: another instance (or this one, before a refund) refused it already.
        return (.limited(retryAfter: retryAfter(start, nowMillis)), hits > limit + 1)
    }

    /// Whether `key` is already at `limit` in this window, without counting a hit.
    public func check(_ key: String, limit: Int, now: Date) async throws -> Decision {
        let (start, nowMillis) = window(now)
        let hits: Int
        switch backend {
        case .memory:
            let digest = Digest(key)
            hits = table.withLock { table in
                guard let entry = table.entries[digest], entry.window == start else { return 0 }
                return entry.hits
            }
        case .store(let store):
            hits = try await store.rateLimitHits(key: Digest(key).hex, windowStart: Date(timeIntervalSince1970: Double(start) / 1000))
        }
        return hits >= limit ? .limited(retryAfter: retryAfter(start, nowMillis)) : .allowed
    }

    /// Hands back one hit counted at `now` (an attempt that turned out to be no failure).
    public func refund(_ key: String, now: Date) async throws {
        let start = window(now).start
        switch backend {
        case .memory:
            let digest = Digest(key)
            table.withLock { table in
                guard var entry = table.entries[digest], entry.window == start, entry.hits > 0 else { return }
                entry.hits -= 1
                table.entries[digest] = entry
            }
        case .store(let store):
            let digest = Digest(key)
            overLimit.withLock { _ = $0.keys.remove(digest) }
            try await store.refundHit(key: digest.hex, windowStart: Date(timeIntervalSince1970: Double(start) / 1000))
        }
    }

    private func add(_ key: String, start: Int64) async throws -> Int {
        let digest = Digest(key)
        switch backend {
        case .memory:
            return table.withLock { table in
                if var entry = table.entries[digest], entry.window == start {
                    entry.hits += 1
                    table.entries[digest] = entry
                    return entry.hits
                }
                if table.entries[digest] == nil && table.entries.count >= maxKeys {
                    Self.prune(&table, before: start)
                    Self.evict(&table, toBelow: maxKeys)
                }
                table.sequence += 1
                table.entries[digest] = Entry(window: start, hits: 1, sequence: table.sequence)
                table.order.append((digest, table.sequence))
                Self.compact(&table)
                return 1
            }
        case .store(let store):
            let begin = Date(timeIntervalSince1970: Double(start) / 1000)
            return try await store.countHit(
                key: digest.hex, windowStart: begin, expiresAt: begin.addingTimeInterval(Double(windowMillis) / 1000))
        }
    }

    /// Drops the windows that ended before `now` (the expiry sweeper calls this every minute).
    public func prune(now: Date) {
        let start = window(now).start
        table.withLock { table in
            Self.prune(&table, before: start)
            Self.compact(&table)
        }
    }

    private static func prune(_ table: inout Table, before start: Int64) {
        table.entries = table.entries.filter { $0.value.window >= start }
    }

    /// Evicts the oldest keys until fewer than `limit` remain.
    private static func evict(_ table: inout Table, toBelow limit: Int) {
        while table.entries.count >= limit && table.orderStart < table.order.count {
            let (digest, sequence) = table.order[table.orderStart]
            table.orderStart += 1
            if table.entries[digest]?.sequence == sequence { table.entries[digest] = nil }
        }
    }

    /// Keeps the order list proportional to the table.
    private static func compact(_ table: inout Table) {
        let live = table.order.count - table.orderStart
        guard live > 2 * table.entries.count + 1024 || table.orderStart > table.order.count / 2 + 1024 else { return }
        table.order = table.order[table.orderStart...].filter { table.entries[$0.0]?.sequence == $0.1 }
        table.orderStart = 0
    }
}
