import Foundation
import Testing

@testable import WebAuthn

/// Inputs the fuzzers (scripts/fuzz) found interesting or crashing, replayed through every
/// parser any of them reaches (an input is not tied to the target that found it). Each must be
/// rejected or accepted cleanly, never trap.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    static let inputs: [String] = {
        let directory = Fixtures.directory.appendingPathComponent("fuzz-regressions")
        return ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { !$0.hasPrefix(".") }.sorted()
    }()

    /// With no inputs the parameterized test below runs zero cases and passes: a lost or
    /// unreadable fixture folder would silently test nothing.
    @Test func theFixturesAreThere() {
        #expect(!Self.inputs.isEmpty, "Tests/Fixtures/fuzz-regressions has no inputs")
    }

    @Test(arguments: inputs)
    func replaysWithoutTrapping(_ name: String) async throws {
        let bytes = Array(try Fixtures.data("fuzz-regressions/\(name)"))
        _ = try? CBORReader.decode(bytes, limits: .init(allowIndefiniteLength: true))
        _ = try? AuthenticatorData(bytes: bytes)
        _ = try? CredentialPublicKey(cose: bytes)
        // FuzzClientExtensionResults and FuzzAuthenticatorExtensions (issue 37).
        if case .object(let members)? = try? JSONReader.parse(bytes) { _ = try? ClientExtensionOutputs(members) }
        if let value = try? CBORReader.decode(bytes) {
            _ = try? AuthenticatorExtensionOutputs(map: value, registration: true)
            _ = try? AuthenticatorExtensionOutputs(map: value, registration: false)
        }
        _ = try? AuthenticatorData(bytes: [UInt8](repeating: 0x49, count: 32) + [0x85, 0, 0, 0, 1] + bytes)
        if let object = try? AttestationObject(bytes: bytes) {
            let rp = try RelyingParty(.init(rpID: "localhost", origins: ["http://localhost:8080"], userVerification: .discouraged))
            let id = object.authenticatorData.attestedCredentialData?.credentialID ?? [1]
            let clientData = Array(
                #"{"type":"webauthn.create","challenge":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc","origin":"http://localhost:8080"}"#
                    .utf8)
            let response = RegistrationResponseJSON(
                id: Base64URLBytes(id).base64URL, rawId: Base64URLBytes(id),
                response: .init(
                    clientDataJSON: Base64URLBytes(clientData), attestationObject: Base64URLBytes(bytes)))
            _ = try? await rp.finishRegistration(response: response, expectedChallenge: Array(repeating: 7, count: 32))
        }
    }
}
