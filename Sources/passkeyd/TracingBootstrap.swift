import Logging
import OTel
import PasskeyCore
import PasskeyStore
import ServiceLifecycle

/// OpenTelemetry traces, read from the standard `OTEL_*` variables and exported over OTLP/HTTP
/// (protobuf) by swift-otel. Off unless an OTLP endpoint is named (`OTEL_EXPORTER_OTLP_ENDPOINT`
/// or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER` asks for an exporter;
/// `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true` keeps it off whatever else is set.
/// Off, no tracer is bootstrapped and the server makes no span (``Spans``).
///
/// swift-otel reads the rest itself: `OTEL_SERVICE_NAME` (default `passkeyd`),
/// `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_EXPORTER_OTLP[_TRACES]_{PROTOCOL,HEADERS,TIMEOUT,COMPRESSION,
/// CERTIFICATE,CLIENT_KEY,CLIENT_CERTIFICATE}`, `OTEL_TRACES_SAMPLER[_ARG]`, `OTEL_PROPAGATORS`,
/// `OTEL_BSP_*` and `OTEL_LOG_LEVEL` (its own diagnostics, logged as `passkeyd.otel` without the
/// values of secret settings: ``LogRedaction``). Only
/// traces: logs stay passkeyd's own lines (which carry the ids) and metrics stay Prometheus.
enum OTelTraces {
    /// Whether the environment turns traces on.
    static func enabled(_ environment: [String: String]) -> Bool {
        func value(_ name: String) -> String? {
            environment[name].map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.flatMap { $0.isEmpty ? nil : $0 }
        }
        if value("OTEL_SDK_DISABLED") == "true" { return false }
        if let exporter = value("OTEL_TRACES_EXPORTER") { return exporter != "none" }
        return value("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != nil || value("OTEL_EXPORTER_OTLP_ENDPOINT") != nil
    }

    /// Bootstraps the tracer and turns spans on: the returned service exports the spans in
    /// batches, and sends the last ones when the server stops.
    static func bootstrap(environment: [String: String]) throws -> any Service {
        try checkPropagators(environment["OTEL_PROPAGATORS"])
        var configuration = OTel.Configuration.default
        configuration.serviceName = "passkeyd"
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.enabled = true
        // swift-otel logs each setting it reads, value and all (the collector's key in
        // OTEL_EXPORTER_OTLP_HEADERS among them): its lines go through the redaction.
        let redaction = LogRedaction(environment: environment)
        configuration.diagnosticLogger = .custom(
            Logger(label: "passkeyd.otel") { label in RedactingLogHandler(base: Logger(label: label).handler, redaction: redaction) })
        let service = try OTel.bootstrap(configuration: configuration, environment: environment)
        Spans.enable()
        return service
    }

    /// `OTEL_PROPAGATORS` names only what swift-otel can do: W3C `tracecontext`, or `none`.
    /// swift-otel stops the process (`fatalError`) on the others (`baggage`, `b3`, `b3multi`,
    /// `jaeger`, `xray`, `ottrace`): the start refuses them first, with a message.
    static func checkPropagators(_ value: String?) throws(ConfigurationError) {
        let names = (value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        for name in names where !name.isEmpty && name != "tracecontext" && name != "none" {
            throw ConfigurationError(
                setting: "OTEL_PROPAGATORS",
                problem: "\"\(name)\" is not supported: passkeyd propagates W3C Trace Context only (tracecontext, or none)")
        }
    }

    /// What puts the current span's `trace_id` and `span_id` in every log line.
    static let logMetadata = OTel.makeLoggingMetadataProvider()
}
