import Foundation

/// An account's email address and what it allows (issue 43, docs/email.md).
public struct AccountEmail: Sendable, Hashable {
    /// The address (local part as entered, domain in ASCII), verified or not; nil without one.
    public var address: String?
    /// When its owner proved it (a link or a code from a mail to it); nil: it counts for
    /// nothing yet (no recovery goes to it, no other account is kept from it).
    public var verifiedAt: Date?
    /// Recovery by mail is closed (after "this wasn't me") until a recovery code sign-in or an
    /// administrator opens it again.
    public var recoveryClosed: Bool
    /// The language of the mails (`en`, `fr`).
    public var language: String?

    public init(address: String? = nil, verifiedAt: Date? = nil, recoveryClosed: Bool = false, language: String? = nil) {
        self.address = address
        self.verifiedAt = verifiedAt
        self.recoveryClosed = recoveryClosed
        self.language = language
    }

    public var verified: Bool { address != nil && verifiedAt != nil }
}

/// A token sent by mail: a link (at least 128 random bits) and, for verification and recovery,
/// a 6-digit code. Only their HMACs are kept; it is bound to one account, one purpose and the
/// address it was sent to, lives minutes (undo: days) and is taken once.
public struct EmailToken: Sendable, Hashable {
    public enum Purpose: String, Sendable, Codable, CaseIterable {
        /// Proves an address (`address`) for the account.
        case verify
        /// Opens a recovery step that can create one passkey.
        case recover
        /// "This wasn't me": undoes what a notice reported (`detail`).
        case undo
    }

    public var id: UUID
    public var accountID: UUID
    public var purpose: Purpose
    /// The address's comparison key.
    public var address: String
    public var linkHash: [UInt8]
    public var codeHash: [UInt8]?
    /// Wrong codes tried so far.
    public var tries: Int
    /// What an undo token undoes (JSON the domain writes), or the verified address's display form.
    public var detail: String?
    public var createdAt: Date
    public var expiresAt: Date
    public var usedAt: Date?

    public init(
        id: UUID = .random(), accountID: UUID, purpose: Purpose, address: String, linkHash: [UInt8], codeHash: [UInt8]? = nil,
        tries: Int = 0, detail: String? = nil, createdAt: Date, expiresAt: Date, usedAt: Date? = nil
    ) {
        self.id = id
        self.accountID = accountID
        self.purpose = purpose
        self.address = address
        self.linkHash = linkHash
        self.codeHash = codeHash
        self.tries = tries
        self.detail = detail
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.usedAt = usedAt
    }

    /// Wrong codes a token takes before it is spent.
    public static let maxTries = 5
}

/// How a code attempt ended.
public enum EmailCodeAttempt: Sendable, Hashable {
    /// The code was right: the token is taken (single use).
    case taken(EmailToken)
    /// Wrong; `triesLeft` more before the token is spent.
    case wrong(triesLeft: Int)
    /// No live token (none sent, expired, taken, or out of tries).
    case none
}

/// A mail waiting in the outbox, or being sent.
public struct QueuedMail: Sendable, Hashable {
    /// Assigned by the store.
    public var id: Int64
    public var accountID: UUID?
    /// What it is (`verify_address`, `recovery`, `notice_passkey_added`, …): metrics and the console.
    public var kind: String
    /// The recipient's address.
    public var recipient: String
    /// The envelope sender.
    public var sender: String
    /// The RFC 5322 message; erased once sent.
    public var message: [UInt8]
    public var attempts: Int
    public var createdAt: Date
    public var nextAttemptAt: Date

    public init(
        id: Int64 = 0, accountID: UUID?, kind: String, recipient: String, sender: String, message: [UInt8], attempts: Int = 0,
        createdAt: Date, nextAttemptAt: Date
    ) {
        self.id = id
        self.accountID = accountID
        self.kind = kind
        self.recipient = recipient
        self.sender = sender
        self.message = message
        self.attempts = attempts
        self.createdAt = createdAt
        self.nextAttemptAt = nextAttemptAt
    }
}

/// The outbox at a glance (console, /metrics).
public struct MailStatistics: Sendable, Hashable, Codable {
    /// Waiting for their first attempt.
    public var queued = 0
    /// Tried and failed at least once, still to be tried again.
    public var failing = 0
    /// Sent in the last 24 hours.
    public var sentLastDay = 0
    /// Given up in the last 24 hours.
    public var failedLastDay = 0
    /// The oldest unsent mail's age in seconds (0 when none).
    public var oldestQueuedSeconds = 0
    public init() {}
}

/// Recovery by mail over a period (console, /metrics).
public struct EmailRecoveryFigures: Sendable, Hashable, Codable {
    /// Recovery mails sent to a verified address (requests that found no account send none and
    /// are not counted: they leave no trace by design).
    public var requested = 0
    /// Recoveries that ended in a new passkey.
    public var completed = 0
    /// "This wasn't me" links used.
    public var undone = 0
    public init() {}
}
