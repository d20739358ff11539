import Foundation

/// Conversions shared by the SQL stores: times are integer Unix milliseconds, IDs text,
/// bytes binary, lists JSON text. Both backends store the same values the same way.
enum StoreValues {
    static func millis(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }
    static func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }

    static func encodeList(_ list: [String]) -> String {
        (try? String(decoding: JSONEncoder().encode(list), as: UTF8.self)) ?? "[]"
    }

    static func decodeList(_ text: String?) -> [String] {
        guard let text, let list = try? JSONDecoder().decode([String].self, from: Data(text.utf8)) else { return [] }
        return list
    }

    /// Largest values accepted for free-text fields, so a store row never grows unbounded.
    static let maxNameLength = 128
}
