import ArgumentParser
import Foundation
import PasskeyCore
import PasskeyStore

/// A refusal the operator has to act on (the last administrator, an administrator already
/// there, a confirmation that does not match): its message on standard error, exit status 1.
/// Bad usage and unknown accounts stay `ValidationError`s (status 2).
func refusal(_ message: String) -> ExitCode {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    return ExitCode(1)
}

/// `yyyy-MM-ddTHH:mm:ssZ` (UTC).
private func moment(_ date: Date) -> String {
    date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: false).timeZone(separator: .omitted))
}

extension AdminContext {
    /// The console's service on this database: the same code the console's API runs.
    func console() throws -> ConsoleService {
        ConsoleService(service: try PasskeyService(configuration: loaded.domain, store: store))
    }

    /// "ada (3f2c…)" for each administrator with the `admin` role.
    func administrators() async throws -> [String] {
        try await console().admins().filter { $0.role.changes }.map {
            "\($0.account.username) (\($0.account.id.uuidString.lowercased()))"
        }
    }
}

/// The operator's console from the command line (docs/admin.md): roles, the first
/// administrator's bootstrap link, account deletion. Each verb goes through `AdminService` /
/// `ConsoleService`, as the console's API does, and is audited with the operator's name.
extension Admin {
    struct Grant: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Give an account a console role: admin (sees and changes), viewer (sees only) or operator (an admin who also manages tenants; default tenant only).",
            discussion: "Granting viewer to the last admin is refused (exit status 1): grant admin to someone else first.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String
        @Option(help: "admin, viewer or operator.") var role: String

        func validate() throws {
            guard AdminRole(rawValue: role) != nil else { throw ValidationError("--role must be admin, viewer or operator") }
        }

        func run() async throws {
            let role = AdminRole(rawValue: self.role) ?? .viewer
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                do {
                    try await context.admin.grantRole(role, to: account, by: context.operatorName)
                } catch let error as PasskeyServiceError where error.code == .lastAdmin {
                    throw refusal("\(account.username) is the last admin: grant admin to another account before making it a viewer")
                }
                print("\(account.username) (\(account.id.uuidString.lowercased())) is now \(role.rawValue)")
            }
        }
    }

    struct RevokeRole: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-role",
            abstract: "Take an account's console role away (its console sessions end).",
            discussion: "The last admin's role is kept (exit status 1): grant admin to someone else first.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                do {
                    try await context.admin.revokeRole(of: account, by: context.operatorName)
                } catch let error as PasskeyServiceError where error.code == .lastAdmin {
                    throw refusal(
                        "\(account.username) is the last admin; the console would have nobody to run it. "
                            + "Grant admin to another account first (passkeyd admin grant NAME --role admin).")
                }
                print("\(account.username) has no console role")
            }
        }
    }

    struct Roles: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the accounts with a console role, and who granted it when.")
        @OptionGroup var options: ServerOptions
        @Flag(help: "Print JSON.") var json = false

        struct Line: Encodable {
            let username: String
            let id: UUID
            let role: String
            let grantedAt: Date
            let grantedBy: String
        }

        func run() async throws {
            try await AdminContext.with(options) { context in
                let lines = try await context.console().admins().map {
                    Line(
                        username: $0.account.username, id: $0.account.id, role: $0.role.rawValue, grantedAt: $0.grantedAt,
                        grantedBy: $0.grantedBy)
                }
                if json {
                    try printJSON(lines)
                    return
                }
                if lines.isEmpty {
                    FileHandle.standardError.write(
                        Data("no console roles yet: passkeyd admin grant NAME --role admin, or passkeyd admin bootstrap-link\n".utf8))
                }
                for line in lines {
                    print(
                        [
                            line.username, line.id.uuidString.lowercased(), line.role, "granted \(moment(line.grantedAt))",
                            "by \(line.grantedBy)",
                        ]
                        .joined(separator: "\t"))
                }
            }
        }
    }

    struct BootstrapLink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bootstrap-link",
            abstract: "Print a one-time link that creates the first console administrator (only while there is none).",
            discussion:
                "The link holds a fresh single-use token (pkb_…) in its fragment; it expires after console.bootstrapSeconds "
                + "(PASSKEYD_ADMIN_BOOTSTRAP_TTL). When an administrator exists it names them and exits with status 1.")
        @OptionGroup var options: ServerOptions

        func run() async throws {
            try await AdminContext.with(options) { context in
                guard context.loaded.domain.console.enabled else {
                    throw refusal("the console is off (console.enabled / PASSKEYD_ADMIN_CONSOLE): a bootstrap link would lead nowhere")
                }
                let console = try context.console()
                guard let (token, expiresAt) = try await console.issueBootstrapToken(by: context.operatorName) else {
                    let admins = try await context.administrators()
                    throw refusal(
                        "the console has an administrator already: \(admins.joined(separator: ", ")). "
                            + "An admin grants roles in the console, or: passkeyd admin grant NAME --role admin|viewer")
                }
                print(console.bootstrapLink(token))
                FileHandle.standardError.write(
                    Data("one-time link for the first console administrator, valid until \(moment(expiresAt)); it works once\n".utf8))
            }
        }
    }

    struct DeleteAccount: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete-account",
            abstract: "Delete an account with its passkeys, password, sessions and codes (its audit lines stay).",
            discussion: "--confirm must repeat the account's username. The last admin's account is kept (exit status 1).")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String
        @Option(help: "The account's username, typed again.") var confirm: String

        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                do {
                    try await context.admin.deleteAccount(account, confirmation: confirm, by: context.operatorName)
                } catch let error as PasskeyServiceError where error.code == .confirmationMismatch {
                    throw refusal("--confirm \"\(confirm)\" is not the account's username (\(account.username)); nothing was deleted")
                } catch let error as PasskeyServiceError where error.code == .lastAdmin {
                    // The store's guard, in the deletion's transaction: a console left without an
                    // admin would only reopen through a bootstrap link.
                    throw refusal("\(account.username) is the last admin: grant admin to another account before deleting it")
                }
                print("deleted \(account.username) (\(account.id.uuidString.lowercased())); its audit lines stay")
            }
        }
    }
}

/// The adoption chart's days, as `admin adoption --daily` prints them.
enum AdoptionTable {
    static let header = [
        "date", "with passkey", "password only", "no way in", "new passkeys", "upg. cond.", "upg. button", "upg. recov.",
        "pw off", "in autofill", "in passkey", "in password", "in recovery", "in oidc",
    ]

    static func lines(_ days: [ConsoleService.AdoptionDay]) -> [String] {
        let rows: [[String]] = days.map { day in
            let counts: [Int] = [
                day.accountsWithPasskey, day.passwordOnly, day.noWayIn, day.newPasskeys, day.upgrades.conditional, day.upgrades.button,
                day.upgrades.recovery, day.passwordsOff, day.signIns.autofill, day.signIns.passkey, day.signIns.password,
                day.signIns.recovery, day.signIns.oidc,
            ]
            return [ConsoleService.dayText(day.date)] + counts.map { String($0) }
        }
        let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            var text: [String] = []
            for (index, cell) in cells.enumerated() {
                let pad = String(repeating: " ", count: max(0, widths[index] - cell.count))
                text.append(index == 0 ? cell + pad : pad + cell)
            }
            return text.joined(separator: "  ")
        }
        return [line(header)] + rows.map(line)
    }

    struct DayJSON: Encodable {
        let date: String
        let accountsWithPasskey, passwordOnly, noWayIn, newPasskeys, passwordsOff: Int
        let upgrades: [String: Int]
        let signIns: [String: Int]

        init(_ day: ConsoleService.AdoptionDay) {
            date = ConsoleService.dayText(day.date)
            accountsWithPasskey = day.accountsWithPasskey
            passwordOnly = day.passwordOnly
            noWayIn = day.noWayIn
            newPasskeys = day.newPasskeys
            passwordsOff = day.passwordsOff
            upgrades = ["conditional": day.upgrades.conditional, "button": day.upgrades.button, "recovery": day.upgrades.recovery]
            signIns = [
                "autofill": day.signIns.autofill, "passkey": day.signIns.passkey, "password": day.signIns.password,
                "recovery": day.signIns.recovery, "oidc": day.signIns.oidc,
            ]
        }
    }
}
