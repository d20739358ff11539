import Configuration
import Foundation
import Synchronization

/// Every setting a ``ConfigReader`` was asked for, as swift-configuration reports it: its key,
/// its environment variable, whether it is secret, and the value found (`<redacted>` when
/// secret). From it `passkeyd` refuses a file key no setting has (a typo such as `rpId` must not
/// leave a default in force silently), `passkeyd settings` prints what is in force, and a test
/// holds the README's table to it.
public final class SettingsLedger: AccessReporter, Sendable {
    /// One setting as read.
    public struct Entry: Sendable, Hashable {
        /// Its key in `passkeyd.json` (`rateLimits.perIP`).
        public let key: String
        /// Its environment variable, when it has one.
        public let environment: String?
        public let isSecret: Bool
        /// The value found, as text (`nil`: none, the default applies); `<redacted>` when secret.
        public let value: String?
    }

    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    public func report(_ event: AccessEvent) {
        let key = event.metadata.key.components.joined(separator: ".")
        var environment: String?
        if case .string(let name)? = event.metadata.key.context[environmentContextKey] { environment = name }
        var value: String?
        var isSecret = false
        if case .success(let found?) = event.result {
            isSecret = found.isSecret
            value = isSecret ? "<redacted>" : Self.text(found.content)
        }
        let entry = Entry(key: key, environment: environment, isSecret: isSecret, value: value)
        entries.withLock { $0[key] = entry }
    }

    /// Every setting read, by key.
    public var all: [Entry] { entries.withLock { $0.values.sorted { $0.key < $1.key } } }

    /// Keys of `file` that name no setting that was read (nor a section of one).
    public func unknownKeys(in file: SettingsFile) -> [String] {
        let known = Set(all.map(\.key))
        return file.keys.filter { !known.contains($0) }.sorted()
    }

    static func text(_ content: ConfigContent) -> String {
        switch content {
        case .string(let text): return text
        case .int(let int): return String(int)
        case .double(let double): return String(double)
        case .bool(let bool): return String(bool)
        case .bytes(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .stringArray(let list): return list.joined(separator: ",")
        case .intArray(let list): return list.map(String.init).joined(separator: ",")
        case .doubleArray(let list): return list.map { String($0) }.joined(separator: ",")
        case .boolArray(let list): return list.map { String($0) }.joined(separator: ",")
        case .byteChunkArray(let chunks): return "\(chunks.count) byte chunks"
        }
    }
}
