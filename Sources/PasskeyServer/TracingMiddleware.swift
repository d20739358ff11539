import HTTPTypes
import Hummingbird
import PasskeyRuntime
import Tracing

/// A server span per request (`POST /api/auth/authenticate/verify`), the root of what the
/// request does (store calls, WebAuthn verification) or the child of the caller's W3C
/// `traceparent` (and its `tracestate`, held to W3C's limits: ``TraceContextHeaders``).
/// Outermost, so that the request's log line carries its ids. Only the method,
/// route, path (never the query string, which may carry a recovery token), status and the
/// client's address are recorded: no body, cookie or header value.
///
/// Added only when tracing is on (``Spans``); Hummingbird's `TracingMiddleware` records the
/// query string, hence this one.
struct TracingMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var parent = InstrumentationContext.current ?? .topLevel
        let trace = TraceContextHeaders(request.headers)
        if trace.traceParent != nil {
            InstrumentationSystem.instrument.extract(trace.carrier, into: &parent, using: Carrier())
        }
        let route = context.endpointPath
        let span = startSpan(route.map { "\(request.method.rawValue) \($0)" } ?? request.method.rawValue, context: parent, ofKind: .server)
        defer { span.end() }
        span.updateAttributes { attributes in
            attributes["http.request.method"] = request.method.rawValue
            attributes["url.path"] = request.uri.path
            attributes["http.route"] = route
            attributes["client.address"] = context.peerAddress
        }
        do {
            let response = try await InstrumentationContext.$current.withValue(span.context) { try await next(request, context) }
            span.attributes["http.response.status_code"] = Int(response.status.code)
            if response.status.code >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        } catch {
            // The error middleware answers every error but a client that went away.
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }

    private struct Carrier: Extractor {
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }
}
