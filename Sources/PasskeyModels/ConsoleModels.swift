import Foundation

// What the operator's console keeps (issue 36): roles, the bootstrap token, console sessions,
// the daily adoption rollups, and the shapes of its searches.

/// What an account may do in the operator's console.
public enum AdminRole: String, Sendable, Codable, CaseIterable {
    /// Sees everything and changes things.
    case admin
    /// Sees everything, changes nothing.
    case viewer
    /// A server operator (issue 44): an `admin` who also adds, changes and removes tenants. Held
    /// only in the default tenant (the server's own), granted by the CLI or by another operator.
    case serverOperator = "operator"

    /// The roles that change things (`admin` and `operator`): the last-admin guard counts them.
    public static let changing: [AdminRole] = [.admin, .serverOperator]

    /// Whether the role may change things (every role but `viewer`).
    public var changes: Bool { self != .viewer }
}

/// An account's console role, with who granted it and when.
public struct AdminGrant: Sendable, Hashable {
    public var account: Account
    public var role: AdminRole
    public var grantedAt: Date
    /// Who granted it: an admin's account id, `cli`, `bootstrap`, … (free text for the audit).
    public var grantedBy: String

    public init(account: Account, role: AdminRole, grantedAt: Date, grantedBy: String) {
        self.account = account
        self.role = role
        self.grantedAt = grantedAt
        self.grantedBy = grantedBy
    }
}

/// How ``PasskeyStore/setAdminRole(accountID:role:by:at:audit:)`` ended.
public enum AdminRoleChange: Sendable, Equatable {
    /// Done. When the account already had that role nothing was written (no audit lines, its
    /// console sessions kept).
    case changed
    case accountNotFound
    /// Refused: it would leave no account with the `admin` role. Nothing was written.
    case lastAdmin
}

/// How ``PasskeyStore/deleteAccount(accountID:audit:)`` ended.
public enum AccountDeletion: Sendable, Equatable {
    case deleted
    case notFound
    /// Refused: the account holds the last `admin` role, and the console would be left without
    /// an administrator. Nothing was written.
    case lastAdmin
}

/// A console session. Only the SHA-256 of its token (and of its CSRF token) is stored.
public struct AdminSessionRecord: Sendable, Hashable {
    public var tokenHash: [UInt8]
    public var accountID: UUID
    public var createdAt: Date
    /// The absolute end (creation + the lifetime, 8 h by default).
    public var expiresAt: Date
    /// The idle end: moved forward on each use (never past ``expiresAt``).
    public var idleExpiresAt: Date
    /// The last passkey verification (sign-in or step-up): changes need a recent one.
    public var verifiedAt: Date
    /// SHA-256 of the session's CSRF token (rotated at each step-up).
    public var csrfHash: [UInt8]
    public var ipAddress: String?
    public var userAgent: String?

    public init(
        tokenHash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date, idleExpiresAt: Date, verifiedAt: Date, csrfHash: [UInt8],
        ipAddress: String? = nil, userAgent: String? = nil
    ) {
        self.tokenHash = tokenHash
        self.accountID = accountID
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.idleExpiresAt = idleExpiresAt
        self.verifiedAt = verifiedAt
        self.csrfHash = csrfHash
        self.ipAddress = ipAddress
        self.userAgent = userAgent
    }
}

/// One rolled-up count: how many audit lines of `metric` were written on the UTC `day`.
public struct DailyMetric: Sendable, Hashable {
    /// The day's start, 00:00 UTC.
    public var day: Date
    public var metric: String
    public var n: Int

    public init(day: Date, metric: String, n: Int) {
        self.day = day
        self.metric = metric
        self.n = n
    }
}

/// What the console's account search matches a prefix against.
public enum AccountSearchField: String, Sendable, CaseIterable {
    /// The username's comparison key (``Username/key(_:)`` of the prefix).
    case username
    /// The display name, folded like a username key (lower-cased, width-mapped, NFC).
    case displayName
    /// The integrating app's id, folded the same way.
    case externalID = "externalId"
    /// The account id's lower-case text (dashes optional in the prefix).
    case id
    /// A passkey's credential id, base64url (standard base64 characters accepted); finds its
    /// account.
    case credentialID = "credentialId"
}

/// A search of the audit log (the console's audit page). Every filter is optional; lines come
/// newest first, `limit` at a time, the next page after the last line's id (`beforeID`).
public struct AuditQuery: Sendable, Hashable {
    public var accountID: UUID?
    /// An ``AuditEvent/Kind`` raw value (`sign_in`, …).
    public var kind: String?
    /// The start of the client address (`192.0.2.`, `2001:db8:`), compared exactly (case matters).
    public var addressPrefix: String?
    /// Lines at or after this time.
    public var from: Date?
    /// Lines before this time.
    public var to: Date?
    /// Lines with a smaller id (the keyset cursor: the last id of the page before).
    public var beforeID: Int64?
    /// 1…10 000 (the CSV export reads up to 10 000 lines at once).
    public var limit: Int

    public init(
        accountID: UUID? = nil, kind: String? = nil, addressPrefix: String? = nil, from: Date? = nil, to: Date? = nil,
        beforeID: Int64? = nil, limit: Int = 50
    ) {
        self.accountID = accountID
        self.kind = kind
        self.addressPrefix = addressPrefix
        self.from = from
        self.to = to
        self.beforeID = beforeID
        self.limit = limit
    }
}

extension StoreError.Code {
    /// A search's input is out of bounds (a prefix of 0 or more than 128 UTF-8 bytes, a limit
    /// out of range, a cursor the store did not make): nothing was read. The server answers
    /// `invalid_query`.
    public static let invalidQuery = StoreError.Code(rawValue: "invalid_query")
}
