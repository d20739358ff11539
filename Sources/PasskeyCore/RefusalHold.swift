import Synchronization

/// Refusals held before they are sent (issue 44, the noisy neighbour).
///
/// A client refused by its per-address limit that asks again in the same window did not wait as
/// Retry-After told it, and its refusals would otherwise cost the server a request's transport
/// each (TCP, the HTTP parser, the event loop: 0.1 to 0.2 ms of a core, docs/PERFORMANCE.md),
/// taken from every other tenant. Such a refusal waits ``duration`` before it is sent: a sleeping
/// task, no CPU. HTTP/1.1 answers a connection's requests one at a time, so a client that waits
/// for its answers gets one a hold per connection.
///
/// Bounds, so that holding can never tie up more than it saves:
/// - at most ``perAddress`` refusals of one address are held at once (the default connection
///   cap per address): a client behind a trusted proxy (whose connections the per-address cap
///   does not count) or one that resets its connections right after sending (its slot is free
///   again while its refusal still waits) cannot hold more, nor take the process's whole budget;
/// - at most ``capacity`` in the process.
/// Past either, a refusal is sent at once, as without a hold. One instance serves the whole
/// process (every tenant's service shares the default one's).
///
/// A graceful shutdown does not cancel the requests in flight: the server waits out a hold
/// (at most ``duration``) as it waits for any answer.
package final class RefusalHold: Sendable {
    package let duration: Duration
    package let capacity: Int
    package let perAddress: Int
    private let sleep: @Sendable (Duration) async throws -> Void
    private let held = Mutex<(total: Int, byAddress: [String: Int])>((0, [:]))

    /// - Parameter sleep: how a hold waits (tests pass one they release themselves).
    package init(
        duration: Duration, capacity: Int = 1024, perAddress: Int = 64,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.duration = duration
        self.capacity = max(0, capacity)
        self.perAddress = max(0, perAddress)
        self.sleep = sleep
    }

    /// Waits out the hold for a refusal of `address`; true when it waited the whole hold. False
    /// at once when holding is off or the address or the process holds as many as it may, and
    /// false when the wait was cut short (the task cancelled).
    package func hold(address: String) async -> Bool {
        guard duration > .zero else { return false }
        let taken = held.withLock { held in
            let mine = held.byAddress[address, default: 0]
            guard held.total < capacity, mine < perAddress else { return false }
            held.total += 1
            held.byAddress[address] = mine + 1
            return true
        }
        guard taken else { return false }
        defer {
            held.withLock { held in
                held.total -= 1
                let mine = held.byAddress[address, default: 1] - 1
                held.byAddress[address] = mine > 0 ? mine : nil
            }
        }
        do {
            try await sleep(duration)
            return true
        } catch {
            return false
        }
    }

    /// Refusals held now, in all and for `address`.
    package var holding: Int { held.withLock { $0.total } }
    package func holding(_ address: String) -> Int { held.withLock { $0.byAddress[address, default: 0] } }
}
