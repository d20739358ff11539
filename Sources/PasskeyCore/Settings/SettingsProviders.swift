import Configuration
import Foundation

/// A setting's value that cannot be read: which setting (its environment variable, or its key in
/// the file) and why. The providers below throw it; ``ConfigReader``'s setting reads turn it into
/// a ``ConfigurationError``, while a value no provider has is simply absent.
public struct SettingProblem: Error, Sendable {
    public let setting: String
    public let problem: String
}

/// The key context entry that carries a setting's environment variable (`PASSKEYD_…`).
let environmentContextKey = "environment"

/// `PASSKEYD_*` environment variables, each found by the name its setting carries in its key's
/// context, so that the published names stay as they are (`PASSKEYD_CHALLENGE_LIFETIME` for
/// `challengeLifetimeSeconds`). Text as given; a blank variable counts as unset (a template's
/// empty line); true/false as `1 true yes on` / `0 false no off`; lists comma-separated, each
/// item trimmed, empty items dropped.
public struct SettingsEnvironment: FixedSettingsProvider {
    let variables: [String: String]

    public init(_ variables: [String: String]) { self.variables = variables }

    public var providerName: String { "environment" }

    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        guard case .string(let name)? = key.context[environmentContextKey] else {
            return LookupResult(encodedKey: key.description, value: nil)
        }
        guard let raw = variables[name], !raw.trimmingCharacters(in: .whitespaces).isEmpty else {
            return LookupResult(encodedKey: name, value: nil)
        }
        func problem(_ text: String) -> SettingProblem { SettingProblem(setting: name, problem: "\"\(raw)\" \(text)") }
        let content: ConfigContent
        switch type {
        case .string: content = .string(raw)
        case .int:
            guard let int = Int(raw.trimmingCharacters(in: .whitespaces)) else { throw problem("is not a whole number") }
            content = .int(int)
        case .bool:
            switch raw.trimmingCharacters(in: .whitespaces).lowercased() {
            case "1", "true", "yes", "on": content = .bool(true)
            case "0", "false", "no", "off": content = .bool(false)
            default: throw problem("is not true or false")
            }
        // A structured setting's own syntax (`PASSKEYD_ANDROID_APPS`), as its bytes.
        case .bytes: content = .bytes(Array(raw.utf8))
        case .stringArray:
            content = .stringArray(
                raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        default: throw problem("cannot be read as \(type.rawValue)")
        }
        return LookupResult(encodedKey: name, value: ConfigValue(content, isSecret: false))
    }
}

/// `passkeyd.json`: nested objects give the keys (`{"rateLimits": {"perIP": 300}}` is
/// `rateLimits.perIP`). Values keep their JSON type: a number where text is expected is an
/// error naming the key, never a silent default. Lists of objects (`androidApps`, `webhooks`)
/// are read as their JSON text by the settings that decode them (swift-configuration's
/// `JSONSnapshot` refuses a file that has any: it holds only lists of text and numbers).
public struct SettingsFile: FixedSettingsProvider {
    /// Every value, by its dotted key.
    let values: [String: JSONLeaf]
    public let providerName: String

    enum JSONLeaf: Sendable {
        case string(String)
        case int(Int)
        case double(Double)
        case bool(Bool)
        case strings([String])
        /// A list with objects or mixed values, as JSON text.
        case structured(Data)
        case null
    }

    /// Parses a settings file. - Throws: ``SettingProblem`` naming `name` when it is not a JSON object.
    public init(json data: Data, name: String) throws(SettingProblem) {
        providerName = name
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw SettingProblem(setting: name, problem: "not valid JSON")
        }
        guard let top = object as? [String: Any] else { throw SettingProblem(setting: name, problem: "not a JSON object") }
        var values: [String: JSONLeaf] = [:]
        func walk(_ dictionary: [String: Any], _ prefix: String) {
            for (key, value) in dictionary {
                let path = prefix.isEmpty ? key : prefix + "." + key
                if let nested = value as? [String: Any] {
                    walk(nested, path)
                } else {
                    values[path] = Self.leaf(value)
                }
            }
        }
        walk(top, "")
        self.values = values
    }

    /// The file's keys with a value (`null` counts as absent).
    public var keys: Set<String> {
        Set(
            values.compactMap { key, leaf in
                if case .null = leaf { return nil }
                return key
            })
    }

    static func leaf(_ value: Any) -> JSONLeaf {
        if value is NSNull { return .null }
        if let number = value as? NSNumber {
            // JSONSerialization gives booleans as NSNumber of Objective-C type `c`.
            if String(cString: number.objCType) == "c" { return .bool(number.boolValue) }
            if let int = Int(exactly: number.doubleValue), !String(describing: number).contains(".") { return .int(int) }
            return .double(number.doubleValue)
        }
        if let string = value as? String { return .string(string) }
        if let array = value as? [Any], array.allSatisfy({ $0 is String }) { return .strings(array.map { $0 as? String ?? "" }) }
        return .structured((try? JSONSerialization.data(withJSONObject: value)) ?? Data("null".utf8))
    }

    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        let name = key.components.joined(separator: ".")
        func wrong(_ expected: String) -> SettingProblem {
            SettingProblem(setting: "\(providerName): \(name)", problem: "has the wrong type (expected \(expected))")
        }
        guard let leaf = values[name] else { return LookupResult(encodedKey: name, value: nil) }
        let content: ConfigContent
        switch (type, leaf) {
        case (_, .null): return LookupResult(encodedKey: name, value: nil)
        case (.string, .string(let text)): content = .string(text)
        case (.string, _): throw wrong("text")
        case (.int, .int(let int)): content = .int(int)
        case (.int, _): throw wrong("a whole number")
        case (.bool, .bool(let bool)): content = .bool(bool)
        case (.bool, _): throw wrong("true or false")
        case (.stringArray, .strings(let strings)): content = .stringArray(strings)
        case (.stringArray, _): throw wrong("a list of text")
        // A list of objects is read as its JSON text (``ConfigReader/structuredSetting``).
        case (.bytes, .structured(let data)): content = .bytes(Array(data))
        case (.bytes, .strings(let strings)):
            content = .bytes(Array((try? JSONSerialization.data(withJSONObject: strings)) ?? Data("[]".utf8)))
        case (.bytes, _): throw wrong("a list of objects")
        default: throw wrong(type.rawValue)
        }
        return LookupResult(encodedKey: name, value: ConfigValue(content, isSecret: false))
    }
}

/// A settings provider whose values never change once it is made (passkeyd reads its settings
/// at start): fetching, watching and its snapshot all answer from `value(forKey:type:)`.
public protocol FixedSettingsProvider: ConfigProvider {}

extension FixedSettingsProvider {
    nonisolated(nonsending) public func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    nonisolated(nonsending) public func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    public func snapshot() -> any ConfigSnapshot { FixedSettingsSnapshot(provider: self) }

    nonisolated(nonsending) public func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}

/// The snapshot of a ``FixedSettingsProvider``: the provider itself.
struct FixedSettingsSnapshot<Provider: FixedSettingsProvider>: ConfigSnapshot {
    let provider: Provider
    var providerName: String { provider.providerName }
    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try provider.value(forKey: key, type: type)
    }
}
