/// The one error type of `PasskeyStore`, with a stable code.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A uniqueness rule was broken (username taken, credential already registered).
        public static let conflict = Code(rawValue: "conflict")
        /// The database cannot be reached or failed, or did not answer in time. The caller was
        /// not told of success: an operation that was already on its way may still have been
        /// written, but nothing was acknowledged.
        public static let unavailable = Code(rawValue: "database_unavailable")
        /// The database URL or schema is not usable.
        public static let invalidDatabase = Code(rawValue: "invalid_database")
        /// A stored row does not hold what its columns must (a malformed ID, a missing key): the
        /// row is refused, never read with invented values.
        public static let corruptRow = Code(rawValue: "corrupt_row")
        /// What is stored is as new as, or newer than, what was offered (a FIDO metadata BLOB
        /// whose number is not greater than the stored one's): nothing was written.
        public static let outdated = Code(rawValue: "outdated")
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func == (lhs: StoreError, rhs: StoreError) -> Bool { lhs.code == rhs.code }

    /// What the PostgreSQL store answers at once while it knows the database is down (the
    /// outage itself is logged once, when it begins and when it ends).
    public static let databaseDown = StoreError(.unavailable, "PostgreSQL is unreachable")

    /// Whether this is ``databaseDown``: a refusal during a known outage, not a new failure.
    public var isKnownOutage: Bool { code == .unavailable && reason == Self.databaseDown.reason }
    public var description: String { "\(code.rawValue): \(reason)" }
}
