import Foundation
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// Username-first options take as long for an unknown or password-only name as for an account
/// with passkeys (no timing oracle for which names exist; their shapes are compared in
/// EdgeTests). A timing: scripts/test runs it in the serial group, after the parallel suites.
@Suite struct OptionsTimingTests {
    @Test func usernameFirstOptionsTakeAsLongForEveryKindOfAccount() async throws {
        let harness = try await ServerHarness { $0.passwordScryptCost = 10 }
        let password = Account(username: "pat", displayName: "Pat", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(password, Bcrypt(hashing: "pat's password", cost: 4).text)]) == [true])
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oracle".utf8))
            _ = try await api.signUp("kay", authenticator: &authenticator)
            // Medians of many samples taken in turn (so a busy moment hits every kind alike), a
            // loose bound.
            var samples: [String: [Duration]] = [:]
            for round in 0..<45 {
                for username in ["kay", "nobody", "pat"] {
                    let start = ContinuousClock.now
                    _ = try await api.post("/api/auth/authenticate/options", ["username": username])
                    if round >= 5 { samples[username, default: []].append(ContinuousClock.now - start) }
                }
            }
            func median(_ username: String) -> Duration {
                samples[username, default: [.zero]].sorted()[samples[username, default: [.zero]].count / 2]
            }
            let (a, b, c) = (median("kay"), median("nobody"), median("pat"))
            let slowest = max(a, b, c), fastest = min(a, b, c)
            #expect(slowest < fastest * 4, "\(a) \(b) \(c)")
        }
    }
}
