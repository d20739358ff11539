import Foundation
import WebAuthnTesting

/// Runs the built `passkeyd` executable (it sits next to the test bundle in the build folder).
enum CLI {
    typealias Result = Subprocess.Result

    static var binary: URL {
        if let path = ProcessInfo.processInfo.environment["PASSKEYD_BINARY"] { return URL(fileURLWithPath: path) }
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return exe.deletingLastPathComponent().appendingPathComponent("passkeyd")
    }

    static func run(_ arguments: [String], stdin: [UInt8] = []) throws -> Result {
        try Subprocess.run(binary, arguments, stdin: stdin)
    }
}
