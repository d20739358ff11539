import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import WebAuthn

/// One HTTP client for the process: fails at once when nothing listens (no retry loop).
let httpClient: HTTPClient = {
    var configuration = HTTPClient.Configuration(timeout: .init(connect: .seconds(5), read: .seconds(30)))
    configuration.connectionPool.retryConnectionEstablishment = false
    // The load generator runs up to this many users at once, each on its own connection.
    configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 256
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}()

/// The native passkeyd API over HTTP.
struct API {
    let server: URL
    let origin: String

    struct Answer {
        var status: Int
        var body: [UInt8]
        var json: JSONValue { (try? JSONReader.parse(body)) ?? .null }
    }

    func call(_ method: HTTPMethod, _ path: String, json: [UInt8]? = nil, token: String? = nil) async throws -> Answer {
        var target = server
        var host: String?
        // Localhost names are the loopback address (RFC 6761 §6.3), as browsers treat them: the
        // connection goes to 127.0.0.1 and the request names the host (a server that serves
        // tenants by host on this machine).
        if let name = server.host?.lowercased(), name.hasSuffix(".localhost"),
            var components = URLComponents(url: server, resolvingAgainstBaseURL: false)
        {
            components.host = "127.0.0.1"
            target = components.url ?? server
            host = server.port.map { "\(name):\($0)" } ?? name
        }
        let url = target.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")) + path
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let host { request.headers.add(name: "Host", value: host) }
        request.headers.add(name: "Origin", value: origin)
        request.headers.add(name: "User-Agent", value: "passkey-cli/1")
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: json))
        }
        let response: HTTPClientResponse
        do {
            response = try await httpClient.execute(request, timeout: .seconds(30))
        } catch {
            throw Failure("cannot reach \(server.absoluteString): \(Self.describe(error))")
        }
        let body = try await response.body.collect(upTo: 4 * 1024 * 1024)
        let answer = Answer(status: Int(response.status.code), body: Array(body.readableBytesView))
        guard (200..<300).contains(answer.status) else {
            if case .string(let code)? = answer.json["error"]?["code"] {
                let message = answer.json["error"]?["message"].flatMap { if case .string(let m) = $0 { m } else { nil } } ?? ""
                throw Failure("\(path): \(code): \(message)")
            }
            throw Failure("\(path) answered HTTP \(answer.status); is \(server.absoluteString) a passkeyd server?")
        }
        return answer
    }

    static func describe(_ error: any Error) -> String {
        let text = "\(error)"
        if text.contains("connectTimeout") || text.contains("deadlineExceeded") { return "timed out" }
        if text.contains("refused") || text.contains("ECONNREFUSED") { return "connection refused (is passkeyd running?)" }
        return text
    }

    static func decode<T: Decodable>(_ type: T.Type, _ answer: Answer, what: String) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(answer.body))
        } catch {
            throw Failure("the server's \(what) are not WebAuthn JSON; is this a passkeyd server?")
        }
    }
}

struct Wrapped<C: Encodable>: Encodable { let credential: C }

extension JSONValue {
    var text: String? {
        if case .string(let s) = self { return s }
        return nil
    }
}
