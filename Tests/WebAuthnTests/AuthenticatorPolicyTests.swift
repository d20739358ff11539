import Crypto
import Foundation
import SwiftASN1
import Testing
import WebAuthnTesting
import X509

@testable import WebAuthn

/// Real authenticators the relying party meets (SHA-1 TPMs, negative serials, the virtual
/// authenticator's Basic Constraints), chains judged by swift-certificates' Verifier, and the
/// relying party's own choice of authenticators (AAGUID lists, device-bound credentials).
@Suite("Authenticator policy and real-world attestation")
struct AuthenticatorPolicyTests {
    static func vector(_ id: String) throws -> Vector { try #require(Vector.all.first { $0.id == id }) }

    // MARK: SHA-1 TPM attestation

    @Test(arguments: [
        "simplewebauthn/reg/validate-tpm-rsa-response-sha1", "pywebauthn/tpm-rs256-lenovo-x1", "java/ThinkpadTpm/registration",
    ])
    func aSHA1TPMStatementRegistersByDefaultAndTheVerdictSaysSo(_ id: String) async throws {
        // Real TPMs (a Lenovo X1, a ThinkPad) sign certInfo with RS1.
        let outcome = try await runVector(try Self.vector(id))
        let attestation = try #require(outcome.registration?.attestation, "\(String(describing: outcome.error))")
        #expect(attestation.format == "tpm" && attestation.usedSHA1)
    }

    @Test func aStrictPolicyRefusesSHA1Statements() async throws {
        let outcome = try await runVector(try Self.vector("simplewebauthn/reg/validate-tpm-rsa-response-sha1")) {
            $0.allowSHA1Attestation = false
        }
        #expect(outcome.error?.code == .unsupportedAlgorithm)
        #expect(outcome.error?.reason.contains("SHA-1") == true)
    }

    @Test func anRS256TPMStatementIsNotFlagged() async throws {
        let outcome = try await runVector(try Self.vector("simplewebauthn/tpm/verify-sha256-tpm-response"))
        let attestation = try #require(outcome.registration?.attestation, "\(String(describing: outcome.error))")
        #expect(!attestation.usedSHA1)
    }

    // MARK: SafetyNet

    @Test func safetyNetCTSProfileMatchIsEnforcedByDefaultAndCanBeRelaxed() async throws {
        let vector = try Self.vector("simplewebauthn/reg/enforce-cts-check-by-default")
        let enforced = try await runVector(vector)
        #expect(enforced.error?.code == .attestationInvalid && enforced.error?.reason.contains("ctsProfileMatch") == true)
        let relaxed = try await runVector(vector) { $0.requireSafetyNetCTSProfileMatch = false }
        #expect(relaxed.error == nil, "\(String(describing: relaxed.error))")
        #expect(relaxed.registration?.attestation.format == "android-safetynet")
    }

    // MARK: negative serial numbers

    @Test func aCertificateWithANegativeSerialIsRepairedAndItsSignatureCheckedOverTheOriginalBytes() async throws {
        // The FIDO conformance tool's TPM chain: its intermediate's serial starts 0xd0 with no
        // leading zero (negative in DER). It must verify, and its chain validate.
        for id in ["go/format/tpm-1", "simplewebauthn/tpm/verify-sha256-tpm-response"] {
            let outcome = try await runVector(try Self.vector(id))
            #expect(outcome.error == nil, "\(id): \(String(describing: outcome.error))")
            #expect(outcome.registration?.attestation.certificates.count == 2)
        }
        // The repair changes only the serial's encoding.
        let ca = try AttestationCA()
        let key = P256.Signing.PrivateKey()
        let negative = try Certificate(
            version: .v3, serialNumber: .init(bytes: [0x80, 1, 2, 3]), publicKey: .init(key.publicKey),
            notValidBefore: ca.root.notValidBefore,
            notValidAfter: ca.root.notValidAfter, issuer: ca.root.subject, subject: ca.root.subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: Certificate.Extensions(), issuerPrivateKey: .init(ca.rootKey))
        var der = Self.der(negative)
        // Serialized with a leading zero (positive); strip it to make the serial negative, as a
        // TPM vendor's encoder did, and fix the three lengths that shrink by one.
        let zeroAt = try #require(Self.serialOffset(der))
        #expect(der[zeroAt] == 0 && der[zeroAt - 1] == 5)
        der.remove(at: zeroAt)
        der[zeroAt - 1] = 4
        Self.shrinkLengths(&der)
        #expect((try? Certificate(derEncoded: der)) == nil, "swift-certificates refuses a negative serial")
        let repaired = try #require(NegativeSerial.repair(der))
        let parsed = try Certificate(derEncoded: repaired.der)
        #expect(parsed.subject == negative.subject && parsed.publicKey == negative.publicKey)
        // What is kept as "original" is the TBS as sent (one byte shorter than the repaired one)
        // and the signature value; the corpus vectors above prove signatures verify over it.
        #expect(repaired.original.tbs.count == parsed.tbsCertificateBytes.count - 1)
        #expect(Array(parsed.tbsCertificateBytes.suffix(20)) == Array(repaired.original.tbs.suffix(20)))
        // A certificate that is fine is not "repaired"; garbage is not either.
        #expect(NegativeSerial.repair(Self.der(ca.root)) == nil)
        #expect(NegativeSerial.repair([0x30, 0x03, 0x02, 0x01, 0x80]) == nil)
    }

    // MARK: the virtual authenticator's Basic Constraints

    @Test func aSpelledOutCAFalseIsReadAsNotACAOnTheAttestationCertificateOnly() async throws {
        #expect(AttestationCertificates.spellsOutDefaultNotCA([0x30, 0x03, 0x01, 0x01, 0x00]))
        #expect(!AttestationCertificates.spellsOutDefaultNotCA([0x30, 0x03, 0x01, 0x01, 0xff]))
        #expect(!AttestationCertificates.spellsOutDefaultNotCA([0x30, 0x06, 0x01, 0x01, 0x00, 0x02, 0x01, 0x00]))
        #expect(!AttestationCertificates.spellsOutDefaultNotCA([0x30, 0x00]))
        let ca = try AttestationCA()
        let key = P256.Signing.PrivateKey()
        let leaf = try ca.issueAttestationCertificate(for: key, aaguid: nil, spellsOutCAFalse: true)
        #expect(throws: (any Error).self) { try leaf.extensions.basicConstraints }
        try AttestationCertificates.requireNotCA(leaf, format: "packed")
        // The same leaf chains to its root and is trusted.
        let notes = AttestationNotes()
        let outcome = try await CertificateChain.validate([leaf], anchors: [ca.root], at: Date(), format: "packed", notes: notes)
        #expect(outcome.trusted, "\(outcome.failure ?? "")")
    }

    // MARK: chains judged by the Verifier

    struct PKI {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let root: Certificate
        let intermediate: Certificate
        let leaf: Certificate

        init(
            rootPathLength: Int? = nil, intermediateUsage: KeyUsage = KeyUsage(keyCertSign: true), intermediateIsCA: Bool = true,
            intermediateNotAfter: Date = Date(timeIntervalSince1970: 2_500_000_000)
        ) throws {
            let rootName = try DistinguishedName { CommonName("Test Root") }
            let intermediateName = try DistinguishedName { CommonName("Test Intermediate") }
            let leafName = try DistinguishedName { CommonName("Test Attestation") }
            let start = Date(timeIntervalSince1970: 1_700_000_000)
            root = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: start,
                notValidAfter: Date(timeIntervalSince1970: 2_500_000_000), issuer: rootName, subject: rootName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: rootPathLength))
                    KeyUsage(keyCertSign: true)
                }, issuerPrivateKey: .init(rootKey))
            intermediate = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: start,
                notValidAfter: intermediateNotAfter, issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(
                        intermediateIsCA
                            ? BasicConstraints.isCertificateAuthority(maxPathLength: nil) : BasicConstraints.notCertificateAuthority)
                    intermediateUsage
                }, issuerPrivateKey: .init(rootKey))
            leaf = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: start,
                notValidAfter: Date(timeIntervalSince1970: 2_400_000_000), issuer: intermediateName, subject: leafName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions { Critical(BasicConstraints.notCertificateAuthority) },
                issuerPrivateKey: .init(intermediateKey))
        }
    }

    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aGoodChainIsTrustedThroughItsIntermediate() async throws {
        let pki = try PKI()
        let outcome = try await CertificateChain.validate(
            [pki.leaf, pki.intermediate], anchors: [pki.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(outcome.trusted && outcome.failure == nil)
        // Also when x5c carries the root itself.
        let withRoot = try await CertificateChain.validate(
            [pki.leaf, pki.intermediate, pki.root], anchors: [pki.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(withRoot.trusted)
    }

    @Test func anIssuerWhoseKeyUsageLacksKeyCertSignBreaksTheChain() async throws {
        let pki = try PKI(intermediateUsage: KeyUsage(digitalSignature: true))
        await #expect(throws: WebAuthnError(.attestationInvalid, "")) {
            _ = try await CertificateChain.validate(
                [pki.leaf, pki.intermediate], anchors: [], at: Self.now, format: "packed", notes: AttestationNotes())
        }
        let outcome = try await CertificateChain.validate(
            [pki.leaf], anchors: [pki.intermediate], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(outcome.trusted, "an anchor is trusted as configured")
    }

    @Test func aPathLengthConstraintIsEnforced() async throws {
        // The root allows one intermediate CA below it.
        let pki = try PKI(rootPathLength: 1)
        let outcome = try await CertificateChain.validate(
            [pki.leaf, pki.intermediate], anchors: [pki.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(outcome.trusted, "\(outcome.failure ?? "")")
        // A root allowing none refuses the intermediate.
        let none = try PKI(rootPathLength: 0)
        let refused = try await CertificateChain.validate(
            [none.leaf, none.intermediate], anchors: [none.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(!refused.trusted && refused.failure?.contains("path length") == true, "\(refused.failure ?? "")")
        // An extra CA level under the intermediate breaks it.
        let subKey = P256.Signing.PrivateKey()
        let subName = try DistinguishedName { CommonName("Sub CA") }
        let sub = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(subKey.publicKey), notValidBefore: pki.intermediate.notValidBefore,
            notValidAfter: pki.intermediate.notValidAfter, issuer: pki.intermediate.subject, subject: subName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                KeyUsage(keyCertSign: true)
            }, issuerPrivateKey: .init(pki.intermediateKey))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(pki.leafKey.publicKey), notValidBefore: pki.leaf.notValidBefore,
            notValidAfter: pki.leaf.notValidAfter, issuer: subName, subject: pki.leaf.subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions { Critical(BasicConstraints.notCertificateAuthority) }, issuerPrivateKey: .init(subKey))
        let deep = try await CertificateChain.validate(
            [leaf, sub, pki.intermediate], anchors: [pki.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(!deep.trusted)
        #expect(deep.failure?.contains("path length") == true, "\(deep.failure ?? "")")
    }

    @Test func anExpiredIntermediateLeavesTheChainUntrustedWithTheReason() async throws {
        let pki = try PKI(intermediateNotAfter: Date(timeIntervalSince1970: 1_750_000_000))
        let outcome = try await CertificateChain.validate(
            [pki.leaf, pki.intermediate], anchors: [pki.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(!outcome.trusted)
        #expect(outcome.failure?.lowercased().contains("expired") == true, "\(outcome.failure ?? "")")
        // Without anchors validity is not judged (nothing is trusted anyway).
        let open = try await CertificateChain.validate(
            [pki.leaf, pki.intermediate], anchors: [], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(!open.trusted && open.failure == nil)
    }

    @Test func aNonCAIssuerIsRefusedAndAForeignRootIsNotTrusted() async throws {
        let notCA = try PKI(intermediateIsCA: false)
        await #expect(throws: WebAuthnError(.attestationInvalid, "")) {
            _ = try await CertificateChain.validate(
                [notCA.leaf, notCA.intermediate], anchors: [], at: Self.now, format: "packed", notes: AttestationNotes())
        }
        let pki = try PKI()
        let other = try PKI()
        let outcome = try await CertificateChain.validate(
            [pki.leaf, pki.intermediate], anchors: [other.root], at: Self.now, format: "packed", notes: AttestationNotes())
        #expect(!outcome.trusted && outcome.failure != nil)
    }

    @Test func anOverlongChainIsRefusedBeforeAnySignatureIsChecked() async throws {
        let ca = try AttestationCA()
        let leaf = Self.der(try ca.issueAttestationCertificate(for: P256.Signing.PrivateKey(), aaguid: nil))
        var harness = try CeremonyHarness { $0.attestation = .direct }
        harness.authenticator.attestation = .packedFull(ca)
        do {
            _ = try await harness.register { r in
                r.response.attestationObject = Base64URLBytes(
                    AttestationTests.replacingStatement(r.response.attestationObject.bytes, format: "packed") { statement in
                        guard case .map(let entries) = statement else { return statement }
                        return .map(
                            entries.map {
                                $0.key == .text("x5c") ? CBORMapEntry($0.key, .array(Array(repeating: .bytes(leaf), count: 6))) : $0
                            })
                    })
            }
            Issue.record("a 6-certificate chain was accepted")
        } catch let error as WebAuthnError {
            #expect(error.code == .attestationInvalid && error.reason.contains("at most 5"), "\(error)")
        }
    }

    @Test func aChainThatCouldBranchIsRefused() async throws {
        // Look-alike issuers (one subject twice) would let the path search branch at every step.
        let pki = try PKI()
        let twin = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(pki.intermediateKey.publicKey),
            notValidBefore: pki.intermediate.notValidBefore, notValidAfter: pki.intermediate.notValidAfter,
            issuer: pki.intermediate.subject, subject: pki.intermediate.subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: pki.intermediate.extensions, issuerPrivateKey: .init(pki.intermediateKey))
        for chain in [[pki.leaf, pki.intermediate, pki.intermediate], [pki.leaf, twin, pki.intermediate]] {
            await #expect(throws: WebAuthnError(.attestationInvalid, "")) {
                _ = try await CertificateChain.validate(
                    chain, anchors: [pki.root], at: Self.now, format: "packed", notes: AttestationNotes())
            }
        }
    }

    // MARK: the relying party's choice of authenticators

    @Test func allowedAndDeniedAAGUIDsDecideRegistration() async throws {
        let aaguid = SoftwareAuthenticator().aaguid
        let other = AAGUID("ee882879-721c-4913-9775-3dfcce97072a")!
        var allowed = try CeremonyHarness { $0.attestationPolicy.allowedAAGUIDs = [aaguid] }
        #expect(try await allowed.register().0.aaguid == aaguid)
        var notListed = try CeremonyHarness { $0.attestationPolicy.allowedAAGUIDs = [other] }
        await #expect(throws: WebAuthnError(.authenticatorNotAllowed, "")) { try await notListed.register() }
        var denied = try CeremonyHarness { $0.attestationPolicy.deniedAAGUIDs = [aaguid] }
        await #expect(throws: WebAuthnError(.authenticatorNotAllowed, "")) { try await denied.register() }
    }

    @Test func requireDeviceBoundRefusesSyncedPasskeys() async throws {
        var harness = try CeremonyHarness { $0.attestationPolicy.requireDeviceBound = true }
        harness.authenticator.backupEligible = true
        harness.authenticator.backedUp = true
        await #expect(throws: WebAuthnError(.authenticatorNotAllowed, "")) { try await harness.register() }
        harness.authenticator.backupEligible = false
        harness.authenticator.backedUp = false
        let (verified, _) = try await harness.register()
        #expect(!verified.backupEligible)
    }

    // MARK: helpers

    static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        try? serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// Offset of the serial's first content byte: Certificate SEQUENCE → TBS SEQUENCE → [0] version → INTEGER.
    static func serialOffset(_ der: [UInt8]) -> Int? {
        let tbs = headerLength(der, 0)
        let version = headerLength(der, tbs)
        let serial = version + 2 + Int(der[version + 1])
        guard der[serial] == 0x02 else { return nil }
        return serial + 2
    }

    /// After removing one byte inside the TBS, shorten the Certificate's and the TBS's lengths.
    static func shrinkLengths(_ der: inout [UInt8]) {
        for at in [0, headerLength(der, 0)] {
            let first = der[at + 1]
            if first < 0x80 {
                der[at + 1] = first - 1
            } else {
                let width = Int(first & 0x7f)
                var value = 0
                for index in 0..<width { value = value << 8 | Int(der[at + 2 + index]) }
                value -= 1
                for index in (0..<width).reversed() {
                    der[at + 2 + index] = UInt8(value & 0xff)
                    value >>= 8
                }
            }
        }
    }

    /// Where the contents of the element starting at `at` begin.
    static func headerLength(_ der: [UInt8], _ at: Int) -> Int {
        let first = der[at + 1]
        return at + 2 + (first < 0x80 ? 0 : Int(first & 0x7f))
    }
}
