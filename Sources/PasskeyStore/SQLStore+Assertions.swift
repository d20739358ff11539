import Foundation

extension SQLStore {
    public func recordAssertion(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, audit: [AuditEvent]
    ) async throws -> SignInCompletion {
        try await transaction { db in
            // Single use: of two answers to one challenge, the first to delete it goes on.
            // (nil: the caller took it already.)
            if let challenge,
                try await db.run("DELETE FROM challenges WHERE challenge_hash = \(ChallengeHash.of(challenge)) RETURNING 1") != 1
            {
                return .challengeTaken
            }
            // Compare-and-set: of two assertions racing with one counter value, one moves it.
            let moved = try await db.run(
                """
                UPDATE passkeys SET sign_count = \(Int64(signCount)), backed_up = \(backedUp), last_used_at = \(time),
                       counter_anomalies = counter_anomalies + \(counterAnomaly ? 1 : 0)
                WHERE credential_id = \(credentialID) AND sign_count = \(Int64(previousSignCount))
                RETURNING 1
                """)
            guard moved == 1 else { return .counterRaced }
            for event in audit { try await db.execute(Self.insert(event)) }
            return .signedIn
        }
    }
}
