import Foundation
import WebAuthn

/// The real-authenticator vectors of `Tests/Fixtures/vectors.jsonl` (responses collected from five
/// other WebAuthn libraries' suites with their verdicts; see Tests/Fixtures/vectors-README.md),
/// for the test suites of a source checkout.
public struct TestVector: Sendable {
    public let id: String
    public let json: [String: JSONValue]

    public init(id: String, json: [String: JSONValue]) {
        self.id = id
        self.json = json
    }

    public subscript(key: String) -> JSONValue? { json[key] }

    /// `Tests/Fixtures` of the checkout this file was built from.
    public static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Tests/Fixtures")

    /// Every vector, in file order (empty when the file is not there).
    public static let all: [TestVector] = {
        guard let data = try? Data(contentsOf: fixtures.appendingPathComponent("vectors.jsonl")) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            guard let object = try? JSONDecoder().decode([String: JSONValue].self, from: Data(line.utf8)),
                case .string(let id)? = object["id"]
            else { return nil }
            return TestVector(id: id, json: object)
        }
    }()
}
