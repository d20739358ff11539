import Foundation

/// What a passkey server keeps: accounts, passkeys, ceremonies in progress, sessions and the
/// audit log. Every method is one transaction: it happens entirely or not at all.
///
/// Two implementations share one conformance suite: ``SQLiteStore`` (embedded, the default)
/// and the PostgreSQL store (several instances behind a load balancer).
public protocol PasskeyStore: Sendable {
    /// Applies pending schema migrations; returns the versions applied.
    @discardableResult func migrate() async throws -> [Int]
    /// The schema version in the database (0 when empty).
    func schemaVersion() async throws -> Int
    /// Fails when the database cannot be reached.
    func ping() async throws

    // Accounts
    func account(id: UUID) async throws -> Account?
    func account(username: String) async throws -> Account?
    func account(userHandle: [UInt8]) async throws -> Account?

    /// Creates an account with its first passkey (sign-up). `conflict` when the username, user
    /// handle or credential ID exists; then nothing is written.
    func createAccount(_ account: Account, passkey: Passkey) async throws

    // Passkeys
    /// Adds a passkey to an existing account; `conflict` when the credential ID is registered.
    func addPasskey(_ passkey: Passkey) async throws
    func passkey(credentialID: [UInt8]) async throws -> Passkey?
    func passkeys(accountID: UUID) async throws -> [Passkey]
    /// Records a verified sign-in: the counter moves from `previousSignCount` to `signCount`
    /// only if nobody else moved it first (compare-and-set). Returns false when the race was lost.
    func recordSignIn(credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
                      counterAnomaly: Bool, at time: Date) async throws -> Bool
    /// Renames one of the account's passkeys; false when it has no such passkey.
    func renamePasskey(accountID: UUID, credentialID: [UInt8], name: String) async throws -> Bool
    /// Deletes one of the account's passkeys unless it is the last one.
    func deletePasskey(accountID: UUID, credentialID: [UInt8]) async throws -> PasskeyDeletion

    // Ceremonies
    func saveChallenge(_ record: ChallengeRecord) async throws
    /// Removes and returns the ceremony for this challenge (single use: of two concurrent calls,
    /// one gets it). Expired records are returned too so the caller can say "expired".
    func takeChallenge(_ challenge: [UInt8]) async throws -> ChallengeRecord?
    /// How many ceremonies are open (for flood limits and metrics).
    func openChallengeCount(now: Date) async throws -> Int

    // Sessions
    func createSession(_ session: SessionRecord) async throws
    /// The live session for a token hash, with its account (nil when unknown, expired or revoked).
    func session(tokenHash: [UInt8], now: Date) async throws -> (SessionRecord, Account)?
    func revokeSession(tokenHash: [UInt8]) async throws
    /// Revokes every session of an account; returns how many.
    @discardableResult func revokeSessions(accountID: UUID) async throws -> Int

    /// A random 32-byte secret kept in the database, created on first use: the same on every
    /// instance that shares the database (used to answer unknown usernames consistently).
    func serverSecret() async throws -> [UInt8]

    // Audit and upkeep
    func appendAudit(_ event: AuditEvent) async throws
    func auditEvents(accountID: UUID?, limit: Int) async throws -> [AuditEvent]
    /// Deletes expired challenges and sessions; returns how many rows went.
    @discardableResult func sweepExpired(now: Date) async throws -> Int
}

public enum PasskeyDeletion: Sendable, Equatable {
    case deleted
    case notFound
    /// Refused: it is the account's only way in.
    case lastPasskey
}
