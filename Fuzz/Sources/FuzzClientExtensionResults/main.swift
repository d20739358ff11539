import WebAuthn

/// Feeds arbitrary bytes as a `clientExtensionResults` JSON document through the strict JSON
/// reader and then the bounded, typed extension output parser. It must never trap; what it
/// accepts must hold the typed values the document carried.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzClientExtensionResults(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard case .object(let members)? = try? JSONReader.parse(bytes) else { return 0 }
    guard let outputs = try? ClientExtensionOutputs(members) else { return 0 }
    // Accepted: a known member of the right type reads back as itself, and a PRF output never passes.
    if case .bool(let rk)? = members["credProps"]?["rk"], outputs.discoverable != rk { fatalError("credProps.rk was not kept") }
    if case .bool(let enabled)? = members["prf"]?["enabled"], outputs.prfEnabled != enabled { fatalError("prf.enabled was not kept") }
    if let results = members["prf"]?["results"], results != .null { fatalError("prf.results was accepted") }
    return 0
}
