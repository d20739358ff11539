import Foundation
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// FIDO metadata (MDS3) in the server: loaded from the store, verified with the configured root,
/// then used by registrations, provider names, `/readyz` and the metrics.
@Suite("FIDO metadata in the server")
struct MetadataServerTests {
    static let model = AAGUID("c0ffee00-0000-4000-8000-00000000cafe")!
    static let icon = "data:image/png;base64,iVBORw0KGgo="

    /// A harness whose configured MDS root is `mds`'s, with `blob` stored and loaded.
    static func harness(_ mds: MetadataBLOBIssuer, storing blob: String?, number: Int = 7, metricsToken: String? = nil) async throws
        -> ServerHarness
    {
        let harness = try await ServerHarness {
            $0.mdsRootCertificates = [mds.root]
            $0.metricsToken = metricsToken
        }
        if let blob {
            try await harness.store.saveMetadataBLOB(
                MetadataBLOBRecord(number: number, nextUpdate: "2027-01-01", blob: blob, importedAt: harness.clock.now), force: false)
        }
        await harness.service.refreshMetadata()
        return harness
    }

    @Test func theProviderNameAndIconComeFromTheMetadata() async throws {
        let mds = try MetadataBLOBIssuer()
        let blob = try mds.blob(number: 7, entries: [.init(aaguid: Self.model, description: "Test MDS Key", icon: Self.icon)])
        let harness = try await Self.harness(mds, storing: blob)
        #expect(harness.service.fidoMetadata?.number == 7)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("mds".utf8))
            let (token, _, verify) = try await api.signUp("ada", authenticator: &authenticator)
            #expect(verify.json["passkey"]?["provider"] == .string("Test MDS Key"))
            #expect(verify.json["passkey"]?["providerIcon"] == .string(Self.icon))
            // The default name of the passkey is the model's name too.
            #expect(verify.json["passkey"]?["name"] == .string("Test MDS Key"))
            let list = try await api.request(.get, "/api/auth/passkeys", token: token)
            guard case .array(let passkeys)? = list.json["passkeys"] else { throw HarnessError.unexpected(list) }
            #expect(passkeys.first?["provider"] == .string("Test MDS Key"))
            #expect(passkeys.first?["providerIcon"] == .string(Self.icon))
        }
    }

    @Test func withoutMetadataTheBundledNamesStay() async throws {
        let mds = try MetadataBLOBIssuer()
        let harness = try await Self.harness(mds, storing: nil)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("mds".utf8))
            authenticator.aaguid = AAGUID("bada5566-a7aa-401f-bd96-45619a55120d")!
            let (_, _, verify) = try await api.signUp("ada", authenticator: &authenticator)
            #expect(verify.json["passkey"]?["provider"] == .string("1Password"))
            #expect(verify.json["passkey"]?["providerIcon"] == nil)
        }
    }

    @Test func aRegistrationOfARevokedModelIsRefused() async throws {
        let mds = try MetadataBLOBIssuer()
        let blob = try mds.blob(number: 7, entries: [.init(aaguid: Self.model, description: "Leaky Key", status: "REVOKED")])
        let harness = try await Self.harness(mds, storing: blob)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("mds".utf8))
            let options = try await api.registrationOptions(username: "ada")
            let (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(verify.status == .forbidden && verify.errorCode == "authenticator_not_allowed")
            let message = verify.json["error"]?["message"]?.string ?? ""
            #expect(message.contains("Leaky Key") && message.contains("REVOKED"), "\(message)")
            #expect(try await harness.store.account(username: "ada") == nil)
        }
    }

    @Test func aStoredBLOBThatDoesNotVerifyIsNotUsed() async throws {
        let mds = try MetadataBLOBIssuer()
        let stranger = try MetadataBLOBIssuer(name: "Another Root")
        let blob = try stranger.blob(number: 7, entries: [.init(aaguid: Self.model, description: "Test MDS Key", status: "REVOKED")])
        let harness = try await Self.harness(mds, storing: blob)
        #expect(harness.service.fidoMetadata == nil)
        // A newer good one, imported by another instance, is picked up on the next refresh.
        try await harness.store.saveMetadataBLOB(
            MetadataBLOBRecord(
                number: 8, nextUpdate: "2049-01-01", blob: try mds.blob(number: 8, entries: []), importedAt: harness.clock.now),
            force: false)
        await harness.service.refreshMetadata()
        #expect(harness.service.fidoMetadata?.number == 8)
    }

    @Test func readinessWarnsAndMetricsSayWhenTheMetadataIsStale() async throws {
        let mds = try MetadataBLOBIssuer()
        // The harness clock is 2027-01-15: a BLOB due for replacement on 2027-01-01 is stale.
        let blob = try mds.blob(number: 7, nextUpdate: "2027-01-01", entries: [])
        let harness = try await Self.harness(mds, storing: blob, metricsToken: "metrics-token-0123456789")
        try await harness.run { api in
            let ready = try await api.request(.get, "/readyz")
            #expect(ready.status == .ok)
            #expect(String(decoding: ready.bytes, as: UTF8.self) == "ready\nwarning: FIDO metadata is stale (nextUpdate 2027-01-01)\n")
            let scrape = try await api.request(.get, "/metrics", headers: [.authorization: "Bearer metrics-token-0123456789"])
            let text = String(decoding: scrape.bytes, as: UTF8.self)
            #expect(text.contains("passkeyd_mds_stale 1"), "\(text)")
            #expect(text.contains("passkeyd_mds_next_update_timestamp_seconds 1798761600"), "\(text)")
        }
        let fresh = try await Self.harness(mds, storing: try mds.blob(number: 7, nextUpdate: "2049-01-01", entries: []))
        try await fresh.run { api in
            let ready = try await api.request(.get, "/readyz")
            #expect(String(decoding: ready.bytes, as: UTF8.self) == "ready\n")
        }
    }
}
