import Foundation
import Testing
import WebAuthn
import WebAuthnTesting

/// OpenTelemetry traces from the real `passkeyd serve`: spans exported over OTLP/HTTP
/// (protobuf) to a local receiver (`scripts/otlp_receiver.py`, parsing each
/// ExportTraceServiceRequest with `opentelemetry-proto`), which also takes the webhook deliveries.
/// Needs a Python with `opentelemetry-proto` (`PASSKEYD_PYTHON`, set by `./scripts/test`); skipped
/// without one unless `PASSKEYD_REQUIRE_ORACLE=1`.
@Suite("OpenTelemetry traces", .serialized)
struct TracingTests {
    typealias Server = ServeBinaryTests.Server
    typealias Wrapped = ServeBinaryTests.Wrapped

    /// The caller's trace: the sign-in's request span must be its child.
    static let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let callerSpanID = "00f067aa0ba902b7"

    @Test func aSignInIsOneTreeOfSpansUnderTheCallersTraceparentAndItsWebhookCarriesTheTrace() async throws {
        guard let receiver = try Receiver.start() else { return }
        defer { receiver.stop() }
        let world = try World(
            environment: [
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)", "OTEL_SERVICE_NAME": "passkeyd-test",
                "OTEL_BSP_SCHEDULE_DELAY": "100",
            ], webhook: "http://127.0.0.1:\(receiver.port)/webhook")
        defer { world.stop() }
        try await world.server.waitUntilReady()
        var (authenticator, credential) = try await world.signUp()

        let (_, requestJSON) = try await world.server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
        let request = try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: JSONEncoder().encode(requestJSON))
        let assertion = try authenticator.authenticate(options: request, origin: world.server.origin, credential: &credential)
        let (status, body) = try await world.server.call(
            "POST", "/api/auth/authenticate/verify", json: JSONEncoder().encode(Wrapped(credential: assertion)),
            headers: ["traceparent": "00-\(Self.traceID)-\(Self.callerSpanID)-01"])
        #expect(status == 200, "\(body)")

        // The tree: the request span under the caller's span, everything else under it.
        let records = try await receiver.waitFor { records in
            records.contains { $0["kind"] as? String == "webhook" && ($0["body"] as? String ?? "").contains("sign_in") }
                && records.contains { $0["name"] as? String == "POST /api/auth/authenticate/verify" }
        }
        let spans = records.filter { $0["kind"] as? String == "span" && $0["trace_id"] as? String == Self.traceID }
        let root = try #require(spans.first { $0["name"] as? String == "POST /api/auth/authenticate/verify" }, "\(records)")
        #expect(root["parent_span_id"] as? String == Self.callerSpanID)
        #expect(root["span_kind"] as? Int == 2)  // SERVER
        #expect(root["service"] as? String == "passkeyd-test")
        let attributes = root["attributes"] as? [String: Any] ?? [:]
        #expect(attributes["http.route"] as? String == "/api/auth/authenticate/verify")
        #expect(attributes["http.response.status_code"] as? Int == 200)
        let rootID = try #require(root["span_id"] as? String)
        let parents = Dictionary(
            spans.compactMap { span in (span["span_id"] as? String).map { ($0, span["parent_span_id"] as? String ?? "") } }
        ) {
            first, _ in first
        }
        func descends(_ span: [String: Any]) -> Bool {
            var id = span["parent_span_id"] as? String ?? ""
            for _ in 0..<16 {
                if id == rootID { return true }
                guard let parent = parents[id] else { return false }
                id = parent
            }
            return false
        }
        let verification = spans.filter { $0["name"] as? String == "webauthn.verify_authentication" }
        #expect(verification.count == 1 && verification.allSatisfy(descends), "\(spans)")
        let queries = spans.filter { $0["name"] as? String == "db.query" }
        #expect(queries.count >= 2 && queries.allSatisfy(descends), "\(spans)")
        #expect(queries.allSatisfy { ($0["attributes"] as? [String: Any])?["db.system"] as? String == "sqlite" })
        let transactions = spans.filter { $0["name"] as? String == "db.transaction" }
        #expect(!transactions.isEmpty && transactions.allSatisfy(descends), "\(spans)")
        // A statement summary, never a value.
        let summaries = queries.compactMap { ($0["attributes"] as? [String: Any])?["db.query.summary"] as? String }
        #expect(summaries.contains { $0.hasPrefix("SELECT ") }, "\(summaries)")

        // The webhook delivery the sign-in caused: a traceparent of the same trace.
        let delivery = try #require(
            records.first { $0["kind"] as? String == "webhook" && ($0["body"] as? String ?? "").contains("\"sign_in\"") })
        let traceParent = try #require((delivery["headers"] as? [String: Any])?["traceparent"] as? String)
        #expect(traceParent.split(separator: "-").count == 4 && traceParent.split(separator: "-")[1] == Self.traceID[...], "\(traceParent)")

        // The request's JSON log line carries the trace and its span.
        world.server.stop()
        let line = try #require(
            world.logLines().first { $0["message"] as? String == "request" && $0["path"] as? String == "/api/auth/authenticate/verify" })
        #expect(line["trace_id"] as? String == Self.traceID)
        #expect(line["span_id"] as? String == rootID)
    }

    @Test func aRequestWithoutTraceparentIsARootSpanAndTheSignUpVerificationIsItsChild() async throws {
        guard let receiver = try Receiver.start() else { return }
        defer { receiver.stop() }
        let world = try World(environment: [
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:\(receiver.port)/v1/traces", "OTEL_BSP_SCHEDULE_DELAY": "100",
        ])
        defer { world.stop() }
        try await world.server.waitUntilReady()
        _ = try await world.signUp()
        let records = try await receiver.waitFor { records in
            records.contains { $0["name"] as? String == "POST /api/auth/register/verify" }
        }
        let root = try #require(records.first { $0["name"] as? String == "POST /api/auth/register/verify" })
        #expect(root["parent_span_id"] as? String == "")
        #expect(root["service"] as? String == "passkeyd")
        let verification = try #require(records.first { $0["name"] as? String == "webauthn.verify_registration" })
        #expect(verification["trace_id"] as? String == root["trace_id"] as? String)
        #expect(verification["parent_span_id"] as? String == root["span_id"] as? String)
    }

    @Test(arguments: [["OTEL_TRACES_EXPORTER": "none"], ["OTEL_SDK_DISABLED": "true"], [:]])
    func tracingIsOffUnlessAnEndpointIsNamedAndNotDisabled(_ switches: [String: String]) async throws {
        var environment = switches
        if !switches.isEmpty { environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9" }
        let world = try World(environment: environment)
        defer { world.stop() }
        try await world.server.waitUntilReady()
        let (status, _) = try await world.server.call(
            "POST", "/api/auth/authenticate/options", json: Data("{}".utf8),
            headers: ["traceparent": "00-\(Self.traceID)-\(Self.callerSpanID)-01"])
        #expect(status == 200)
        world.server.stop()
        let lines = try world.logLines()
        #expect(lines.contains { $0["message"] as? String == "passkeyd listening" && $0["tracing"] as? String == "off" })
        let request = try #require(lines.first { $0["message"] as? String == "request" })
        #expect(request["trace_id"] == nil && request["span_id"] == nil)
    }

    /// Issue 42, 13: the collector's key in OTEL_EXPORTER_OTLP_HEADERS goes to the collector and
    /// nowhere else. swift-otel logs each setting it reads, value and all.
    @Test func theCollectorsKeyIsSentWithTheSpansAndNeverLogged() async throws {
        guard let receiver = try Receiver.start() else { return }
        defer { receiver.stop() }
        let world = try World(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)", "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_EXPORTER_OTLP_HEADERS": "x-collector-key=SECRETVALUE123", "OTEL_LOG_LEVEL": "debug",
        ])
        defer { world.stop() }
        try await world.server.waitUntilReady()
        let (status, _) = try await world.server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
        #expect(status == 200)
        let records = try await receiver.waitFor { records in
            records.contains { $0["name"] as? String == "POST /api/auth/authenticate/options" }
        }
        let exports = records.filter { $0["kind"] as? String == "export" }
        #expect(
            !exports.isEmpty && exports.allSatisfy { ($0["headers"] as? [String: Any])?["x-collector-key"] as? String == "SECRETVALUE123" })
        world.server.stop()
        let output = try String(contentsOf: world.log, encoding: .utf8)
        #expect(!output.contains("SECRETVALUE123"), "\(output)")
        // swift-otel still says what it read, without the value.
        let read = try world.logLines().filter {
            $0["message"] as? String == "Configuration updated from environment"
                && ($0["environment_key"] as? String ?? "").hasSuffix("_HEADERS")
        }
        #expect(!read.isEmpty && read.allSatisfy { $0["environment_value"] as? String == "[redacted]" }, "\(output)")
    }

    /// Issue 42, 13: a database URL's password and a collector URL's password are in no line of
    /// a start that fails on them (the database is refused), a raw `/` or `#` in the password too
    /// (URLComponents then reads no password).
    @Test(arguments: [
        "postgres://passkeyd:DBSECRET789@127.0.0.1:1/passkeyd", "postgres://passkeyd:DB/SECRET789@127.0.0.1:1/passkeyd",
        "postgres://passkeyd:DB#SECRET789@127.0.0.1:1/passkeyd",
    ])
    func passwordsInURLsAreNeverLogged(_ database: String) throws {
        var environment = ProcessInfo.processInfo.environment
        for name in environment.keys where name.hasPrefix("OTEL_") || name.hasPrefix("PASSKEYD_") { environment[name] = nil }
        environment["PASSKEYD_LOG_FORMAT"] = "json"
        environment["PASSKEYD_PASSWORD_SCRYPT_COST"] = "10"
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://collector:OTLPSECRET456@127.0.0.1:9"
        environment["OTEL_EXPORTER_OTLP_TRACES_HEADERS"] = "authorization=Basic%20SECRETVALUE123"
        // A key passed as a URL's user name, with no password.
        environment["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] = "http://TOKENUSER321@127.0.0.1:9/v1/metrics"
        let result = try Subprocess.run(
            ServeBinaryTests.binary, ["serve", "--database", database, "--listen", "127.0.0.1:0"],
            environment: environment, timeout: .seconds(120))
        #expect(result.status != 0 && !result.timedOut)
        let output = result.stdout + result.stderr
        #expect(output.contains("database"), "\(output)")
        for secret in ["SECRET789", "OTLPSECRET456", "SECRETVALUE123", "TOKENUSER321"] {
            #expect(!output.contains(secret), "\(secret): \(output)")
        }
    }

    /// A propagator swift-otel cannot run (it would stop the process with `fatalError`) is
    /// refused at start, with a message naming the variable; `tracecontext` and `none` start.
    @Test(arguments: ["b3", "tracecontext,baggage", "jaeger", "nonsense"])
    func anUnsupportedPropagatorStopsTheStartWithAMessage(_ propagators: String) throws {
        var environment = ProcessInfo.processInfo.environment
        for name in environment.keys where name.hasPrefix("OTEL_") || name.hasPrefix("PASSKEYD_") { environment[name] = nil }
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
        environment["OTEL_PROPAGATORS"] = propagators
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-otel-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let result = try Subprocess.run(
            ServeBinaryTests.binary, ["serve", "--database", "sqlite://\(directory.path)/db.sqlite", "--listen", "127.0.0.1:0"],
            environment: environment, timeout: .seconds(60))
        #expect(result.status != 0 && !result.timedOut, "\(result.status): \(result.stderr)")
        #expect(result.stderr.contains("OTEL_PROPAGATORS") && result.stderr.contains("not supported"), "\(result.stderr)")
    }

    /// Issue 42, 13: passkeyd's own start and stop lines name no secret, at debug level too
    /// (ServiceLifecycle logs each service it starts, the one holding the configuration among
    /// them): not the metrics token, a webhook's secret or its receiver URL's token.
    @Test func startAndStopLinesNameNoSecretSetting() async throws {
        let world = try World(
            environment: ["LOG_LEVEL": "trace", "PASSKEYD_METRICS_TOKEN": "METRICSSECRET0123456789"],
            webhook: "https://hooks.example.com/webhook?token=QUERYSECRET")
        defer { world.stop() }
        try await world.server.waitUntilReady()
        world.server.stop()
        let output = try String(contentsOf: world.log, encoding: .utf8)
        #expect(output.contains("Starting service"), "\(output)")
        for secret in ["METRICSSECRET", "QUERYSECRET", World.webhookSecret] {
            #expect(!output.contains(secret), "\(secret): \(output)")
        }
    }

    /// Issue 42, 14: a webhook receiver's URL may hold its secret in its query, path or user
    /// information; no span of its delivery records any of them.
    @Test func webhookSpansNameTheReceiversHostAndNothingElseOfItsURL() async throws {
        guard let receiver = try Receiver.start() else { return }
        defer { receiver.stop() }
        let world = try World(
            environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)", "OTEL_BSP_SCHEDULE_DELAY": "100"],
            webhook: "http://hook:USERSECRET@127.0.0.1:\(receiver.port)/webhook/PATHSECRET?token=QUERYSECRET")
        defer { world.stop() }
        try await world.server.waitUntilReady()
        try await world.signIn()
        let records = try await receiver.waitFor { records in
            records.contains { $0["kind"] as? String == "webhook" && ($0["body"] as? String ?? "").contains("sign_in") }
                && records.contains { $0["name"] as? String == "webhook.deliver" } && records.contains { $0["span_kind"] as? Int == 3 }
        }
        let spans = records.filter { $0["kind"] as? String == "span" }
        for span in spans {
            let text = String(decoding: try JSONSerialization.data(withJSONObject: span), as: UTF8.self)
            for secret in ["USERSECRET", "PATHSECRET", "QUERYSECRET"] { #expect(!text.contains(secret), "\(text)") }
        }
        // The client span: under the delivery's, the host and port, and the traceparent it sent.
        let deliver = try #require(spans.first { $0["name"] as? String == "webhook.deliver" })
        let client = try #require(
            spans.first { $0["span_kind"] as? Int == 3 && $0["parent_span_id"] as? String == deliver["span_id"] as? String })
        let attributes = client["attributes"] as? [String: Any] ?? [:]
        #expect(attributes["server.address"] as? String == "127.0.0.1" && attributes["server.port"] as? Int == receiver.port)
        #expect(attributes["http.response.status_code"] as? Int == 200)
        let delivery = try #require(
            records.first { $0["kind"] as? String == "webhook" && ($0["body"] as? String ?? "").contains("sign_in") })
        let traceParent = try #require((delivery["headers"] as? [String: Any])?["traceparent"] as? String)
        #expect(traceParent.split(separator: "-").dropFirst(2).first.map(String.init) == client["span_id"] as? String, "\(traceParent)")
    }

    /// Issue 42, 15: a caller's tracestate is held to W3C Trace Context's limits: 1,200 members
    /// (13 KB) are dropped, the traceparent kept; a normal one stays on the spans.
    @Test(arguments: [
        ((0..<1200).map { "vendor\($0)=value-\($0)" }.joined(separator: ","), ""),
        // swift-otel writes the list back with ", " between members.
        ("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"),
    ])
    func theCallersTracestateIsHeldToW3CLimits(_ traceState: String, _ exported: String) async throws {
        guard let receiver = try Receiver.start() else { return }
        defer { receiver.stop() }
        let world = try World(environment: [
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:\(receiver.port)", "OTEL_BSP_SCHEDULE_DELAY": "100",
        ])
        defer { world.stop() }
        try await world.server.waitUntilReady()
        let (status, _) = try await world.server.call(
            "POST", "/api/auth/authenticate/options", json: Data("{}".utf8),
            headers: ["traceparent": "00-\(Self.traceID)-\(Self.callerSpanID)-01", "tracestate": traceState])
        #expect(status == 200)
        let records = try await receiver.waitFor { records in
            records.contains { $0["name"] as? String == "POST /api/auth/authenticate/options" }
        }
        let spans = records.filter { $0["kind"] as? String == "span" && $0["trace_id"] as? String == Self.traceID }
        let root = try #require(spans.first { $0["name"] as? String == "POST /api/auth/authenticate/options" })
        #expect(root["parent_span_id"] as? String == Self.callerSpanID)
        #expect(spans.allSatisfy { $0["trace_state"] as? String == exported }, "\(spans.map { ($0["name"], $0["trace_state"]) })")
    }

    /// A server on a fresh SQLite file, its JSON log in a file, optionally with a webhook endpoint.
    final class World: Sendable {
        static let webhookSecret = "a-webhook-secret-of-24-bytes-or-more"
        let directory: URL
        let server: Server
        var log: URL { directory.appendingPathComponent("passkeyd.log") }

        init(environment: [String: String], webhook: String? = nil) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-tracing-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            var environment = environment
            for name in ProcessInfo.processInfo.environment.keys where name.hasPrefix("OTEL_") && environment[name] == nil {
                environment[name] = ""
            }
            if let webhook {
                let config = directory.appendingPathComponent("passkeyd.json")
                let settings =
                    #"{"webhooks": [{"url": "\#(webhook)", "secret": "\#(Self.webhookSecret)", "events": ["sign_in"]}]}"#
                try Data(settings.utf8).write(to: config)
                environment["PASSKEYD_CONFIG"] = config.path
                environment["PASSKEYD_WEBHOOK_ALLOW_PRIVATE"] = "1"
            }
            server = try Server(
                database: directory.appendingPathComponent("p.sqlite").path,
                environment: environment,
                log: directory.appendingPathComponent("passkeyd.log"))
        }

        func stop() {
            if server.process.isRunning { server.stop() }
            try? FileManager.default.removeItem(at: directory)
        }

        /// Signs up `ada` with a fresh software passkey.
        func signUp() async throws -> (SoftwareAuthenticator, SoftwareCredential) {
            var authenticator = SoftwareAuthenticator(seed: Array("tracing".utf8))
            let (_, optionsJSON) = try await server.call("POST", "/api/auth/register/options", json: Data(#"{"username":"ada"}"#.utf8))
            let options = try JSONDecoder().decode(PublicKeyCredentialCreationOptionsJSON.self, from: JSONEncoder().encode(optionsJSON))
            let (registration, credential) = try authenticator.register(options: options, origin: server.origin)
            let (status, body) = try await server.call(
                "POST", "/api/auth/register/verify", json: JSONEncoder().encode(Wrapped(credential: registration)))
            #expect(status == 200, "\(body)")
            return (authenticator, credential)
        }

        /// Signs `ada` up and in (the sign-in's event goes to the webhook endpoint).
        func signIn() async throws {
            var (authenticator, credential) = try await signUp()
            let (_, requestJSON) = try await server.call("POST", "/api/auth/authenticate/options", json: Data("{}".utf8))
            let request = try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: JSONEncoder().encode(requestJSON))
            let assertion = try authenticator.authenticate(options: request, origin: server.origin, credential: &credential)
            let (status, body) = try await server.call(
                "POST", "/api/auth/authenticate/verify", json: JSONEncoder().encode(Wrapped(credential: assertion)))
            #expect(status == 200, "\(body)")
        }

        func logLines() throws -> [[String: Any]] {
            try String(contentsOf: log, encoding: .utf8).split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }
    }

    /// `scripts/otlp_receiver.py` on a free port, writing what it receives to a file.
    final class Receiver: @unchecked Sendable {  // its process is only started and stopped
        let process: SpawnedProcess
        let port: Int
        let output: URL

        static var python: String? {
            ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"]
                ?? {
                    let venv = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../.venv/bin/python")
                        .path
                    return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
                }()
        }

        /// nil (the test skipped) when no Python here has opentelemetry-proto.
        static func start() throws -> Receiver? {
            guard let python, (try? run(python, ["-c", "import opentelemetry.proto.collector.trace.v1.trace_service_pb2"])) == 0 else {
                if ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_ORACLE"] == "1" {
                    Issue.record("no Python with opentelemetry-proto (PASSKEYD_PYTHON): ./scripts/test installs it")
                }
                return nil
            }
            return try Receiver(python: python)
        }

        private static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
            try SpawnedProcess(executable: executable, arguments: arguments).waitUntilExit()
        }

        private init(python: String) throws {
            output = FileManager.default.temporaryDirectory.appendingPathComponent("otlp-\(UUID().uuidString).jsonl")
            _ = FileManager.default.createFile(atPath: output.path, contents: nil)
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
                "../../scripts/otlp_receiver.py")
            // It listens on port 0 and writes the port it got beside its output.
            process = try SpawnedProcess(executable: python, arguments: [script.standardizedFileURL.path, "0", output.path])
            // The exporter drops a batch it cannot connect for: the server starts only once the
            // receiver listens (bounded: 30 s, a Python start beside the whole parallel run).
            let portFile = URL(fileURLWithPath: output.path + ".port")
            let deadline = ContinuousClock.now + .seconds(30)
            var listening: Int?
            while listening == nil && process.isRunning && ContinuousClock.now < deadline {
                listening = (try? String(contentsOf: portFile, encoding: .utf8)).flatMap { Int($0) }
                if listening == nil { usleep(50_000) }
            }
            try? FileManager.default.removeItem(at: portFile)
            guard let listening else { throw POSIXError(.ETIMEDOUT) }
            port = listening
        }

        func stop() {
            process.signal(SIGKILL)  // nothing to flush: every line is written as it comes
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: output)
        }

        func records() -> [[String: Any]] {
            ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        /// What it has received once `done` holds of it (within 15 s).
        func waitFor(_ done: ([[String: Any]]) -> Bool) async throws -> [[String: Any]] {
            for _ in 0..<150 {
                let records = records()
                if done(records) { return records }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("the receiver did not get what was expected: \(records())")
            return records()
        }
    }
}
