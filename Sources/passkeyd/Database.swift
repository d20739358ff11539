import Foundation
import PasskeyServer
import PasskeyStore

/// Opens the store a database URL names: `sqlite://path` (relative or absolute), `sqlite:///abs/path`.
enum Database {
    static func open(_ url: String) throws -> any PasskeyStore {
        if url.hasPrefix("sqlite://") {
            let path = String(url.dropFirst("sqlite://".count))
            guard !path.isEmpty else { throw ConfigurationError(setting: "databaseURL", problem: "sqlite:// needs a file path") }
            return try SQLiteStore(path: path)
        }
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            throw ConfigurationError(setting: "databaseURL", problem: "PostgreSQL support is not built yet; use sqlite://FILE")
        }
        throw ConfigurationError(setting: "databaseURL", problem: "\"\(url)\" is not sqlite://FILE")
    }
}
