import Foundation

/// A small deterministic generator for reproducible random tests (SplitMix64).
///
/// A test's random inputs come from ``forTest(_:)``: seeded from `PASSKEYD_TEST_SEED` when it is
/// set (to replay a failure), else from a fresh seed, which is printed with the test's name
/// before any input is made, so a failure (or a crash) can always be replayed. Put ``seed`` in
/// the test's failure messages too.
public struct SplitMix64: RandomNumberGenerator {
    public let seed: UInt64
    private var state: UInt64

    public init(seed: UInt64) {
        self.seed = seed
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// A generator for `test`'s random inputs; prints its seed.
    public static func forTest(_ test: String = #function) -> SplitMix64 {
        let given = ProcessInfo.processInfo.environment["PASSKEYD_TEST_SEED"].flatMap { UInt64($0) }
        let seed = given ?? UInt64.random(in: 0...UInt64.max)
        print("\(test): random inputs from seed \(seed) (PASSKEYD_TEST_SEED=\(seed) replays them)")
        return SplitMix64(seed: seed)
    }
}
