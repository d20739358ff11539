import Crypto
import Foundation
import Testing
import WebAuthnTesting
import X509

@testable import WebAuthn

@Suite("FIDO Metadata Service v3 BLOBs (MDS3 §3.2) with generated PKI")
struct MetadataTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let key = AAGUID("c0ffee00-0000-4000-8000-00000000cafe")!
    static let other = AAGUID("0ea242b4-43c4-4a1b-8b17-dd6d0b6baec6")!

    @Test func aGoodBLOBVerifiesAndItsEntriesRead() async throws {
        let mds = try MetadataBLOBIssuer()
        let blob = try mds.blob(
            number: 42, nextUpdate: "2027-02-01",
            entries: [
                .init(aaguid: Self.key, description: "Test Key", icon: "data:image/png;base64,iVBORw0KGgo=", status: "FIDO_CERTIFIED_L1"),
                .init(aaguid: Self.other, description: "Linked", icon: "https://example.com/icon.png"),
                .init(aaguid: nil, description: "A U2F key known by key identifier"),
            ])
        let metadata = try await FIDOMetadata.verify(blob: blob + "\n", roots: [mds.root], at: Self.now)
        #expect(metadata.number == 42)
        #expect(metadata.nextUpdateDay == "2027-02-01")
        #expect(metadata.legalHeader.hasPrefix("Test metadata"))
        #expect(metadata.entries.count == 2 && metadata.skippedEntries == 1)
        let entry = try #require(metadata.entry(for: Self.key))
        #expect(entry.description == "Test Key" && entry.icon == "data:image/png;base64,iVBORw0KGgo=")
        #expect(entry.latestStatus?.status == AuthenticatorStatus(rawValue: "FIDO_CERTIFIED_L1") && entry.refusal == nil)
        // Icons are data: URLs only.
        #expect(metadata.entry(for: Self.other)?.icon == nil)
        #expect(metadata.isStale(at: Self.now) == false)
        #expect(metadata.isStale(at: MetadataDay.parse("2027-02-01")!))
        // The root in x5c as well changes nothing.
        let withRoot = try mds.blob(number: 1, entries: [], chain: .x5c(includeRoot: true))
        #expect(try await FIDOMetadata.verify(blob: withRoot, roots: [mds.root], at: Self.now).entries.isEmpty)
    }

    @Test func aBLOBWithoutACertificateChainVerifiesWithTheRootsOwnKey() async throws {
        // §3.2 step 3: no x5u, no x5c: the trust anchor is the signing certificate.
        let mds = try MetadataBLOBIssuer()
        let blob = try mds.blob(number: 3, entries: [], chain: .signedByRoot)
        #expect(try await FIDOMetadata.verify(blob: blob, roots: [mds.root], at: Self.now).number == 3)
        let stranger = try MetadataBLOBIssuer(name: "Another Root")
        await #expect(throws: WebAuthnError(.metadataInvalid, "")) {
            try await FIDOMetadata.verify(blob: blob, roots: [stranger.root], at: Self.now)
        }
    }

    enum Refusal: String, CaseIterable, Sendable {
        case wrongRoot, tamperedPayload, tamperedSignature, expiredSigningCertificate, x5uOnly, garbage, oversized, notYYYYMMDD
        case unsupportedAlg, duplicateAAGUID, critHeader

        /// What the error's reason must mention.
        var reason: String {
            switch self {
            case .wrongRoot: "does not lead to a configured MDS root"
            case .tamperedPayload, .tamperedSignature: "signature does not verify"
            case .expiredSigningCertificate: "is not valid at"
            case .x5uOnly: "offline"
            case .garbage: "not a JWS compact serialization"
            case .oversized: "MiB"
            case .notYYYYMMDD: "nextUpdate"
            case .unsupportedAlg: "alg"
            case .duplicateAAGUID: "more than once"
            case .critHeader: "crit"
            }
        }
    }

    @Test(arguments: Refusal.allCases)
    func aBadBLOBIsRefusedWithItsReason(_ refusal: Refusal) async throws {
        let mds = try MetadataBLOBIssuer()
        var roots = [mds.root]
        let entries = [MetadataBLOBIssuer.Entry(aaguid: Self.key, description: "Test Key")]
        let good = try mds.blob(number: 5, entries: entries)
        let parts = good.split(separator: ".").map(String.init)
        func header(_ json: String) -> String { Base64URLBytes(Array(json.utf8)).base64URL }
        var blob = good
        switch refusal {
        case .wrongRoot:
            roots = [try MetadataBLOBIssuer(name: "Another Root").root]
        case .tamperedPayload:
            let other = try mds.payload(number: 6, entries: entries)
            blob = [parts[0], Base64URLBytes(other).base64URL, parts[2]].joined(separator: ".")
        case .tamperedSignature:
            var signature = Base64URLBytes(encoded: parts[2])!.bytes
            signature[10] ^= 0x01
            blob = [parts[0], parts[1], Base64URLBytes(signature).base64URL].joined(separator: ".")
        case .expiredSigningCertificate:
            let expired = try MetadataBLOBIssuer(
                signingNotBefore: Date(timeIntervalSince1970: 1_000_000_000), signingNotAfter: Date(timeIntervalSince1970: 1_100_000_000))
            roots = [expired.root]
            blob = try expired.blob(number: 5, entries: entries)
        case .x5uOnly:
            blob = try mds.blob(number: 5, entries: entries, chain: .x5uOnly)
        case .garbage:
            blob = "this is not a BLOB"
        case .oversized:
            blob = String(repeating: "A", count: FIDOMetadata.maxBLOBSize + 1)
        case .notYYYYMMDD:
            blob = try mds.blob(number: 5, nextUpdate: "2027-02-30", entries: entries)
        case .unsupportedAlg:
            let json = String(decoding: Base64URLBytes(encoded: parts[0])!.bytes, as: UTF8.self)
            blob = [header(json.replacingOccurrences(of: "ES256", with: "none")), parts[1], parts[2]].joined(separator: ".")
        case .duplicateAAGUID:
            blob = try mds.blob(number: 5, entries: entries + entries)
        case .critHeader:
            let json = String(decoding: Base64URLBytes(encoded: parts[0])!.bytes, as: UTF8.self)
            blob = [header(json.replacingOccurrences(of: "{", with: "{\"crit\":[\"b64\"],")), parts[1], parts[2]].joined(separator: ".")
        }
        do {
            _ = try await FIDOMetadata.verify(blob: blob, roots: roots, at: Self.now)
            Issue.record("\(refusal) was accepted")
        } catch {
            #expect(error.code == .metadataInvalid)
            #expect(error.reason.contains(refusal.reason), "\(error.reason)")
        }
    }

    @Test func everyTruncatedBLOBIsRefusedAndFlippedBitsNeverCrash() async throws {
        let mds = try MetadataBLOBIssuer()
        let blob = Array(try mds.blob(number: 9, entries: [.init(aaguid: Self.key, description: "Test Key")]).utf8)
        for length in stride(from: 0, to: blob.count, by: 3) {
            await #expect(throws: WebAuthnError(.metadataInvalid, "")) {
                try await FIDOMetadata.verify(blob: String(decoding: blob[..<length], as: UTF8.self), roots: [mds.root], at: Self.now)
            }
        }
        var generator = SplitMix64.forTest()
        for _ in 0..<200 {
            var flipped = blob
            flipped[Int.random(in: 0..<flipped.count, using: &generator)] ^= UInt8(1 << Int.random(in: 0..<8, using: &generator))
            _ = try? await FIDOMetadata.verify(blob: String(decoding: flipped, as: UTF8.self), roots: [mds.root], at: Self.now)
        }
    }

    @Test func aBLOBSignedUnderTheRootForAnotherNameIsRefused() async throws {
        // The MDS root is a public web root: a certificate it issued to someone else's domain
        // must not sign metadata.
        let impostor = try MetadataBLOBIssuer(signerHostname: "evil.example")
        let blob = try impostor.blob(number: 3, entries: [])
        do {
            _ = try await FIDOMetadata.verify(blob: blob, roots: [impostor.root], at: Self.now)
            Issue.record("a BLOB signed for evil.example was accepted")
        } catch {
            #expect(error.code == .metadataInvalid && error.reason.contains("not to mds.fidoalliance.org"), "\(error)")
        }
        // A private metadata service names its own signer (or none).
        #expect(try await FIDOMetadata.verify(blob: blob, roots: [impostor.root], at: Self.now, signerHostname: "evil.example").number == 3)
    }

    @Test func aRefusingStatusInEffectDecidesAndIsNotLiftedLater() {
        func entry(_ reports: [(String, String?)]) -> MetadataEntry {
            MetadataEntry(
                aaguid: Self.key,
                statusReports: reports.map {
                    StatusReport(status: AuthenticatorStatus(rawValue: $0.0), effectiveDate: $0.1.flatMap(MetadataDay.parse))
                })
        }
        #expect(entry([("FIDO_CERTIFIED", "2020-01-01"), ("USER_VERIFICATION_BYPASS", "2023-05-01")]).refusal == .userVerificationBypass)
        // Listed out of order: the later date wins, not the later position.
        #expect(entry([("REVOKED", "2023-05-01"), ("FIDO_CERTIFIED", "2020-01-01")]).refusal == .revoked)
        // A later update or certification does not lift a compromise: the devices made keep it.
        #expect(
            entry([("USER_KEY_REMOTE_COMPROMISE", "2021-01-01"), ("UPDATE_AVAILABLE", "2022-01-01")]).refusal == .userKeyRemoteCompromise)
        #expect(
            entry([("ATTESTATION_KEY_COMPROMISE", "2021-01-01"), ("FIDO_CERTIFIED_L2", "2024-01-01")]).refusal == .attestationKeyCompromise)
        // A report dated in the future is not in effect yet.
        let future = entry([("FIDO_CERTIFIED", "2020-01-01"), ("REVOKED", "2999-01-01")])
        #expect(future.refusal == nil && future.refusal(at: MetadataDay.parse("3000-01-01")!)?.status == .revoked)
        #expect(entry([]).refusal == nil)
        #expect(entry([("UPDATE_AVAILABLE", "2022-01-01")]).refusal == nil)
    }

    @Test(arguments: AuthenticatorStatus.refusing.map(\.rawValue).sorted())
    func aRegistrationOfAnAuthenticatorReportedCompromisedIsRefused(_ status: String) async throws {
        let mds = try MetadataBLOBIssuer()
        let metadata = try await FIDOMetadata.verify(
            blob: try mds.blob(number: 1, entries: [.init(aaguid: Self.key, description: "Bad Key", status: status)]), roots: [mds.root],
            at: Self.now)
        var harness = try CeremonyHarness { $0.attestationPolicy.metadata = metadata }
        do {
            _ = try await harness.register()
            Issue.record("\(status) was registered")
        } catch let error as WebAuthnError {
            #expect(error.code == .authenticatorNotAllowed)
            #expect(error.reason.contains(status) && error.reason.contains("Bad Key"), "\(error.reason)")
        }
        // Another model registers.
        harness.authenticator.aaguid = Self.other
        #expect(try await harness.register().0.aaguid == Self.other)
    }

    @Test func anAttestationChainingToAnEntrysRootIsTrustedForThatAAGUIDOnly() async throws {
        let ca = try AttestationCA(name: "Vendor Attestation Root")
        let mds = try MetadataBLOBIssuer()
        let metadata = try await FIDOMetadata.verify(
            blob: try mds.blob(number: 1, entries: [.init(aaguid: Self.key, description: "Vendor Key", attestationRoots: [ca.root])]),
            roots: [mds.root], at: Self.now)
        #expect(metadata.trustAnchors(for: Self.key) == [ca.root])
        var harness = try CeremonyHarness {
            $0.attestation = .direct
            $0.attestationPolicy = AttestationPolicy(requireTrustedAttestation: true)
            $0.attestationPolicy.metadata = metadata
        }
        harness.authenticator.attestation = .packedFull(ca)
        let verdict = try await harness.register().0.attestation
        #expect(verdict.type == .basic && verdict.trusted)
        // The same root does not vouch for a model whose entry does not list it.
        harness.authenticator.aaguid = Self.other
        await #expect(throws: WebAuthnError(.attestationUntrusted, "")) { try await harness.register() }
        // Nor for a certificate that does not name its model: nothing binds the AAGUID to it.
        harness.authenticator.aaguid = Self.key
        harness.authenticator.attestationCertificateNamesAAGUID = false
        do {
            _ = try await harness.register()
            Issue.record("metadata roots vouched for a certificate without id-fido-gen-ce-aaguid")
        } catch let error as WebAuthnError {
            #expect(error.code == .attestationUntrusted && error.reason.contains("id-fido-gen-ce-aaguid"), "\(error)")
        }
        // A root the operator configured still counts for it.
        var configured = try CeremonyHarness {
            $0.attestation = .direct
            $0.attestationPolicy = AttestationPolicy(trustAnchors: [ca.root], requireTrustedAttestation: true)
            $0.attestationPolicy.metadata = metadata
        }
        configured.authenticator.attestation = .packedFull(ca)
        configured.authenticator.aaguid = Self.key
        configured.authenticator.attestationCertificateNamesAAGUID = false
        #expect(try await configured.register().0.attestation.trusted)
    }
}
