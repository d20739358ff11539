import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A child process started with `posix_spawn`, for the tests and tools that run the built
/// executables and Python. Not Foundation's `Process`: on Linux (Swift 6.3.1) its `run()` lists
/// `/proc/self/fd` by copying each directory entry's whole 256-byte name and, when an entry
/// ends glibc's buffer at a page's end, reads past it and crashes the whole test process now and
/// then (swift-corelibs-foundation pull request 5472; a CI run of this package died so).
public final class SpawnedProcess: @unchecked Sendable {  // the pid is fixed; the status behind a lock
    public let pid: pid_t
    private let lock = NSLock()
    /// waitpid's status once the child ended.
    private var rawStatus: Int32?

    /// Starts `executable`. `stdin`, `stdout`, `stderr`: a descriptor the child gets as 0, 1 and
    /// 2 (nil: /dev/null). `environment` nil: this process's. Descriptors this process opens
    /// are close-on-exec where it matters (the pipes below are made so); the child sees only
    /// 0, 1 and 2 of ours.
    public init(
        executable: String, arguments: [String], environment: [String: String]? = nil, stdin: Int32? = nil, stdout: Int32? = nil,
        stderr: Int32? = nil
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (source, target) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] {
            if let source {
                posix_spawn_file_actions_adddup2(&actions, source, target)
            } else {
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            }
        }
        // Nothing else of this process reaches the child (Foundation's Process closed every other
        // descriptor too): a test's sockets, a server's listener, another child's pipes.
        Self.closeFrom3(&actions)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { variables.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, variables)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
        self.pid = pid
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later; not in Swift's Glibc
    /// module), found at run time; else a close action for each descriptor open now.
    private static let addCloseFrom: AddCloseFrom? = {
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    private static func closeFrom3(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>) {
        if let addCloseFrom, addCloseFrom(actions, 3) == 0 { return }
        for fd in Int32(3)..<Int32(4096) where fcntl(fd, F_GETFD) != -1 && fcntl(fd, F_GETFD) & FD_CLOEXEC == 0 {
            posix_spawn_file_actions_addclose(actions, fd)
        }
    }

    /// A pipe whose two ends close on exec (so no other child keeps one open).
    public static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Self.makePipe(&fds) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // (pipe2 with O_CLOEXEC is not in Swift's Glibc module: a child spawned by another thread
        // in between could inherit these two, which only delays this pipe's end until it exits.)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    private static func makePipe(_ fds: UnsafeMutablePointer<Int32>) -> Int32 {
        #if canImport(Glibc)
            Glibc.pipe(fds)
        #else
            Darwin.pipe(fds)
        #endif
    }

    public func signal(_ signal: Int32) { kill(pid, signal) }

    /// SIGTERM, as Foundation's `Process.terminate()`.
    public func terminate() { kill(pid, SIGTERM) }

    public var processIdentifier: Int32 { pid }

    /// How the child ended, as Foundation's `Process` says it.
    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    /// Waits for the child's end; its exit code (or the signal that ended it).
    @discardableResult public func waitUntilExit() -> Int32 {
        if let known = lock.withLock({ rawStatus }) { return Self.code(known) }
        var status: Int32 = 0
        var reaped: pid_t
        repeat { reaped = waitpid(pid, &status, 0) } while reaped == -1 && errno == EINTR
        // Not reaped here (ECHILD): `isRunning` reaped it meanwhile and kept its status.
        return lock.withLock {
            if reaped == pid && rawStatus == nil { rawStatus = status }
            return Self.code(rawStatus ?? status)
        }
    }

    /// Whether the child is still running (reaping it if it ended).
    public var isRunning: Bool {
        lock.withLock {
            guard rawStatus == nil else { return false }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return true }
            rawStatus = status
            return false
        }
    }

    /// The exit code, or the signal's number (after the child ended).
    public var terminationStatus: Int32 { Self.code(lock.withLock { rawStatus } ?? 0) }
    public var terminationReason: TerminationReason { (lock.withLock { rawStatus } ?? 0) & 0x7F == 0 ? .exit : .uncaughtSignal }

    private static func code(_ status: Int32) -> Int32 { status & 0x7F == 0 ? (status >> 8) & 0xFF : status & 0x7F }

    /// Reads a descriptor to its end and closes it.
    public static func readAll(_ fd: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        close(fd)
        return data
    }
}
