import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Testing

/// The operator verbs `passkeyd admin` runs: each change lands with its audit line, on both stores.
@Suite("Admin service (SQLite and PostgreSQL)")
struct AdminServiceTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    static func seed(_ store: any PasskeyStore, _ name: String) async throws -> (Account, Passkey, [SessionRecord]) {
        let account = Account(username: name, displayName: name, userHandle: (0..<64).map { _ in .random(in: 0...255) }, createdAt: t0)
        let passkey = Passkey(
            credentialID: (0..<32).map { _ in .random(in: 0...255) }, accountID: account.id, publicKey: [1], signCount: 0,
            aaguid: "00000000-0000-0000-0000-000000000000", transports: [], backupEligible: true, backedUp: true, userVerified: true,
            attestationFormat: "none", attestationTrusted: false, name: "Key", createdAt: t0)
        try await store.createAccount(account, passkey: passkey, session: nil, audit: [])
        var sessions: [SessionRecord] = []
        for _ in 0..<2 {
            let session = SessionRecord(
                tokenHash: (0..<32).map { _ in .random(in: 0...255) }, accountID: account.id, createdAt: t0,
                expiresAt: t0.addingTimeInterval(3600), method: "passkey", credentialID: passkey.credentialID)
            try await store.createSession(session)
            sessions.append(session)
        }
        return (account, passkey, sessions)
    }

    @Test(arguments: TestDatabase.kinds)
    func everyVerbLandsWithItsAuditLine(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let admin = AdminService(store: store, now: { Self.t0 })
        let (ada, key, _) = try await Self.seed(store, "ada")
        let (bob, bobsKey, _) = try await Self.seed(store, "bob")

        #expect(try await admin.account("ADA").id == ada.id)
        #expect(try await admin.account(ada.id.uuidString).id == ada.id)
        await #expect(throws: PasskeyServiceError.accountNotFound) { try await admin.account("nobody") }

        #expect(try await admin.disable(ada, by: "op") == 2)
        #expect(try await store.account(id: ada.id)?.disabled == true)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).isEmpty)
        try await admin.enable(ada, by: "op")
        #expect(try await store.account(id: ada.id)?.disabled == false)

        // A passkey of another account is refused and nothing is written.
        await #expect(throws: PasskeyServiceError.passkeyNotFound) {
            try await admin.revokePasskey(bobsKey.credentialID, of: ada, by: "op")
        }
        #expect(try await store.passkey(credentialID: bobsKey.credentialID) != nil)
        #expect(try await admin.revokePasskey(key.credentialID, of: ada, by: "op").name == "Key")
        #expect(try await store.passkeys(accountID: ada.id).isEmpty)

        #expect(try await admin.revokeSessions(of: bob, by: "op") == 2)
        #expect(try await admin.revokeSessions(of: bob, by: "op") == 0)

        let adaLog = try await store.auditEvents(accountID: ada.id, limit: 10).reversed().map { "\($0.kind) \($0.userAgent ?? "")" }
        #expect(adaLog == ["admin_account_disabled op", "admin_account_enabled op", "admin_passkey_revoked op"])
        #expect(
            try await store.auditEvents(accountID: bob.id, limit: 10).map(\.kind) == ["admin_sessions_revoked", "admin_sessions_revoked"])
    }

    /// The admin verbs throw coded domain errors, and the server API answers each code with its
    /// own status (issue 35: each route used to re-code a bare string as `malformed_json`).
    @Test func refusalsCarryTheirCodeToTheServerAPI() async throws {
        let harness = try await ServerHarness { $0.webhookAllowPrivateAddresses = true }
        try await harness.run { api in
            let key = try await IntegrationTests.apiKey(harness, scopes: ["webhooks"])
            let auth: HTTPFields = [.authorization: "Bearer \(key)"]
            let events = try await api.request(
                .post, "/api/admin/webhooks", body: Array(#"{"url":"http://127.0.0.1:9/hook","events":["no_such_event"]}"#.utf8),
                origin: nil, headers: auth)
            #expect(events.status == .badRequest && events.errorCode == "invalid_value")
            let missing = try await api.request(.delete, "/api/admin/webhooks/\(UUID())", origin: nil, headers: auth)
            #expect(missing.status == .notFound && missing.errorCode == "not_found")
        }
        let admin = AdminService(store: harness.store)
        await #expect(throws: PasskeyServiceError(.invalidValue, "")) {
            try await admin.addClient(
                name: "app", redirectURIs: [], postLogoutURIs: [], isPublic: true, firstParty: false, allowSignUp: false,
                idTokenAlgorithm: "RS256", by: "op")
        }
        await #expect(throws: PasskeyServiceError(.invalidName, "")) {
            try await admin.addClient(
                name: " ", redirectURIs: ["https://app.example/cb"], postLogoutURIs: [], isPublic: true, firstParty: false,
                allowSignUp: false, idTokenAlgorithm: "RS256", by: "op")
        }
        await #expect(throws: PasskeyServiceError(.notFound, "")) { try await admin.removeClient("nobody", by: "op") }
    }
}
