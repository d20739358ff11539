import Foundation
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// The process itself failing or stopping under load, on the embedded SQLite store:
/// - killed with SIGKILL in the middle of 16 clients' sign-ups: after a restart every sign-up it
///   had acknowledged signs in, and SQLite's `PRAGMA integrity_check` says ok;
/// - stopped with SIGTERM while clients keep requests coming on kept-alive connections: every
///   request sent before the signal gets its whole answer (none is reset), and the process exits 0.
@Suite("The process killed or stopped under load")
struct ProcessFaultTests {
    static let origin = "http://localhost:8080"

    @Test(.timeLimit(.minutes(3)))
    func aKilledServerKeepsEveryAcknowledgedSignUp() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("passkeyd.sqlite").path
        let limits = ["PASSKEYD_RATE_LIMIT_PER_IP": "1000000"]
        let server = try ServeBinaryTests.Server(
            database: database, environment: limits, origin: Self.origin)
        try await server.waitUntilReady()

        let record = PostgresOutageTests.Record()
        let load = Task { await PostgresOutageTests.load(server, record) }
        // Until a good number of sign-ups were acknowledged (bounded), then SIGKILL mid-traffic.
        for _ in 0..<100 where record.acknowledged.withLock({ $0.count }) < 150 { try await Task.sleep(for: .milliseconds(50)) }
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        record.stop.store(true, ordering: .relaxed)
        await load.value
        #expect(server.process.terminationReason == .uncaughtSignal)

        let integrity = try Self.integrityCheck(database)
        #expect(integrity == "ok", "PRAGMA integrity_check: \(integrity)")

        let restarted = try ServeBinaryTests.Server(
            database: database, environment: limits, origin: Self.origin)
        defer { restarted.stop() }
        try await restarted.waitUntilReady()
        let acknowledged = record.acknowledged.withLock { $0 }
        #expect(acknowledged.count >= 10, "too few sign-ups before the kill: \(acknowledged.count)")
        var lost: [String] = []
        for (name, credential) in acknowledged {
            var signingIn = credential
            let (status, body) = try await AdminCommandTests.signIn(
                restarted, origin: Self.origin, authenticator: SoftwareAuthenticator(), credential: &signingIn)
            if status != 200 { lost.append("\(name): \(status) \(body)") }
        }
        #expect(lost.isEmpty, "acknowledged sign-ups lost to SIGKILL: \(lost.prefix(5))")
        print("SIGKILL under sign-up load: \(acknowledged.count) acknowledged, \(lost.count) lost, integrity_check \(integrity)")
    }

    /// `PRAGMA integrity_check` through Python's sqlite3 module (no sqlite3 command needed).
    static func integrityCheck(_ path: String) throws -> String {
        let python = ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"] ?? "python3"
        let result = try PasskeyCLITests.run(
            URL(fileURLWithPath: "/usr/bin/env"),
            [
                python, "-c", "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])",
                path,
            ])
        guard result.status == 0 else { return "python failed: \(result.stderr)" }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Clients that each keep one connection alive and send requests back to back; SIGTERM lands
    /// among them. Each request is timed by when its last byte was written.
    @Test(.timeLimit(.minutes(2)))
    func aStoppingServerAnswersEveryRequestSentBeforeTheSignal() async throws {
        var lines: [String] = []
        for round in 0..<4 {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-drain-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let server = try ServeBinaryTests.Server(
                database: directory.appendingPathComponent("db.sqlite").path,
                environment: ["PASSKEYD_RATE_LIMIT_PER_IP": "1000000"], origin: Self.origin)
            try await server.waitUntilReady()
            let port = server.port
            let clients = (0..<8).map { _ in KeptAliveClient(port: port, origin: Self.origin) }
            let threads = clients.map { client in
                let thread = Thread { client.run() }
                thread.start()
                return thread
            }
            try await Task.sleep(for: .milliseconds(700 + 100 * round))
            let signalled = ContinuousClock.now
            kill(server.process.processIdentifier, SIGTERM)
            server.process.waitUntilExit()
            for client in clients { client.stop() }
            while threads.contains(where: { !$0.isFinished }) { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.process.terminationStatus == 0 && server.process.terminationReason == .exit)
            let outcomes = clients.flatMap { $0.outcomes.withLock { $0 } }
            let before = outcomes.filter { $0.sent < signalled }
            let failedBefore = before.filter { !$0.answered }
            let closest = failedBefore.map { signalled - $0.sent }.min()
            #expect(
                failedBefore.isEmpty,
                "round \(round): \(failedBefore.count) requests sent before SIGTERM got no answer (the nearest \(String(describing: closest)) before it)"
            )
            #expect(before.count > 50, "round \(round): only \(before.count) requests before the signal")
            let after = outcomes.filter { $0.sent >= signalled }
            lines.append(
                "round \(round): \(before.count) requests before SIGTERM, \(failedBefore.count) unanswered; \(after.count) after it (\(after.filter(\.answered).count) answered)"
            )
        }
        print("SIGTERM drain with kept-alive clients:\n  " + lines.joined(separator: "\n  "))
    }
}

/// One kept-alive HTTP/1.1 connection sending `GET /healthz` and `POST
/// /api/auth/authenticate/options` alternately, each as soon as the last is answered; after a
/// closed connection it opens a new one, until it cannot or is stopped.
final class KeptAliveClient: @unchecked Sendable {
    struct Outcome: Sendable {
        let sent: ContinuousClock.Instant
        let answered: Bool
    }
    let port: Int
    let origin: String
    let outcomes = Mutex<[Outcome]>([])
    private let stopped = Atomic<Bool>(false)

    init(port: Int, origin: String) {
        self.port = port
        self.origin = origin
    }

    func stop() { stopped.store(true, ordering: .relaxed) }

    func run() {
        var number = 0
        while !stopped.load(ordering: .relaxed) {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            guard connected else {
                close(fd)
                return  // the listener is gone
            }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer: [UInt8] = []
            while !stopped.load(ordering: .relaxed) {
                number += 1
                let request =
                    number % 2 == 0
                    ? "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    : "POST /api/auth/authenticate/options HTTP/1.1\r\nHost: localhost\r\nOrigin: \(origin)\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                let bytes = Array(request.utf8)
                let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
                let sent = ContinuousClock.now
                guard written == bytes.count else {
                    outcomes.withLock { $0.append(Outcome(sent: sent, answered: false)) }
                    break
                }
                let (answered, closes) = Self.readAnswer(fd, &buffer)
                outcomes.withLock { $0.append(Outcome(sent: sent, answered: answered)) }
                if !answered || closes { break }
            }
            close(fd)
        }
    }

    /// Reads one answer (its head and `Content-Length` body); whether it came whole, and
    /// whether the server said it closes the connection.
    static func readAnswer(_ fd: Int32, _ buffer: inout [UInt8]) -> (Bool, Bool) {
        var chunk = [UInt8](repeating: 0, count: 8192)
        while true {
            if let end = PlainHead.end(of: buffer) {
                let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                let length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if buffer.count >= end + length {
                    buffer.removeFirst(end + length)
                    return (true, head.contains("connection: close"))
                }
            }
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count <= 0 { return (false, true) }
            buffer += chunk[..<count]
        }
    }
}

enum PlainHead {
    /// Where an answer's head ends (after its blank line), if it is all there.
    static func end(of bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index + 4
        }
        return nil
    }
}
