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
        let api = API(server: try options.serverURL(), origin: try options.claimedOrigin())
        let prefix = self.prefix ?? "load-" + String(UUID().uuidString.prefix(8)).lowercased()
        let mode = self.mode

        // Sign-in mode: every user gets an account and a passkey first.
        var credentials: [SoftwareCredential] = []
        if mode == .signIn {
            credentials = try await withThrowingTaskGroup(of: SoftwareCredential.self) { group in
                for index in 0..<users {
                    group.addTask { try await Self.signUp(api, username: "\(prefix)-\(index)") }
                }
                var all: [SoftwareCredential] = []
                for try await credential in group { all.append(credential) }
                return all
            }
        }

        let start = ContinuousClock.now
        let deadline = start + .milliseconds(Int(duration * 1000))
        let tallies = await withTaskGroup(of: Tally.self) { group in
            for index in 0..<users {
                let credential = credentials.isEmpty ? nil : credentials[index]
                group.addTask {
                    var tally = Tally()
                    var credential = credential
                    var round = 0
                    while ContinuousClock.now < deadline {
                        let began = ContinuousClock.now
                        do {
                            if mode == .signIn, var current = credential {
                                try await Self.signIn(api, credential: &current)
                                credential = current
                            } else {
                                _ = try await Self.signUp(api, username: "\(prefix)-\(index)-\(round)")
                            }
                            let elapsed = ContinuousClock.now - began
                            _ = tally.histogram.record(
                                UInt64(max(1, elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000)))
                            tally.ok += 1
                        } catch let failure as Failure {
                            tally.errors[Self.code(of: failure), default: 0] += 1
                        } catch {
                            tally.errors["client_error", default: 0] += 1
                        }
                        round += 1
                    }
                    return tally
                }
            }
            var all: [Tally] = []
            for await tally in group { all.append(tally) }
            return all
        }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
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

    static func signUp(_ api: API, username: String) async throws -> SoftwareCredential {
        let options = try await api.call(.POST, "/api/auth/register/options", json: Array(#"{"username":"\#(username)"}"#.utf8))
        var authenticator = SoftwareAuthenticator()
        let (registration, credential) = try authenticator.register(
            options: try API.decode(PublicKeyCredentialCreationOptionsJSON.self, options, what: "creation options"), origin: api.origin)
        _ = try await api.call(.POST, "/api/auth/register/verify", json: Array(try JSONEncoder().encode(Wrapped(credential: registration))))
        return credential
    }

    static func signIn(_ api: API, credential: inout SoftwareCredential) async throws {
        let options = try await api.call(.POST, "/api/auth/authenticate/options", json: Array("{}".utf8))
        let request = try API.decode(PublicKeyCredentialRequestOptionsJSON.self, options, what: "request options")
        let assertion = try SoftwareAuthenticator().authenticate(options: request, origin: api.origin, credential: &credential)
        _ = try await api.call(
            .POST, "/api/auth/authenticate/verify", json: Array(try JSONEncoder().encode(Wrapped(credential: assertion))))
    }
}
