import Foundation
import PasskeyCore
import PasskeyStore
import PasskeyStoreTesting

/// A `PasskeyService` on a fresh database (SQLite in a temporary folder; PostgreSQL when the
/// suite runs with `PASSKEYD_TEST_STORE=postgres`) and a test clock: the domain with no HTTP.
struct DomainHarness: Sendable {
    let service: PasskeyService
    let store: any PasskeyStore
    let clock: TestClock

    init(store: (any PasskeyStore)? = nil, _ configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        if let store {
            self.store = store
        } else {
            self.store = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        }
        var configuration = ServerConfiguration()
        configure(&configuration)
        let clock = TestClock()
        self.clock = clock
        service = try PasskeyService(configuration: configuration, store: self.store, now: { clock.now })
    }

    /// A client as the edge would describe one.
    static let client = PasskeyService.Client(ipAddress: "192.0.2.7", userAgent: "passkeyd-tests")
}
