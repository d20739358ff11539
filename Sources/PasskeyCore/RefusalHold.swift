import Synchronization

/// Refusals held before they are sent (issue 44, the noisy neighbour).
///
/// A client refused by its per-address limit that asks again in the same window did not wait as
/// Retry-After told it, and its refusals would otherwise cost the server a request's transport
/// each (TCP, the HTTP parser, the event loop: 0.1 to 0.2 ms of a core, docs/PERFORMANCE.md),
/// taken from every other tenant. Such a refusal waits ``duration`` before it is sent: a sleeping
/// task, no CPU. HTTP/1.1 answers a connection's requests one at a time, so a kept-alive
/// connection then gets one answer a hold, and one address (at most
/// `connections.maxConnectionsPerAddress` connections) that many per hold.
///
/// At most ``capacity`` refusals are held at once in the process; past it they are sent at once,
/// as without a hold, so a flood from many addresses cannot make the server keep an unbounded
/// number of tasks. One instance serves the whole process (every tenant's service shares the
/// default one's).
package final class RefusalHold: Sendable {
    package let duration: Duration
    package let capacity: Int
    private let sleep: @Sendable (Duration) async throws -> Void
    private let held = Mutex(0)

    /// - Parameter sleep: how a hold waits (tests pass one they release themselves).
    package init(
        duration: Duration, capacity: Int = 1024,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.duration = duration
        self.capacity = max(0, capacity)
        self.sleep = sleep
    }

    /// Waits out the hold and returns true; false at once when holding is off or ``capacity``
    /// refusals are held already. A cancelled task stops waiting (the server shutting down).
    package func hold() async -> Bool {
        guard duration > .zero else { return false }
        let taken = held.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
        guard taken else { return false }
        defer { held.withLock { $0 -= 1 } }
        try? await sleep(duration)
        return true
    }

    /// Refusals held now.
    package var holding: Int { held.withLock { $0 } }
}
