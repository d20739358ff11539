import Crypto
import Foundation
import SwiftASN1
@_spi(FixedExpiryValidationTime) @_spi(DisableValidityCheck) import X509

/// Validation of an attestation certificate chain (x5c, leaf first) as WebAuthn §7.1 step 23
/// asks, with swift-certificates' `Verifier` and its RFC 5280 policy (basic constraints and path
/// length, validity, name constraints, version, critical extensions), plus the rules attestation
/// adds (``AttestationChainPolicy``: an issuer's key usage must allow `keyCertSign`).
///
/// Two questions, asked separately:
/// - **Is the chain well formed?** Every x5c certificate is signed by the next, and the chain
///   meets RFC 5280 with its last certificate taken as the root (validity not judged: with no
///   anchor, nothing is trusted anyway). A failure is `attestation_invalid`: the statement is
///   broken whatever the relying party trusts.
/// - **Does it lead to a trust anchor?** With anchors, the `Verifier` builds the path from the
///   leaf through x5c to an anchor, with validity judged at the verification time. A failure is
///   not an error here: the verdict says untrusted and why; the caller refuses it only when the
///   policy requires trusted attestation.
enum CertificateChain {
    /// What the chain step concluded.
    struct Outcome {
        /// The chain leads to a configured anchor.
        var trusted: Bool
        /// Why it does not, when anchors were configured.
        var failure: String?
    }

    static func validate(
        _ chain: [Certificate], anchors: [Certificate], at time: Date, format: String, notes: AttestationNotes
    ) async throws(WebAuthnError) -> Outcome {
        guard let leaf = chain.first else { return Outcome(trusted: false, failure: nil) }
        // One issuer per step: no two x5c certificates share a subject, and none below the top
        // is self-issued. Otherwise the Verifier's path search could branch at every step (a
        // crafted chain of look-alike certificates makes thousands of paths).
        guard Set(chain.map(\.subject)).count == chain.count,
            !chain.dropLast().contains(where: { $0.issuer == $0.subject })
        else {
            throw WebAuthnError(.attestationInvalid, "\(format): x5c repeats a subject or has a self-issued certificate below its top")
        }
        // Every link, over the bytes that were signed (a repaired certificate's original bytes).
        for index in 0..<(chain.count - 1) where !isSigned(chain[index], by: chain[index + 1], notes: notes) {
            throw WebAuthnError(.attestationInvalid, "\(format): x5c[\(index)] is not signed by x5c[\(index + 1)]")
        }
        if chain.count > 1, let last = chain.last {
            let policy = AttestationChainPolicy(validity: nil, checksRoot: true)
            if let failure = await verify(Array(chain.dropLast()), root: last, policy: policy, notes: notes) {
                throw WebAuthnError(.attestationInvalid, "\(format): the x5c chain breaks RFC 5280: \(failure)")
            }
        }
        guard !anchors.isEmpty else { return Outcome(trusted: false, failure: nil) }

        // The anchor the chain's top certificate is (or is issued by): checked here over the
        // original bytes, so a repaired certificate can be validated too.
        guard let top = chain.last,
            let anchor = anchors.first(where: { $0 == top }) ?? anchors.first(where: { isSigned(top, by: $0, notes: notes) })
        else {
            return Outcome(trusted: false, failure: "the chain does not lead to a configured trust anchor")
        }
        let path = anchor == top ? chain : chain + [anchor]
        if path.count == 1 {
            // The attestation certificate is itself an anchor: only its validity is left to judge.
            guard leaf.notValidBefore <= time, time <= leaf.notValidAfter else {
                return Outcome(trusted: false, failure: "x5c[0] is not valid at \(time)")
            }
            return Outcome(trusted: true, failure: nil)
        }
        if let failure = await verify(
            path.dropLast().map { $0 }, root: anchor, policy: AttestationChainPolicy(validity: time, checksRoot: false), notes: notes)
        {
            return Outcome(trusted: false, failure: failure)
        }
        return Outcome(trusted: true, failure: nil)
    }

    /// Runs the `Verifier` on `chain` (leaf first, without the root) under `root`. `nil` when it
    /// validates, else the reasons it gave.
    private static func verify(_ chain: [Certificate], root: Certificate, policy: AttestationChainPolicy, notes: AttestationNotes) async
        -> String?
    {
        var path = chain + [root]
        // The Verifier checks signatures over the parsed bytes, which for a repaired certificate
        // are not what its issuer signed. Every real signature was checked above, so the path is
        // re-signed with throwaway keys (same names, validity, extensions) for the RFC 5280
        // rules, which read only those fields.
        if path.contains(where: { notes.originals[$0] != nil }) {
            guard let resigned = try? resign(path) else { return "a repaired certificate could not be re-checked" }
            path = resigned
        }
        guard let leaf = path.first, let anchor = path.last else { return "empty chain" }
        var verifier = Verifier(rootCertificates: CertificateStore([anchor])) {
            policy.rfc5280
            policy
        }
        let diagnostics = Diagnostics()
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore(Array(path.dropFirst().dropLast()))) {
            diagnostics.record($0)
        }
        switch result {
        case .validCertificate: return nil
        case .couldNotValidate(let failures):
            let reasons = failures.prefix(3).map { compact(String(describing: $0.policyFailureReason)) } + diagnostics.problems
            return reasons.isEmpty ? "no path to the root" : reasons.joined(separator: "; ")
        }
    }

    /// The Verifier's reasons for not finding a path (an unhandled critical extension, a
    /// signature that does not verify), without the certificate dumps.
    private final class Diagnostics: @unchecked Sendable {
        /// The first few diagnostics, kept as values: describing one prints whole certificates,
        /// so that is done only when validation failed.
        var kept: [VerificationDiagnostic] = []
        func record(_ diagnostic: VerificationDiagnostic) {
            if kept.count < 16 { kept.append(diagnostic) }
        }
        var problems: [String] {
            var out: [String] = []
            let interesting = ["critical extension", "has not signed", "does not meet", "fails to meet"]
            for diagnostic in kept where out.count < 2 {
                let text = String(describing: diagnostic)
                if interesting.contains(where: { text.contains($0) }) { out.append(CertificateChain.compact(text)) }
            }
            return out
        }
    }

    /// A Verifier reason without its certificate dumps (`Certificate(version: …)` becomes the
    /// certificate's subject), at most 300 characters.
    static func compact(_ text: String) -> String {
        var out = ""
        var rest = Substring(text)
        while let start = rest.range(of: "Certificate(") {
            out += rest[..<start.lowerBound]
            var depth = 1
            var index = start.upperBound
            while index < rest.endIndex, depth > 0 {
                if rest[index] == "(" { depth += 1 } else if rest[index] == ")" { depth -= 1 }
                index = rest.index(after: index)
            }
            let dump = rest[start.lowerBound..<index]
            if let subject = dump.range(of: "subject: \""), let end = dump[subject.upperBound...].firstIndex(of: "\"") {
                out += "\"" + dump[subject.upperBound..<end] + "\""
            } else {
                out += "a certificate"
            }
            rest = rest[index...]
            if out.count > 300 { break }
        }
        out += rest
        return String(out.prefix(300))
    }

    /// Whether `child` carries a valid signature by `parent`'s key, over the bytes it was sent
    /// with, and names `parent` as its issuer.
    static func isSigned(_ child: Certificate, by parent: Certificate, notes: AttestationNotes) -> Bool {
        guard child.issuer == parent.subject else { return false }
        if let original = notes.originals[child] {
            return parent.publicKey.isValidSignature(original.signature, for: original.tbs, signatureAlgorithm: child.signatureAlgorithm)
        }
        return parent.publicKey.isValidSignature(child.signature, for: child)
    }

    /// The same path re-signed top-down with fresh P-256 keys; the leaf keeps its own key.
    private static func resign(_ path: [Certificate]) throws -> [Certificate] {
        var out: [Certificate] = []
        var signer = P256.Signing.PrivateKey()
        var index = path.count - 1
        while index >= 0 {
            let original = path[index]
            let isLeaf = index == 0
            let key = index == path.count - 1 ? signer : P256.Signing.PrivateKey()
            let certificate = try Certificate(
                version: original.version, serialNumber: original.serialNumber,
                publicKey: isLeaf ? original.publicKey : Certificate.PublicKey(key.publicKey),
                notValidBefore: original.notValidBefore, notValidAfter: original.notValidAfter, issuer: original.issuer,
                subject: original.subject, signatureAlgorithm: .ecdsaWithSHA256, extensions: original.extensions,
                issuerPrivateKey: Certificate.PrivateKey(signer))
            out.insert(certificate, at: 0)
            signer = key
            index -= 1
        }
        return out
    }
}

/// The attestation rules on top of RFC 5280 (WebAuthn §7.1 step 23, RFC 5280 §4.2.1.3): every
/// issuing certificate with a key usage extension must allow `keyCertSign`, and the critical
/// extensions attestation certificates carry are understood (a TPM AIK certificate's
/// subjectAltName is critical by design, §8.3.2).
struct AttestationChainPolicy: VerifierPolicy {
    /// The time validity is judged at; `nil` leaves validity unjudged.
    let validity: Date?
    /// Whether the root's key usage is judged too: yes for the last x5c certificate standing in
    /// as a root; no for a configured trust anchor (RFC 5280 §6.1: trust anchor information is
    /// taken as given).
    let checksRoot: Bool

    var rfc5280: RFC5280Policy {
        if let validity { return RFC5280Policy(fixedExpiryValidationTime: validity) }
        return RFC5280Policy.withValidityCheckDisabled()
    }

    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = [
        .X509ExtensionID.keyUsage,
        .X509ExtensionID.extendedKeyUsage,
        .X509ExtensionID.subjectAlternativeName,
        [2, 5, 29, 32],  // certificatePolicies
    ]

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        for (index, certificate) in chain.enumerated() where index > 0 && (checksRoot || index < chain.count - 1) {
            guard let usage = try? certificate.extensions.keyUsage else {
                if certificate.extensions[oid: .X509ExtensionID.keyUsage] != nil {
                    return .failsToMeetPolicy(reason: "certificate \(index) has a malformed key usage extension")
                }
                continue
            }
            if !usage.keyCertSign {
                return .failsToMeetPolicy(reason: "certificate \(index) issues certificates but its key usage lacks keyCertSign")
            }
        }
        return .meetsPolicy
    }
}

/// Certificates whose serial number is negative: RFC 5280 §4.1.2.2 says it "MUST be a positive
/// integer", and swift-certificates refuses them, but TPMs ship AIK certificates (and vendors
/// intermediates) with serials whose first bit is set and no leading zero. py_webauthn,
/// SimpleWebAuthn and java-webauthn-server accept them. passkeyd accepts them inside
/// attestation chains only: the certificate is read from a copy whose serial has a leading zero
/// byte (the same magnitude, now positive), and its issuer's signature is checked over the bytes
/// that were actually signed.
enum NegativeSerial {
    /// What was sent: the signed TBSCertificate bytes and the signature value.
    struct Original {
        let tbs: [UInt8]
        let signature: [UInt8]
    }

    /// A copy of `der` with its serial made positive, or `nil` when `der` is not a certificate
    /// with a negative serial.
    static func repair(_ der: [UInt8]) -> (der: [UInt8], original: Original)? {
        guard der.count <= 64 * 1024, let certificate = try? DERReader.single(der), certificate.isUniversal(16),
            let parts = try? certificate.children(), parts.count == 3, parts[0].isUniversal(16), parts[2].isUniversal(3),
            let signatureBits = parts[2].value.first, signatureBits == 0,
            var fields = try? parts[0].children(), !fields.isEmpty
        else { return nil }
        // Only a certificate this encoder reproduces byte for byte is repaired (definite minimal
        // lengths, low tag numbers), so the repaired copy differs in the serial alone.
        guard encode(certificate) == der else { return nil }
        let serialIndex = fields[0].tagClass == .contextSpecific && fields[0].tag == 0 ? 1 : 0
        guard serialIndex < fields.count, fields[serialIndex].isUniversal(2), let first = fields[serialIndex].value.first, first & 0x80 != 0
        else { return nil }
        let tbs = encode(parts[0])
        fields[serialIndex] = DERReader.Element(tagClass: .universal, constructed: false, tag: 2, value: [0] + fields[serialIndex].value)
        let repairedTBS = encode(
            DERReader.Element(tagClass: .universal, constructed: true, tag: 16, value: fields.flatMap { encode($0) }))
        let repaired = encode(
            DERReader.Element(tagClass: .universal, constructed: true, tag: 16, value: repairedTBS + encode(parts[1]) + encode(parts[2])))
        return (repaired, Original(tbs: tbs, signature: Array(parts[2].value.dropFirst())))
    }

    /// DER encoding of an element with a low tag number (all a certificate's top levels use).
    private static func encode(_ element: DERReader.Element) -> [UInt8] {
        var out = [UInt8(element.tagClass.rawValue << 6 | (element.constructed ? 0x20 : 0) | UInt8(element.tag & 0x1f))]
        let count = element.value.count
        if count < 0x80 {
            out.append(UInt8(count))
        } else {
            var lengthBytes: [UInt8] = []
            var remaining = count
            while remaining > 0 {
                lengthBytes.insert(UInt8(remaining & 0xff), at: 0)
                remaining >>= 8
            }
            out.append(0x80 | UInt8(lengthBytes.count))
            out += lengthBytes
        }
        return out + element.value
    }
}
