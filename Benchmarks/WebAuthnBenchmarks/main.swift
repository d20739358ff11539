// Library benchmark: the cost of a whole assertion check against the bare signature check it
// contains. Run with `swift run -c release WebAuthnBenchmarks` (or ./scripts/bench).
//
// Both loops verify the same P-256 signature over the same bytes, single-threaded:
//   raw       P256.Signing.ECDSASignature(derRepresentation:) + isValidSignature(for: authData || SHA-256(clientDataJSON))
//   ceremony  AuthenticationResponseJSON bytes -> decode -> RelyingParty.finishAuthentication -> verdict
import Crypto
import Foundation
import WebAuthn
import WebAuthnTesting

@inline(never) func blackHole<T>(_ value: T) { withExtendedLifetime(value) {} }

func measure(_ label: String, iterations: Int, _ body: () throws -> Void) rethrows -> Double {
    for _ in 0..<max(iterations / 10, 100) { try body() }  // warm up
    var best = Double.infinity
    for _ in 0..<5 {
        let start = ContinuousClock.now
        for _ in 0..<iterations { try body() }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = min(best, seconds / Double(iterations))
    }
    print(String(format: "%-38@ %9.2f µs/op  %10.0f ops/s", label as NSString, best * 1e6, 1 / best))
    return best
}

/// ``measure(_:iterations:_:)`` for an async body (registration verifies its attestation chain
/// with swift-certificates' async `Verifier`). The body must be `@Sendable` and is run from a
/// detached task: top-level code runs on the main actor, and a main-actor body would hop to the
/// global executor and back on every call (two thread wake-ups a call, not what a server pays).
func measureAsync(_ label: String, iterations: Int, _ body: @escaping @Sendable () async throws -> Void) async throws -> Double {
    try await Task.detached { try await measureLoop(label, iterations: iterations, body) }.value
}

nonisolated func measureLoop(_ label: String, iterations: Int, _ body: @Sendable () async throws -> Void) async throws -> Double {
    for _ in 0..<max(iterations / 10, 100) { try await body() }  // warm up
    var best = Double.infinity
    for _ in 0..<5 {
        let start = ContinuousClock.now
        for _ in 0..<iterations { try await body() }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        best = min(best, seconds / Double(iterations))
    }
    print(String(format: "%-38@ %9.2f µs/op  %10.0f ops/s", label as NSString, best * 1e6, 1 / best))
    return best
}

let iterations = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 4000
let rp = try RelyingParty(.init(rpID: "example.com", rpName: "Bench", origins: ["https://example.com"]))
var authenticator = SoftwareAuthenticator(seed: Array("bench".utf8))
let user = PublicKeyCredentialUserEntity(id: RelyingParty.makeUserHandle(), name: "bench", displayName: "Bench")
let registration = rp.beginRegistration(user: user)
let (registrationResponse, created) = try authenticator.register(options: registration.options, origin: "https://example.com")
var credential = created
let verified = try await rp.finishRegistration(response: registrationResponse, expectedChallenge: registration.challenge)
let stored = StoredCredential(
    id: verified.credentialID, publicKey: verified.publicKey, signCount: 0, userHandle: user.id, backupEligible: true)

// One assertion, signed with counter 0 (a synced passkey), so it verifies on every iteration.
let request = rp.beginAuthentication()
let assertion = try authenticator.authenticate(
    options: request.options, origin: "https://example.com", credential: &credential, counterStep: 0)
let assertionJSON = Array(try JSONEncoder().encode(assertion))
let signedBytes = assertion.response.authenticatorData.bytes + Array(SHA256.hash(data: assertion.response.clientDataJSON.bytes))
let rawKey = try P256.Signing.PublicKey(
    rawRepresentation: P256.Signing.PrivateKey(rawRepresentation: credential.privateKey).publicKey.rawRepresentation)
let signatureDER = assertion.response.signature.bytes

print("passkeyd library benchmark — \(iterations) iterations per round, single thread")

// The raw check and the whole ceremony run in alternating short rounds, so that a noisy
// machine (a shared VM) slows both alike; the ratio is the median of the per-round ratios.
func rawCheck() throws {
    let signature = try P256.Signing.ECDSASignature(derRepresentation: signatureDER)
    precondition(rawKey.isValidSignature(signature, for: signedBytes))
}
func ceremonyCheck() throws {
    let response = try AuthenticationResponseJSON.decode(assertionJSON)
    blackHole(try rp.finishAuthentication(response: response, expectedChallenge: request.challenge, credential: stored))
}
let batch = 100
func timePerOp(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    for _ in 0..<batch { try body() }
    let elapsed = ContinuousClock.now - start
    return (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18) / Double(batch)
}
for _ in 0..<max(iterations / 10, 100) {
    try rawCheck()
    try ceremonyCheck()
}
var ratios: [Double] = [], raws: [Double] = [], ceremonies: [Double] = []
let rounds = max(iterations / batch, 9)
for _ in 0..<rounds {
    let r = try timePerOp(rawCheck)
    let c = try timePerOp(ceremonyCheck)
    raws.append(r)
    ceremonies.append(c)
    ratios.append(r / c)
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
let raw = median(raws), ceremony = median(ceremonies)
print(String(format: "%-38@ %9.2f µs/op  %10.0f ops/s", "raw P-256 verify (swift-crypto)" as NSString, raw * 1e6, 1 / raw))
print(String(format: "%-38@ %9.2f µs/op  %10.0f ops/s", "finishAuthentication from JSON" as NSString, ceremony * 1e6, 1 / ceremony))
_ = try measure("  of which JSON decode", iterations: iterations) {
    blackHole(try AuthenticationResponseJSON.decode(assertionJSON))
}
_ = try measure("COSE key parse (once per credential)", iterations: iterations) {
    blackHole(try CredentialPublicKey(cose: verified.publicKey.coseBytes))
}
let registrationJSON = Array(try JSONEncoder().encode(registrationResponse))
let registrationChallenge = registration.challenge
let relyingParty = rp
let finishRegistration = try await measureAsync("finishRegistration from JSON", iterations: iterations) {
    let response = try RegistrationResponseJSON.decode(registrationJSON)
    blackHole(try await relyingParty.finishRegistration(response: response, expectedChallenge: registrationChallenge))
}
_ = finishRegistration
// Packed attestation with an x5c chain: the statement, then the chain judged by the Verifier
// twice (well formed; trusted by its root).
let attestationCA = try AttestationCA()
let attestedRP = try RelyingParty(
    .init(
        rpID: "example.com", rpName: "Bench", origins: ["https://example.com"], attestation: .direct,
        attestationPolicy: AttestationPolicy(trustAnchors: [attestationCA.root], requireTrustedAttestation: true)))
var attestingAuthenticator = SoftwareAuthenticator(seed: Array("bench-attested".utf8))
attestingAuthenticator.attestation = .packedFull(attestationCA)
let attestedBegin = attestedRP.beginRegistration(user: user)
let (attestedResponse, _) = try attestingAuthenticator.register(options: attestedBegin.options, origin: "https://example.com")
let attestedJSON = Array(try JSONEncoder().encode(attestedResponse))
let attestedChallenge = attestedBegin.challenge
_ = try await measureAsync("finishRegistration, packed + x5c root", iterations: max(iterations / 10, 100)) {
    let response = try RegistrationResponseJSON.decode(attestedJSON)
    blackHole(try await attestedRP.finishRegistration(response: response, expectedChallenge: attestedChallenge))
}
print(
    String(
        format:
            "ratio raw / ceremony = %.3f (median of %d alternating rounds of %d; target ≥ 0.85: the whole check costs at most 15%% more)",
        rounds, batch, median(ratios)))
if CommandLine.arguments.contains("--breakdown") {
    let response = try AuthenticationResponseJSON.decode(assertionJSON)
    _ = try measure("  clientData parse", iterations: iterations) {
        blackHole(try CollectedClientData(bytes: response.response.clientDataJSON.bytes))
    }
    _ = try measure("  authenticatorData parse", iterations: iterations) {
        blackHole(try AuthenticatorData(bytes: response.response.authenticatorData.bytes))
    }
    _ = try measure("  JSON parse only", iterations: iterations) { blackHole(try JSONReader.parse(assertionJSON)) }
    _ = measure("  sha256 clientData", iterations: iterations) { blackHole(SHA256.hash(data: response.response.clientDataJSON.bytes)) }
    let concatenated = response.response.authenticatorData.bytes + Array(SHA256.hash(data: response.response.clientDataJSON.bytes))
    _ = try measure("  raw again", iterations: iterations) { try rawCheck() }
    _ = try measure("  CredentialPublicKey.verify", iterations: iterations) {
        try stored.publicKey.verify(signature: response.response.signature.bytes, over: concatenated)
    }
    _ = try measure("  verify only (parsed)", iterations: iterations) {
        blackHole(try rp.finishAuthentication(response: response, expectedChallenge: request.challenge, credential: stored))
    }
}
