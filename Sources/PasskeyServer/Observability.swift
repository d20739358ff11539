import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PasskeyCore
import PasskeyRuntime
import Synchronization
import WebAuthn

extension HTTPField.Name {
    static let requestID = HTTPField.Name("X-Request-Id")!
}

/// Gives every request an id (the caller's `X-Request-Id` when it is a short token, else a new
/// one), puts it in the request's logger and the response, and logs one line per request:
/// method, path (never the query string, which may carry a recovery token), status, duration.
/// Bodies, cookies, tokens and challenges are never logged.
private let requestIDPrefix = UInt64.random(in: 0...UInt64.max)
private let requestSerial = Atomic<UInt64>(0)

struct RequestLogMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        let id = Self.requestID(request.headers[.requestID])
        var context = context
        context.logger[metadataKey: "request_id"] = .string(id)
        context.logger[metadataKey: "hb.request.id"] = nil
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            // The error middleware answers everything but a client that went away.
            if error is ClientAborted || context.clientWentAway { return aborted(request, context, since: start) }
            context.logger.info("request", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)", "status": "error"])
            throw error
        }
        if context.clientWentAway { return aborted(request, context, since: start) }
        response.headers[.requestID] = id
        let elapsed = ContinuousClock.now - start
        metrics.request(status: response.status.code, duration: elapsed)
        // A refusal past a rate limit (429) is counted (`passkeyd_requests_total{status="429"}`,
        // `passkeyd_rate_limited_total`) and logged at debug: a flood from one address would
        // otherwise write a line per refusal, the log's volume and the server's time going to it
        // (the noisy neighbour, docs/tenants.md).
        let level: Logger.Level =
            response.status.code >= 500 ? .warning : response.status == .tooManyRequests ? .debug : .info
        context.logger.log(
            level: level, "request",
            metadata: [
                "method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(response.status.code)",
                "duration_ms": "\(Double(elapsed.nanoseconds / 1000) / 1000)", "ip": "\(context.peerAddress ?? "-")",
            ])
        return response
    }

    /// A request whose client closed the connection first: logged at info, counted apart, never
    /// a 500 (nobody is there to read the answer).
    private func aborted(_ request: Request, _ context: Context, since start: ContinuousClock.Instant) -> Response {
        metrics.requestAborted()
        context.logger.info(
            "aborted request",
            metadata: [
                "method": "\(request.method)", "path": "\(request.uri.path)",
                "duration_ms": "\(Double((ContinuousClock.now - start).nanoseconds / 1000) / 1000)", "ip": "\(context.peerAddress ?? "-")",
            ])
        return Response(status: .init(code: 499, reasonPhrase: "Client Closed Request"))
    }

    static func requestID(_ supplied: String?) -> String {
        if let supplied, (8...64).contains(supplied.utf8.count),
            supplied.utf8.allSatisfy({
                $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            })
        {
            return supplied
        }
        // 24 hex digits: this process's random 64-bit prefix and a counter. Unique across
        // instances and requests without a call to the system's generator per request (a
        // request ID correlates log lines; it is no secret).
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(24)
        let serial = requestSerial.add(1, ordering: .relaxed).newValue
        for value in [requestIDPrefix >> 32, requestIDPrefix & 0xFFFF_FFFF, serial & 0xFFFF_FFFF] {
            for shift in stride(from: 28, through: 0, by: -4) { text.append(digits[Int((value >> UInt64(shift)) & 0xF)]) }
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// Works out the client of every request once, into `context.client`: its address (from
/// `X-Forwarded-For` when the TCP peer is a trusted proxy: the right-most address that is not
/// one), User-Agent, and with tracing on the `traceparent` of the request's span (what the
/// request's webhook deliveries carry). Added after the tracing middleware, so the span is there.
struct ClientMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let trustedProxies: [String]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.client = PasskeyService.Client(
            ipAddress: PasskeyService.clientAddress(
                peer: context.peerAddress, forwardedFor: request.headers[.forwardedFor], trustedProxies: trustedProxies),
            userAgent: request.headers[.userAgent], traceParent: Spans.currentTraceParent, language: request.headers[.acceptLanguage])
        return try await next(request, context)
    }
}
