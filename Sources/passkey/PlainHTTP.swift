import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The load generator's own client: one kept-alive HTTP/1.1 connection, used by one thread. A
/// request is one `write` and (usually) one `read`; async-http-client's event loop, channel
/// pipeline and task hops cost the generator more CPU than the server spent answering. Plain
/// `http://` only.
///
/// It speaks HTTP/1.1 as any server may answer it: an answer that says `Connection: close`, an
/// HTTP/1.0 answer (unless it says `keep-alive`), or a server that closes an idle connection
/// (a read that returns 0) leave the connection ``spent``, and the next request goes on a new
/// one (``reopen()``); an answer with no `Content-Length` on a closing connection ends where
/// the server closes it. Connecting waits at most ``connectTimeout``, and a blocking request
/// at most its timeout in all (not per read).
///
/// Blocking (``post(_:json:origin:timeout:)``: setting up users, one request at a time) or,
/// once ``makeNonBlocking()`` was called, driven by a `poll` loop (``send(_:)``,
/// ``receive()``, ``takeAnswer()``): one thread runs many users' connections, so the generator
/// beside the server is one more thread on the machine, not one per simulated user.
final class PlainHTTPConnection {
    struct Answer {
        var status: Int
        var body: [UInt8]
        /// `Retry-After` in seconds (a 429 or 503), when the answer gave it so.
        var retryAfter: Int? = nil
        /// The server closes the connection after this answer.
        var closes = false
    }

    /// What an answer's head says about its body and its connection.
    struct Head: Equatable {
        var status: Int
        /// nil: no `Content-Length` (the body runs to the connection's end, when it closes).
        var length: Int?
        var retryAfter: Int?
        var closes: Bool
    }

    private(set) var fd: Int32 = -1
    private let url: URL
    private let hostHeader: String
    private var nonBlocking = false
    private var buffer: [UInt8] = []
    /// Where a read lands before it is appended to `buffer`: made once, not per read.
    private var chunk = [UInt8](repeating: 0, count: 16384)
    /// How much of `buffer` was searched for the end of an answer's head without finding it.
    private var searched = 0
    /// The server closed its side (a read returned 0).
    private(set) var ended = false
    /// No further request may go on this connection: the server closed it or said it would.
    private(set) var spent = false
    /// Answers taken on this connection (a request that finds a reused connection closed
    /// before any answer came is sent once more, on a new one, as browsers do).
    private var answers = 0

    static let connectTimeout = Duration.seconds(5)
    /// The longest a blocking request waits for its whole answer.
    static let answerTimeout = Duration.seconds(30)

    init(url: URL) throws {
        guard url.scheme == "http", let host = url.host else { throw Failure("the plain client speaks http:// only") }
        self.url = url
        hostHeader = url.port.map { "\(host):\($0)" } ?? host
        try open()
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Opens a new connection in place of the old one (which is closed).
    func reopen() throws {
        if fd >= 0 { close(fd) }
        fd = -1
        buffer.removeAll(keepingCapacity: true)
        searched = 0
        ended = false
        spent = false
        answers = 0
        try open()
        if nonBlocking { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }

    private func open() throws {
        guard let host = url.host else { throw Failure("the plain client speaks http:// only") }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        // Localhost names are the loopback address (RFC 6761 §6.3), as browsers treat them:
        // `a.localhost` reaches a server that serves tenants by host on this machine.
        let lowered = host.lowercased()
        let resolved = lowered == "localhost" || lowered.hasSuffix(".localhost") ? "127.0.0.1" : host
        guard getaddrinfo(resolved, String(url.port ?? 80), &hints, &found) == 0, let address = found else {
            throw Failure("cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        // Connect without blocking, and wait for it at most `connectTimeout`.
        let flags = fcntl(socketFD, F_GETFL)
        _ = fcntl(socketFD, F_SETFL, flags | O_NONBLOCK)
        var reason: String?
        if connect(socketFD, address.pointee.ai_addr, address.pointee.ai_addrlen) != 0 {
            if errno == EINPROGRESS {
                var descriptor = [pollfd(fd: socketFD, events: Int16(POLLOUT), revents: 0)]
                let milliseconds = Int32(Self.connectTimeout.components.seconds * 1000)
                var ready: Int32
                repeat { ready = poll(&descriptor, 1, milliseconds) } while ready < 0 && errno == EINTR
                if ready == 0 {
                    reason = "timed out"
                } else {
                    var error: Int32 = 0
                    var size = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(socketFD, SOL_SOCKET, SO_ERROR, &error, &size)
                    if error != 0 { reason = String(cString: strerror(error)) }
                }
            } else {
                reason = String(cString: strerror(errno))
            }
        }
        if let reason {
            close(socketFD)
            throw Failure("cannot reach \(url.absoluteString): \(reason)")
        }
        _ = fcntl(socketFD, F_SETFL, flags)
        var one: Int32 = 1
        setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        fd = socketFD
    }

    /// From now on reads and writes return at once (`poll` says when to call them).
    func makeNonBlocking() {
        nonBlocking = true
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    /// A whole request: head and JSON body, to be written with one `write`.
    func request(_ path: String, json: [UInt8], origin: String) -> [UInt8] {
        var request = Array(
            "POST \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nOrigin: \(origin)\r\nUser-Agent: passkey-load/1\r\nContent-Type: application/json\r\nContent-Length: \(json.count)\r\n\r\n"
                .utf8)
        request += json
        return request
    }

    /// Sends a request and waits for its whole answer, at most `timeout` in all (a blocking
    /// connection). A spent connection is replaced first; a reused one the server had closed
    /// before answering is replaced and the request sent once more.
    func post(_ path: String, json: [UInt8], origin: String, timeout: Duration = answerTimeout) throws -> Answer {
        let deadline = ContinuousClock.now + timeout
        let request = request(path, json: json, origin: origin)
        for attempt in 0..<2 {
            if spent || ended { try reopen() }
            let reused = answers > 0
            do {
                var sent = 0
                while sent < request.count { sent += try send(request[sent...]) }
                while true {
                    if let answer = try takeAnswer() { return answer }
                    if ended { throw Failure("connection closed by the server") }
                    try wait(until: deadline)
                    try receive()
                }
            } catch let failure as Failure where attempt == 0 && reused && buffer.isEmpty && failure.message != Self.timedOut {
                spent = true  // closed while idle: once more on a new connection
            }
        }
        throw Failure("connection closed by the server")
    }

    static let timedOut = "no answer in time"

    /// Waits until the socket can be read, or throws when `deadline` passes first.
    private func wait(until deadline: ContinuousClock.Instant) throws {
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw Failure(Self.timedOut) }
            let milliseconds = Int32(min(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1, 60_000))
            var descriptor = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw Failure("connection lost") }
        }
    }

    /// Writes what the socket takes of `bytes` now; returns how many it took (0 when a
    /// non-blocking socket is full).
    func send(_ bytes: ArraySlice<UInt8>) throws -> Int {
        if spent || ended { throw Failure("connection closed by the server") }
        while true {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            if count > 0 { return count }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return 0 }
            throw Failure("connection lost while sending")
        }
    }

    /// Reads what has arrived (waits for it on a blocking socket; on a non-blocking one,
    /// nothing there is no error). A read of 0 means the server closed its side: ``ended``.
    func receive() throws {
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count > 0 {
                buffer += chunk[..<count]
                return
            }
            if count == 0 {
                ended = true
                spent = true
                return
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            throw Failure("connection closed by the server")
        }
    }

    /// The first whole answer received, taken out of the buffer; nil while it is incomplete.
    /// Throws when the server closed the connection in the middle of an answer.
    func takeAnswer() throws -> Answer? {
        // The head: up to the blank line (searched for in what arrived since the last look).
        guard let end = Self.find(Self.blankLine, in: buffer, from: max(0, searched - 3)).map({ $0 + 4 }) else {
            searched = buffer.count
            if ended { throw Failure(buffer.isEmpty ? "connection closed by the server" : "the server closed the connection mid-answer") }
            return nil
        }
        let head = try Self.parseHead(buffer[..<end])
        let length: Int
        if let known = head.length {
            guard buffer.count >= end + known else {
                if ended { throw Failure("the server closed the connection mid-answer") }
                return nil
            }
            length = known
        } else if Self.hasNoBody(head.status) {
            length = 0
        } else {
            // No length: the body is what comes until the server closes the connection.
            guard ended else {
                guard buffer.count - end <= Self.maximumBody else { throw Failure("a bad Content-Length") }
                return nil
            }
            length = buffer.count - end
        }
        let body = Array(buffer[end..<(end + length)])
        buffer.removeFirst(end + length)
        searched = 0
        answers += 1
        if head.closes || (head.length == nil && !Self.hasNoBody(head.status)) { spent = true }
        return Answer(status: head.status, body: body, retryAfter: head.retryAfter, closes: spent)
    }

    /// 1xx, 204 and 304 answers have no body (RFC 9112 §6.3).
    static func hasNoBody(_ status: Int) -> Bool { status < 200 || status == 204 || status == 304 }

    static let blankLine: [UInt8] = [13, 10, 13, 10]
    /// The largest answer body read (passkeyd's are a few KB).
    static let maximumBody = 16 << 20

    /// The status, `Content-Length`, `Retry-After` (seconds; nil when absent or an HTTP date)
    /// and whether the server closes the connection after it (`Connection: close`, or an
    /// HTTP/1.0 answer without `Connection: keep-alive`), read as bytes: splitting the head
    /// into Swift strings (a dozen header lines, the security headers long) was the
    /// generator's largest cost after the signatures.
    static func parseHead(_ head: ArraySlice<UInt8>) throws -> Head {
        let start = head.startIndex
        let version11 = head.starts(with: "HTTP/1.1 ".utf8)
        guard head.count >= 12, version11 || head.starts(with: "HTTP/1.0 ".utf8) else { throw Failure("not an HTTP/1.x answer") }
        var status = 0
        for byte in head[(start + 9)..<(start + 12)] {
            guard (0x30...0x39).contains(byte) else { throw Failure("not an HTTP/1.x answer") }
            status = status * 10 + Int(byte - 0x30)
        }
        var length: Int?
        var retryAfter: Int?
        var closes = !version11
        var line = (find([13, 10], in: head, from: start) ?? head.endIndex) + 2
        while line < head.endIndex, let lineEnd = find([13, 10], in: head, from: line), lineEnd > line {
            if let colon = head[line..<lineEnd].firstIndex(of: 0x3A) {
                let name = head[line..<colon]
                let value = head[(colon + 1)..<lineEnd].filter { $0 != 0x20 && $0 != 0x09 }
                if Self.equalsIgnoringCase(name, "content-length") {
                    var number = 0
                    for byte in value {
                        guard (0x30...0x39).contains(byte), number <= maximumBody else { throw Failure("a bad Content-Length") }
                        number = number * 10 + Int(byte - 0x30)
                    }
                    guard !value.isEmpty, number <= maximumBody, length == nil || length == number else {
                        throw Failure("a bad Content-Length")
                    }
                    length = number
                } else if Self.equalsIgnoringCase(name, "retry-after") {
                    if !value.isEmpty, value.count <= 9, value.allSatisfy({ (0x30...0x39).contains($0) }) {
                        retryAfter = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                    }
                } else if Self.equalsIgnoringCase(name, "connection") {
                    // A list of tokens: "close" anywhere closes; "keep-alive" keeps an HTTP/1.0 one.
                    for token in value.split(separator: 0x2C) {
                        if Self.equalsIgnoringCase(token, "close") { closes = true }
                        if Self.equalsIgnoringCase(token, "keep-alive") && !version11 { closes = false }
                    }
                } else if Self.equalsIgnoringCase(name, "transfer-encoding") {
                    throw Failure("chunked answers are not supported by the load client")
                }
            }
            line = lineEnd + 2
        }
        return Head(status: status, length: length, retryAfter: retryAfter, closes: closes)
    }

    /// Whether `bytes` spell `name` (lower-case ASCII) in any case.
    static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ name: StaticString) -> Bool {
        guard bytes.count == name.utf8CodeUnitCount else { return false }
        return name.withUTF8Buffer { expected in
            zip(bytes, expected).allSatisfy { byte, wanted in byte == wanted || (byte >= 0x41 && byte <= 0x5A && byte + 0x20 == wanted) }
        }
    }

    /// Where `needle` first occurs in `haystack` at or after `from`.
    static func find<Bytes: RandomAccessCollection>(_ needle: [UInt8], in haystack: Bytes, from: Int) -> Int?
    where Bytes.Element == UInt8, Bytes.Index == Int {
        guard let first = needle.first, haystack.endIndex - from >= needle.count else { return nil }
        var start = max(from, haystack.startIndex)
        while start <= haystack.endIndex - needle.count {
            if haystack[start] == first, haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
            start += 1
        }
        return nil
    }
}
