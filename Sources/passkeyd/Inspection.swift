import Crypto
import Foundation
import SwiftASN1
import WebAuthn
import X509

/// A readable breakdown of any passkey payload: a registration or authentication response JSON,
/// or a bare attestation object (binary CBOR or base64 of it). Every part is decoded on its own,
/// so one malformed field does not hide the rest; each failure is reported with its error code.
struct Inspection: Encodable {
    struct ClientData: Encodable {
        var type, challenge, origin: String
        var crossOrigin: Bool?
        var topOrigin: String?
    }
    struct AuthData: Encodable {
        var rpIdHash: String
        var flags: [String]
        var signCount: UInt32
        var aaguid: String?
        var provider: String?
        var credentialId: String?
        var publicKeyAlgorithm: String?
        var publicKeyCOSE: String?
        var extensions: String?
    }
    struct CertificateSummary: Encodable {
        var subject, issuer, notBefore, notAfter, serial: String
    }
    struct Attestation: Encodable {
        var fmt: String
        var statementKeys: [String]
        var alg: String?
        var certificates: [CertificateSummary]
    }

    var kind: String
    var id: String?
    var clientData: ClientData?
    var authenticatorData: AuthData?
    var attestation: Attestation?
    var signature: String?
    var userHandle: String?
    var transports: [String]?
    var authenticatorAttachment: String?
    var errors: [String] = []

    init(_ input: [UInt8]) {
        let trimmed = String(decoding: input, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") {
            kind = "unknown JSON"
            inspectJSON(Array(trimmed.utf8))
        } else if let decoded = Base64URLBytes(encoded: trimmed), !trimmed.isEmpty,
            (try? CBORReader.decode(decoded.bytes, limits: .init(allowIndefiniteLength: true))) != nil
        {
            kind = "attestation object"
            inspectAttestationObject(decoded.bytes)
        } else {
            kind = "attestation object"
            inspectAttestationObject(input)
        }
    }

    private mutating func inspectJSON(_ json: [UInt8]) {
        if let registration = try? RegistrationResponseJSON.decode(json) {
            kind = "registration response"
            id = registration.id
            transports = registration.response.transports
            authenticatorAttachment = registration.authenticatorAttachment
            inspectClientData(registration.response.clientDataJSON.bytes)
            inspectAttestationObject(registration.response.attestationObject.bytes)
        } else {
            do {
                let authentication = try AuthenticationResponseJSON.decode(json)
                kind = "authentication response"
                id = authentication.id
                authenticatorAttachment = authentication.authenticatorAttachment
                signature = authentication.response.signature.bytes.map { String(format: "%02x", $0) }.joined()
                userHandle = authentication.response.userHandle?.base64URL
                inspectClientData(authentication.response.clientDataJSON.bytes)
                do {
                    authenticatorData = Self.summary(try AuthenticatorData(bytes: authentication.response.authenticatorData.bytes))
                } catch {
                    errors.append("authenticatorData: \(error.code): \(error.reason)")
                }
            } catch {
                errors.append("not a registration or authentication response: \(error.reason)")
            }
        }
    }

    private mutating func inspectClientData(_ bytes: [UInt8]) {
        do {
            let data = try CollectedClientData(bytes: bytes)
            clientData = ClientData(
                type: data.type, challenge: Base64URLBytes(data.challenge).base64URL, origin: data.origin,
                crossOrigin: data.crossOrigin, topOrigin: data.topOrigin)
        } catch {
            errors.append("clientDataJSON: \(error.code): \(error.reason)")
        }
    }

    private mutating func inspectAttestationObject(_ bytes: [UInt8]) {
        let object: AttestationObject
        do {
            object = try AttestationObject(bytes: bytes)
        } catch {
            errors.append("attestationObject: \(error.code): \(error.reason)")
            return
        }
        authenticatorData = Self.summary(object.authenticatorData)
        var certificates: [CertificateSummary] = []
        for element in object.statement[text: "x5c"]?.arrayValue ?? [] {
            guard let der = element.bytesValue else { continue }
            do {
                let certificate = try Certificate(derEncoded: der)
                certificates.append(
                    CertificateSummary(
                        subject: certificate.subject.description, issuer: certificate.issuer.description,
                        notBefore: ISO8601DateFormatter().string(from: certificate.notValidBefore),
                        notAfter: ISO8601DateFormatter().string(from: certificate.notValidAfter),
                        serial: certificate.serialNumber.description))
            } catch {
                errors.append("x5c certificate: \(error)")
            }
        }
        let alg = object.statement[text: "alg"]?.intValue.map { COSEAlgorithmIdentifier(rawValue: Int($0)).description }
        attestation = Attestation(
            fmt: object.format, statementKeys: object.statement.mapValue?.compactMap { $0.key.textValue } ?? [],
            alg: alg, certificates: certificates)
    }

    static func summary(_ data: AuthenticatorData) -> AuthData {
        var flags: [String] = []
        let names: [(AuthenticatorData.Flags, String)] = [
            (.userPresent, "UP"), (.userVerified, "UV"), (.backupEligible, "BE"), (.backedUp, "BS"),
            (.attestedCredentialData, "AT"), (.extensionData, "ED"),
        ]
        for (flag, name) in names where data.flags.contains(flag) { flags.append(name) }
        let credential = data.attestedCredentialData
        return AuthData(
            rpIdHash: data.rpIDHash.map { String(format: "%02x", $0) }.joined(), flags: flags, signCount: data.signCount,
            aaguid: credential?.aaguid.description, provider: credential?.aaguid.providerName,
            credentialId: credential.map { Base64URLBytes($0.credentialID).base64URL },
            publicKeyAlgorithm: credential?.publicKey.algorithm.description,
            publicKeyCOSE: credential.map { Base64URLBytes($0.publicKey.coseBytes).base64URL },
            extensions: data.extensions.map { "\($0)" })
    }

    /// The human-readable form.
    var text: String {
        var lines = ["\(kind)"]
        if let id { lines.append("  credential id: \(id)") }
        if let authenticatorAttachment { lines.append("  attachment:    \(authenticatorAttachment)") }
        if let transports { lines.append("  transports:    \(transports.joined(separator: ", "))") }
        if let c = clientData {
            lines.append("client data")
            lines.append("  type:          \(c.type)")
            lines.append("  origin:        \(c.origin)")
            lines.append("  challenge:     \(c.challenge)")
            if let cross = c.crossOrigin { lines.append("  crossOrigin:   \(cross)") }
            if let top = c.topOrigin { lines.append("  topOrigin:     \(top)") }
        }
        if let a = authenticatorData {
            lines.append("authenticator data")
            lines.append("  rpIdHash:      \(a.rpIdHash)")
            lines.append("  flags:         \(a.flags.joined(separator: " "))")
            lines.append("  signCount:     \(a.signCount)")
            if let aaguid = a.aaguid { lines.append("  AAGUID:        \(aaguid)\(a.provider.map { " (\($0))" } ?? "")") }
            if let id = a.credentialId { lines.append("  credential id: \(id)") }
            if let alg = a.publicKeyAlgorithm { lines.append("  public key:    \(alg)  \(a.publicKeyCOSE ?? "")") }
            if let ext = a.extensions { lines.append("  extensions:    \(ext)") }
        }
        if let s = attestation {
            lines.append("attestation")
            lines.append("  fmt:           \(s.fmt)")
            lines.append("  attStmt keys:  \(s.statementKeys.joined(separator: ", "))")
            if let alg = s.alg { lines.append("  alg:           \(alg)") }
            for (index, certificate) in s.certificates.enumerated() {
                lines.append("  x5c[\(index)]:       \(certificate.subject)")
                lines.append("                 issuer \(certificate.issuer), valid \(certificate.notBefore) – \(certificate.notAfter)")
            }
        }
        if let signature { lines.append("signature:       \(signature)") }
        if let userHandle { lines.append("userHandle:      \(userHandle)") }
        for error in errors { lines.append("error: \(error)") }
        return lines.joined(separator: "\n")
    }
}
