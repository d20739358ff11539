import Foundation
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// PostgreSQL taken away under concurrent sign-up load, the way production loses it: stopped
/// with `-m immediate` (a crash or a failover) for 1, 3, 12 and 60 seconds, and every backend
/// killed with `pg_terminate_backend` (a proxy resetting connections). 16 clients sign up
/// throughout. What the clients and `/readyz` see is measured against what the issue asks:
/// - the process never dies;
/// - once the server knows the database is down (`/readyz` says so, within 1 s), every request
///   is answered within 1 s: 503 `database_unavailable` with `Retry-After`;
/// - `/readyz` is ready within 2 s of the database's return, and sign-ups succeed within 5 s,
///   without a restart;
/// - every sign-up that was acknowledged (200) signs in afterwards.
/// PostgreSQL runs with `synchronous_commit=on` here: with it off (the other tests' setting) an
/// immediate stop loses the last commits it had acknowledged, which would be the database's
/// loss, not passkeyd's.
@Suite("PostgreSQL outages under load", .serialized)
struct PostgresOutageTests {
    static let origin = "http://localhost:8080"
    static let clients = 16

    struct Sample: Sendable {
        let started: ContinuousClock.Instant
        let elapsed: Duration
        let status: Int
        let code: String?
        let retryAfter: Bool
    }

    /// What the load and the `/readyz` poller saw.
    final class Record: Sendable {
        let samples = Mutex<[Sample]>([])
        let ready = Mutex<[(at: ContinuousClock.Instant, status: Int)]>([])
        let acknowledged = Mutex<[(name: String, credential: SoftwareCredential)]>([])
        let stop = Atomic<Bool>(false)
    }

    @Test(.enabled(if: PostgresClusterTests.postgresInstalled || PostgresClusterTests.required), .timeLimit(.minutes(6)))
    func outagesUnderLoadNeverCrashTheServerAndLoseNothing() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-outage-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let cluster = try StoppablePostgres(directory: directory)
        defer {
            cluster.stop()
            try? FileManager.default.removeItem(at: directory)
        }
        let database = cluster.url
        let server = try await PostgresClusterTests.server(
            database, ["PASSKEYD_RATE_LIMIT_PER_IP": "1000000"], log: directory.appendingPathComponent("passkeyd.log"))
        defer { server.stop() }

        let record = Record()
        let load = Task { await Self.load(server, record) }
        let poller = Task { await Self.pollReadiness(server, record) }
        try await Task.sleep(for: .seconds(2))

        var lines: [String] = []
        for seconds in [1, 3, 12, 60] {
            let stopping = ContinuousClock.now
            let stopped = try cluster.run(["stop", directory.path, "immediate"])
            #expect(stopped.status == 0, "\(stopped.stderr)")
            try await Task.sleep(for: .seconds(seconds))
            let restarted = try cluster.run(["start", directory.path, "\(cluster.port)"])
            #expect(restarted.status == 0, "\(restarted.stderr)")
            let back = ContinuousClock.now
            let line = try await Self.judge(record, outage: stopping, back: back, name: "stopped \(seconds) s")
            lines.append(line)
            #expect(server.process.isRunning, "passkeyd died during a \(seconds) s outage")
        }
        // A proxy resetting every connection: the database stays up, its backends are killed.
        let killing = ContinuousClock.now
        let killed = try cluster.run([
            "sql", directory.path, "\(cluster.port)",
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
        ])
        #expect(killed.status == 0, "\(killed.stderr)")
        let recovered = try await Self.firstSignUp(record, after: killing, within: .seconds(5))
        lines.append(
            "backends terminated (\(killed.stdout.trimmingCharacters(in: .whitespacesAndNewlines))): sign-ups again after \(recovered.map { "\($0)" } ?? "never")"
        )
        #expect(recovered != nil, "no sign-up succeeded within 5 s of pg_terminate_backend")
        try await Task.sleep(for: .seconds(1))

        record.stop.store(true, ordering: .relaxed)
        await load.value
        await poller.value
        #expect(server.process.isRunning, "passkeyd died")

        // Nothing acknowledged is lost: every acknowledged sign-up signs in.
        let acknowledged = record.acknowledged.withLock { $0 }
        let lost = await withTaskGroup(of: [String].self) { group in
            for slice in 0..<8 {
                group.addTask {
                    var failures: [String] = []
                    for (name, credential) in acknowledged.enumerated().filter({ $0.offset % 8 == slice }).map(\.element) {
                        var signingIn = credential
                        let result = try? await AdminCommandTests.signIn(
                            server, origin: Self.origin, authenticator: SoftwareAuthenticator(), credential: &signingIn)
                        if result?.0 != 200 { failures.append("\(name): \(String(describing: result))") }
                    }
                    return failures
                }
            }
            return await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(lost.isEmpty, "acknowledged sign-ups that cannot sign in: \(lost.prefix(5))")
        let samples = record.samples.withLock { $0 }
        lines.append(
            "\(samples.count) requests from \(Self.clients) clients, \(acknowledged.count) sign-ups acknowledged, \(lost.count) lost, crashes 0"
        )
        print("PostgreSQL outages under load:\n  " + lines.joined(separator: "\n  "))
    }

    /// Checks one outage against the promises; returns its figures as a line.
    static func judge(_ record: Record, outage: ContinuousClock.Instant, back: ContinuousClock.Instant, name: String) async throws -> String
    {
        let recovered = try await firstSignUp(record, after: back, within: .seconds(5))
        try await Task.sleep(for: .seconds(2))
        let ready = record.ready.withLock { $0 }
        let knownDown = ready.first { $0.at >= outage && $0.status == 503 }?.at
        let readyAgain = ready.first { $0.at >= back && $0.status == 200 }?.at
        let samples = record.samples.withLock { $0 }
        let whileDown = samples.filter { sample in
            guard let knownDown else { return false }
            return sample.started >= knownDown && sample.started + sample.elapsed <= back
        }
        let slowest = whileDown.map(\.elapsed).max() ?? .zero
        let refused = whileDown.filter { $0.status == 503 }
        let unexplained = whileDown.filter { $0.status != 503 && $0.status != 200 }
        #expect(
            knownDown != nil && knownDown! - outage <= .seconds(1),
            "\(name): /readyz said not ready after \(knownDown.map { $0 - outage }.map { "\($0)" } ?? "never")")
        #expect(slowest <= .seconds(1), "\(name): a request took \(slowest) while the database was known down")
        #expect(refused.allSatisfy { $0.code == "database_unavailable" && $0.retryAfter }, "\(name): a 503 without its code or Retry-After")
        #expect(unexplained.isEmpty, "\(name): statuses \(Set(unexplained.map(\.status)))")
        #expect(
            readyAgain != nil && readyAgain! - back <= .seconds(2),
            "\(name): ready again after \(readyAgain.map { $0 - back }.map { "\($0)" } ?? "never")")
        #expect(recovered != nil, "\(name): no sign-up succeeded within 5 s of the database's return")
        func ms(_ duration: Duration?) -> String {
            guard let duration else { return "never" }
            return "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000) ms"
        }
        return
            "\(name): /readyz not ready after \(ms(knownDown.map { $0 - outage })), \(whileDown.count) requests while known down (max \(ms(slowest)), \(refused.count) × 503), ready again \(ms(readyAgain.map { $0 - back })) after the return, sign-ups after \(ms(recovered))"
    }

    /// How long after `after` the first sign-up succeeded (waiting up to `within`).
    static func firstSignUp(_ record: Record, after: ContinuousClock.Instant, within: Duration) async throws -> Duration? {
        let deadline = after + within
        while ContinuousClock.now < deadline + .milliseconds(500) {
            let first = record.samples.withLock { samples in
                samples.first { $0.started >= after && $0.status == 200 && $0.code == "signed_up" }
            }
            if let first { return first.started + first.elapsed - after }
            try await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }

    /// 16 clients signing up new accounts until told to stop; a refused request is tried again
    /// after 100 ms (not `Retry-After`: the test measures answers during the outage).
    static func load(_ server: ServeBinaryTests.Server, _ record: Record) async {
        await withTaskGroup(of: Void.self) { group in
            for client in 0..<clients {
                group.addTask {
                    var authenticator = SoftwareAuthenticator()
                    var round = 0
                    while !record.stop.load(ordering: .relaxed) {
                        round += 1
                        let name = "load\(client)x\(round)"
                        let begun = ContinuousClock.now
                        guard
                            let (status, body, headers) = try? await server.send(
                                "POST", "/api/auth/register/options", json: Data(#"{"username":"\#(name)"}"#.utf8))
                        else { continue }
                        record.samples.withLock { $0.append(sample(begun, status, body, headers)) }
                        guard status == 200,
                            let options = try? JSONDecoder().decode(
                                PublicKeyCredentialCreationOptionsJSON.self, from: JSONEncoder().encode(body)),
                            let (registration, credential) = try? authenticator.register(options: options, origin: origin),
                            let json = try? JSONEncoder().encode(ServeBinaryTests.Wrapped(credential: registration))
                        else {
                            try? await Task.sleep(for: .milliseconds(100))
                            continue
                        }
                        let verifying = ContinuousClock.now
                        guard
                            let (verified, answer, verifyHeaders) = try? await server.send("POST", "/api/auth/register/verify", json: json)
                        else { continue }
                        var result = sample(verifying, verified, answer, verifyHeaders)
                        if verified == 200 {
                            record.acknowledged.withLock { $0.append((name, credential)) }
                            result = Sample(
                                started: result.started, elapsed: result.elapsed, status: 200, code: "signed_up", retryAfter: false)
                        } else {
                            try? await Task.sleep(for: .milliseconds(100))
                        }
                        record.samples.withLock { $0.append(result) }
                    }
                }
            }
        }
    }

    static func sample(_ begun: ContinuousClock.Instant, _ status: Int, _ body: JSONValue, _ headers: [String: String]) -> Sample {
        let code: String? = if case .string(let code)? = body["error"]?["code"] { code } else { nil }
        return Sample(
            started: begun, elapsed: ContinuousClock.now - begun, status: status, code: code,
            retryAfter: headers.keys.contains { $0.lowercased() == "retry-after" })
    }

    /// `/readyz` every 100 ms until told to stop (each status with the time it was answered).
    static func pollReadiness(_ server: ServeBinaryTests.Server, _ record: Record) async {
        while !record.stop.load(ordering: .relaxed) {
            let status = (try? await server.call("GET", "/readyz").0) ?? 0
            let answered = ContinuousClock.now
            record.ready.withLock { $0.append((answered, status)) }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }
}

/// A throwaway PostgreSQL the test stops and starts itself (`scripts/postgres` in `directory`,
/// on a free port), with `synchronous_commit=on`: with it off (the other tests' setting) an
/// immediate stop loses the last commits it had acknowledged, which would be the database's
/// loss, not passkeyd's.
struct StoppablePostgres: Sendable {
    let directory: URL
    let port: Int
    /// Its connection URL.
    let url: String

    /// Starts it; throws with its error output when it does not start.
    init(directory: URL) throws {
        self.directory = directory
        port = try ServeBinaryTests.freePort()
        let started = try Self.script(["start", directory.path, "\(port)"])
        guard started.status == 0 else { throw StartFailed(output: started.stderr) }
        url = started.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    struct StartFailed: Error, CustomStringConvertible {
        let output: String
        var description: String { "PostgreSQL did not start: \(output)" }
    }

    /// `scripts/postgres` with `arguments` (`start DIR PORT`, `stop DIR [MODE]`, `sql DIR PORT SQL`).
    func run(_ arguments: [String]) throws -> PasskeyCLITests.Result { try Self.script(arguments) }

    private static func script(_ arguments: [String]) throws -> PasskeyCLITests.Result {
        let script = PostgresClusterTests.repository.appendingPathComponent("scripts/postgres")
        return try PostgresClusterTests.spawn(["/usr/bin/env", "PASSKEYD_PG_SYNCHRONOUS_COMMIT=on", "/bin/bash", script.path] + arguments)
    }

    /// Stops it (a fast shutdown) at the end of a test.
    func stop() { _ = try? run(["stop", directory.path]) }
}
