import Foundation

/// What the store keeps for mail (issue 43): each account's address, the tokens mails carry, and
/// the outbox. Part of every ``PasskeyStore``; each method is one statement or one transaction.
public protocol MailStore: Sendable {
    /// The account's address and its state; nil when there is no such account.
    func accountEmail(accountID: UUID) async throws -> AccountEmail?
    /// The account whose *verified* address has this comparison key (at most one: a verified
    /// address belongs to one account).
    func account(verifiedEmailKey key: String) async throws -> Account?
    /// Accounts whose address (not verified) has this comparison key, at most `limit`.
    func accounts(unverifiedEmailKey key: String, limit: Int) async throws -> [Account]
    /// Sets an address that is not verified yet, with the mails' language; the account's live
    /// verification tokens end. Refused (false) when the account's address is verified: a
    /// verified address is only replaced by verifying the new one.
    func setUnverifiedEmail(accountID: UUID, address: String?, key: String?, language: String?) async throws -> Bool
    /// The address proven (a verification token taken): stored as verified from `time`.
    /// `conflict` when another account has it verified; nothing changes then.
    func verifyEmail(accountID: UUID, address: String, key: String, at time: Date, audit: [AuditEvent]) async throws
    /// Puts back the address an undo restores (verified as it was).
    func restoreEmail(accountID: UUID, address: String?, key: String?, verifiedAt: Date?) async throws
    /// Opens or closes recovery by mail.
    func setEmailRecoveryClosed(accountID: UUID, closed: Bool) async throws
    /// The mails' language.
    func setEmailLanguage(accountID: UUID, language: String) async throws

    /// Queues `mail` and, in the same transaction, stores `token` (the account's other live
    /// tokens of its purpose end: only the newest code counts) and `audit`.
    func queueMail(_ mail: QueuedMail, token: EmailToken?, audit: [AuditEvent]) async throws
    /// Stores a token no mail carries (a recovery step handed to whoever just proved the address);
    /// the account's other live tokens of its purpose end.
    func saveEmailToken(_ token: EmailToken) async throws
    /// Takes a live token by its link's HMAC and purpose (single use): nil when there is none.
    func takeEmailToken(linkHash: [UInt8], purpose: EmailToken.Purpose, now: Date) async throws -> EmailToken?
    /// One code attempt on the account's live token of `purpose`, in one statement: the try is
    /// counted and, when the HMAC matches, the token taken. Of racing attempts at most
    /// ``EmailToken/maxTries`` are compared and one takes it.
    func attemptEmailCode(accountID: UUID, purpose: EmailToken.Purpose, codeHash: [UInt8], now: Date) async throws -> EmailCodeAttempt
    /// Ends the account's live tokens of `purpose` (undo closing recovery, an address removed).
    func endEmailTokens(accountID: UUID, purpose: EmailToken.Purpose, now: Date) async throws

    /// Leases up to `limit` due mails to `leaseToken` until `leaseUntil`, oldest first; a mail
    /// leased to another sender is skipped.
    func claimMail(now: Date, leaseUntil: Date, leaseToken: [UInt8], limit: Int) async throws -> [QueuedMail]
    /// Marks a leased mail sent (its message is erased); false when the lease was lost.
    func markMailSent(id: Int64, leaseToken: [UInt8], at time: Date) async throws -> Bool
    /// A failed attempt: tried again at `retryAt`, or given up (`retryAt` nil).
    func markMailFailed(id: Int64, leaseToken: [UInt8], error: String, retryAt: Date?, at time: Date) async throws -> Bool
    func mailStatistics(now: Date) async throws -> MailStatistics
    /// Recovery by mail since `since`, from the audit log: requests that found an account,
    /// recoveries completed, and "this wasn't me" used.
    func emailRecoveryFigures(since: Date) async throws -> EmailRecoveryFigures
    /// Deletes sent mails after 7 days, given-up mails after 30 and tokens a day past their end.
    func sweepMail(now: Date) async throws -> Int
}
