import ArgumentParser
import Foundation

/// `passkey`: a passkey provider in the terminal. It keeps passkeys in a file (mode 0600) like a
/// password manager would, and uses them against a passkeyd server's native API.
@main
struct PasskeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passkey",
        abstract: "Create and use passkeys against a passkeyd server, from the terminal.",
        subcommands: [Register.self, SignIn.self, List.self, Load.self])

    /// Exit codes: 0 done, 1 the server or network said no, 2 bad usage.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as Failure {
            FileHandle.standardError.write(Data("passkey: \(failure.message)\n".utf8))
            Foundation.exit(1)
        } catch let code as ExitCode {
            Foundation.exit(code.rawValue)
        } catch {
            if exitCode(for: error) == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            Foundation.exit(2)
        }
    }
}

/// A failure to report in one sentence (exit 1).
struct Failure: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

struct ClientOptions: ParsableArguments {
    @Option(help: "The passkeyd server, e.g. http://localhost:8080.")
    var server: String = "http://localhost:8080"

    @Option(help: "The origin to claim in client data (default: the server's own origin).")
    var origin: String?

    @Option(help: "Where passkeys and sessions are kept (default: ~/.passkey/passkeys.json).")
    var store: String?

    func serverURL() throws -> URL {
        guard let url = URL(string: server), let scheme = url.scheme, scheme == "http" || scheme == "https", url.host != nil else {
            throw ValidationError("--server must be an http(s) URL, e.g. http://localhost:8080")
        }
        return url
    }

    /// scheme://host[:port] of the server.
    func claimedOrigin() throws -> String {
        if let origin { return origin }
        let url = try serverURL()
        var text = "\(url.scheme ?? "http")://\(url.host ?? "")"
        if let port = url.port { text += ":\(port)" }
        return text
    }

    /// `$HOME` when it is set (as for any Unix tool), else the account's home directory.
    static var home: URL {
        if let home = ProcessInfo.processInfo.environment["HOME"], !home.isEmpty { return URL(fileURLWithPath: home) }
        return FileManager.default.homeDirectoryForCurrentUser
    }

    func keychain() -> Keychain {
        Keychain(path: store ?? Self.home.appendingPathComponent(".passkey/passkeys.json").path)
    }
}
