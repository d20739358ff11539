import Foundation

/// `application/x-www-form-urlencoded` fields: a form body, or a URL's query (`+` is a space,
/// then percent-decoding). A repeated name keeps its first value, ``repeated`` names the first
/// name that came again and ``repeatedNames`` every one (RFC 6749 §3.1, §3.2: parameters must
/// not be repeated).
struct FormFields: Sendable {
    private(set) var values: [String: String] = [:]
    private(set) var repeated: String?
    private(set) var repeatedNames: Set<String> = []

    init(_ text: String) {
        for pair in text.split(separator: "&") {
            // "=x" is an empty name (not a name "x"): empty sides are kept.
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ")
            }
            guard let name = parts.first?.removingPercentEncoding else { continue }
            guard values[name] == nil else {
                repeated = repeated ?? name
                repeatedNames.insert(name)
                continue
            }
            values[name] = parts.count > 1 ? (parts[1].removingPercentEncoding ?? parts[1]) : ""
        }
    }

    subscript(name: String) -> String? { values[name] }
}
