import Foundation
import Testing
import WebAuthnTesting

/// The `passkey` client CLI against a real `passkeyd serve`, as a newcomer would use it.
@Suite("passkey CLI against a running server")
struct PasskeyCLITests {
    static var binary: URL { ServeBinaryTests.binary.deletingLastPathComponent().appendingPathComponent("passkey") }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        /// Still running after its timeout, and killed.
        var timedOut = false
    }

    static func passkey(_ arguments: [String], timeout: Duration? = nil) throws -> Result {
        try run(binary, arguments, timeout: timeout)
    }

    /// Runs one of the package's executables to completion.
    static func run(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], timeout: Duration? = nil) throws
        -> Result
    {
        let result = try Subprocess.run(
            executable, arguments, environment: environment.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(environment) { $1 },
            timeout: timeout)
        return Result(status: result.status, stdout: result.stdout, stderr: result.stderr, timedOut: result.timedOut)
    }

    @Test func registerSignInAndListAgainstARealServer() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkey-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServeBinaryTests.Server(database: directory.appendingPathComponent("db.sqlite").path)
        try await server.waitUntilReady()
        let port = server.port
        let store = directory.appendingPathComponent("vault/passkeys.json").path
        let common = ["--server", "http://localhost:\(port)", "--origin", server.origin, "--store", store]

        let register = try Self.passkey(["register", "--username", "ada"] + common)
        #expect(register.status == 0, "\(register.stderr)")
        #expect(register.stdout.contains("Registered a ES256 passkey for ada") && register.stdout.contains("Signed in as ada"))
        let attributes = try FileManager.default.attributesOfItem(atPath: store)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        let discoverable = try Self.passkey(["sign-in"] + common)
        #expect(
            discoverable.status == 0 && discoverable.stdout.contains("Signed in as ada") && discoverable.stdout.contains("counter 1"),
            "\(discoverable.stderr)")
        let named = try Self.passkey(["sign-in", "--username", "ada"] + common)
        #expect(named.status == 0 && named.stdout.contains("counter 2"))
        let added = try Self.passkey(["register", "--add", "--key-type", "ed25519"] + common)
        #expect(added.status == 0 && added.stdout.contains("EdDSA"), "\(added.stderr)")
        let list = try Self.passkey(["list"] + common)
        #expect(list.status == 0 && list.stdout.contains("has 2 passkey(s)"), "\(list.stdout) \(list.stderr)")

        // Without --store the vault lives under $HOME when it is set.
        let home = directory.appendingPathComponent("home")
        let atHome = try Self.run(
            Self.binary, ["register", "--username", "bea", "--server", "http://localhost:\(port)", "--origin", server.origin],
            environment: ["HOME": home.path])
        #expect(atHome.status == 0, "\(atHome.stderr)")
        #expect(FileManager.default.fileExists(atPath: home.appendingPathComponent(".passkey/passkeys.json").path))

        // Clear messages and non-zero exits when things go wrong.
        let taken = try Self.passkey(["register", "--username", "ada"] + common)
        #expect(taken.status == 1 && taken.stderr.contains("username_taken"))
        let stranger = try Self.passkey(["sign-in", "--username", "nobody"] + common)
        #expect(stranger.status == 1 && stranger.stderr.contains("no passkey"), "\(stranger.stderr)")
        let wrongPath = try Self.passkey([
            "sign-in", "--server", "http://localhost:\(port)/not-passkeyd", "--origin", server.origin, "--store", store,
        ])
        #expect(wrongPath.status == 1 && wrongPath.stderr.contains("not_found"), "\(wrongPath.stderr)")
        server.stop()
        let down = try Self.passkey(["sign-in"] + common)
        #expect(down.status == 1 && down.stderr.contains("cannot reach"), "\(down.stderr)")
        let usage = try Self.passkey(["register", "--server", "ftp://example.com", "--store", store])
        #expect(usage.status == 2)
    }

    /// A server that asks every registration for PRF (`PASSKEYD_PRF`): the terminal passkey and the
    /// load generator evaluate it at creation, as Chromium does, and post what an app posts (no
    /// PRF output: the server would refuse it with `prf_output_posted`).
    @Test func registerAndLoadAgainstAServerThatAsksForPRF() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkey-prf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServeBinaryTests.Server(
            database: directory.appendingPathComponent("db.sqlite").path,
            environment: ["PASSKEYD_PRF": "true", "PASSKEYD_RATE_LIMIT_PER_IP": "1000000"])
        defer { server.stop() }
        try await server.waitUntilReady()
        let port = server.port
        let common = [
            "--server", "http://localhost:\(port)", "--origin", server.origin, "--store",
            directory.appendingPathComponent("vault.json").path,
        ]
        let register = try Self.passkey(["register", "--username", "ada"] + common)
        #expect(register.status == 0, "\(register.stderr)")
        let signIn = try Self.passkey(["sign-in", "--username", "ada"] + common)
        #expect(signIn.status == 0, "\(signIn.stderr)")
        let list = try Self.passkey(["list"] + common)
        #expect(list.status == 0 && list.stdout.contains("has 1 passkey(s)"), "\(list.stdout) \(list.stderr)")
        let load = try Self.passkey([
            "load", "--server", "http://localhost:\(port)", "--origin", server.origin, "--users", "2", "--duration", "1", "--mode",
            "sign-up", "--json",
        ])
        #expect(load.status == 0, "\(load.stderr)")
        #expect(load.stdout.contains(#""errors":{}"#), "\(load.stdout)")
    }

    /// A real server for the load generator, its database in a folder of its own (removed when
    /// `body` returns), with `perIP` requests per rate-limit window for one client address.
    private static func withLoadServer(
        perIP: String, window: String = "60", _ body: (_ server: ServeBinaryTests.Server) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkey-load-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServeBinaryTests.Server(
            database: directory.appendingPathComponent("db.sqlite").path,
            environment: ["PASSKEYD_RATE_LIMIT_PER_IP": perIP, "PASSKEYD_RATE_LIMIT_WINDOW": window])
        defer { server.stop() }
        try await server.waitUntilReady()
        try await body(server)
    }

    @Test func theLoadGeneratorRunsBoundedCeremoniesAndReports() async throws {
        // Every limit on (failure counts, connection caps and timeouts); one client address runs every
        // simulated user, so its per-address budget is that of a busy proxy.
        try await Self.withLoadServer(perIP: "1000000") { server in try Self.loadRuns(server) }
    }

    private static func loadRuns(_ server: ServeBinaryTests.Server) throws {
        let port = server.port
        // One thread drives both users with poll, then two threads one user each.
        for (mode, threads) in [("sign-in", "1"), ("sign-up", "1"), ("sign-in", "2")] {
            let result = try Self.passkey([
                "load", "--server", "http://localhost:\(port)", "--origin", server.origin, "--users", "2", "--duration", "1", "--mode",
                mode,
                "--threads", threads,
                "--json",
            ])
            // A failure names what the server saw too: a request that waited out the client's 30 s
            // timeout (a commit lost in SQLite's write groups, fixed in 3851674) shows there.
            #expect(result.status == 0, "\(mode): \(result.stderr)\n--- server log:\n\(server.logTail())")
            let report = try JSONDecoder().decode([String: JSONValueLite].self, from: Data(result.stdout.utf8))
            #expect(
                (report["ceremonies"]?.number ?? 0) > 0 && report["errors"] == .object([:]),
                "\(result.stdout)\n--- server log:\n\(server.logTail())")
            #expect((report["p99Milliseconds"]?.number ?? 0) > 0)
        }
        let bad = try Self.passkey(["load", "--server", "http://localhost:\(port)", "--users", "0"])
        #expect(bad.status == 2)
        #expect(try Self.passkey(["load", "--server", "http://localhost:\(port)", "--threads", "0"]).status == 2)
        // Its own HTTP/1.1 client speaks plain http beside the server; nothing listening is said so.
        #expect(try Self.passkey(["load", "--server", "https://localhost:\(port)"]).status == 2)
        let closed = try ServeBinaryTests.ClosedPort()
        let nobody = try Self.passkey(["load", "--server", "http://127.0.0.1:\(closed.port)", "--users", "1"])
        #expect(nobody.status != 0 && nobody.stderr.contains("cannot reach"), "\(nobody.stderr)")
    }

    /// A user the server refuses with `Retry-After` (its per-address limit) waits as it is told
    /// instead of asking again at once: a handful of refusals, not thousands, and the rate is
    /// given over the whole run even when every user stopped early.
    @Test func theLoadGeneratorHonoursRetryAfter() async throws {
        // Twelve requests in a 600 s window: the two users' set-up (four) and four ceremonies,
        // then each is refused with a Retry-After past the run's end, however slow the machine.
        try await Self.withLoadServer(perIP: "12", window: "600") { server in try Self.refusedLoadWaits(server) }
    }

    private static func refusedLoadWaits(_ server: ServeBinaryTests.Server) throws {
        let result = try Self.passkey([
            "load", "--server", "http://localhost:\(server.port)", "--origin", server.origin, "--users", "2", "--duration", "2", "--json",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let report = try JSONDecoder().decode([String: JSONValueLite].self, from: Data(result.stdout.utf8))
        let refused = if case .object(let errors)? = report["errors"] { errors["rate_limited"] ?? 0 } else { 0 }
        #expect(refused >= 1 && refused <= 4, "\(result.stdout)")
        #expect((report["ceremonies"]?.number ?? 0) > 0, "\(result.stdout)")
        #expect((report["seconds"]?.number ?? 0) >= 2, "\(result.stdout)")
    }
}

/// `passkey load` against servers that do not keep connections alive: an HTTP/1.0 proxy (it
/// closes after every answer, sends no `Connection` header) and an HTTP/1.1 one that says
/// `Connection: close` and closes, both in front of a real passkeyd. Every ceremony completes
/// on new connections, and the run ends within its duration plus a few seconds (it used to
/// write the next request on the closed socket and wait out a 30 s receive timeout, forever).
@Suite("passkey load against servers that close connections")
struct ClosingServerLoadTests {
    /// A reverse proxy that answers each request on its own connection and then closes it.
    static let proxy = #"""
        import http.client, sys
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        port_file, backend, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        class Proxy(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0" if mode == "1.0" else "HTTP/1.1"
            def log_message(self, *args): pass
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream = http.client.HTTPConnection("127.0.0.1", backend, timeout=10)
                upstream.request("POST", self.path, body, {k: v for k, v in self.headers.items() if k.lower() != "connection"})
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name in ("Content-Type", "Retry-After"):
                    if answer.getheader(name): self.send_header(name, answer.getheader(name))
                if mode == "close":
                    self.send_header("Content-Length", str(len(data)))
                    self.send_header("Connection", "close")
                self.close_connection = True
                self.end_headers()
                self.wfile.write(data)
                upstream.close()
        server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
        with open(port_file + ".part", "w") as f: f.write(str(server.server_address[1]))
        import os; os.rename(port_file + ".part", port_file)
        server.serve_forever()
        """#

    @Test(arguments: ["1.0", "close"])
    func theLoadGeneratorFinishesAgainstAServerThatClosesEveryConnection(_ mode: String) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkey-closing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try ServeBinaryTests.Server(
            database: directory.appendingPathComponent("db.sqlite").path, environment: ["PASSKEYD_RATE_LIMIT_PER_IP": "1000000"])
        defer { server.stop() }
        try await server.waitUntilReady()

        let script = directory.appendingPathComponent("proxy.py")
        try Self.proxy.write(to: script, atomically: true, encoding: .utf8)
        // The proxy listens on port 0 and writes the port it got to this file.
        let portFile = directory.appendingPathComponent("proxy.port")
        // posix_spawn and waitpid: Foundation's Process can miss a child's exit and wait forever.
        let python = try Self.start([
            "/usr/bin/env", ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"] ?? "python3", script.path, portFile.path,
            "\(server.port)", mode,
        ])
        defer {
            kill(python, SIGKILL)
            var status: Int32 = 0
            while waitpid(python, &status, 0) == -1 && errno == EINTR {}
        }
        // Wait (bounded: 30 s, a Python start on a loaded machine) for the proxy to listen.
        let deadline = ContinuousClock.now + .seconds(30)
        var proxyPort: Int?
        while proxyPort == nil && ContinuousClock.now < deadline {
            proxyPort = (try? String(contentsOf: portFile, encoding: .utf8)).flatMap { Int($0) }
            if proxyPort == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        let listeningPort = try #require(proxyPort, "the proxy did not listen within 30 s")
        #expect(Self.listening(listeningPort))

        for loadMode in ["sign-in", "sign-up"] {
            // A hang is what this guards against: the run (two users, 2 s) is killed after a
            // minute, far past what it takes even on a loaded machine, and that fails the test.
            let result = try PasskeyCLITests.passkey(
                [
                    "load", "--server", "http://localhost:\(listeningPort)", "--origin", server.origin, "--users", "2", "--duration", "2",
                    "--mode", loadMode, "--json",
                ], timeout: .seconds(60))
            #expect(!result.timedOut, "\(mode) \(loadMode): still running after 60 s")
            #expect(result.status == 0, "\(mode) \(loadMode): \(result.stderr)")
            let report = try JSONDecoder().decode([String: JSONValueLite].self, from: Data(result.stdout.utf8))
            #expect((report["ceremonies"]?.number ?? 0) >= 2, "\(mode) \(loadMode): \(result.stdout)")
            #expect(report["errors"] == .object([:]), "\(mode) \(loadMode): \(result.stdout)")
        }
    }

    /// Starts `command` in the background (its output discarded); its process id.
    static func start(_ command: [String]) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var arguments = command.map { strdup($0) } + [nil]
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, &arguments, environ)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
        return pid
    }

    static func listening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// Just enough JSON to read the load report.
enum JSONValueLite: Decodable, Equatable {
    case number(Double)
    case string(String)
    case object([String: Int])
    case other
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let n = try? container.decode(Double.self) {
            self = .number(n)
        } else if let s = try? container.decode(String.self) {
            self = .string(s)
        } else if let o = try? container.decode([String: Int].self) {
            self = .object(o)
        } else {
            self = .other
        }
    }
    var number: Double? {
        if case .number(let n) = self { return n }
        return nil
    }
}
