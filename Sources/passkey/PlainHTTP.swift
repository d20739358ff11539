import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The load generator's own client: one kept-alive HTTP/1.1 connection over a blocking socket,
/// used by one thread. A request is one `write` and (usually) one `read`; async-http-client's
/// event loop, channel pipeline and task hops cost the generator more CPU than the server spent
/// answering. Plain `http://` only; `Content-Length` answers only (what passkeyd sends).
final class PlainHTTPConnection {
    struct Answer {
        var status: Int
        var body: [UInt8]
    }

    private let fd: Int32
    private let hostHeader: String
    private var buffer: [UInt8] = []

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

    func post(_ path: String, json: [UInt8], origin: String) throws -> Answer {
        var request = Array(
            "POST \(path) HTTP/1.1\r\nHost: \(hostHeader)\r\nOrigin: \(origin)\r\nUser-Agent: passkey-load/1\r\nContent-Type: application/json\r\nContent-Length: \(json.count)\r\n\r\n"
                .utf8)
        request += json
        try request.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let count = write(fd, raw.baseAddress! + sent, raw.count - sent)
                guard count > 0 else { throw Failure("connection lost while sending") }
                sent += count
            }
        }
        return try readAnswer()
    }

    private func readAnswer() throws -> Answer {
        // The head: up to the blank line.
        var headEnd: Int?
        while headEnd == nil {
            headEnd = Self.find([13, 10, 13, 10], in: buffer).map { $0 + 4 }
            if headEnd == nil { try fill() }
        }
        let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1.1 "), let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            throw Failure("not an HTTP/1.1 answer")
        }
        var length = 0
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let name = parts[0].lowercased()
            if name == "content-length" { length = Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0 }
            if name == "transfer-encoding" { throw Failure("chunked answers are not supported by the load client") }
        }
        while buffer.count < headEnd! + length { try fill() }
        let body = Array(buffer[headEnd!..<(headEnd! + length)])
        buffer.removeFirst(headEnd! + length)
        return Answer(status: status, body: body)
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        guard count > 0 else { throw Failure("connection closed by the server") }
        buffer += chunk[..<count]
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return start }
        }
        return nil
    }
}
