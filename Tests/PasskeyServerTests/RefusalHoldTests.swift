import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Synchronization
import Testing

/// The held refusal (issue 44, the noisy neighbour): an address refused by its per-address limit
/// that asks again in the same window gets its next refusals after a hold, no CPU spent while
/// they wait, and the process holds a bounded number at once.
@Suite("Held refusals")
struct RefusalHoldTests {
    /// A sleep the test ends itself: every hold waits here until ``release()``.
    final class Latch: Sendable {
        private let waiting = Mutex<(open: Bool, continuations: [CheckedContinuation<Void, Never>])>((false, []))

        func sleep(_: Duration) async {
            await withCheckedContinuation { continuation in
                let resumeNow = waiting.withLock { state in
                    if state.open { return true }
                    state.continuations.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }

        var sleepers: Int { waiting.withLock { $0.continuations.count } }

        func release() {
            let continuations = waiting.withLock { state in
                state.open = true
                defer { state.continuations = [] }
                return state.continuations
            }
            for continuation in continuations { continuation.resume() }
        }
    }

    @Test func noHoldWhenItIsOff() async {
        let hold = RefusalHold(duration: .zero, capacity: 8)
        #expect(await hold.hold(address: "192.0.2.1") == false)
        #expect(hold.holding == 0)
    }

    /// Past the process's capacity, or past one address's share, a refusal is sent at once; a
    /// held one comes back when its sleep ends and frees its place.
    @Test(.timeLimit(.minutes(1))) func atMostCapacityAreHeldAtOnceAndAtMostTheAddressesShare() async {
        let latch = Latch()
        let hold = RefusalHold(duration: .seconds(1), capacity: 3, perAddress: 2) { await latch.sleep($0) }
        let held = await withTaskGroup(of: Bool.self) { group in
            for address in ["192.0.2.1", "192.0.2.1", "192.0.2.2"] {
                group.addTask { await hold.hold(address: address) }
            }
            while latch.sleepers < 3 { await Task.yield() }
            #expect(hold.holding == 3 && hold.holding("192.0.2.1") == 2 && hold.holding("192.0.2.2") == 1)
            // The address that has its two held is answered at once; so is a third address,
            // the process holding its three.
            #expect(await hold.hold(address: "192.0.2.1") == false)
            #expect(await hold.hold(address: "192.0.2.3") == false)
            latch.release()
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(held == 3)
        #expect(hold.holding == 0 && hold.holding("192.0.2.1") == 0)
        #expect(await hold.hold(address: "192.0.2.1") == true, "a place is free again (the latch is open now)")
    }

    /// A cancelled hold stops waiting, frees its place and says it was cut short (the refusal's
    /// Retry-After is then not shortened by a hold that did not happen).
    @Test(.timeLimit(.minutes(1))) func aCancelledHoldEndsAtOnceAndSaysSo() async {
        let hold = RefusalHold(duration: .seconds(3600), capacity: 4)
        let task = Task { await hold.hold(address: "192.0.2.9") }
        while hold.holding == 0 { await Task.yield() }
        task.cancel()
        #expect(await task.value == false)
        #expect(hold.holding == 0 && hold.holding("192.0.2.9") == 0)
    }

    /// Takers released together against one address's limit: exactly `limit` pass, exactly one is
    /// the first refusal (sent at once), and every other is a repeat (held). On PostgreSQL the
    /// count is the store's, as with several instances; on SQLite and in memory, the process's.
    @Test(arguments: [nil] + TestDatabase.kinds.map { Optional($0) })
    func exactlyOneRefusalIsTheFirst(_ kind: TestDatabase.Kind?) async throws {
        let store: (any PasskeyStore)? = if let kind { try await TestDatabase.makeStore(kind) } else { nil }
        let limiter = RateLimiter(window: .seconds(60), store: store)
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let key = "ip:198.51.100.7-\(UUID())"
        let results = await Race.run(24) { _ in try await limiter.hitNotingRepeats(key, limit: 5, now: now) }
        #expect(Race.winners(results) { $0.decision == .allowed } == 5)
        #expect(Race.winners(results) { $0.decision != .allowed && !$0.repeated } == 1)
        #expect(Race.winners(results) { $0.decision != .allowed && $0.repeated } == 18)
        #expect(Race.winners(results) { $0.decision == .allowed && $0.repeated } == 0)
        // Another instance on the same store counts its first refusal as a repeat: the address
        // was refused already (by this one). In memory the other instance counts on its own.
        let other = RateLimiter(window: .seconds(60), store: store)
        let next = try await other.hitNotingRepeats(key, limit: 5, now: now)
        if store != nil {
            #expect(next.decision != .allowed && next.repeated)
        } else {
            #expect(next.decision == .allowed && !next.repeated)
        }
        // A new window starts afresh.
        let later = try await limiter.hitNotingRepeats(key, limit: 5, now: now.addingTimeInterval(60))
        #expect(later.decision == .allowed && !later.repeated)
    }

    /// Over HTTP: the first refusal in a window is sent at once, the next ones are held (counted
    /// in `passkeyd_refusals_held_total`), all are 429 with Retry-After; with the hold off,
    /// nothing is held.
    @Test(arguments: [20, 0])
    func repeatedRefusalsAreHeldOverHTTP(_ milliseconds: Int) async throws {
        let harness = try await ServerHarness {
            $0.rateLimits.perIP = 2
            $0.rateLimits.refusalHoldMilliseconds = milliseconds
            $0.metricsToken = "metrics-token-0123456789"
        }
        try await harness.run(live: true) { api in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<5 {
                let response = try await api.request(.post, "/api/auth/authenticate/options", body: Array("{}".utf8))
                statuses.append(response.status)
                if response.status == .tooManyRequests {
                    #expect(response.errorCode == "rate_limited")
                    #expect(Int(response.headers[.retryAfter] ?? "") ?? 0 >= 1)
                }
            }
            #expect(statuses == [.ok, .ok, .tooManyRequests, .tooManyRequests, .tooManyRequests])
            let scrape = try await api.request(.get, "/metrics", headers: [.authorization: "Bearer metrics-token-0123456789"])
            let text = String(decoding: scrape.bytes, as: UTF8.self)
            #expect(text.contains(#"passkeyd_rate_limited_total{scope="ip"} 3"#), "\(text)")
            if milliseconds > 0 {
                #expect(text.contains(#"passkeyd_refusals_held_total{result="held"} 2"#), "\(text)")
            } else {
                #expect(!text.contains("passkeyd_refusals_held_total"), "\(text)")
            }
        }
    }

    /// The OpenID provider's own budgets are held the same way: a flood of a tenant's token
    /// endpoint (`oauth_client:`) gets its first refusal at once and the next ones held.
    @Test func theOpenIDBudgetsAreHeldToo() async throws {
        let harness = try await ServerHarness {
            $0.rateLimits.perIP = 2
            $0.rateLimits.refusalHoldMilliseconds = 20
            $0.metricsToken = "metrics-token-0123456789"
        }
        try await harness.run(live: true) { api in
            var statuses: [HTTPResponse.Status] = []
            for _ in 0..<5 {
                let response = try await api.request(
                    .post, "/oauth2/token", body: Array("grant_type=authorization_code&code=nothing".utf8), origin: nil,
                    headers: [.contentType: "application/x-www-form-urlencoded"])
                statuses.append(response.status)
            }
            #expect(statuses.prefix(2).allSatisfy { $0 != .tooManyRequests } && statuses.dropFirst(2).allSatisfy { $0 == .tooManyRequests })
            let scrape = try await api.request(.get, "/metrics", headers: [.authorization: "Bearer metrics-token-0123456789"])
            let text = String(decoding: scrape.bytes, as: UTF8.self)
            #expect(text.contains(#"passkeyd_rate_limited_total{scope="oauth_client"} 3"#), "\(text)")
            #expect(text.contains(#"passkeyd_refusals_held_total{result="held"} 2"#), "\(text)")
        }
    }

    /// A held refusal's Retry-After counts the second it was held: both refusals are decided at
    /// one instant of the test's clock, the second is sent a second later and says one less.
    @Test(.timeLimit(.minutes(1))) func aHeldRefusalsRetryAfterCountsTheHold() async throws {
        let harness = try await ServerHarness {
            $0.rateLimits.perIP = 1
            $0.rateLimits.refusalHoldMilliseconds = 1000
        }
        try await harness.run(live: true) { api in
            let body = Array("{}".utf8)
            #expect(try await api.request(.post, "/api/auth/authenticate/options", body: body).status == .ok)
            let first = try await api.request(.post, "/api/auth/authenticate/options", body: body)
            let held = try await api.request(.post, "/api/auth/authenticate/options", body: body)
            #expect(first.status == .tooManyRequests && held.status == .tooManyRequests)
            let told = Int(first.headers[.retryAfter] ?? "") ?? 0
            #expect(told >= 2, "the test clock sits early enough in its window: \(told)")
            #expect(Int(held.headers[.retryAfter] ?? "") == told - 1, "\(held.headers)")
        }
    }

    /// `rateLimits.refusalHoldMilliseconds` / `PASSKEYD_RATE_LIMIT_REFUSAL_HOLD_MS`: 1 s unless
    /// set, 0 to 10 s, and the process's alone (one budget of held refusals for every tenant).
    @Test func theHoldIsAProcessSetting() throws {
        #expect(try SettingsTests.load().domain.rateLimits.refusalHoldMilliseconds == 1000)
        let set = try SettingsTests.load(["PASSKEYD_RATE_LIMIT_REFUSAL_HOLD_MS": "250"])
        #expect(set.domain.rateLimits.refusalHoldMilliseconds == 250)
        let off = try SettingsTests.load(file: #"{"rateLimits": {"refusalHoldMilliseconds": 0}}"#)
        #expect(off.domain.rateLimits.refusalHoldMilliseconds == 0)
        #expect(throws: ConfigurationError.self) { try SettingsTests.load(["PASSKEYD_RATE_LIMIT_REFUSAL_HOLD_MS": "10001"]) }
        #expect(throws: ConfigurationError.self) { try SettingsTests.load(["PASSKEYD_RATE_LIMIT_REFUSAL_HOLD_MS": "-1"]) }
        let tenant = #"{"rpID": "shop.example", "origins": ["https://shop.example"], "rateLimits": {"refusalHoldMilliseconds": 0}}"#
        do {
            _ = try TenantSettings.read(tenant: "shop", json: Data(tenant.utf8), server: set)
            Issue.record("a tenant's settings set the process's refusal hold")
        } catch {
            #expect("\(error)".contains("rateLimits.refusalHoldMilliseconds"), "\(error)")
        }
    }
}
