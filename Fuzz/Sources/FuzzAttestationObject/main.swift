import Dispatch
import WebAuthn

/// Feeds arbitrary bytes as an attestation object through parsing and then the whole
/// registration ceremony (every attestation format, certificate parsing, chain checks), with a
/// client data whose challenge and origin match so the fuzzer reaches the attestation code.
/// It must never trap.
///
/// Static members initialise lazily: libFuzzer's main runs, not this file's top-level code.
enum Fixture {
    static let relyingParty = try! RelyingParty(
        .init(
            rpID: "localhost", rpName: "fuzz", origins: ["http://localhost:8080"], userVerification: .discouraged,
            algorithms: RelyingParty.defaultAlgorithms + [.rs1, .ps384, .ps512, .rs384, .rs512, .mlDSA65, .mlDSA87],
            attestation: .direct, attestationPolicy: AttestationPolicy(allowSHA1Attestation: true)))
    static let challenge: [UInt8] = Array(repeating: 7, count: 32)
    static let clientDataJSON = Array(
        #"{"type":"webauthn.create","challenge":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc","origin":"http://localhost:8080"}"#.utf8)
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAttestationObject(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let object = try? AttestationObject(bytes: bytes) else {
        _ = try? AuthenticatorData(bytes: bytes)
        return 0
    }
    let id = object.authenticatorData.attestedCredentialData?.credentialID ?? [1]
    let response = RegistrationResponseJSON(
        id: Base64URLBytes(id).base64URL, rawId: Base64URLBytes(id),
        response: AuthenticatorAttestationResponseJSON(
            clientDataJSON: Base64URLBytes(Fixture.clientDataJSON), attestationObject: Base64URLBytes(bytes)))
    // Registration is async (the chain goes through swift-certificates' Verifier); libFuzzer's
    // thread is not one of Swift's, so waiting for a task here blocks nothing it needs.
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        _ = try? await Fixture.relyingParty.finishRegistration(response: response, expectedChallenge: Fixture.challenge)
        done.signal()
    }
    done.wait()
    return 0
}
