import Crypto
import Foundation
import X509

/// `android-safetynet` attestation (WebAuthn Level 3 §8.5):
///
/// ```
/// safetynetStmtFormat = { ver: text, response: bytes }   ; response: UTF-8 JWS compact serialization
/// ```
/// The JWS header carries `alg` and `x5c` (standard base64 DER, leaf first); the payload carries
/// `nonce` (base64 of SHA-256(authenticatorData || clientDataHash)), `timestampMs`,
/// `ctsProfileMatch` and `basicIntegrity`.
enum AndroidSafetyNetAttestation {
    /// How far the attestation's timestamp may be from the verification time.
    static let allowedFutureSkew: TimeInterval = 60
    static let maximumAge: TimeInterval = 10 * 60

    private struct Header: Decodable {
        var alg: String
        var x5c: [String]
    }
    private struct Payload: Decodable {
        var nonce: String
        var timestampMs: Double
        var ctsProfileMatch: Bool
        var basicIntegrity: Bool?
    }

    static func verify(_ input: AttestationInput) throws(WebAuthnError) -> StatementResult {
        // §8.5 step 1: Verify that attStmt is valid CBOR conforming to the syntax above.
        guard let version = input.statement[text: "ver"]?.textValue, !version.isEmpty else {
            throw WebAuthnError(.attestationInvalid, "android-safetynet attStmt.ver is missing or empty")
        }
        let response = try input.bytes("response")
        let parts = response.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerBytes = Base64.decode(String(decoding: parts[0], as: UTF8.self), flavor: .urlUnpadded),
            let payloadBytes = Base64.decode(String(decoding: parts[1], as: UTF8.self), flavor: .urlUnpadded),
            let signature = Base64.decode(String(decoding: parts[2], as: UTF8.self), flavor: .urlUnpadded)
        else {
            throw WebAuthnError(.attestationInvalid, "android-safetynet response is not a compact JWS")
        }
        let header: Header
        let payload: Payload
        do {
            header = try JSONDecoder().decode(Header.self, from: Data(headerBytes))
            payload = try JSONDecoder().decode(Payload.self, from: Data(payloadBytes))
        } catch {
            throw WebAuthnError(.attestationInvalid, "android-safetynet JWS header or payload is not the expected JSON")
        }

        // §8.5 step 2: Verify that response is a valid SafetyNet response of version ver by
        // following the steps indicated by the SafetyNet online documentation.
        var chain: [Certificate] = []
        try AttestationInput.checkChainLength(header.x5c.count, format: input.format)
        for encoded in header.x5c {
            guard let der = Base64.decode(encoded, flavor: .any) else {
                throw WebAuthnError(.attestationInvalid, "android-safetynet x5c entry is not base64")
            }
            chain.append(try input.certificate(der))
        }
        guard let leaf = chain.first else {
            throw WebAuthnError(.attestationInvalid, "android-safetynet JWS header has no x5c")
        }
        let signingInput = Array(parts[0]) + [UInt8(ascii: ".")] + Array(parts[1])
        try verifyJWSSignature(signature, over: signingInput, alg: header.alg, certificate: leaf)

        // §8.5 step 3: Verify that the nonce attribute in the payload of response is identical
        // to the Base64 encoding of the SHA-256 hash of the concatenation of authenticatorData
        // and clientDataHash.
        guard let nonce = Base64.decode(payload.nonce, flavor: .any), constantTimeEquals(nonce, sha256(input.signedData)) else {
            throw WebAuthnError(.attestationInvalid, "android-safetynet nonce does not match authData and clientDataHash")
        }
        // §8.5 step 4: Verify that the SafetyNet response actually came from the SafetyNet
        // service: the leaf certificate is issued to attest.android.com.
        guard isIssuedToAttestAndroid(leaf) else {
            throw WebAuthnError(.attestationInvalid, "android-safetynet leaf certificate is not issued to attest.android.com")
        }
        // SafetyNet documentation: ctsProfileMatch says the device passed Android compatibility.
        if input.policy.requireSafetyNetCTSProfileMatch && !payload.ctsProfileMatch {
            throw WebAuthnError(.attestationInvalid, "android-safetynet ctsProfileMatch is false")
        }
        // SafetyNet documentation: the response must be fresh.
        let timestamp = Date(timeIntervalSince1970: payload.timestampMs / 1000)
        let age = input.verificationTime.timeIntervalSince(timestamp)
        guard age >= -allowedFutureSkew, age <= maximumAge else {
            throw WebAuthnError(
                .attestationInvalid, "android-safetynet timestampMs is not within the allowed window of the verification time")
        }
        return StatementResult(type: .basic, certificates: chain)
    }

    private static func verifyJWSSignature(_ signature: [UInt8], over data: [UInt8], alg: String, certificate: Certificate)
        throws(WebAuthnError)
    {
        let verifier = try AttestationCertificates.verifier(for: certificate)
        let valid: Bool
        switch (alg, verifier) {
        case ("RS256", _): valid = verifier.isValidSignature(signature, for: data, algorithm: .rs256)
        case ("RS384", _): valid = verifier.isValidSignature(signature, for: data, algorithm: .rs384)
        case ("RS512", _): valid = verifier.isValidSignature(signature, for: data, algorithm: .rs512)
        case ("ES256", .p256(let key)):
            // JWS ECDSA signatures are the raw r || s (RFC 7518 §3.4), not DER.
            guard let sig = try? P256.Signing.ECDSASignature(rawRepresentation: signature) else {
                throw WebAuthnError(.attestationInvalid, "android-safetynet ES256 signature is not 64 bytes")
            }
            valid = key.isValidSignature(sig, for: SHA256.hash(data: data))
        default:
            throw WebAuthnError(.attestationInvalid, "android-safetynet JWS alg \(alg) is not supported")
        }
        guard valid else {
            throw WebAuthnError(.attestationInvalid, "android-safetynet JWS signature does not verify")
        }
    }

    private static func isIssuedToAttestAndroid(_ certificate: Certificate) -> Bool {
        if let names = try? certificate.extensions.subjectAlternativeNames {
            for name in names {
                if case .dnsName(let host) = name, host == "attest.android.com" { return true }
            }
        }
        return AttestationCertificates.attributeValues(certificate.subject, oid: "2.5.4.3").contains("attest.android.com")
    }
}
