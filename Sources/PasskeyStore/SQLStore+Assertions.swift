import Foundation

extension SQLStore {
    public func recordAssertion(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, audit: [AuditEvent]
    ) async throws -> SignInCompletion {
        try await transaction { [self] db in
            if let refused = try await takeChallengeAndMoveCounter(
                db, challenge: challenge, credentialID: credentialID, previousSignCount: previousSignCount, signCount: signCount,
                backedUp: backedUp, counterAnomaly: counterAnomaly, at: time)
            {
                return refused
            }
            for event in audit { try await db.execute(insert(event)) }
            return .signedIn
        }
    }

    /// What every verified assertion does first, inside its transaction: the challenge taken
    /// (single use: of two answers to one challenge, the first to delete it goes on; nil: the
    /// caller took it already), then the counter's compare-and-set (of two assertions racing
    /// with one counter value, one moves it), with the last use and backup state. Returns the
    /// refusal, or nil when both happened.
    func takeChallengeAndMoveCounter(
        _ db: any SQLConnection, challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32,
        backedUp: Bool, counterAnomaly: Bool, at time: Date
    ) async throws -> SignInCompletion? {
        if let challenge,
            try await db.run(
                "DELETE FROM challenges WHERE tenant_id = \(tenant) AND challenge_hash = \(ChallengeHash.of(challenge)) RETURNING 1") != 1
        {
            return .challengeTaken
        }
        let moved = try await db.run(
            """
            UPDATE passkeys SET sign_count = \(Int64(signCount)), backed_up = \(backedUp), last_used_at = \(time),
                   counter_anomalies = counter_anomalies + \(counterAnomaly ? 1 : 0)
            WHERE tenant_id = \(tenant) AND credential_id = \(credentialID) AND sign_count = \(Int64(previousSignCount))
            RETURNING 1
            """)
        return moved == 1 ? nil : .counterRaced
    }
}
