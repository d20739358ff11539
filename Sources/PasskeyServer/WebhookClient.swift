import AsyncHTTPClient
import Foundation
import NIOCore
import PasskeyCore
import PasskeyRuntime
import Synchronization
import Tracing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The HTTP client webhook deliveries go through, held to ``OutboundURLPolicy``:
/// - the URL is checked again before each send, and a name's addresses are resolved and checked
///   (any inside address refuses the send);
/// - every connection is checked once open, on the address the socket actually reached (a name
///   that resolves differently for the client than it did a moment before changes nothing);
/// - redirects are never followed (a 3xx is a failed delivery);
/// - a refused connection fails at once (no retry until the deadline), a connection attempt
///   gives up after `connectTimeout`, and the whole exchange after `requestTimeout`;
/// - traced by a span of its own (``traced(_:_:)``), never async-http-client's, which records
///   the URL whole (`url.full`, `url.query`: a receiver's `?token=`).
struct WebhookClient: WebhookSender {
    typealias Outcome = WebhookSendOutcome

    let http: HTTPClient
    let policy: OutboundURLPolicy
    let requestTimeout: Duration
    /// Names resolved lately: until when the verdict holds, and the refusal if any.
    private final class Verdicts: Sendable {
        let byName = Mutex<[String: (until: ContinuousClock.Instant, refusal: OutboundURLPolicy.Refusal?)]>([:])
    }
    private let resolved = Verdicts()

    init(policy: OutboundURLPolicy, connectTimeout: Duration, requestTimeout: Duration) {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .nanoseconds(connectTimeout.nanoseconds), read: .nanoseconds(requestTimeout.nanoseconds)))
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.connectionPool.idleTimeout = .seconds(30)
        configuration.decompression = .disabled
        configuration.tracing.tracer = nil
        if !policy.allowsPrivateAddresses {
            let check: @Sendable (Channel) -> EventLoopFuture<Void> = { channel in Self.checkPeer(channel, policy: policy) }
            configuration.http1_1ConnectionDebugInitializer = check
            configuration.http2ConnectionDebugInitializer = check
        }
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        self.policy = policy
        self.requestTimeout = requestTimeout
    }

    func shutdown() async {
        try? await http.shutdown()
    }

    /// The connect-time rule: the peer of a new connection must be an address the policy allows;
    /// otherwise the connection is closed before a byte of the request is written.
    static func checkPeer(_ channel: Channel, policy: OutboundURLPolicy) -> EventLoopFuture<Void> {
        let refusal: OutboundURLPolicy.Refusal?
        switch channel.remoteAddress {
        case .v4(let address)?:
            refusal = Self.refusal { () throws(OutboundURLPolicy.Refusal) in
                try policy.check(address: withUnsafeBytes(of: address.address.sin_addr) { Array($0) })
            }
        case .v6(let address)?:
            refusal = Self.refusal { () throws(OutboundURLPolicy.Refusal) in
                try policy.check(address: withUnsafeBytes(of: address.address.sin6_addr) { Array($0) })
            }
        default:
            refusal = OutboundURLPolicy.Refusal(description: "the connection has no IP peer address")
        }
        guard let refusal else { return channel.eventLoop.makeSucceededVoidFuture() }
        // The pool learns of the failure first; the close that follows is one it expects.
        channel.eventLoop.execute { channel.close(promise: nil) }
        return channel.eventLoop.makeFailedFuture(refusal)
    }

    private static func refusal(_ body: () throws(OutboundURLPolicy.Refusal) -> Void) -> OutboundURLPolicy.Refusal? {
        do {
            try body()
            return nil
        } catch {
            return error
        }
    }

    /// Sends one signed event; never throws, never takes longer than `requestTimeout` (plus the
    /// name's resolution, itself bounded).
    func post(url: String, headers: [(String, String)], body: [UInt8]) async -> Outcome {
        let destination: OutboundURLPolicy.Destination
        do {
            destination = try policy.check(url: url)
            if destination.address == nil, !policy.allowsPrivateAddresses { try await vet(name: destination.host) }
        } catch let refusal as OutboundURLPolicy.Refusal {
            return Outcome(failure: "address refused: \(refusal.description)", reason: "address_refused")
        } catch {
            return Outcome(failure: String("\(error)".prefix(200)), reason: "error")
        }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(bytes: body))
        return await traced(destination, request)
    }

    /// The exchange as a client span of the trace current (a delivery's `webhook.deliver`), whose
    /// `traceparent` the request carries; no span when spans are off or no trace is current.
    /// The span names the method, scheme, host and port, and the answer's status: never the
    /// user information, path or query, where receivers keep their secret (`?token=`, the
    /// token in Slack's and Discord's paths).
    private func traced(_ destination: OutboundURLPolicy.Destination, _ request: HTTPClientRequest) async -> Outcome {
        guard Spans.enabled, let parent = InstrumentationContext.current else { return await send(request) }
        var request = request
        let span = startSpan(request.method.rawValue, context: parent, ofKind: .client)
        defer { span.end() }
        span.updateAttributes { attributes in
            attributes["http.request.method"] = request.method.rawValue
            attributes["url.scheme"] = destination.scheme
            attributes["server.address"] = destination.host
            attributes["server.port"] = destination.port
        }
        if let traceParent = Spans.traceParent(of: span.context) { request.headers.replaceOrAdd(name: "traceparent", value: traceParent) }
        let outcome = await InstrumentationContext.$current.withValue(span.context) { [request] in await send(request) }
        if let status = outcome.status { span.attributes["http.response.status_code"] = status }
        if !outcome.delivered {
            span.attributes["error.type"] = outcome.reason ?? "error"
            span.setStatus(SpanStatus(code: .error))
        }
        return outcome
    }

    private func send(_ request: HTTPClientRequest) async -> Outcome {
        let deadline = NIODeadline.now() + .nanoseconds(requestTimeout.nanoseconds)
        do {
            let status = try await Self.within(requestTimeout) { [http, request] in
                let response = try await http.execute(request, deadline: deadline)
                _ = try? await response.body.collect(upTo: 64 * 1024)
                return Int(response.status.code)
            }
            switch status {
            case 200..<300: return Outcome(status: status)
            case 300..<400: return Outcome(status: status, failure: "HTTP \(status): redirects are not followed", reason: "redirect")
            default: return Outcome(status: status, failure: "HTTP \(status)", reason: "http_status")
            }
        } catch let refusal as OutboundURLPolicy.Refusal {
            return Outcome(failure: "address refused: \(refusal.description)", reason: "address_refused")
        } catch {
            return Self.outcome(of: error)
        }
    }

    private static func outcome(of error: any Error) -> Outcome {
        let text = String("\(error)".prefix(200))
        if error is TimedOut || (error as? HTTPClientError) == .deadlineExceeded || (error as? HTTPClientError) == .connectTimeout
            || (error as? HTTPClientError) == .readTimeout
        {
            return Outcome(failure: "timed out (\(text))", reason: "timeout")
        }
        if let io = error as? IOError, io.errnoCode == ECONNREFUSED {
            return Outcome(failure: "connection refused", reason: "refused")
        }
        if text.contains("connection refused") || text.contains("Connection refused") {
            return Outcome(failure: "connection refused", reason: "refused")
        }
        return Outcome(failure: text, reason: "error")
    }

    struct TimedOut: Error, CustomStringConvertible {
        var description: String { "the request took too long" }
    }

    /// `body`, cancelled once `limit` has passed.
    static func within<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            defer { group.cancelAll() }
            guard case let value?? = try await group.next() else { throw TimedOut() }
            return value
        }
    }

    /// Resolves a name (cached 30 s) and refuses it when any of its addresses is an inside one.
    /// A name that does not resolve is left to the client, whose own lookup then fails.
    private func vet(name: String) async throws(OutboundURLPolicy.Refusal) {
        let now = ContinuousClock.now
        if let known = resolved.byName.withLock({ $0[name] }), known.until > now {
            if let refusal = known.refusal { throw refusal }
            return
        }
        let addresses = await NameResolver.resolve(name, within: .seconds(2)) ?? []
        var refusal: OutboundURLPolicy.Refusal?
        for address in addresses {
            do throws(OutboundURLPolicy.Refusal) {
                try policy.check(address: address)
            } catch {
                refusal = OutboundURLPolicy.Refusal(description: "\(name) resolves to \(error.description)")
                break
            }
        }
        if !addresses.isEmpty {
            resolved.byName.withLock {
                if $0.count > 1000 { $0.removeAll() }
                $0[name] = (now + .seconds(30), refusal)
            }
        }
        if let refusal { throw refusal }
    }
}
