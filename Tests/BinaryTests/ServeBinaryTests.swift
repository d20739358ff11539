import Foundation
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The real `passkeyd serve` binary on a free loopback port, over HTTP, as a user runs it.
@Suite("passkeyd serve over a real socket")
struct ServeBinaryTests {
    static var binary: URL {
        URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("passkeyd")
    }

    /// A port the kernel says is free right now, for a server that cannot listen on port 0
    /// itself (PostgreSQL). passkeyd servers listen on port 0 (``Server``); a port where nothing
    /// listens is ``ClosedPort``.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A loopback port where nothing listens, held for as long as this value lives: bound and
    /// never listening, so a connection is refused and no other test can take the port meanwhile.
    final class ClosedPort: @unchecked Sendable {  // its descriptor is only read and closed
        let port: Int
        private let fd: Int32

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw POSIXError(.EMFILE) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
            guard bound == 0 else {
                close(fd)
                throw POSIXError(.EADDRINUSE)
            }
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            port = Int(UInt16(bigEndian: address.sin_port))
            self.fd = fd
        }

        deinit { close(fd) }
    }

    /// A real `passkeyd serve`. It listens on port 0 unless told otherwise and reports the port
    /// the system gave it in its "passkeyd listening" log line, which ``waitUntilReady()`` reads:
    /// a port chosen by the test beforehand (bound, closed, handed over) can be taken by another
    /// parallel test in between.
    final class Server: @unchecked Sendable {  // its process is only started and stopped
        let process: SpawnedProcess
        private let requestedPort: Int
        private let bound = Mutex<Int?>(nil)
        /// The port it listens on: known once ``waitUntilReady()`` returned.
        var port: Int { bound.withLock { $0 } ?? requestedPort }
        /// The web origin it is configured with (what a browser page of it sends as Origin).
        let origin: String
        /// Where its standard output and error go.
        let log: URL
        private let ownsLog: Bool
        /// `database`: a SQLite file path, or a database URL. `log`: where its standard output and
        /// error go (by default a file of its own, removed by ``stop()``). `origin` defaults to
        /// `http://localhost:<port>` for a fixed port and `http://localhost:8080` for port 0 (the
        /// tests that craft WebAuthn answers name it themselves).
        init(port: Int = 0, database: String, environment extra: [String: String] = [:], origin: String? = nil, log: URL? = nil) throws {
            requestedPort = port
            self.origin = origin ?? "http://localhost:\(port == 0 ? 8080 : port)"
            ownsLog = log == nil
            self.log = log ?? FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-serve-\(UUID().uuidString).log")
            var environment = ProcessInfo.processInfo.environment
            environment["PASSKEYD_LISTEN"] = "127.0.0.1:\(port)"
            environment["PASSKEYD_ORIGINS"] = self.origin
            environment["PASSKEYD_CONFIG"] = nil
            environment["PASSKEYD_LOG_FORMAT"] = "json"
            // Password checks at scrypt cost 10 (cost 17 in a debug build is seconds of CPU per check).
            environment["PASSKEYD_PASSWORD_SCRYPT_COST"] = "10"
            environment.merge(extra) { $1 }
            let fd = open(self.log.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            defer { close(fd) }
            process = try SpawnedProcess(
                executable: ServeBinaryTests.binary.path,
                arguments: ["serve", "--database", database.contains("://") ? database : "sqlite://\(database)"], environment: environment,
                stdout: fd, stderr: fd)
        }

        /// The port in the server's "passkeyd listening" line, once it has written it.
        static func listeningPort(in log: String) -> Int? {
            for line in log.split(separator: "\n") where line.contains(#""passkeyd listening""#) {
                guard let range = line.range(of: #""address":"127.0.0.1:"#) else { continue }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }
            return nil
        }

        /// Until it has said which port it got and `/healthz` answers 200 there: at most 60 s (a
        /// debug build migrating and generating keys beside the whole parallel run). A server that
        /// exited or never got ready fails the test with its output.
        func waitUntilReady() async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if bound.withLock({ $0 }) == nil, let text = try? String(contentsOf: log, encoding: .utf8),
                    let port = Self.listeningPort(in: text)
                {
                    bound.withLock { $0 = port }
                }
                if let port = bound.withLock({ $0 }),
                    let (_, response) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/healthz")!),
                    (response as? HTTPURLResponse)?.statusCode == 200
                {
                    return
                }
                if !process.isRunning { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            throw ServerNotReady(running: process.isRunning, output: String(output.suffix(4000)))
        }

        struct ServerNotReady: Error, CustomStringConvertible {
            let running: Bool
            let output: String
            var description: String { "passkeyd serve \(running ? "not ready after 60 s" : "exited before it was ready"):\n\(output)" }
        }

        /// Stateless like an app with a bearer token: no cookie jar (cookies ignore ports, so a shared
        /// jar would carry one test's session into another's server).
        static let session: URLSession = {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.httpCookieStorage = nil
            configuration.httpShouldSetCookies = false
            configuration.httpCookieAcceptPolicy = .never
            // Redirects are answers to look at (OpenID Connect), never followed.
            return URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
        }()

        /// The last `lines` lines of the server's log, for a failing expectation's message (the log
        /// itself is removed when the server stops).
        func logTail(_ lines: Int = 40) -> String {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
        }

        func stop() {
            process.signal(SIGTERM)  // graceful shutdown
            process.waitUntilExit()
            if ownsLog { try? FileManager.default.removeItem(at: log) }
        }

        func call(_ method: String, _ path: String, json: Data? = nil, token: String? = nil, headers: [String: String] = [:]) async throws
            -> (Int, JSONValue)
        {
            let (status, body, _) = try await send(method, path, json: json, token: token, headers: headers)
            return (status, body)
        }

        func send(_ method: String, _ path: String, json: Data? = nil, token: String? = nil, headers extra: [String: String] = [:])
            async throws -> (
                Int, JSONValue, [String: String]
            )
        {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
            request.httpMethod = method
            request.httpBody = json

            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.setValue(origin, forHTTPHeaderField: "Origin")
            if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
            for (name, value) in extra { request.setValue(value, forHTTPHeaderField: name) }
            let (data, response) = try await Self.session.data(for: request)
            let http = response as? HTTPURLResponse
            var headers: [String: String] = [:]
            for (key, value) in http?.allHeaderFields ?? [:] { headers["\(key)"] = "\(value)" }
            return (http?.statusCode ?? 0, (try? JSONReader.parse(Array(data))) ?? .null, headers)
        }
    }

    struct Wrapped<C: Encodable>: Encodable { let credential: C }

    @Test func theReferenceIOSAppWorksAgainstTheRealServer() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-compat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try Server(database: directory.appendingPathComponent("p.sqlite").path)
        defer { server.stop() }
        try await server.waitUntilReady()
        let origin = server.origin
        var authenticator = SoftwareAuthenticator(seed: Array("ios-app".utf8))

        let (status, signup) = try await server.call("GET", "/signup?username=app-user")
        #expect(status == 200)
        let (options, userId) = try #require(ReferenceApps.creationOptions(fromSignup: signup))
        var (registration, credential) = try authenticator.register(options: options, origin: origin)
        let (made, madeBody) = try await server.call(
            "POST", "/makeCredential?userId=\(userId)", json: Data(ReferenceApps.iOSBody(registration, userId: userId)))
        #expect(made == 200 && madeBody == .object([:]), "\(madeBody)")

        let (_, requestJSON) = try await server.call("GET", "/authenticate?username=app-user")
        let request = try #require(ReferenceApps.requestOptions(from: requestJSON))
        let assertion = try authenticator.authenticate(options: request, origin: origin, credential: &credential)
        let (signedIn, body) = try await server.call(
            "POST", "/authenticate?username=app-user", json: Data(ReferenceApps.iOSBody(assertion)))
        #expect(signedIn == 200, "\(body)")
        guard case .string(let token)? = body["token"] else {
            Issue.record("no token")
            return
        }
        let (session, _) = try await server.call("GET", "/api/auth/session", token: token)
        #expect(session == 200)
        _ = registration
    }

    @Test func signUpAndSignInSurviveARestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let database = directory.appendingPathComponent("passkeyd.sqlite").path
        var authenticator = SoftwareAuthenticator(seed: Array("serve".utf8))

        var server = try Server(database: database)
        try await server.waitUntilReady()
        let origin = server.origin
        let (status, optionsJSON) = try await server.call("POST", "/api/auth/register/options", json: Data(#"{"username":"ada"}"#.utf8))
        #expect(status == 200)
        let options = try JSONDecoder().decode(PublicKeyCredentialCreationOptionsJSON.self, from: JSONEncoder().encode(optionsJSON))
        var (registration, credential) = try authenticator.register(options: options, origin: origin)
        let (registered, signUp) = try await server.call(
            "POST", "/api/auth/register/verify", json: JSONEncoder().encode(Wrapped(credential: registration)))
        #expect(registered == 200, "\(signUp)")
        guard case .string(let token)? = signUp["token"] else {
            Issue.record("no token")
            server.stop()
            return
        }

        func signIn() async throws -> (Int, JSONValue) {
            let (_, requestJSON) = try await server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
            let request = try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: JSONEncoder().encode(requestJSON))
            let assertion = try authenticator.authenticate(options: request, origin: origin, credential: &credential)
            return try await server.call(
                "POST", "/api/auth/authenticate/verify", json: JSONEncoder().encode(Wrapped(credential: assertion)))
        }
        #expect(try await signIn().0 == 200)
        server.stop()

        // A new process on the same database: the account, passkey, counter and session are there.
        server = try Server(database: database, origin: origin)
        try await server.waitUntilReady()
        defer { server.stop() }
        let (sessionStatus, session) = try await server.call("GET", "/api/auth/session", token: token)
        #expect(sessionStatus == 200 && session["user"]?["username"] == .string("ada"))
        let (again, verdict) = try await signIn()
        #expect(again == 200 && verdict["user"]?["username"] == .string("ada"), "\(verdict)")
        let (_, passkeys) = try await server.call("GET", "/api/auth/passkeys", token: token)
        guard case .array(let list)? = passkeys["passkeys"] else {
            Issue.record("no passkeys")
            return
        }
        #expect(list.count == 1)
    }
}

/// Hands a redirect back as the response instead of following it.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
