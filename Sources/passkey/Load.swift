import ArgumentParser
import Foundation
import Histogram
import WebAuthn
import WebAuthnTesting

/// A bounded load generator: N simulated users, each with its own passkey, running whole
/// ceremonies (options -> sign -> verify) in a loop for a fixed time against one server.
struct Load: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Run N concurrent users doing full sign-ins (or sign-ups) for a bounded time; report rate, errors and latency percentiles.")

    enum Mode: String, ExpressibleByArgument {
        case signIn = "sign-in"
        case signUp = "sign-up"
    }

    @OptionGroup var options: ClientOptions
    @Option(help: "Concurrent simulated users.") var users: Int = 16
    @Option(help: "Seconds to run (after registering the users).") var duration: Double = 10
    @Option(help: "sign-in or sign-up.") var mode: Mode = .signIn
    @Option(help: "Threads driving the users (each runs its share of them with poll).") var threads: Int = 1
    @Option(help: "Prefix for generated usernames (default: a random one).") var prefix: String?
    @Flag(help: "Print the summary as JSON.") var json = false

    struct Report: Encodable {
        var mode: String
        var users: Int
        var seconds: Double
        var ceremonies: Int
        var perSecond: Double
        var errors: [String: Int]
        var p50Milliseconds: Double, p90Milliseconds: Double, p99Milliseconds: Double, p999Milliseconds: Double, maxMilliseconds: Double
    }

    /// One simulated user's results.
    struct Tally: Sendable {
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var ok = 0
        var errors: [String: Int] = [:]
    }

    func run() async throws {
        guard users >= 1, users <= 256 else { throw ValidationError("--users must be 1...256") }
        guard duration > 0, duration <= 600 else { throw ValidationError("--duration must be 0...600 seconds") }
        guard threads >= 1, threads <= 64 else { throw ValidationError("--threads must be 1...64") }
        let url = try options.serverURL()
        guard url.scheme == "http" else { throw ValidationError("load runs beside the server: --server must be an http:// URL") }
        let origin = try options.claimedOrigin()
        let prefix = self.prefix ?? "load-" + String(UUID().uuidString.prefix(8)).lowercased()
        let mode = self.mode
        let milliseconds = Int(duration * 1000)
        let threads = min(self.threads, users)
        let users = self.users

        // Each thread drives its share of the users, each user one kept-alive connection, with
        // `poll` (non-blocking I/O: the cheapest client there is, and one thread per user would
        // put sixteen threads beside the server's two on a small machine, each answer a thread
        // wake-up and a preemption of the server). In sign-in mode every user first gets an
        // account and a passkey; the clock starts when all of them have one.
        let ready = DispatchGroup()
        let start = Locked<ContinuousClock.Instant?>(nil)
        let failures = Locked<[String]>([])
        let results = Locked<[Tally]>([])
        let finished = DispatchGroup()
        // Every thread is counted before any starts, so none sets the clock before the last
        // has its users ready.
        for _ in 0..<threads { ready.enter() }
        // A server that resets a connection fails a write with EPIPE instead of killing the
        // process.
        signal(SIGPIPE, SIG_IGN)
        for thread in 0..<threads {
            finished.enter()
            let worker = Thread {
                defer { finished.leave() }
                var loop = LoadLoop(url: url, origin: origin, mode: mode, prefix: prefix)
                for index in stride(from: thread, to: users, by: threads) {
                    do {
                        try loop.add(index: index)
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
                ready.leave()
                ready.wait()
                let deadline =
                    start.withLock { begun in
                        if begun == nil { begun = ContinuousClock.now }
                        return begun!
                    } + .milliseconds(milliseconds)
                let tallies = loop.run(until: deadline)
                results.withLock { $0 += tallies }
            }
            worker.stackSize = 1 << 20
            worker.start()
        }
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                finished.wait()
                continuation.resume()
            }
        }
        if let failure = failures.withLock({ $0.first }) { throw Failure("could not prepare the users: \(failure)") }
        let tallies = results.withLock { $0 }
        let began = start.withLock { $0 } ?? ContinuousClock.now
        let elapsed = ContinuousClock.now - began
        // Users that stopped early (told to come back after the end, or left with no connection)
        // do not shorten the run the rate is given over.
        let seconds = max(duration, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var errors: [String: Int] = [:]
        var ok = 0
        for tally in tallies {
            histogram.add(tally.histogram)
            ok += tally.ok
            errors.merge(tally.errors, uniquingKeysWith: +)
        }
        func ms(_ percentile: Double) -> Double { Double(histogram.valueAtPercentile(percentile)) / 1000 }
        let report = Report(
            mode: mode.rawValue, users: users, seconds: seconds, ceremonies: ok, perSecond: Double(ok) / seconds, errors: errors,
            p50Milliseconds: ms(50), p90Milliseconds: ms(90), p99Milliseconds: ms(99), p999Milliseconds: ms(99.9),
            maxMilliseconds: Double(histogram.maxRecorded) / 1000)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print(
                String(
                    format: "%@: %d users, %.1f s, %d ceremonies, %.0f/s; latency ms p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f",
                    mode.rawValue, users, seconds, ok, report.perSecond, ms(50), ms(90), ms(99), ms(99.9), report.maxMilliseconds))
            print(
                errors.isEmpty
                    ? "errors: none"
                    : "errors: " + errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
        if ok == 0 { throw Failure("no ceremony succeeded") }
    }

    static func code(of failure: Failure) -> String {
        // "path: code: message" -> code
        let parts = failure.message.split(separator: ":", maxSplits: 2)
        return parts.count >= 2 ? parts[1].trimmingCharacters(in: .whitespaces) : "unreachable"
    }

    static let signUpOptionsPath = "/api/auth/register/options"
    static let signUpVerifyPath = "/api/auth/register/verify"
    static let signInOptionsPath = "/api/auth/authenticate/options"
    static let signInVerifyPath = "/api/auth/authenticate/verify"

    static func signUpOptionsBody(username: String) -> [UInt8] { Array(#"{"username":"\#(username)"}"#.utf8) }

    /// From a sign-up's options: a new software passkey, and the verify request's body.
    static func signUpVerifyBody(options: [UInt8], origin: String) throws -> (body: [UInt8], credential: SoftwareCredential) {
        var authenticator = SoftwareAuthenticator()
        let creation: PublicKeyCredentialCreationOptionsJSON
        do {
            creation = try JSONDecoder().decode(PublicKeyCredentialCreationOptionsJSON.self, from: Data(options))
        } catch {
            throw Failure("register/options: bad_options: not WebAuthn JSON")
        }
        var (registration, credential) = try authenticator.register(options: creation, origin: origin)
        registration.clientExtensionResults = Postable.results(registration.clientExtensionResults)
        return (Array(try JSONEncoder().encode(Wrapped(credential: registration))), credential)
    }

    /// A whole sign-up on a blocking `connection`: options, a new software passkey, verify.
    static func signUp(_ connection: PlainHTTPConnection, origin: String, username: String) throws -> SoftwareCredential {
        let options = try answer(
            connection.post(signUpOptionsPath, json: signUpOptionsBody(username: username), origin: origin), "register/options")
        let (body, credential) = try signUpVerifyBody(options: options, origin: origin)
        _ = try answer(connection.post(signUpVerifyPath, json: body, origin: origin), "register/verify")
        return credential
    }

    /// From a sign-in's options: the assertion as the verify request's body, with no Foundation
    /// JSON (the options are read with the library's JSON reader, the assertion written by hand).
    static func signInVerifyBody(options: [UInt8], origin: String, credential: inout SoftwareCredential) throws -> [UInt8] {
        guard let json = try? JSONReader.parse(options), case .string(let challenge)? = json["challenge"],
            let bytes = Base64URLBytes(encoded: challenge), case .string(let rpID)? = json["rpId"]
        else { throw Failure("authenticate/options: bad_options: not WebAuthn JSON") }
        let request = PublicKeyCredentialRequestOptionsJSON(
            challenge: bytes, timeout: nil, rpId: rpID, allowCredentials: [], userVerification: "required")
        let assertion = try SoftwareAuthenticator().authenticate(options: request, origin: origin, credential: &credential)
        let response = assertion.response
        var text = #"{"credential":{"id":""#
        text += assertion.id + #"","rawId":""# + assertion.rawId.base64URL
        text += #"","type":"public-key","response":{"clientDataJSON":""# + response.clientDataJSON.base64URL
        text += #"","authenticatorData":""# + response.authenticatorData.base64URL + #"","signature":""# + response.signature.base64URL
        if let handle = response.userHandle { text += #"","userHandle":""# + handle.base64URL }
        text += #""},"clientExtensionResults":{}}}"#
        return Array(text.utf8)
    }

    /// The body of a 2xx answer; otherwise a failure named "path: code: message".
    static func answer(_ answer: PlainHTTPConnection.Answer, _ path: String) throws -> [UInt8] {
        if (200..<300).contains(answer.status) { return answer.body }
        if let json = try? JSONReader.parse(answer.body), case .string(let code)? = json["error"]?["code"] {
            throw Failure("\(path): \(code): HTTP \(answer.status)")
        }
        throw Failure("\(path): http_\(answer.status): not passkeyd's answer")
    }
}

/// A value several threads share, behind a lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
