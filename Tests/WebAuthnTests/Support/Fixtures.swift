import Foundation

@testable import WebAuthn

/// Locates files under Tests/Fixtures (kept outside the target so SwiftPM does not bundle them).
enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(name))
    }
}

extension Array where Element == UInt8 {
    init(base64URL: String) {
        self = Base64URLBytes(encoded: base64URL)?.bytes ?? []
    }
}
