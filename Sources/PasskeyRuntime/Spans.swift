import Synchronization
import Tracing

/// Whether passkeyd makes spans, and the one way its libraries make them.
///
/// Off by default, and off costs nothing measurable: the executable turns spans on once, at
/// start, when it has bootstrapped a tracer (before any store is opened or request served);
/// until then every `measure` is one relaxed atomic load and a direct call, and no span name,
/// attribute or context is made. The libraries never ask the instrumentation system whether a
/// tracer is there (a read-write lock and a task-local read per call).
package enum Spans {
    private static let on = Atomic<Bool>(false)

    /// Whether spans are made.
    package static var enabled: Bool { on.load(ordering: .relaxed) }

    /// Spans from now on (the executable, once its tracer is bootstrapped).
    package static func enable() { on.store(true, ordering: .relaxed) }

    /// `body` as the current span `name` when spans are on (its error, typed as it is thrown,
    /// recorded on the span), else `body` alone. `inTraceOnly`: only inside a trace already
    /// begun (a request's), so that background work (sweeps, the webhook outbox's polling) does
    /// not start a trace of its own every time it asks the store something.
    package static func measure<T, E: Error>(
        _ name: @autoclosure () -> String, kind: SpanKind = .internal, inTraceOnly: Bool = false,
        attributes: (inout SpanAttributes) -> Void = { _ in }, _ body: () throws(E) -> T
    ) throws(E) -> T {
        guard enabled, !inTraceOnly || InstrumentationContext.current != nil else { return try body() }
        let span = startSpan(name(), ofKind: kind)
        defer { span.end() }
        span.updateAttributes(attributes)
        let result: Result<T, E> = InstrumentationContext.$current.withValue(span.context) {
            do throws(E) {
                return .success(try body())
            } catch {
                return .failure(error)
            }
        }
        return try settle(result, span)
    }

    /// `body` as the current span `name` when spans are on, else `body` alone (async).
    package static func measure<T, E: Error>(
        _ name: @autoclosure () -> String, kind: SpanKind = .internal, inTraceOnly: Bool = false,
        attributes: (inout SpanAttributes) -> Void = { _ in }, isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws(E) -> T
    ) async throws(E) -> T {
        guard enabled, !inTraceOnly || InstrumentationContext.current != nil else { return try await body() }
        let span = startSpan(name(), ofKind: kind)
        defer { span.end() }
        span.updateAttributes(attributes)
        let result: Result<T, E> = await InstrumentationContext.$current.withValue(span.context) {
            do throws(E) {
                return .success(try await body())
            } catch {
                return .failure(error)
            }
        }
        return try settle(result, span)
    }

    /// The W3C `traceparent` of the current span: nil when spans are off or no span is current
    /// (or the propagators in force, `OTEL_PROPAGATORS`, do not write one).
    package static var currentTraceParent: String? {
        guard enabled, let context = InstrumentationContext.current else { return nil }
        return traceParent(of: context)
    }

    /// The `traceparent` the propagators write for `context`.
    package static func traceParent(of context: InstrumentationContext) -> String? {
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: Carrier())
        return carrier["traceparent"]
    }

    /// A context whose remote parent is `traceParent` (what the propagators read of it).
    package static func context(traceParent: String) -> InstrumentationContext {
        var context = InstrumentationContext.topLevel
        InstrumentationSystem.instrument.extract(["traceparent": traceParent], into: &context, using: Carrier())
        return context
    }

    /// A `traceparent` as W3C Trace Context level 1 writes it (version 00: 55 characters,
    /// lower-case hex fields): one from the database is checked before it becomes a header.
    package static func isTraceParent(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 55 else { return false }
        for (index, byte) in bytes.enumerated() {
            let dash = index == 2 || index == 35 || index == 52
            guard dash ? byte == UInt8(ascii: "-") : (byte >= 0x30 && byte <= 0x39) || (byte >= 0x61 && byte <= 0x66) else {
                return false
            }
        }
        return true
    }

    private struct Carrier: Injector, Extractor {
        func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) { carrier[key] = value }
        func extract(key: String, from carrier: [String: String]) -> String? { carrier[key] }
    }

    private static func settle<T, E: Error>(_ result: Result<T, E>, _ span: any Span) throws(E) -> T {
        switch result {
        case .success(let value): return value
        case .failure(let error):
            span.recordError(error)
            span.setStatus(SpanStatus(code: .error))
            throw error
        }
    }
}
