import Foundation
import HTTPTypes
import Testing
import WebAuthn

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// The server API's scopes hold for reads hidden in writes (issue 34, item 6): a `users:write`
/// key that names another account's `externalId` in `POST /api/admin/users` learns only that it
/// is taken. Run on SQLite and again on PostgreSQL.
@Suite("Server API: a write-only key reads nothing")
struct ServerAPIScopeTests {
    static func body(_ username: String, externalID: String) -> [UInt8] {
        Array(#"{"username":"\#(username)","externalId":"\#(externalID)"}"#.utf8)
    }

    @Test func aWriteOnlyKeyGetsAConflictAndNoRecordForAnotherAccountsExternalID() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let owner: HTTPFields = [
                .authorization: "Bearer \(try await IntegrationTests.apiKey(harness, scopes: ["users:read", "users:write"]))"
            ]
            let writer: HTTPFields = [.authorization: "Bearer \(try await IntegrationTests.apiKey(harness, scopes: ["users:write"]))"]
            let created = try await api.request(
                .post, "/api/admin/users", body: Self.body("victim", externalID: "cust-7"), origin: nil, headers: owner)
            #expect(created.status == .created)
            let id = try #require(created.string("id"))

            // The attack: a write-only key names the victim's externalId. It used to answer 200
            // with the whole record (id, username, display name, last sign-in).
            let probe = try await api.request(
                .post, "/api/admin/users", body: Self.body("probe", externalID: "cust-7"), origin: nil, headers: writer)
            #expect(probe.status == .conflict && probe.errorCode == "conflict", "\(probe.status)")
            let text = String(decoding: probe.bytes, as: UTF8.self)
            #expect(!text.contains(id) && !text.contains("victim") && probe.json["id"] == nil, "\(text)")
            // Nothing was made or changed by it.
            #expect(try await harness.store.account(username: "probe") == nil)
            #expect(try await harness.store.account(externalID: "cust-7")?.id.uuidString.lowercased() == id)

            // The write-only key still creates accounts (and sees what it made)...
            let made = try await api.request(
                .post, "/api/admin/users", body: Self.body("newcomer", externalID: "cust-8"), origin: nil, headers: writer)
            #expect(made.status == .created && made.string("externalId") == "cust-8")
            // ...and a key with users:read keeps the idempotent find-or-create.
            let again = try await api.request(
                .post, "/api/admin/users", body: Self.body("other", externalID: "cust-7"), origin: nil, headers: owner)
            #expect(again.status == .ok && again.string("id") == id)
            // Reading by externalId needs users:read.
            let read = try await api.request(.get, "/api/admin/users?externalId=cust-7", origin: nil, headers: writer)
            #expect(read.status == .forbidden && read.errorCode == "insufficient_scope")
        }
    }
}
