import Crypto
import Foundation
import SwiftASN1
import Testing
import WebAuthnTesting
import X509

@testable import WebAuthn

@Suite("Attestation statements (§8) with generated PKI")
struct AttestationTests {
    @Test func packedSelfAttestationVerifies() async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.attestation = .packedSelf
        let verdict = try await harness.register().0.attestation
        #expect(verdict.format == "packed" && verdict.type == .self && !verdict.trusted)
    }

    @Test func packedSelfAttestationWithABadSignatureFails() async throws {
        var harness = try CeremonyHarness()
        harness.authenticator.attestation = .packedSelf
        await #expect(throws: WebAuthnError(.attestationInvalid, "")) {
            try await harness.register { response in
                response.response.attestationObject = Base64URLBytes(
                    Self.replacingStatement(response.response.attestationObject.bytes) { statement in
                        .map([CBORMapEntry(.text("alg"), .int(-7)), CBORMapEntry(.text("sig"), .bytes([0x30, 0x00]))])
                    })
            }
        }
    }

    @Test func packedFullAttestationIsTrustedOnlyWithItsRoot() async throws {
        let ca = try AttestationCA()
        let otherCA = try AttestationCA(name: "Another Root")
        // No anchors: verified, reported untrusted.
        var open = try CeremonyHarness { $0.attestation = .direct }
        open.authenticator.attestation = .packedFull(ca)
        let untrusted = try await open.register().0.attestation
        #expect(untrusted.type == .basic && !untrusted.trusted && untrusted.certificates.count == 1)
        // Its root configured and required: trusted.
        var strict = try CeremonyHarness {
            $0.attestation = .direct
            $0.attestationPolicy = AttestationPolicy(trustAnchors: [ca.root], requireTrustedAttestation: true)
        }
        strict.authenticator.attestation = .packedFull(ca)
        #expect(try await strict.register().0.attestation.trusted)
        // Another root required: rejected.
        var wrongRoot = try CeremonyHarness {
            $0.attestationPolicy = AttestationPolicy(trustAnchors: [otherCA.root], requireTrustedAttestation: true)
        }
        wrongRoot.authenticator.attestation = .packedFull(ca)
        await #expect(throws: WebAuthnError(.attestationUntrusted, "")) { try await wrongRoot.register() }
        // Trust required and no attestation at all: rejected.
        strict.authenticator.attestation = .none
        await #expect(throws: WebAuthnError(.attestationUntrusted, "")) { try await strict.register() }
        strict.authenticator.attestation = .packedSelf
        await #expect(throws: WebAuthnError(.attestationUntrusted, "")) { try await strict.register() }
    }

    @Test func anAttestationCertificateOutsideItsValidityIsUntrusted() async throws {
        let expired = try AttestationCA(
            notBefore: Date(timeIntervalSince1970: 1_000_000_000), notAfter: Date(timeIntervalSince1970: 1_100_000_000))
        var harness = try CeremonyHarness {
            $0.attestationPolicy = AttestationPolicy(trustAnchors: [expired.root], requireTrustedAttestation: true)
        }
        harness.authenticator.attestation = .packedFull(expired)
        await #expect(throws: WebAuthnError(.attestationUntrusted, "")) { try await harness.register() }
    }

    @Test func packedCertificateRequirementsAreEnforced() async throws {
        let ca = try AttestationCA()
        let key = P256.Signing.PrivateKey()
        let cases: [(String, Certificate)] = [
            ("CA certificate", try ca.issueAttestationCertificate(for: key, aaguid: nil, isCA: true)),
            ("wrong OU", try ca.issueAttestationCertificate(for: key, aaguid: nil, organizationalUnit: "Something Else")),
            ("AAGUID mismatch", try ca.issueAttestationCertificate(for: key, aaguid: AAGUID(bytes: Array(repeating: 1, count: 16)))),
        ]
        for (label, certificate) in cases {
            var harness = try CeremonyHarness()
            await #expect(throws: WebAuthnError(.attestationInvalid, ""), "\(label)") {
                try await harness.register { response in
                    let authData = Self.authData(of: response.response.attestationObject.bytes)
                    let clientDataHash = Array(SHA256.hash(data: response.response.clientDataJSON.bytes))
                    let sig = Array(try! key.signature(for: authData + clientDataHash).derRepresentation)
                    response.response.attestationObject = Base64URLBytes(
                        Self.replacingStatement(response.response.attestationObject.bytes, format: "packed") { _ in
                            .map([
                                CBORMapEntry(.text("alg"), .int(-7)), CBORMapEntry(.text("sig"), .bytes(sig)),
                                CBORMapEntry(.text("x5c"), .array([.bytes(Self.der(certificate))])),
                            ])
                        })
                }
            }
        }
    }

    @Test func formatsArePolicedByPolicy() async throws {
        var onlyPacked = try CeremonyHarness { $0.attestationPolicy = AttestationPolicy(allowedFormats: ["packed"]) }
        await #expect(throws: WebAuthnError(.attestationNotAllowed, "")) { try await onlyPacked.register() }
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.unsupportedAttestationFormat, "")) {
            try await harness.register { r in
                r.response.attestationObject = Base64URLBytes(
                    Self.replacingStatement(r.response.attestationObject.bytes, format: "made-up") { $0 })
            }
        }
        await #expect(throws: WebAuthnError(.attestationInvalid, "")) {
            try await harness.register { r in
                r.response.attestationObject = Base64URLBytes(
                    Self.replacingStatement(r.response.attestationObject.bytes) { _ in .map([CBORMapEntry(.text("x"), .null)]) })
            }
        }
    }

    @Test func anRS1SelfAttestationOverAnES256KeyIsRefusedWhateverTheSHA1Policy() async throws {
        // SHA-1 statements are accepted by default (flagged in the verdict; see
        // AuthenticatorPolicyTests), but a self attestation must use the credential key's algorithm.
        var harness = try CeremonyHarness()
        await #expect(throws: WebAuthnError(.attestationInvalid, "")) {
            try await harness.register { r in
                r.response.attestationObject = Base64URLBytes(
                    Self.replacingStatement(r.response.attestationObject.bytes, format: "packed") { _ in
                        .map([CBORMapEntry(.text("alg"), .int(-65535)), CBORMapEntry(.text("sig"), .bytes([1]))])
                    })
            }
        }
    }

    // MARK: helpers

    static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        try? serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    static func authData(of attestationObject: [UInt8]) -> [UInt8] {
        (try? CBORReader.decode(attestationObject))?[text: "authData"]?.bytesValue ?? []
    }

    static func replacingStatement(_ attestationObject: [UInt8], format: String? = nil, _ change: (CBORValue) -> CBORValue) -> [UInt8] {
        guard let value = try? CBORReader.decode(attestationObject), let entries = value.mapValue else { return attestationObject }
        return CBORWriter.encode(
            .map(
                entries.map { entry in
                    switch entry.key {
                    case .text("attStmt"): CBORMapEntry(entry.key, change(entry.value))
                    case .text("fmt"): CBORMapEntry(entry.key, format.map(CBORValue.text) ?? entry.value)
                    default: entry
                    }
                }))
    }
}
