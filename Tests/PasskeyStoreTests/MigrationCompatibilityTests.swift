import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// A rolling upgrade runs `passkeyd migrate` of the new release while instances of the previous
/// release keep serving on the migrated schema (docs/deploy.md, "Upgrades and migrations"). That
/// holds while a migration only adds: tables, indexes, triggers, nullable or defaulted columns,
/// backfills. Every other statement is listed here with the reason the previous release is not
/// hurt, and docs/deploy.md names it: a new migration that drops, renames or retypes fails this
/// suite until it is reviewed and documented.
@Suite("Migrations a previous release survives")
struct MigrationCompatibilityTests {
    /// Statements reviewed one by one: (dialect, version, statement start) → why old instances
    /// keep working.
    static let reviewed: [(dialect: SQLDialect, version: Int, prefix: String, reason: String)] = [
        (.sqlite, 10, "DROP INDEX audit_time", "no statement of any release names the index"),
        (.postgres, 10, "DROP INDEX IF EXISTS audit_time", "no statement of any release names the index"),
        (.sqlite, 10, "DROP TABLE challenges", "rebuilt as WITHOUT ROWID with the same columns and indexes"),
        (.sqlite, 10, "ALTER TABLE challenges_v10 RENAME TO challenges", "rebuilt as WITHOUT ROWID with the same columns"),
        (.sqlite, 10, "DROP TABLE sessions", "rebuilt as WITHOUT ROWID with the same columns and indexes"),
        (.sqlite, 10, "ALTER TABLE sessions_v10 RENAME TO sessions", "rebuilt as WITHOUT ROWID with the same columns"),
        (.sqlite, 11, "DROP INDEX IF EXISTS sessions_credential", "no statement of any release names the index"),
        (.postgres, 11, "DROP INDEX IF EXISTS sessions_credential", "no statement of any release names the index"),
        (.sqlite, 7, "CREATE UNIQUE INDEX accounts_external_id", "on a column the same migration adds"),
        (.postgres, 7, "CREATE UNIQUE INDEX accounts_external_id", "on a column the same migration adds"),
        (.sqlite, 15, "CREATE UNIQUE INDEX accounts_verified_email", "on columns the same migration adds"),
        (.postgres, 15, "CREATE UNIQUE INDEX accounts_verified_email", "on columns the same migration adds"),
        (
            .postgres, 13, "ALTER TABLE audit_events ALTER COLUMN ip_address TYPE TEXT COLLATE \"C\"",
            "still text; the table is rewritten under an exclusive lock, so old instances' writes to it wait"
        ),
        (
            .postgres, 13, "ALTER TABLE accounts ALTER COLUMN username_key TYPE TEXT COLLATE \"C\"",
            "still text; the table is rewritten under an exclusive lock, so old instances' sign-ins wait"
        ),
        (.sqlite, 14, "DROP TRIGGER audit_events_outbox", "recreated by the next statement of the same transaction"),
    ]

    /// Migrations the previous release cannot run beside: its instances are stopped before
    /// `passkeyd migrate` (docs/deploy.md names them with the reason).
    static let stopsThePreviousRelease: [SQLDialect: [Int: String]] = [
        .sqlite: [16: "tenants: every table rebuilt with tenant_id (no default), which the previous release's inserts do not name"],
        .postgres: [
            16: "tenants: tenant_id without a default on every tenant-owned table, which the previous release's inserts do not name",
            17: "row-level security: the previous release's connections name no tenant, so as the tables' owner they would see no row",
        ],
    ]

    /// The statement forms any release's code keeps working with.
    static func onlyAdds(_ statement: String) -> Bool {
        let text = statement.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(
            of: #"\s+"#, with: " ", options: .regularExpression)
        let upper = text.uppercased()
        for form in [
            "CREATE TABLE ", "CREATE INDEX ", "CREATE TRIGGER ", "CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION ", "INSERT INTO ",
            "UPDATE ",
        ]
        where upper.hasPrefix(form) {
            return true
        }
        // A new column the previous release does not write: nullable, or NOT NULL with a default.
        if upper.range(of: #"^ALTER TABLE \w+ ADD COLUMN "#, options: .regularExpression) != nil {
            return !upper.contains("NOT NULL") || upper.contains("DEFAULT")
        }
        return false
    }

    static func allMigrations() -> [(SQLDialect, SQLiteSchema.Migration)] {
        SQLiteSchema.migrations.map { (.sqlite, $0) } + PostgresSchema.migrations.map { (.postgres, $0) }
    }

    @Test func everyStatementOnlyAddsOrIsReviewedForThePreviousRelease() {
        for (dialect, migration) in Self.allMigrations() where Self.stopsThePreviousRelease[dialect]?[migration.version] == nil {
            for statement in migration.statements where !Self.onlyAdds(statement) {
                let text = statement.trimmingCharacters(in: .whitespacesAndNewlines)
                let review = Self.reviewed.first { $0.dialect == dialect && $0.version == migration.version && text.hasPrefix($0.prefix) }
                #expect(
                    review != nil,
                    "migration \(migration.version) (\(dialect)) runs \"\(text.prefix(80))\": a previous release may break on it; review it, list it here and in docs/deploy.md"
                )
            }
        }
    }

    @Test func everyReviewedStatementStillExists() {
        for review in Self.reviewed {
            let found = Self.allMigrations().contains { dialect, migration in
                dialect == review.dialect && migration.version == review.version
                    && migration.statements.contains { $0.trimmingCharacters(in: .whitespacesAndNewlines).hasPrefix(review.prefix) }
            }
            #expect(found, "the review of \"\(review.prefix)\" (migration \(review.version), \(review.dialect)) names no statement")
        }
    }

    @Test func theRuleCatchesWhatWouldBreakAPreviousRelease() {
        #expect(!Self.onlyAdds("ALTER TABLE accounts DROP COLUMN email"))
        #expect(!Self.onlyAdds("ALTER TABLE accounts RENAME COLUMN username TO name"))
        #expect(!Self.onlyAdds("ALTER TABLE accounts ADD COLUMN tenant TEXT NOT NULL"))
        #expect(!Self.onlyAdds("DROP TABLE sessions"))
        #expect(!Self.onlyAdds("CREATE UNIQUE INDEX x ON accounts(display_name)"))
        #expect(Self.onlyAdds("ALTER TABLE accounts ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'"))
        #expect(Self.onlyAdds("ALTER TABLE accounts ADD COLUMN email TEXT"))
    }

    /// The schema a release reads is never ahead of what it knows: `pendingMigrations` names what
    /// `passkeyd migrate` would apply, `knownSchemaVersion` the newest version this release has.
    @Test func pendingMigrationsAreWhatMigrateApplies() async throws {
        let url = try await TestDatabase.makeURL(.sqlite)
        let store = try SQLiteStore(path: String(url.dropFirst("sqlite://".count)))
        let all = SQLiteSchema.migrations.map(\.version)
        #expect(try await store.pendingMigrations() == all)
        #expect(store.knownSchemaVersion == all.max())
        _ = try await store.migrate(through: 9)
        #expect(try await store.pendingMigrations() == all.filter { $0 > 9 })
        #expect(try await store.migrate() == all.filter { $0 > 9 })
        #expect(try await store.pendingMigrations() == [])
    }
}
