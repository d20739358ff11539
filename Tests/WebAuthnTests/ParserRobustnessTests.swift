import Foundation
import Testing
import WebAuthnTesting
import X509

@testable import WebAuthn

/// Every binary structure a response carries, from real authenticators: each truncated prefix is
/// rejected, and single-bit flips anywhere go through the whole ceremony without a trap.
@Suite("Parser robustness on real responses")
struct ParserRobustnessTests {
    /// One real registration per attestation format.
    static let samples: [Vector] = {
        var seen = Set<String>()
        return Vector.all.filter { vector in
            guard vector["ceremony"]?.string == "registration", vector["expect"]?["ok"]?.bool == true, corpusDeviations[vector.id] == nil,
                let format = vector["expect"]?["fmt"]?.string, !seen.contains(format)
            else { return false }
            seen.insert(format)
            return true
        }
    }()

    static func attestationObject(_ vector: Vector) -> [UInt8] {
        [UInt8](base64URL: vector["response"]?["response"]?["attestationObject"]?.string ?? "")
    }

    @Test func everyFormatIsSampled() {
        #expect(
            Set(Self.samples.compactMap { $0["expect"]?["fmt"]?.string }) == [
                "none", "packed", "fido-u2f", "apple", "android-key", "android-safetynet", "tpm",
            ])
    }

    @Test(arguments: samples)
    func everyTruncatedAttestationObjectIsRejected(_ vector: Vector) async throws {
        let bytes = Self.attestationObject(vector)
        #expect(try await runVector(vector).error == nil, "the untouched sample verifies")
        for length in stride(from: 0, to: bytes.count, by: max(1, bytes.count / 400)) {
            #expect(throws: WebAuthnError.self) { try AttestationObject(bytes: Array(bytes[0..<length])) }
        }
    }

    @Test(arguments: samples)
    func flippedBitsInAttestationObjectsAreRejectedWithoutATrap(_ vector: Vector) async throws {
        let bytes = Self.attestationObject(vector)
        var generator = SplitMix64(seed: UInt64(bytes.count))
        var accepted = 0
        for _ in 0..<150 {
            var mutated = bytes
            let index = Int.random(in: 0..<mutated.count, using: &generator)
            mutated[index] ^= 1 << UInt8.random(in: 0..<8, using: &generator)
            var json = vector.json
            if case .object(var credential)? = json["response"], case .object(var response)? = credential["response"] {
                response["attestationObject"] = .string(Base64URLBytes(mutated).base64URL)
                credential["response"] = .object(response)
                json["response"] = .object(credential)
            }
            if try await runVector(Vector(id: vector.id, json: json)).error == nil { accepted += 1 }
        }
        // A flip in an unsigned spot (none attestation's AAGUID, a certificate's unused field)
        // may still verify; most must not.
        #expect(accepted < 75, "\(vector.id): \(accepted) of 150 mutants accepted")
    }

    @Test func everyTruncatedClientDataIsRejected() {
        let clientData = Array(#"{"type":"webauthn.get","challenge":"AAAA","origin":"https://example.com","crossOrigin":false}"#.utf8)
        _ = try? CollectedClientData(bytes: clientData)
        for length in 0..<clientData.count {
            #expect(throws: WebAuthnError.self) { try CollectedClientData(bytes: Array(clientData[0..<length])) }
        }
    }

    @Test func truncatedTPMStructuresAreRejected() async throws {
        let vector = try #require(Self.samples.first { $0["expect"]?["fmt"]?.string == "tpm" })
        let object = try CBORReader.decode(Self.attestationObject(vector), limits: .init(allowIndefiniteLength: true))
        let statement = try #require(object[text: "attStmt"])
        for field in ["pubArea", "certInfo"] {
            let bytes = try #require(statement[text: field]?.bytesValue)
            for length in 0..<bytes.count {
                let parse: () throws -> Void =
                    field == "pubArea"
                    ? { _ = try TPM.Public(bytes: Array(bytes[0..<length])) }
                    : { _ = try TPM.Attest(bytes: Array(bytes[0..<length])) }
                #expect(throws: WebAuthnError.self, "\(field) prefix \(length)") { try parse() }
            }
            // And trailing bytes.
            #expect(throws: WebAuthnError.self) {
                if field == "pubArea" { _ = try TPM.Public(bytes: bytes + [0]) } else { _ = try TPM.Attest(bytes: bytes + [0]) }
            }
        }
    }

    @Test func truncatedDERIsRejected() async throws {
        let vector = try #require(Self.samples.first { $0["expect"]?["fmt"]?.string == "android-key" })
        let object = try CBORReader.decode(Self.attestationObject(vector), limits: .init(allowIndefiniteLength: true))
        let leaf = try #require(object[text: "attStmt"]?[text: "x5c"]?.arrayValue?.first?.bytesValue)
        let certificate = try Certificate(derEncoded: leaf)
        let keyDescription = try #require(
            AttestationCertificates.extensionValue(certificate, oid: AndroidKeyAttestation.keyDescriptionExtension))
        #expect(throws: Never.self) { try DERReader.single(keyDescription) }
        for length in 0..<keyDescription.count {
            #expect(throws: WebAuthnError.self) { try DERReader.single(Array(keyDescription[0..<length])) }
        }
    }
}
