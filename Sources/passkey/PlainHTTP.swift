import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The load generator's own client: one kept-alive HTTP/1.1 connection, used by one thread. A
/// request is one `write` and (usually) one `read`; async-http-client's event loop, channel
/// pipeline and task hops cost the generator more CPU than the server spent answering. Plain
/// `http://` only; `Content-Length` answers only (what passkeyd sends).
///
/// Blocking (``post(_:json:origin:)``: setting up users, one request at a time) or, once
/// ``makeNonBlocking()`` was called, driven by a `poll` loop (``send(_:)``, ``receive()``,
/// ``takeAnswer()``): one thread runs many users' connections, so the generator beside the
/// server is one more thread on the machine, not one per simulated user.
final class PlainHTTPConnection {
    struct Answer {
        var status: Int
        var body: [UInt8]
        /// `Retry-After` in seconds (a 429 or 503), when the answer gave it so.
        var retryAfter: Int? = nil
    }

    let fd: Int32
    private let hostHeader: String
    private var buffer: [UInt8] = []
    /// Where a read lands before it is appended to `buffer`: made once, not per read.
    private var chunk = [UInt8](repeating: 0, count: 16384)
    /// How much of `buffer` was searched for the end of an answer's head without finding it.
    private var searched = 0

    init(url: URL) throws {
        guard url.scheme == "http", let host = url.host else { throw Failure("the plain client speaks http:// only") }
        let port = url.port ?? 80
        hostHeader = url.port.map { "\(host):\($0)" } ?? host
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
            throw Failure("cannot resolve \(host)")
        }
        defer { freeaddrinfo(found) }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        guard connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure("cannot reach \(url.absoluteString): \(reason)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// From now on reads and writes return at once (`poll` says when to call them).
    func makeNonBlocking() {
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

    /// Sends a request and waits for its answer (a blocking connection).
    func post(_ path: String, json: [UInt8], origin: String) throws -> Answer {
        let request = request(path, json: json, origin: origin)
        var sent = 0
        while sent < request.count { sent += try send(request[sent...]) }
        while true {
            if let answer = try takeAnswer() { return answer }
            try receive()
        }
    }

    /// Writes what the socket takes of `bytes` now; returns how many it took (0 when a
    /// non-blocking socket is full).
    func send(_ bytes: ArraySlice<UInt8>) throws -> Int {
        while true {
            let count = bytes.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            if count > 0 { return count }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return 0 }
            throw Failure("connection lost while sending")
        }
    }

    /// Reads what has arrived (waits for it on a blocking socket; on a non-blocking one,
    /// nothing there is no error).
    func receive() throws {
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count > 0 {
                buffer += chunk[..<count]
                return
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                if fcntl(fd, F_GETFL) & O_NONBLOCK != 0 { return }
                throw Failure("connection closed by the server")  // SO_RCVTIMEO ran out
            }
            throw Failure("connection closed by the server")
        }
    }

    /// The first whole answer received, taken out of the buffer; nil while it is incomplete.
    func takeAnswer() throws -> Answer? {
        // The head: up to the blank line (searched for in what arrived since the last look).
        guard let end = Self.find(Self.blankLine, in: buffer, from: max(0, searched - 3)).map({ $0 + 4 }) else {
            searched = buffer.count
            return nil
        }
        let (status, length, retryAfter) = try Self.parseHead(buffer[..<end])
        guard buffer.count >= end + length else { return nil }
        let body = Array(buffer[end..<(end + length)])
        buffer.removeFirst(end + length)
        searched = 0
        return Answer(status: status, body: body, retryAfter: retryAfter)
    }

    static let blankLine: [UInt8] = [13, 10, 13, 10]
    /// The largest answer body read (passkeyd's are a few KB).
    static let maximumBody = 16 << 20

    /// The status, `Content-Length` and `Retry-After` (seconds; nil when absent or an HTTP
    /// date) of an answer's head, read as bytes: splitting it into Swift strings (a dozen header
    /// lines, the security headers long) was the generator's largest cost after the signatures.
    static func parseHead(_ head: ArraySlice<UInt8>) throws -> (status: Int, length: Int, retryAfter: Int?) {
        let start = head.startIndex
        guard head.count >= 12, head.starts(with: "HTTP/1.1 ".utf8) else { throw Failure("not an HTTP/1.1 answer") }
        var status = 0
        for byte in head[(start + 9)..<(start + 12)] {
            guard (0x30...0x39).contains(byte) else { throw Failure("not an HTTP/1.1 answer") }
            status = status * 10 + Int(byte - 0x30)
        }
        var length = 0
        var retryAfter: Int?
        var line = (find([13, 10], in: head, from: start) ?? head.endIndex) + 2
        while line < head.endIndex, let lineEnd = find([13, 10], in: head, from: line), lineEnd > line {
            if let colon = head[line..<lineEnd].firstIndex(of: 0x3A) {
                let name = head[line..<colon]
                if Self.equalsIgnoringCase(name, "content-length") {
                    var value = 0
                    for byte in head[(colon + 1)..<lineEnd] where byte != 0x20 && byte != 0x09 {
                        guard (0x30...0x39).contains(byte), value <= maximumBody else { throw Failure("a bad Content-Length") }
                        value = value * 10 + Int(byte - 0x30)
                    }
                    guard value <= maximumBody else { throw Failure("a bad Content-Length") }
                    length = value
                } else if Self.equalsIgnoringCase(name, "retry-after") {
                    let value = head[(colon + 1)..<lineEnd].filter { $0 != 0x20 && $0 != 0x09 }
                    if !value.isEmpty, value.count <= 9, value.allSatisfy({ (0x30...0x39).contains($0) }) {
                        retryAfter = value.reduce(0) { $0 * 10 + Int($1 - 0x30) }
                    }
                } else if Self.equalsIgnoringCase(name, "transfer-encoding") {
                    throw Failure("chunked answers are not supported by the load client")
                }
            }
            line = lineEnd + 2
        }
        return (status, length, retryAfter)
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
