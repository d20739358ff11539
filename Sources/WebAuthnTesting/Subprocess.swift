import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Runs a child process (the built executables, a Python oracle) to completion, feeding it standard input, and collects its output.
public enum Subprocess {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// The child was still running after the `timeout` it was given, and was killed.
        public var timedOut = false
    }

    public static func run(
        _ executable: URL, _ arguments: [String], stdin: [UInt8] = [], environment: [String: String]? = nil,
        directory: URL? = nil, timeout: Duration? = nil
    ) throws -> Result {
        // A directory: through the shell's cd (posix_spawn has no portable chdir action).
        let (path, argv) =
            directory.map { ("/bin/sh", ["-c", "cd \"$0\" && exec \"$@\"", $0.path, executable.path] + arguments) }
            ?? (executable.path, arguments)
        let input = try SpawnedProcess.pipe(), output = try SpawnedProcess.pipe(), errorPipe = try SpawnedProcess.pipe()
        let child: SpawnedProcess
        do {
            child = try SpawnedProcess(
                executable: path, arguments: argv, environment: environment, stdin: input.read, stdout: output.write,
                stderr: errorPipe.write)
        } catch {
            for fd in [input.read, input.write, output.read, output.write, errorPipe.read, errorPipe.write] { close(fd) }
            throw error
        }
        for fd in [input.read, output.write, errorPipe.write] { close(fd) }
        // Both outputs are read at once (a child filling one pipe while the other is read would wait forever).
        let errors = Collected(), finished = DispatchSemaphore(value: 0), errorFD = errorPipe.read
        Thread {
            errors.data = SpawnedProcess.readAll(errorFD)
            finished.signal()
        }.start()
        stdin.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(input.write, bytes.baseAddress! + offset, bytes.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
        close(input.write)
        // A child that hangs past its timeout is killed (its output so far is kept), so a test
        // of "does not hang" fails rather than waiting forever.
        let exited = DispatchSemaphore(value: 0), watchdog = Collected()
        if let timeout {
            let pid = child.pid
            Thread {
                let (seconds, attoseconds) = timeout.components
                let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
                if exited.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .timedOut {
                    watchdog.fired = true
                    kill(pid, SIGKILL)
                }
            }.start()
        }
        let out = SpawnedProcess.readAll(output.read)
        let status = child.waitUntilExit()
        exited.signal()
        finished.wait()
        return Result(
            status: status, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: errors.data, as: UTF8.self),
            timedOut: watchdog.fired)
    }

    /// Standard error, read on a thread of its own (handed over after its semaphore).
    private final class Collected: @unchecked Sendable {
        var data = Data()
        var fired = false
    }
}
