import WebAuthn

/// Feeds arbitrary bytes to the CBOR reader under both limit sets. It must never trap; when it
/// accepts an input, the writer's encoding of the value must read back to the same value.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCBOR(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    _ = try? CBORReader.decodePrefix(bytes)
    if let value = try? CBORReader.decode(bytes, limits: .init(allowIndefiniteLength: true)), !containsFloat(value) {
        let again = try? CBORReader.decode(CBORWriter.encode(value), limits: .init(allowIndefiniteLength: true))
        if again != value { fatalError("CBOR round trip changed the value") }
    }
    return 0
}

private func containsFloat(_ value: CBORValue) -> Bool {
    switch value {
    case .float: true
    case .array(let items): items.contains(where: containsFloat)
    case .map(let entries): entries.contains { containsFloat($0.key) || containsFloat($0.value) }
    case .tagged(_, let inner): containsFloat(inner)
    default: false
    }
}
