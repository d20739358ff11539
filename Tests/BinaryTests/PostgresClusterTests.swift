import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStoreTesting
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Several `passkeyd serve` processes on one PostgreSQL, and PostgreSQL going away under a
/// running server. Run by scripts/test, which starts PostgreSQL (and requires these to run).
@Suite("Several instances on PostgreSQL, and database faults", .serialized)
struct PostgresClusterTests {
    static let origin = "http://localhost:8080"
    static var required: Bool { ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_POSTGRES"] == "1" }
    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }
    static var postgresInstalled: Bool {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).contains {
            FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\($0)/bin/pg_ctl")
        }
    }

    static func server(_ database: String, _ extra: [String: String] = [:], log: URL? = nil) async throws -> ServeBinaryTests.Server {
        let server = try ServeBinaryTests.Server(
            database: database, environment: extra,
            origin: origin, log: log)
        try await server.waitUntilReady()
        return server
    }

    static func requestOptions(_ server: ServeBinaryTests.Server) async throws -> PublicKeyCredentialRequestOptionsJSON {
        let (status, json) = try await server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
        guard status == 200 else { throw POSIXError(.EPROTO) }
        return try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: JSONEncoder().encode(json))
    }

    @Test(.enabled(if: TestDatabase.postgresURL != nil || required))
    func aCeremonyBegunOnOneInstanceFinishesOnAnotherAndARaceSucceedsOnce() async throws {
        let database = try await TestDatabase.makeURL(.postgres)
        let limits = ["PASSKEYD_RATE_LIMIT_PER_IP": "1000"]
        let a = try await Self.server(database, limits), b = try await Self.server(database, limits)
        defer {
            a.stop()
            b.stop()
        }
        var authenticator = SoftwareAuthenticator(seed: Array("cluster".utf8))

        // Sign up: options from A, verify on B.
        let (_, creation) = try await a.call("POST", "/api/auth/register/options", json: Data(#"{"username":"ada"}"#.utf8))
        let options = try JSONDecoder().decode(PublicKeyCredentialCreationOptionsJSON.self, from: JSONEncoder().encode(creation))
        var (registration, credential) = try authenticator.register(options: options, origin: Self.origin)
        let (registered, signUp) = try await b.call(
            "POST", "/api/auth/register/verify",
            json: JSONEncoder().encode(ServeBinaryTests.Wrapped(credential: registration)))
        #expect(registered == 200, "\(signUp)")
        guard case .string(let token)? = signUp["token"] else {
            Issue.record("no token")
            return
        }
        #expect(try await a.call("GET", "/api/auth/session", token: token).0 == 200)

        // Sign in: options from B, verify on A.
        var assertion = try authenticator.authenticate(
            options: try await Self.requestOptions(b), origin: Self.origin, credential: &credential)
        #expect(
            try await a.call(
                "POST", "/api/auth/authenticate/verify",
                json: JSONEncoder().encode(ServeBinaryTests.Wrapped(credential: assertion))
            ).0 == 200)

        // The same assertion sent to both instances at once: exactly one succeeds, ten times over.
        for _ in 0..<10 {
            assertion = try authenticator.authenticate(
                options: try await Self.requestOptions(a), origin: Self.origin, credential: &credential)
            let body = try JSONEncoder().encode(ServeBinaryTests.Wrapped(credential: assertion))
            async let first = a.call("POST", "/api/auth/authenticate/verify", json: body)
            async let second = b.call("POST", "/api/auth/authenticate/verify", json: body)
            let results = try await [first, second]
            #expect(results.map(\.0).sorted() == [200, 400], "\(results)")
            #expect(results.contains { $0.1["error"]?["code"] == .string("challenge_unknown") })
        }
        // Sign-ins with fresh challenges on both at once: the counter never goes backwards, both succeed or one reports the race.
        let (_, passkeys) = try await b.call("GET", "/api/auth/passkeys", token: token)
        if case .array(let list)? = passkeys["passkeys"] { #expect(list.count == 1) } else { Issue.record("no passkeys") }
    }

    /// Apps that trust passkeyd, across two real instances on one PostgreSQL: a token minted on
    /// one is introspected on the other, an OpenID Connect code issued by one is exchanged at the
    /// other, and the webhook outbox both dispatchers work on delivers every event exactly once.
    @Test(.enabled(if: TestDatabase.postgresURL != nil || required), .timeLimit(.minutes(3)))
    func tokensCodesAndWebhooksAcrossInstances() async throws {
        let database = try await TestDatabase.makeURL(.postgres)
        let received = Mutex<[String]>([])
        let router = Router()
        router.post("hook") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            received.withLock { $0.append(request.headers[HTTPField.Name("webhook-id")!] ?? "") }
            return Response(status: .noContent)
        }
        var logger = Logger(label: "receiver")
        logger.logLevel = .error
        let receiver = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        try await receiver.test(.live) { client in
            let port = try #require(client.port)
            // The receiver is on loopback: the operator's switch lets webhooks reach it.
            let limits = ["PASSKEYD_RATE_LIMIT_PER_IP": "1000", "PASSKEYD_WEBHOOK_ALLOW_PRIVATE": "1"]
            let a = try await Self.server(database, limits), b = try await Self.server(database, limits)
            defer {
                a.stop()
                b.stop()
            }
            func admin(_ arguments: [String]) throws -> String {
                let result = try PasskeyCLITests.run(
                    ServeBinaryTests.binary, ["admin"] + arguments + ["--database", database],
                    environment: ["PASSKEYD_CONFIG": "", "PASSKEYD_ORIGINS": Self.origin, "PASSKEYD_WEBHOOK_ALLOW_PRIVATE": "1"])
                #expect(result.status == 0, "\(arguments): \(result.stderr)")
                return result.stdout
            }
            _ = try admin(["webhooks", "add", "http://127.0.0.1:\(port)/hook", "--events", "sign_up", "sign_in", "oidc_token_issued"])
            let key = try admin(["api-keys", "create", "backend", "--scopes", "introspect"]).trimmingCharacters(in: .whitespacesAndNewlines)
            let client = Dictionary(
                uniqueKeysWithValues: try admin(["clients", "add", "App", "--first-party", "--redirect-uri", "https://app.example.com/cb"])
                    .split(separator: "\n").map { line in
                        let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
                        return (parts[0], parts.count > 1 ? parts[1] : "")
                    })

            var authenticator = SoftwareAuthenticator(seed: Array("cluster-apps".utf8))
            let (session, credential0) = try await AdminCommandTests.signUp(a, "ida", origin: Self.origin, authenticator: &authenticator)
            var credential = credential0
            let (signedIn, answer) = try await AdminCommandTests.signIn(
                b, origin: Self.origin, authenticator: authenticator, credential: &credential)
            #expect(signedIn == 200)
            guard case .string(let access)? = answer["accessToken"] else {
                Issue.record("no access token: \(answer)")
                return
            }
            // Minted by B, introspected on A.
            let (status, introspection) = try await a.call(
                "POST", "/api/auth/introspect", json: Data("token=\(access)".utf8),
                headers: ["Authorization": "Bearer \(key)", "Content-Type": "application/x-www-form-urlencoded"])
            #expect(status == 200 && introspection["active"] == .bool(true), "\(introspection)")

            // An authorization code from A, exchanged at B.
            let verifier = Base64URLBytes((0..<40).map { _ in UInt8.random(in: 0...255) }).base64URL
            let challenge = Base64URLBytes(Array(SHA256.hash(data: Array(verifier.utf8)))).base64URL
            let (_, _, headers) = try await a.send(
                "GET",
                "/oauth2/authorize?client_id=\(client["client_id"] ?? "")&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb&response_type=code&scope=openid&code_challenge=\(challenge)&code_challenge_method=S256&state=s",
                token: session)
            let location = headers.first { $0.key.lowercased() == "location" }?.value ?? ""
            let code = URLComponents(string: location)?.queryItems?.first { $0.name == "code" }?.value ?? ""
            #expect(!code.isEmpty, "\(location)")
            let basic = Data("\(client["client_id"] ?? ""):\(client["client_secret"] ?? "")".utf8).base64EncodedString()
            let (exchanged, tokens) = try await b.call(
                "POST", "/oauth2/token",
                json: Data(
                    "grant_type=authorization_code&code=\(code)&redirect_uri=https%3A%2F%2Fapp.example.com%2Fcb&code_verifier=\(verifier)"
                        .utf8),
                headers: ["Authorization": "Basic \(basic)", "Content-Type": "application/x-www-form-urlencoded"])
            #expect(exchanged == 200 && tokens["id_token"] != nil, "\(tokens)")

            // sign_up, sign_in, oidc_token_issued: three events, each delivered once by one of the two.
            for _ in 0..<40 where received.withLock({ $0.count }) < 3 { try await Task.sleep(for: .milliseconds(500)) }
            try await Task.sleep(for: .seconds(2))  // a duplicate would have arrived by now
            let ids = received.withLock { $0 }
            #expect(ids.count == 3 && Set(ids).count == 3, "\(ids)")
        }
    }

    @Test(.enabled(if: TestDatabase.postgresURL != nil || required))
    func rateLimitsAreSharedAcrossInstances() async throws {
        // Windows start at multiples of 600 s: calls that straddle a start are counted in two
        // windows, so a run that did starts again on a fresh database (counters at zero).
        for attempt in 1...3 {
            let database = try await TestDatabase.makeURL(.postgres)
            let limits = ["PASSKEYD_RATE_LIMIT_PER_IP": "6", "PASSKEYD_RATE_LIMIT_WINDOW": "600"]
            let a = try await Self.server(database, limits), b = try await Self.server(database, limits)
            defer {
                a.stop()
                b.stop()
            }
            let window = { Int(Date().timeIntervalSince1970 / 600) }
            let started = window()
            var statuses: [Int] = []
            for n in 0..<8 {
                statuses.append(try await (n % 2 == 0 ? a : b).call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8)).0)
            }
            if window() != started && attempt < 3 { continue }
            #expect(statuses == [200, 200, 200, 200, 200, 200, 429, 429])
            return
        }
    }

    /// PostgreSQL stops under a running server: requests fail with 503 and a code, /readyz fails,
    /// a SIGTERM still lets the request in flight finish; PostgreSQL comes back: service resumes,
    /// nothing lost or duplicated.
    @Test(.enabled(if: postgresInstalled || required), .timeLimit(.minutes(3)))
    func theServerSurvivesPostgreSQLGoingAwayAndComingBack() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-pg-fault-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let script = Self.repository.appendingPathComponent("scripts/postgres")
        let pgPort = try ServeBinaryTests.freePort()
        func postgres(_ arguments: [String]) throws -> PasskeyCLITests.Result {
            try Self.spawn(["/bin/bash", script.path] + arguments)
        }
        let started = try postgres(["start", directory.path, "\(pgPort)"])
        #expect(started.status == 0, "\(started.stderr)")
        defer {
            _ = try? postgres(["stop", directory.path])
            try? FileManager.default.removeItem(at: directory)
        }
        let database = started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let server = try await Self.server(database)
        defer { server.stop() }
        let second = try await Self.server(database)
        var authenticator = SoftwareAuthenticator(seed: Array("fault".utf8))
        let (token, credential) = try await AdminCommandTests.signUp(server, "ada", origin: Self.origin, authenticator: &authenticator)
        var signingIn = credential

        #expect(try postgres(["stop", directory.path]).status == 0)
        let (down, body, headers) = try await server.send("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
        #expect(down == 503 && body["error"]?["code"] == .string("database_unavailable"), "\(body)")
        #expect(headers["Retry-After"] != nil)
        #expect(try await server.call("GET", "/readyz").0 == 503)
        #expect(try await server.call("GET", "/healthz").0 == 200)

        // SIGTERM with a request in flight (it waits on the database): the request is answered, the process exits cleanly.
        async let inFlight = second.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
        try await Task.sleep(for: .milliseconds(500))
        second.process.terminate()
        let answered = try await inFlight
        #expect(answered.0 == 503)
        second.process.waitUntilExit()
        #expect(second.process.terminationStatus == 0)

        // PostgreSQL is back: the same server process recovers by itself.
        #expect(try postgres(["start", directory.path, "\(pgPort)"]).status == 0)
        var ready = false
        for _ in 0..<80 where !ready {
            ready = try await server.call("GET", "/readyz").0 == 200
            if !ready { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(ready)
        let (signedIn, verdict) = try await AdminCommandTests.signIn(
            server, origin: Self.origin, authenticator: authenticator, credential: &signingIn)
        #expect(signedIn == 200, "\(verdict)")
        let (_, passkeys) = try await server.call("GET", "/api/auth/passkeys", token: token)
        if case .array(let list)? = passkeys["passkeys"] { #expect(list.count == 1) } else { Issue.record("no passkeys: \(passkeys)") }
    }

    /// Runs a command with posix_spawn and waitpid. Foundation's Process does not notice the exit of
    /// `scripts/postgres` (its `pg_ctl` leaves a daemon behind through `runuser`) and waits forever.
    static func spawn(_ command: [String]) throws -> PasskeyCLITests.Result {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("spawn-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, output.path + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        defer {
            try? FileManager.default.removeItem(atPath: output.path + ".out")
            try? FileManager.default.removeItem(atPath: output.path + ".err")
        }
        var arguments = command.map { strdup($0) } + [nil]
        defer { arguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, &arguments, environ)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EIO) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let read = { (suffix: String) in (try? String(contentsOfFile: output.path + suffix, encoding: .utf8)) ?? "" }
        return PasskeyCLITests.Result(
            status: (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f),
            stdout: read(".out"), stderr: read(".err"))
    }

    @Test(.timeLimit(.minutes(1)))
    func startingWithAnUnreachableDatabaseFailsClearly() throws {
        let closed = try ServeBinaryTests.ClosedPort()
        let nobody = closed.port
        let result = try PasskeyCLITests.run(
            ServeBinaryTests.binary,
            [
                "serve", "--listen", "127.0.0.1:0", "--database",
                "postgres://app:s3cret@127.0.0.1:\(nobody)/passkeyd?sslmode=disable",
            ],
            environment: ["PASSKEYD_CONFIG": "", "PASSKEYD_LOG_FORMAT": "text"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("cannot use the database at postgres://app:***@127.0.0.1:\(nobody)/passkeyd"), "\(result.stderr)")
        #expect(!result.stderr.contains("s3cret"))
    }
}
