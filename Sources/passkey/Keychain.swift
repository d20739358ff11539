import Foundation
import WebAuthnTesting

/// The file where `passkey` keeps its passkeys (private keys included) and session tokens.
/// Created with mode 0600 in a 0700 folder, like a provider's vault; rewritten atomically.
struct Keychain {
    struct Entry: Codable {
        var server: String
        var credential: SoftwareCredential
        var createdAt: Date
    }

    struct Contents: Codable {
        var passkeys: [Entry] = []
        /// Session token per server.
        var sessions: [String: String] = [:]
    }

    let path: String

    func load() throws -> Contents {
        guard let data = FileManager.default.contents(atPath: path) else { return Contents() }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return try decoder.decode(Contents.self, from: data)
        } catch {
            throw Failure("\(path) is not a passkey store (\(error.localizedDescription))")
        }
    }

    func save(_ contents: Contents) throws {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(contents)
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)")
        guard FileManager.default.createFile(atPath: temporary.path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw Failure("cannot write \(temporary.path)")
        }
        // rename(2) replaces the old file atomically: a crash leaves the old store or the new one.
        guard rename(temporary.path, path) == 0 else {
            try? FileManager.default.removeItem(at: temporary)
            throw Failure("cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}
