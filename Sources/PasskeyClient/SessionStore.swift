import Foundation

/// Where ``PasskeyClient`` keeps the session between launches: the Keychain on Apple platforms
/// (`KeychainSessionStore`), a private file elsewhere (``FileSessionStore``).
public protocol SessionStore: Sendable {
    /// The session kept for `server`, if any.
    func load(server: String) async throws -> StoredSession?
    /// Keeps `session` for `server`; `nil` forgets it.
    func save(_ session: StoredSession?, server: String) async throws
}

/// Sessions in memory only: gone when the process ends.
public actor MemorySessionStore: SessionStore {
    private var sessions: [String: StoredSession] = [:]
    public init() {}
    public func load(server: String) -> StoredSession? { sessions[server] }
    public func save(_ session: StoredSession?, server: String) { sessions[server] = session }
}

/// Sessions in one JSON file, mode 0600 in a 0700 folder, rewritten atomically (write a temporary
/// file, then `rename(2)`): a crash leaves the old file or the new one, never half of one.
public actor FileSessionStore: SessionStore {
    public let path: String

    public init(path: String) { self.path = path }

    /// `$XDG_CONFIG_HOME/passkeyd/sessions.json`, else `~/.config/passkeyd/sessions.json`.
    public static func defaultPath() -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? (NSHomeDirectory() + "/.config")
        return base + "/passkeyd/sessions.json"
    }

    public func load(server: String) throws -> StoredSession? { try read()[server] }

    public func save(_ session: StoredSession?, server: String) throws {
        var all = try read()
        all[server] = session
        try write(all)
    }

    private func read() throws -> [String: StoredSession] {
        guard let data = FileManager.default.contents(atPath: path) else { return [:] }
        do {
            return try JSONDecoder.passkeyd.decode([String: StoredSession].self, from: data)
        } catch {
            throw PasskeyClientError.unsupported("\(path) is not a passkeyd session file")
        }
    }

    private func write(_ all: [String: StoredSession]) throws {
        let url = URL(fileURLWithPath: path)
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        let data = try encoder.encode(all)
        let temporary = folder.appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString)").path
        // Created 0600 from the start (never readable by others, even for a moment), written and
        // flushed, then renamed over the old file, and the folder flushed: after a crash or a
        // power cut the file is the old one or the new one.
        let fd = open(temporary, O_CREAT | O_EXCL | O_WRONLY, 0o600)
        guard fd >= 0 else { throw PasskeyClientError.unsupported("cannot write \(temporary)") }
        let written = data.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let count = Foundation.write(fd, raw.baseAddress! + offset, raw.count - offset)
                if count <= 0 { return false }
                offset += count
            }
            return true
        }
        let flushed = fsync(fd) == 0
        close(fd)
        guard written, flushed, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw PasskeyClientError.unsupported("cannot write \(path)")
        }
        let directory = open(folder.path, O_RDONLY)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }
}

extension JSONDecoder {
    /// passkeyd's JSON: ISO 8601 dates, with or without fractional seconds.
    static var passkeyd: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            if let date = try? Date(text, strategy: .iso8601) { return date }
            if let date = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return date }
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 date: \(text)"))
        }
        return decoder
    }
}
