import Foundation
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

    /// A port the kernel says is free right now.
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

    final class Server: @unchecked Sendable {  // its process is only started and stopped
        let process: SpawnedProcess
        let port: Int
        /// The web origin it is configured with (what a browser page of it sends as Origin).
        let origin: String
        /// `database`: a SQLite file path, or a database URL.
        init(port: Int, database: String, environment extra: [String: String] = [:], origin: String? = nil, log: URL? = nil) throws {
            self.port = port
            self.origin = origin ?? "http://localhost:\(port)"
            var environment = ProcessInfo.processInfo.environment
            environment["PASSKEYD_LISTEN"] = "127.0.0.1:\(port)"
            environment["PASSKEYD_ORIGINS"] = self.origin
            environment["PASSKEYD_CONFIG"] = nil
            environment["PASSKEYD_LOG_FORMAT"] = "json"
            // The decoy bcrypt hash is made at start; cost 12 in a debug build is seconds of CPU per server.
            environment["PASSKEYD_PASSWORD_SCRYPT_COST"] = "10"
            environment.merge(extra) { $1 }
            var logFD: Int32?
            if let log {
                let fd = open(log.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
                guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                logFD = fd
            }
            defer { logFD.map { _ = close($0) } }
            process = try SpawnedProcess(
                executable: ServeBinaryTests.binary.path,
                arguments: ["serve", "--database", database.contains("://") ? database : "sqlite://\(database)"], environment: environment,
                stderr: logFD)
        }

        /// Until `/healthz` answers 200: at most 60 s (a debug build migrating and generating keys
        /// beside the whole parallel run).
        func waitUntilReady() async throws {
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                if let (_, response) = try? await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/healthz")!),
                    (response as? HTTPURLResponse)?.statusCode == 200
                {
                    return
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw POSIXError(.ETIMEDOUT)
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

        func stop() {
            process.signal(SIGTERM)  // graceful shutdown
            process.waitUntilExit()
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
        let port = try Self.freePort()
        let origin = "http://localhost:\(port)"
        let server = try Server(port: port, database: directory.appendingPathComponent("p.sqlite").path)
        defer { server.stop() }
        try await server.waitUntilReady()
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
        let port = try Self.freePort()
        let origin = "http://localhost:\(port)"
        var authenticator = SoftwareAuthenticator(seed: Array("serve".utf8))

        var server = try Server(port: port, database: database)
        try await server.waitUntilReady()
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
        server = try Server(port: port, database: database)
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
