import Foundation
import Synchronization

/// A controllable clock for expiry tests: it starts at 2027-01-15 08:00 UTC and moves only when
/// told to.
public final class TestClock: Sendable {
    private let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    public init() {}
    public var now: Date { time.withLock { $0 } }
    public func advance(_ seconds: TimeInterval) { time.withLock { $0 = $0.addingTimeInterval(seconds) } }
}
