import Foundation
import WebAuthnTesting

#if canImport(Glibc)
    import Glibc
#endif

/// One thread's share of `passkey load`'s users, driven by `poll` over their non-blocking
/// connections: a user sends a ceremony's first request, and each answer that arrives is
/// turned into the next request (options -> sign -> verify) until the ceremony ends; then the
/// next ceremony starts, until the deadline.
struct LoadLoop {
    /// One simulated user: its connection, its passkey (sign-in), where its ceremony is.
    private final class User {
        enum Stage {
            case options
            case verify
        }

        let index: Int
        var connection: PlainHTTPConnection
        var credential: SoftwareCredential?
        var stage = Stage.options
        var round = 0
        var began = ContinuousClock.now
        /// When the request now outstanding was sent.
        var waitingSince = ContinuousClock.now
        /// A write failed: the poll loop replaces the connection before anything else.
        var broken = false
        /// The request being written and how much of it the socket has taken.
        var outgoing: [UInt8] = []
        var sent = 0
        var done = false
        /// Refused with `Retry-After` (429, 503): the next ceremony starts then, not at once.
        var resumeAt: ContinuousClock.Instant?
        var tally = Load.Tally()

        init(index: Int, connection: PlainHTTPConnection, credential: SoftwareCredential?) {
            self.index = index
            self.connection = connection
            self.credential = credential
        }
    }

    /// An answer not come this long after its request was sent fails the ceremony, as the
    /// blocking client's receive timeout did.
    static let answerTimeout = Duration.seconds(30)

    private let url: URL
    private let origin: String
    private let mode: Load.Mode
    private let prefix: String
    private var users: [User] = []

    init(url: URL, origin: String, mode: Load.Mode, prefix: String) {
        self.url = url
        self.origin = origin
        self.mode = mode
        self.prefix = prefix
    }

    /// Connects a user (in sign-in mode it signs up first, on the blocking connection).
    mutating func add(index: Int) throws {
        let connection = try PlainHTTPConnection(url: url)
        var credential: SoftwareCredential?
        if mode == .signIn {
            credential = try Load.signUp(connection, origin: origin, username: "\(prefix)-\(index)")
        }
        connection.makeNonBlocking()
        users.append(User(index: index, connection: connection, credential: credential))
    }

    /// Runs ceremonies until `deadline` (a ceremony under way then is finished); returns each
    /// user's results.
    func run(until deadline: ContinuousClock.Instant) -> [Load.Tally] {
        for user in users { begin(user, deadline: deadline) }
        var descriptors: [pollfd] = []
        var polled: [User] = []
        while true {
            descriptors.removeAll(keepingCapacity: true)
            polled.removeAll(keepingCapacity: true)
            var wait = Duration.milliseconds(100)
            var paused = false
            for user in users where !user.done {
                if user.broken {
                    user.broken = false
                    fail(user, code: "unreachable", deadline: deadline)
                }
                if let resume = user.resumeAt {
                    let left = resume - ContinuousClock.now
                    if left > .zero {
                        wait = min(wait, left)
                        paused = true
                        continue
                    }
                    // The server may have closed the connection while the user waited (its idle
                    // timeout is about as long as the longest pause): start on a new one.
                    user.resumeAt = nil
                    if reconnect(user) {
                        begin(user, deadline: deadline)
                    } else {
                        user.tally.errors["unreachable", default: 0] += 1
                    }
                }
                if user.done { continue }
                if user.broken {
                    paused = true  // dealt with at the top of the next turn
                    wait = .zero
                    continue
                }
                let events = user.sent < user.outgoing.count ? POLLIN | POLLOUT : POLLIN
                descriptors.append(pollfd(fd: user.connection.fd, events: Int16(events), revents: 0))
                polled.append(user)
            }
            if polled.isEmpty && !paused { break }
            let milliseconds = Int32(max(1, wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000))
            let ready = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            if ready < 0 && errno != EINTR { break }
            let now = ContinuousClock.now
            for (offset, descriptor) in descriptors.enumerated() {
                let user = polled[offset]
                if descriptor.revents == 0 {
                    if now - user.waitingSince > Self.answerTimeout { fail(user, code: "timeout", deadline: deadline) }
                    continue
                }
                do {
                    if Int32(descriptor.revents) & Int32(POLLOUT) != 0 { try flush(user) }
                    if Int32(descriptor.revents) & Int32(POLLIN | POLLERR | POLLHUP | POLLNVAL) != 0 {
                        try user.connection.receive()
                        while !user.done, !user.broken, user.resumeAt == nil, let answer = try user.connection.takeAnswer() {
                            answered(user, answer, deadline: deadline)
                        }
                    }
                } catch {
                    fail(user, code: "unreachable", deadline: deadline)
                }
            }
        }
        return users.map(\.tally)
    }

    /// Starts the user's next ceremony, or ends its run after the deadline.
    private func begin(_ user: User, deadline: ContinuousClock.Instant) {
        let now = ContinuousClock.now
        guard now < deadline else {
            user.done = true
            return
        }
        user.began = now
        user.stage = .options
        if mode == .signIn && user.credential != nil {
            send(user, Load.signInOptionsPath, Array("{}".utf8))
        } else {
            send(user, Load.signUpOptionsPath, Load.signUpOptionsBody(username: "\(prefix)-\(user.index)-\(user.round)"))
        }
    }

    private func send(_ user: User, _ path: String, _ body: [UInt8]) {
        // The server closed the connection, or said it would after its last answer: the next
        // request goes on a new one (a server need not keep connections alive).
        if user.connection.spent {
            guard reconnect(user) else { return }
        }
        user.outgoing = user.connection.request(path, json: body, origin: origin)
        user.sent = 0
        user.waitingSince = ContinuousClock.now
        do {
            try flush(user)
        } catch {
            user.outgoing = []
            user.sent = 0
            user.broken = true
        }
    }

    /// Writes what the socket takes of the pending request (the rest when `poll` says it can).
    private func flush(_ user: User) throws {
        while user.sent < user.outgoing.count {
            let count = try user.connection.send(user.outgoing[user.sent...])
            if count == 0 { return }
            user.sent += count
        }
    }

    /// One answer: the ceremony's next request, or its end.
    private func answered(_ user: User, _ answer: PlainHTTPConnection.Answer, deadline: ContinuousClock.Instant) {
        // A refusal that says when to come back (rate limits, an unavailable database) is
        // counted and honoured, as a real client would, instead of asked again at once.
        let pause = answer.status == 429 || answer.status == 503 ? answer.retryAfter : nil
        do {
            switch user.stage {
            case .options:
                if mode == .signIn, var credential = user.credential {
                    let options = try Load.answer(answer, "authenticate/options")
                    let body = try Load.signInVerifyBody(options: options, origin: origin, credential: &credential)
                    user.credential = credential
                    user.stage = .verify
                    send(user, Load.signInVerifyPath, body)
                } else {
                    let options = try Load.answer(answer, "register/options")
                    let (body, _) = try Load.signUpVerifyBody(options: options, origin: origin)
                    user.stage = .verify
                    send(user, Load.signUpVerifyPath, body)
                }
                return
            case .verify:
                _ = try Load.answer(answer, mode == .signIn ? "authenticate/verify" : "register/verify")
                let elapsed = ContinuousClock.now - user.began
                _ = user.tally.histogram.record(
                    UInt64(max(1, elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000)))
                user.tally.ok += 1
            }
        } catch let failure as Failure {
            user.tally.errors[Load.code(of: failure), default: 0] += 1
        } catch {
            user.tally.errors["client_error", default: 0] += 1
        }
        user.round += 1
        if let pause {
            let resume = ContinuousClock.now + .seconds(min(max(pause, 1), Self.longestPause))
            if resume >= deadline { user.done = true } else { user.resumeAt = resume }
        } else {
            begin(user, deadline: deadline)
        }
    }

    /// The longest `Retry-After` honoured, in seconds.
    static let longestPause = 60

    /// The connection failed or an answer never came: the ceremony counts as failed and the
    /// user goes on over a new connection, as a browser would (or stops, if none can be made).
    private func fail(_ user: User, code: String, deadline: ContinuousClock.Instant) {
        user.tally.errors[code, default: 0] += 1
        user.round += 1
        if reconnect(user) { begin(user, deadline: deadline) }
    }

    /// Gives the user a new connection; false (and the user is done) if none can be made.
    private func reconnect(_ user: User) -> Bool {
        guard let fresh = try? PlainHTTPConnection(url: url) else {
            user.done = true
            return false
        }
        fresh.makeNonBlocking()
        user.connection = fresh
        return true
    }
}
