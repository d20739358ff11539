import Foundation

/// Tenant names: each tenant is one relying party, its rows in the one database carrying its name
/// (`tenant_id`). A name is also how the operator names it (`passkeyd tenant show NAME`), so it
/// is a DNS-label-like slug that never needs quoting or escaping anywhere: 1 to 63 characters of
/// `a-z`, `0-9` and `-`, neither first nor last a `-`.
public enum TenantID {
    /// The tenant the server's own settings describe (`PASSKEYD_RP_ID`, `PASSKEYD_ORIGINS`, …):
    /// every row of a database from before tenants belongs to it.
    public static let defaultTenant = "default"

    /// What upkeep names on PostgreSQL connections (sweeps, rollups, the outboxes, migrations):
    /// every tenant's rows. Never a tenant's name (``isValid(_:)`` refuses it).
    public static let everyTenant = "*"

    /// Whether `name` is a well-formed tenant name (the reserved `default` is one).
    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...63).contains(bytes.count), bytes.first != UInt8(ascii: "-"), bytes.last != UInt8(ascii: "-") else { return false }
        return bytes.allSatisfy {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                || $0 == UInt8(ascii: "-")
        }
    }
}

/// A tenant beside the default one, as the database keeps it: its name, the hosts it is served
/// on (lowercase A-labels, no port, no trailing dot; each host belongs to one tenant), and its
/// settings, a JSON object with the server's own setting names (`rpID`, `origins`, …), and the
/// database its rows live in when it has one of its own (`passkeyd tenant add --database`).
public struct TenantRecord: Sendable, Hashable {
    public var id: String
    public var hosts: [String]
    public var settings: String
    public var createdAt: Date
    public var updatedAt: Date
    /// The URL of its own database (`sqlite://…`, `postgres://…`); nil: the server's. Chosen
    /// when it is added and never changed (its rows would stay behind).
    public var database: String?

    public init(id: String, hosts: [String], settings: String, createdAt: Date, updatedAt: Date, database: String? = nil) {
        self.id = id
        self.hosts = hosts
        self.settings = settings
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.database = database
    }
}

/// How ``PasskeyStore/removeTenant(id:deleteData:)`` ended.
public enum TenantRemoval: Sendable, Hashable {
    case removed
    case notFound
    /// Refused: the tenant still has this many accounts (remove with its data to go on).
    case hasAccounts(Int)
}
