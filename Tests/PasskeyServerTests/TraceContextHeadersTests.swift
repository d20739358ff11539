import HTTPTypes
import Testing

@testable import PasskeyServer

/// The W3C Trace Context headers a request's span is extracted from: `tracestate` held to the
/// Recommendation's list grammar and limits (32 members, 512 characters), dropped alone when
/// it breaks them; `traceparent` kept.
@Suite struct TraceContextHeadersTests {
    static let traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    static func headers(traceState: [String]) -> HTTPFields {
        var fields = HTTPFields()
        fields[HTTPField.Name("traceparent")!] = traceParent
        for value in traceState { fields.append(HTTPField(name: HTTPField.Name("tracestate")!, value: value)) }
        return fields
    }

    @Test func aNormalTracestateIsKeptWithTheTraceparent() {
        let trace = TraceContextHeaders(Self.headers(traceState: ["rojo=00f067aa0ba902b7, congo=t61rcWkgMzE"]))
        #expect(trace.traceParent == Self.traceParent)
        #expect(trace.traceState == "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
        #expect(trace.carrier == ["traceparent": Self.traceParent, "tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"])
    }

    @Test func tracestateFieldsAreCombinedInOrder() {
        let trace = TraceContextHeaders(Self.headers(traceState: ["rojo=1", "congo=2,\t,fr@acme=a b "]))
        #expect(trace.traceState == "rojo=1,congo=2,fr@acme=a b")
    }

    @Test func moreThan32MembersDropTheTracestateNotTheTraceparent() {
        // The tester's header: 1,200 members, 13 KB.
        let members = (0..<1200).map { "vendor\($0)=value-\($0)" }
        let trace = TraceContextHeaders(Self.headers(traceState: [members.joined(separator: ",")]))
        #expect(trace.traceParent == Self.traceParent)
        #expect(trace.traceState == nil)
        #expect(trace.carrier == ["traceparent": Self.traceParent])
        // 32 is the limit, empty members counted.
        #expect(TraceContextHeaders.limitedTraceState(members.prefix(32).joined(separator: ",")) != nil)
        #expect(TraceContextHeaders.limitedTraceState(members.prefix(33).joined(separator: ",")) == nil)
        #expect(TraceContextHeaders.limitedTraceState(members.prefix(31).joined(separator: ",") + ",,") == nil)
    }

    @Test func over512CharactersLosesEntriesOver128FirstThenFromTheEnd() {
        let large = "big=" + String(repeating: "x", count: 130)
        let medium = (0..<4).map { "m\($0)=" + String(repeating: "y", count: 100) }  // 103 characters each
        // 134 + 4 × 103 + 4 commas = 550: the large one goes, the rest (415) stays.
        #expect(TraceContextHeaders.limitedTraceState(([large] + medium).joined(separator: ",")) == medium.joined(separator: ","))
        // Six of 103 (623): the last two go (415).
        let six = (0..<6).map { "m\($0)=" + String(repeating: "y", count: 100) }
        #expect(TraceContextHeaders.limitedTraceState(six.joined(separator: ", ")) == six.prefix(4).joined(separator: ","))
        // 512 exactly stays: 4 × 103, 4 commas and "z=" with 94 characters.
        let exact = medium + ["z=" + String(repeating: "z", count: 94)]
        #expect(TraceContextHeaders.limitedTraceState(exact.joined(separator: ",")) == exact.joined(separator: ","))
    }

    @Test(arguments: [
        "Rojo=1",  // upper case key
        "rojo",  // no value
        "rojo=",  // empty value
        "rojo=a,rojo=b",  // a key twice
        "rojo=a=b",  // '=' in a value
        "@acme=1",  // empty tenant
        "t@Acme=1",  // upper case system
        "t@acme-system-way-too-long=1",  // system over 14
        "rojo=caf\u{e9}",  // not ASCII
        String(repeating: "k", count: 257) + "=1",  // key over 256
        "k=" + String(repeating: "v", count: 257),  // value over 256
    ])
    func anInvalidTracestateIsDroppedAndTheTraceparentKept(_ value: String) {
        let trace = TraceContextHeaders(Self.headers(traceState: [value]))
        #expect(trace.traceParent == Self.traceParent)
        #expect(trace.traceState == nil, "\(value)")
    }

    @Test(arguments: [
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",  // short
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace-id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero parent-id
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // a later version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01, 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    ])
    func anInvalidTraceparentIsIgnoredWithItsTracestate(_ value: String) {
        var fields = HTTPFields()
        fields[HTTPField.Name("traceparent")!] = value
        fields[HTTPField.Name("tracestate")!] = "rojo=1"
        let trace = TraceContextHeaders(fields)
        #expect(trace.traceParent == nil && trace.traceState == nil)
        #expect(trace.carrier.isEmpty)
    }

    @Test func theTracerIsGivenNoOtherHeader() {
        var fields = Self.headers(traceState: ["rojo=1"])
        fields[.cookie] = "session=SECRET"
        fields[.authorization] = "Bearer SECRET"
        #expect(Set(TraceContextHeaders(fields).carrier.keys) == ["traceparent", "tracestate"])
    }
}
