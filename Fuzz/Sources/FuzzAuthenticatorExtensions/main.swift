import WebAuthn

/// Feeds arbitrary bytes as an authenticator extension map: decoded by the strict CBOR reader and
/// read as registration and as assertion outputs, then as the tail of assertion authenticator
/// data with ED set (rpIdHash, flags UP|UV|ED, counter, then the bytes). It must never trap, and
/// authenticator data accepts its tail exactly when the tail is one map whose outputs read.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAuthenticatorExtensions(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    var mapReads = false
    if let value = try? CBORReader.decode(bytes) {
        _ = try? AuthenticatorExtensionOutputs(map: value, registration: true)
        mapReads = (try? AuthenticatorExtensionOutputs(map: value, registration: false)) != nil
    }
    let header = [UInt8](repeating: 0x49, count: 32) + [0x85, 0, 0, 0, 1]
    let parsed = try? AuthenticatorData(bytes: header + bytes)
    if (parsed != nil) != mapReads { fatalError("authenticator data and the extension map disagree") }
    if let parsed, parsed.extensions == nil { fatalError("ED set and no extensions kept") }
    return 0
}
