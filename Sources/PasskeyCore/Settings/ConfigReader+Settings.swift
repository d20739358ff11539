import Configuration
import Foundation

/// Typed reads of passkeyd's settings, for the `init(reader:)` of each settings struct. Every
/// setting is named once, where its struct reads it: its whole key in `passkeyd.json`
/// (`rateLimits.perIP`, so that a message names it as the file has it), its environment variable when it has one, its range and whether it is secret.
/// A value that is there but wrong throws ``ConfigurationError`` naming the setting; a value no
/// source has is `nil` (the caller's default).
extension ConfigReader {
    /// How an error names a setting: its key, and its environment variable when it has one.
    static func settingName(_ key: String, _ environment: String?) -> String {
        environment.map { "\(key) (\($0))" } ?? key
    }

    private func setting<T>(_ key: String, _ environment: String?, secret: Bool, _ read: (ConfigKey, Bool) throws -> T)
        throws(ConfigurationError) -> T?
    {
        let configKey = ConfigKey(key, context: environment.map { [environmentContextKey: .string($0)] } ?? [:])
        do {
            return try read(configKey, secret)
        } catch let problem as SettingProblem {
            throw ConfigurationError(setting: problem.setting, problem: problem.problem)
        } catch {
            // The reader's own error: no source has the value.
            return nil
        }
    }

    /// Text (`secret`: redacted wherever swift-configuration reports what was read).
    package func text(_ key: String, env: String?, secret: Bool = false) throws(ConfigurationError) -> String? {
        try setting(key, env, secret: secret) { try requiredString(forKey: $0, isSecret: $1) }
    }

    /// True or false.
    package func flag(_ key: String, env: String?) throws(ConfigurationError) -> Bool? {
        try setting(key, env, secret: false) { try requiredBool(forKey: $0, isSecret: $1) }
    }

    /// A whole number within `range`.
    package func number(_ key: String, env: String?, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
        guard let value = try setting(key, env, secret: false, { try requiredInt(forKey: $0, isSecret: $1) }) else { return nil }
        guard range.contains(value) else {
            throw ConfigurationError(
                setting: Self.settingName(key, env), problem: "\(value) is outside \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// A number of seconds within `range`, as a duration.
    package func seconds(_ key: String, env: String?, in range: ClosedRange<Int>) throws(ConfigurationError) -> Duration? {
        try number(key, env: env, in: range).map { .seconds($0) }
    }

    /// A list of text (comma-separated in the environment).
    package func list(_ key: String, env: String?) throws(ConfigurationError) -> [String]? {
        try setting(key, env, secret: false) { try requiredStringArray(forKey: $0, isSecret: $1) }
    }

    /// One of `T`'s raw values.
    package func choice<T: RawRepresentable & CaseIterable>(_ key: String, env: String?, as: T.Type) throws(ConfigurationError) -> T?
    where T.RawValue == String {
        guard let raw = try text(key, env: env) else { return nil }
        guard let value = T(rawValue: raw) else {
            throw ConfigurationError(
                setting: Self.settingName(key, env),
                problem: "\"\(raw)\" is not one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return value
    }

    /// A list of objects: the file's JSON text (`[…]`), or the environment variable's own syntax.
    package func structured(_ key: String, env: String?, secret: Bool = false) throws(ConfigurationError) -> [UInt8]? {
        try setting(key, env, secret: secret) { try requiredBytes(forKey: $0, isSecret: $1) }
    }

    /// Decodes a structured setting's JSON text.
    package func decoded<T: Decodable>(_ key: String, env: String?, secret: Bool = false, as: T.Type) throws(ConfigurationError) -> T? {
        guard let bytes = try structured(key, env: env, secret: secret) else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw ConfigurationError(setting: Self.settingName(key, env), problem: ConfigurationError.describe(error))
        } catch {
            throw ConfigurationError(setting: Self.settingName(key, env), problem: "not valid JSON")
        }
    }
}

extension ConfigurationError {
    /// What is wrong with a JSON value, in a line.
    package static func describe(_ error: DecodingError) -> String {
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(context.codingPath.map(\.stringValue).joined(separator: ".")) has the wrong type"
        case .keyNotFound(let key, _):
            return "\(key.stringValue) is missing"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "not valid JSON" : "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        @unknown default:
            return "invalid"
        }
    }
}
