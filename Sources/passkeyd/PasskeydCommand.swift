import ArgumentParser
import Foundation

/// `passkeyd`: the passkey server and its tools.
@main
struct PasskeydCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passkeyd",
        abstract: "A passkey (WebAuthn / FIDO2) sign-in server, and tools to debug passkey payloads.",
        version: "passkeyd \(BuildInfo.version) (commit \(BuildInfo.commit))",
        subcommands: [
            Serve.self, Migrate.self, Healthcheck.self, Admin.self, Tenant.self, Import.self, Inspect.self, Verify.self, MDS.self,
        ]
    )

    /// Exit codes: 0 success, 1 a verification that failed, 2 bad usage or unreadable input.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
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

/// Reads a file path, or standard input for "-".
func readInput(_ path: String) throws -> [UInt8] {
    if path == "-" {
        return Array(FileHandle.standardInput.readDataToEndOfFile())
    }
    guard let data = FileManager.default.contents(atPath: path) else {
        throw ValidationError("cannot read \(path)")
    }
    return Array(data)
}

func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}
