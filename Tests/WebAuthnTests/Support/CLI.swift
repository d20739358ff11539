import Foundation

/// Runs a child process to completion, feeding it standard input, and collects its output.
enum Subprocess {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func run(
        _ executable: URL, _ arguments: [String], stdin: [UInt8] = [], environment: [String: String]? = nil,
        directory: URL? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        if let directory { process.currentDirectoryURL = directory }
        let input = Pipe(), output = Pipe(), error = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        try process.run()
        input.fileHandleForWriting.write(Data(stdin))
        try input.fileHandleForWriting.close()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = error.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self))
    }
}

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
