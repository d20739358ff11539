import Foundation
import Logging

/// What never reaches a log line: the value of a setting whose name ends in `_HEADERS`, `_KEY`,
/// `_SECRET`, `_PASSWORD` or `_TOKEN` (an OTLP collector's API key in
/// `OTEL_EXPORTER_OTLP_HEADERS`), and the password of any URL (`scheme://user:password@host`).
///
/// For the lines of libraries passkeyd hands a logger to (``RedactingLogHandler``): swift-otel
/// logs every setting it reads from the environment, name and value, at `info`. passkeyd's own
/// lines name no secret in the first place.
struct LogRedaction: Sendable {
    static let mask = "[redacted]"

    /// The environment's secret values, longest first (a secret that contains another goes
    /// whole); values under 6 characters are left to the rules by name, not searched for.
    let secrets: [String]

    init(environment: [String: String]) {
        var found: Set<String> = []
        for (name, value) in environment where Self.namesSecret(name) {
            found.insert(value.trimmingCharacters(in: .whitespaces))
            // `key=value,key=value`, values percent-encoded (OTLP exporter configuration): each
            // value as written and as the exporter decodes it.
            guard name.uppercased().hasSuffix("_HEADERS") else { continue }
            for member in value.split(separator: ",") {
                guard let equals = member.firstIndex(of: "=") else { continue }
                let header = member[member.index(after: equals)...].trimmingCharacters(in: .whitespaces)
                found.insert(header)
                if let decoded = header.removingPercentEncoding { found.insert(decoded) }
            }
        }
        secrets = found.filter { $0.count >= 6 }.sorted { $0.count > $1.count }
    }

    /// Whether a setting of this name holds a secret.
    static func namesSecret(_ name: String) -> Bool {
        let name = name.uppercased()
        return ["_HEADERS", "_KEY", "_SECRET", "_PASSWORD", "_TOKEN"].contains { name.hasSuffix($0) }
    }

    /// A line's metadata without its secrets. swift-otel's "Configuration updated from
    /// environment" names the setting in `environment_key` and its values in
    /// `environment_value`, `previous_value` and `new_value`: for a secret setting, all three go.
    func redact(_ metadata: Logger.Metadata) -> Logger.Metadata {
        let secretSetting = metadata["environment_key"].map { Self.namesSecret($0.description) } ?? false
        var result: Logger.Metadata = [:]
        for (key, value) in metadata {
            if secretSetting && ["environment_value", "previous_value", "new_value"].contains(key) {
                result[key] = .string(Self.mask)
            } else {
                result[key] = redact(value)
            }
        }
        return result
    }

    func redact(_ value: Logger.MetadataValue) -> Logger.MetadataValue {
        switch value {
        case .string(let text): .string(redact(text))
        case .stringConvertible(let text): .string(redact(text.description))
        case .array(let values): .array(values.map(redact))
        case .dictionary(let entries): .dictionary(redact(entries))
        }
    }

    /// `text` with every URL's password and every known secret masked.
    func redact(_ text: String) -> String {
        var text = Self.withoutURLPasswords(text)
        for secret in secrets where text.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: Self.mask)
        }
        return text
    }

    /// `text` with the password of each `scheme://user:password@host` in it masked, and the whole
    /// user information of a `scheme://token@host` (a key passed as the user name). The user
    /// information runs from `://` to the last `@` before a space, quote or angle bracket (a
    /// password may hold any other character, escaped or not); when a later `@` sits in a
    /// path or query behind a port, more than the password goes, never less.
    static func withoutURLPasswords(_ text: String) -> String {
        guard text.contains("://") else { return text }
        var result = ""
        var rest = text[...]
        while let marker = rest.range(of: "://") {
            result += rest[..<marker.upperBound]
            rest = rest[marker.upperBound...]
            let end = rest.firstIndex { " \t\r\n\"'<>".contains($0) } ?? rest.endIndex
            guard let at = rest[..<end].lastIndex(of: "@") else { continue }
            if let colon = rest[..<at].firstIndex(of: ":") {
                result += rest[...colon]
            }
            // No colon: the user part alone is the credential (`https://APIKEY@collector`).
            result += Self.mask
            rest = rest[at...]
        }
        return result + rest
    }
}

/// A log handler that writes through another with ``LogRedaction`` applied to each line: its
/// message, its metadata (the logger's own and the event's) and its error (written as the
/// `error` metadata, redacted).
struct RedactingLogHandler: LogHandler {
    private var base: any LogHandler
    let redaction: LogRedaction

    init(base: any LogHandler, redaction: LogRedaction) {
        self.base = base
        self.redaction = redaction
    }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { base.metadataProvider }
        set { base.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        var base = self.base
        var metadata = base.metadata.merging(event.metadata ?? [:]) { $1 }
        if let error = event.error {
            if metadata["error"] == nil { metadata["error"] = "\(String(describing: error))" }
            event.error = nil
        }
        base.metadata = [:]
        event.metadata = redaction.redact(metadata)
        event.message = "\(redaction.redact(event.message.description))"
        base.log(event: event)
    }
}
