import Synchronization

/// Races for the single-use rules: `takers` tasks that all wait at one start gate and are
/// released together once every one of them is ready, so their store calls overlap (a task
/// group alone starts them one after another, and the first may finish before the last starts).
public enum Race {
    /// Runs `take` in `takers` tasks released together; returns each one's result in task order.
    public static func run<T: Sendable>(
        _ takers: Int = 16, _ take: @escaping @Sendable (Int) async throws -> T
    ) async -> [Result<T, any Error>] {
        let gate = StartGate(count: takers)
        return await withTaskGroup(of: (Int, Result<T, any Error>).self) { group in
            for taker in 0..<takers {
                group.addTask {
                    await gate.arrive()
                    do {
                        return (taker, .success(try await take(taker)))
                    } catch {
                        return (taker, .failure(error))
                    }
                }
            }
            var results = [Result<T, any Error>?](repeating: nil, count: takers)
            for await (taker, result) in group { results[taker] = result }
            return results.compactMap { $0 }
        }
    }

    /// How many of `results` succeeded with a value `won` accepts (errors never win).
    public static func winners<T>(_ results: [Result<T, any Error>], _ won: (T) -> Bool) -> Int {
        results.filter { (try? $0.get()).map(won) ?? false }.count
    }
}

/// A gate that opens when `count` tasks have arrived at it.
final class StartGate: Sendable {
    private let state: Mutex<(arrived: Int, waiting: [CheckedContinuation<Void, Never>])>
    private let count: Int

    init(count: Int) {
        self.count = count
        state = Mutex((0, []))
    }

    func arrive() async {
        await withCheckedContinuation { continuation in
            let release = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.arrived += 1
                state.waiting.append(continuation)
                guard state.arrived == count else { return [] }
                defer { state.waiting = [] }
                return state.waiting
            }
            for waiter in release { waiter.resume() }
        }
    }
}
