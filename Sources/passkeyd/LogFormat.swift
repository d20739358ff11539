import Foundation
import Logging
import PasskeyServer

/// Log output: JSON lines in production (one object per line: time, level, label, message and
/// metadata), human text in development. Default: text on a terminal, JSON otherwise.
enum LogFormat: String, CaseIterable {
    case json, text

    static func bootstrap(_ format: LogFormat?, level: Logger.Level) {
        let chosen = format ?? (isatty(STDERR_FILENO) == 1 ? .text : .json)
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = chosen == .json ? JSONLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }
}

struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    private static let lock = NSLock()

    init(label: String) { self.label = label }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields: [(String, String)] = [
            ("time", Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))),
            ("level", event.level.rawValue), ("label", label), ("message", "\(event.message)"),
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for key in merged.keys.sorted() { fields.append((key, "\(merged[key]!)")) }
        var line = "{" + fields.map { JSONText.quote($0.0) + ":" + JSONText.quote($0.1) }.joined(separator: ",") + "}\n"
        // One write(2) per line: lines from concurrent requests never interleave.
        line.withUTF8 { buffer in
            Self.lock.lock()
            defer { Self.lock.unlock() }
            var offset = 0
            while offset < buffer.count {
                let written = write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }
}
