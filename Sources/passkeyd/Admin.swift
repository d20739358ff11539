import ArgumentParser
import Foundation
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore
import WebAuthn

/// `passkeyd admin …`: operator verbs on the same database URL as `serve` (any instance's
/// database, SQLite or PostgreSQL). Every change is written to the audit log as `admin_*`.
struct Admin: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Look after accounts (list, show, disable, revoke passkeys or sessions, delete, audit log, export, adoption), console roles, signing keys, API keys and webhooks.",
        subcommands: [
            Accounts.self, Show.self, Disable.self, Enable.self, RevokePasskey.self, RevokeSessions.self, RecoveryLink.self,
            OpenEmailRecovery.self,
            DeleteAccount.self, Audit.self, Export.self, Adoption.self, Grant.self, RevokeRole.self, Roles.self, BootstrapLink.self,
            Keys.self, APIKeys.self, Webhooks.self, RegistrationToken.self, Clients.self,
        ])
}

/// What every admin verb needs: the store, opened from the settings, and account lookup.
struct AdminContext {
    let store: any PasskeyStore
    let loaded: ServerSettings

    /// With `--tenant NAME`, the store and the settings are that tenant's (its settings read
    /// over the server's, as the server reads them).
    static func with<T>(_ options: ServerOptions, _ body: (AdminContext) async throws -> T) async throws -> T {
        var loaded = try options.load()
        let (store, _) = try await Database.openMigrated(loaded.databaseURL, logger: Logger(label: "passkeyd.admin"))
        defer { (store as? PostgresStore)?.close() }
        guard let tenant = options.tenant, tenant != TenantID.defaultTenant else {
            return try await body(AdminContext(store: store, loaded: loaded))
        }
        let scoped = try await Tenant.store(store, for: tenant)
        defer { scoped.close() }
        guard let record = scoped.record else { return try await body(AdminContext(store: store, loaded: loaded)) }
        do {
            (loaded.domain, loaded.edge) = try TenantSettings.read(tenant: tenant, json: Data(record.settings.utf8), server: loaded)
        } catch {
            throw ValidationError(error.description)
        }
        // Its own database's store when it has one (`tenant add --database`).
        return try await body(AdminContext(store: scoped.store, loaded: loaded))
    }

    var operatorName: String { "passkeyd admin (\(ProcessInfo.processInfo.environment["USER"] ?? "admin"))" }

    /// The verbs that change accounts, each atomic with its audit line.
    var admin: AdminService { AdminService(store: store, webhookPolicy: loaded.domain.webhookPolicy) }

    /// An account by username or by its ID.
    func account(_ user: String) async throws -> Account {
        do {
            return try await admin.account(user)
        } catch let refusal as PasskeyServiceError {
            throw ValidationError(refusal.message)
        }
    }

}

/// The JSON shapes the admin verbs print (and `export` writes).
struct AccountReport: Encodable {
    /// The API's passkey fields, plus what only an operator sees: the counter, its anomalies
    /// and (in `export`) the public key.
    struct PasskeyReport: Encodable {
        let passkey: PasskeyJSON
        let signCount: UInt32
        let counterAnomalies: Int
        let publicKey: String?

        init(_ passkey: Passkey, withKey: Bool) {
            self.passkey = PasskeyJSON(passkey)
            signCount = passkey.signCount
            counterAnomalies = passkey.counterAnomalies
            publicKey = withKey ? Base64URLBytes(passkey.publicKey).base64URL : nil
        }

        enum Extra: String, CodingKey { case signCount, counterAnomalies, publicKey }

        /// One flat object: the API fields and the extra ones side by side.
        func encode(to encoder: any Encoder) throws {
            try passkey.encode(to: encoder)
            var container = encoder.container(keyedBy: Extra.self)
            try container.encode(signCount, forKey: .signCount)
            try container.encode(counterAnomalies, forKey: .counterAnomalies)
            try container.encodeIfPresent(publicKey, forKey: .publicKey)
        }
    }

    struct SessionReport: Encodable {
        let createdAt: Date
        let expiresAt: Date
        let userAgent: String?
        let ipAddress: String?
    }

    let id: UUID
    let username: String
    let displayName: String
    let userHandle: String
    let createdAt: Date
    let lastSignInAt: Date?
    let disabled: Bool
    let passkeys: [PasskeyReport]
    let sessions: [SessionReport]
    let auditEvents: [AuditReport]?

    init(_ account: Account, passkeys: [Passkey], sessions: [SessionRecord], audit: [AuditEvent]?, withKeys: Bool) {
        id = account.id
        username = account.username
        displayName = account.displayName
        userHandle = Base64URLBytes(account.userHandle).base64URL
        createdAt = account.createdAt
        lastSignInAt = account.lastSignInAt
        disabled = account.disabled
        self.passkeys = passkeys.map { PasskeyReport($0, withKey: withKeys) }
        self.sessions = sessions.map {
            SessionReport(createdAt: $0.createdAt, expiresAt: $0.expiresAt, userAgent: $0.userAgent, ipAddress: $0.ipAddress)
        }
        auditEvents = audit?.map(AuditReport.init)
    }

    static func load(_ account: Account, in context: AdminContext, audit: Bool, withKeys: Bool) async throws -> AccountReport {
        AccountReport(
            account, passkeys: try await context.store.passkeys(accountID: account.id),
            sessions: try await context.store.sessions(accountID: account.id, now: Date()),
            audit: audit ? try await context.store.auditEvents(accountID: account.id, limit: 100_000) : nil, withKeys: withKeys)
    }
}

struct AuditReport: Encodable {
    let time: Date
    let kind: String
    let accountID: UUID?
    let passkeyID: String?
    let ipAddress: String?
    let userAgent: String?
    let detail: String?

    init(_ event: AuditEvent) {
        time = event.time
        kind = event.kind
        accountID = event.accountID
        passkeyID = event.credentialID.map { Base64URLBytes($0).base64URL }
        ipAddress = event.ipAddress
        userAgent = event.userAgent
        detail = event.detail
    }
}

private func day(_ date: Date?) -> String {
    date.map { $0.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false)) } ?? "never"
}

extension Admin {
    struct Accounts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List accounts by username.")
        @OptionGroup var options: ServerOptions
        @Option(help: "Start after this username (paging).") var after: String?
        @Option(help: "At most this many.") var limit = 100
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1...100000") }
            try await AdminContext.with(options) { context in
                let accounts = try await context.store.accounts(after: after, limit: limit)
                if json {
                    var reports: [AccountReport] = []
                    for account in accounts {
                        reports.append(try await AccountReport.load(account, in: context, audit: false, withKeys: false))
                    }
                    try printJSON(reports)
                    return
                }
                for account in accounts {
                    let count = try await context.store.passkeys(accountID: account.id).count
                    print(
                        "\(account.username)\t\(account.id)\t\(count) passkey\(count == 1 ? "" : "s")\tlast sign-in \(day(account.lastSignInAt))\(account.disabled ? "\tDISABLED" : "")"
                    )
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show an account with its passkeys and live sessions.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            try await AdminContext.with(options) { context in
                let report = try await AccountReport.load(try await context.account(user), in: context, audit: false, withKeys: false)
                if json {
                    try printJSON(report)
                    return
                }
                print("\(report.username) (\(report.displayName))\(report.disabled ? "  DISABLED" : "")")
                print("  id \(report.id)\n  created \(day(report.createdAt)), last sign-in \(day(report.lastSignInAt))")
                print("  passkeys (\(report.passkeys.count)):")
                for report in report.passkeys {
                    let passkey = report.passkey
                    print(
                        "    \(passkey.id)  \(passkey.name)  [\(passkey.provider ?? passkey.aaguid)]  created \(day(passkey.createdAt)), last used \(day(passkey.lastUsedAt))\(passkey.backedUp ? ", synced" : "")\(report.counterAnomalies > 0 ? ", \(report.counterAnomalies) counter anomalies" : "")"
                    )
                }
                print("  sessions (\(report.sessions.count)):")
                for session in report.sessions {
                    print(
                        "    since \(day(session.createdAt)) until \(day(session.expiresAt))  \(session.ipAddress ?? "-")  \(session.userAgent ?? "-")"
                    )
                }
            }
        }
    }

    struct Disable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Disable an account: its sessions end and it cannot sign in.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                let revoked = try await context.admin.disable(account, by: context.operatorName)
                print("disabled \(account.username); \(revoked) session\(revoked == 1 ? "" : "s") revoked")
            }
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Re-enable a disabled account.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                try await context.admin.enable(account, by: context.operatorName)
                print("enabled \(account.username)")
            }
        }
    }

    struct RevokePasskey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-passkey",
            abstract: "Remove one of an account's passkeys (even its last: then only a recovery link lets the person back in).")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String
        @Argument(help: "The passkey's ID (base64url, as `show` prints it).") var passkeyID: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                guard let id = Base64URLBytes(encoded: passkeyID)?.bytes else {
                    throw ValidationError("\(account.username) has no passkey \(passkeyID)")
                }
                let passkey: Passkey
                do {
                    passkey = try await context.admin.revokePasskey(id, of: account, by: context.operatorName)
                } catch let refusal as PasskeyServiceError {
                    throw ValidationError(refusal.message)
                }
                print("revoked passkey \"\(passkey.name)\" of \(account.username)")
            }
        }
    }

    struct RevokeSessions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "revoke-sessions", abstract: "Sign an account out everywhere.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                let revoked = try await context.admin.revokeSessions(of: account, by: context.operatorName)
                print("revoked \(revoked) session\(revoked == 1 ? "" : "s") of \(account.username)")
            }
        }
    }

    struct RecoveryLink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "recovery-link",
            abstract:
                "Print a one-time recovery link for someone who lost every passkey (expiring; signing in with it ends their other sessions)."
        )
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String
        @Option(help: "Hours until the link expires.") var hours = 24
        @Option(help: "Where the web UI is (default: the first configured origin).") var baseURL: String?

        func run() async throws {
            guard (1...720).contains(hours) else { throw ValidationError("--hours must be 1...720") }
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                let service = try PasskeyService(configuration: context.loaded.domain, store: context.store)
                let token = try await service.issueRecoveryLink(for: account, lifetime: Double(hours) * 3600, issuer: context.operatorName)
                let base = baseURL ?? context.loaded.domain.webOrigins.first ?? "http://localhost:8080"
                // The token travels in the fragment: browsers never send it to servers or proxies' logs.
                print("\(base.hasSuffix("/") ? String(base.dropLast()) : base)/#recover=\(token)")
                FileHandle.standardError.write(Data("one-time link for \(account.username), valid \(hours) h\n".utf8))
            }
        }
    }

    struct OpenEmailRecovery: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "open-email-recovery",
            abstract: "Open recovery by email again for an account where \"this wasn't me\" closed it (docs/email.md).")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                let service = try PasskeyService(configuration: context.loaded.domain, store: context.store)
                try await service.openEmailRecovery(accountID: account.id, client: PasskeyService.Client(), by: context.operatorName)
                print("recovery by email is open for \(account.username)")
            }
        }
    }

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the audit log, newest first.")
        @OptionGroup var options: ServerOptions
        @Option(name: .customLong("user"), help: "Only this account (username or ID).") var user: String?
        @Option(help: "Only events of this kind (sign_in, sign_in_failed, sign_up, passkey_added, …).") var kind: String?
        @Option(help: "At most this many events.") var limit = 50
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            guard (1...100_000).contains(limit) else { throw ValidationError("--limit must be 1...100000") }
            try await AdminContext.with(options) { context in
                var accountID: UUID?
                if let user { accountID = try await context.account(user).id }
                // Filter by kind over a wider window, so `--kind` still returns up to `limit` events.
                var events = try await context.store.auditEvents(accountID: accountID, limit: kind == nil ? limit : limit * 20)
                if let kind { events = Array(events.filter { $0.kind == kind }.prefix(limit)) }
                if json {
                    try printJSON(events.map(AuditReport.init))
                    return
                }
                for event in events.map(AuditReport.init) {
                    print(
                        [
                            day(event.time), event.kind, event.accountID?.uuidString ?? "-", event.passkeyID ?? "-", event.ipAddress ?? "-",
                            event.detail ?? "", event.userAgent ?? "",
                        ].joined(separator: "\t"))
                }
            }
        }
    }

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Export everything kept about an account as JSON (account, passkeys with public keys, sessions, audit log).")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                try printJSON(try await AccountReport.load(try await context.account(user), in: context, audit: true, withKeys: true))
            }
        }
    }

    struct Adoption: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "How many accounts have passkeys, active accounts among them, passkeys by provider; --daily: the console's chart as a table.",
            discussion:
                "With --daily (or --csv) --days is the chart's range (7, 30, 90 or 365) and the table is the console's adoption chart, "
                + "day by day (UTC), from the daily rollups and today's audit lines (docs/admin.md).")
        @OptionGroup var options: ServerOptions
        @Option(help: "Active means signed in within this many days; with --daily, the days shown.") var days = 30
        @Flag(help: "Print the console's adoption chart day by day.") var daily = false
        @Flag(help: "Print the chart's days as the console's CSV download.") var csv = false
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            if daily || csv {
                guard ConsoleService.adoptionRanges.contains(days) else {
                    throw ValidationError("with --daily or --csv, --days must be one of 7, 30, 90, 365")
                }
            }
        }

        func chart(_ context: AdminContext) async throws {
            let console = try context.console()
            if csv {
                // Byte for byte the console's download (RFC 4180 line ends).
                FileHandle.standardOutput.write(Data(try await console.adoptionCSV(days: days).utf8))
                return
            }
            let series = try await console.adoption(days: days)
            if json {
                try printJSON(series.map(AdoptionTable.DayJSON.init))
                return
            }
            for line in AdoptionTable.lines(series) { print(line) }
        }

        func run() async throws {
            guard (1...3650).contains(days) else { throw ValidationError("--days must be 1...3650") }
            try await AdminContext.with(options) { context in
                if daily || csv {
                    try await chart(context)
                    return
                }
                let now = Date()
                let stats = try await context.store.statistics(now: now, activeSince: now.addingTimeInterval(-Double(days) * 86_400))
                if json {
                    try printJSON(stats)
                    return
                }
                func percent(_ part: Int, _ whole: Int) -> String {
                    whole == 0 ? "-" : String(format: "%.1f%%", Double(part) * 100 / Double(whole))
                }
                print("accounts: \(stats.accounts) (\(stats.disabledAccounts) disabled)")
                print("with a passkey: \(stats.accountsWithPasskey) (\(percent(stats.accountsWithPasskey, stats.accounts)))")
                print(
                    "active in \(days) days: \(stats.activeAccounts); with a passkey: \(stats.activeAccountsWithPasskey) (\(percent(stats.activeAccountsWithPasskey, stats.activeAccounts)))"
                )
                print("passkeys: \(stats.passkeys); live sessions: \(stats.liveSessions)")
                for (aaguid, count) in stats.passkeysByAAGUID.sorted(by: { $0.value > $1.value }) {
                    print("  \(AAGUID(aaguid)?.providerName ?? aaguid): \(count)")
                }
            }
        }
    }
}
