import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// Notices, languages, reopening recovery, and the figures the console and /metrics show.
extension EmailTests {
    /// Signs up `name` with `name@example.com` and verifies it: the session token.
    static func verifiedAccount(_ api: APIClient, _ mail: MailSetup, _ name: String, device: inout SoftwareAuthenticator) async throws
        -> String
    {
        let (token, _) = try await signUp(api, name, email: "\(name)@example.com", authenticator: &device)
        let code = try #require(try await mail.mails(to: "\(name)@example.com").first?.code)
        let verified = try await api.post("/api/auth/email/verify", ["code": code], token: token)
        guard verified.status == .ok else { throw HarnessError.unexpected(verified) }
        return token
    }

    @Test func aNewAddressIsVerifiedBeforeItCountsAndTheOldOneCanUndoTheChange() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let token = try await Self.verifiedAccount(api, mail, "jo", device: &device)
            let put = try await api.request(.put, "/api/auth/email", body: Array(#"{"address":"jo.new@example.com"}"#.utf8), token: token)
            #expect(put.status == .accepted && put.json["address"] == .string("jo@example.com") && put.json["verified"] == .bool(true))
            #expect(put.json["pendingAddress"] == .string("jo.new@example.com"))
            let code = try #require(try await mail.mails(to: "jo.new@example.com").first?.code)
            #expect(try await api.post("/api/auth/email/verify", ["code": code], token: token).status == .ok)
            #expect(try await api.request(.get, "/api/auth/email", token: token).json["address"] == .string("jo.new@example.com"))
            // The old address is told, and its undo puts it back and signs everyone out.
            let notice = try #require(try await mail.mails(to: "jo@example.com", count: 2).last)
            #expect(notice.text.contains("jo.new@example.com"))
            let undone = try await api.post("/api/auth/email/undo", ["token": try #require(notice.token("undo"))])
            #expect(undone.json["addressRestored"] == .string("jo@example.com"), "\(undone.json)")
            #expect(
                try await api.post("/api/auth/email/verify", ["token": try #require(notice.token("verify-email") ?? "x")]).status
                    == .unauthorized)
            #expect(try await api.request(.get, "/api/auth/session", token: token).status == .unauthorized)
            let account = try #require(try await mail.harness.store.account(username: "jo"))
            let email = try #require(try await mail.harness.store.accountEmail(accountID: account.id))
            // Back, but unverified: whoever holds the old address may be who it was taken from
            // (it proves nothing until its owner verifies it again).
            #expect(email.address == "jo@example.com" && !email.verified && email.recoveryClosed)
        }
    }

    @Test func aPasskeyAddedOrRemovedIsNoticedAndAnAddedOneUndone() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let token = try await Self.verifiedAccount(api, mail, "kim", device: &device)
            // A second passkey added by the signed-in session.
            var other = SoftwareAuthenticator()
            let options = try await api.post("/api/auth/register/options", [String: String](), token: token)
            let (registration, credential) = try other.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: token).status
                    == .ok)
            let added = try #require(try await mail.mails(to: "kim@example.com", count: 2).last)
            #expect(added.subject.contains("added"), "\(added.subject)")
            let id = Base64URLBytes(credential.id).base64URL
            #expect(try await api.request(.get, "/api/auth/passkeys", token: token).bytes.count > 0)
            let undone = try await api.post("/api/auth/email/undo", ["token": try #require(added.token("undo"))])
            #expect(undone.json["passkeyRemoved"] == .bool(true))
            let account = try #require(try await mail.harness.store.account(username: "kim"))
            #expect(try await mail.harness.store.passkeys(accountID: account.id).map { Base64URLBytes($0.credentialID).base64URL } != [id])
            #expect(try await mail.harness.store.passkeys(accountID: account.id).count == 1)
        }
    }

    @Test func mailsAreInTheAccountsLanguageWithNoRemoteContent() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let options = try await api.request(
                .post, "/api/auth/register/options",
                body: Array(try JSONEncoder().encode(SignUpBody(username: "lou", email: "lou@example.com"))),
                headers: [.acceptLanguage: "fr-CA,fr;q=0.9,en;q=0.5"])
            let (registration, _) = try device.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let verify = try await api.request(
                .post, "/api/auth/register/verify",
                body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: registration))),
                headers: [.acceptLanguage: "fr-CA,fr;q=0.9"])
            #expect(verify.status == .ok)
            let received = try #require(try await mail.mails(to: "lou@example.com").first)
            #expect(received.raw.text.contains("Content-Language: fr"))
            #expect(received.text.contains("Confirmer mon adresse"), "\(received.text)")
            let html = received.raw.text.lowercased()
            for remote in ["<img", "src=", "<script", "<link", "url("] { #expect(!html.contains(remote), "\(remote)") }
            #expect(received.raw.data.allSatisfy { $0 < 0x80 })
        }
    }

    @Test func aRecoveryCodeSignInOpensRecoveryByMailAgain() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let token = try await Self.verifiedAccount(api, mail, "max", device: &device)
            let codes = try await api.request(.post, "/api/auth/recovery-codes", body: Array("{}".utf8), token: token)
            let code = try #require(codes.json["codes"]?.array?.first.flatMap { if case .string(let c) = $0 { c } else { nil } })
            let account = try #require(try await mail.harness.store.account(username: "max"))
            try await mail.harness.store.setEmailRecoveryClosed(accountID: account.id, closed: true)
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "max"]).status == .accepted)
            try await mail.detachedWorkDone()
            #expect(await mail.allMails().filter { $0.raw.recipients == ["max@example.com"] }.count == 1)
            #expect(try await api.post("/api/auth/recovery/sign-in", ["username": "max", "code": code]).status == .ok)
            #expect(try await mail.harness.store.accountEmail(accountID: account.id)?.recoveryClosed == false)
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "max"]).status == .accepted)
            // The recovery-code notice, then the recovery mail.
            let mails = try await mail.mails(to: "max@example.com", count: 3)
            #expect(mails.contains { $0.token("email-recover") != nil })
        }
    }

    @Test func theConsoleAndMetricsShowMailHealthAndRecoveries() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            _ = try await Self.verifiedAccount(api, mail, "ned", device: &device)
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "ned"]).status == .accepted)
            _ = try await mail.mails(to: "ned@example.com", count: 2)
            let overview = try await ConsoleService(service: mail.harness.service).overview()
            #expect(overview.mail.sentLastDay == 2 && overview.mail.queued == 0 && overview.recovery.requested == 1, "\(overview.mail)")
            let metrics = try await mail.harness.service.renderMetrics()
            #expect(metrics.contains("passkeyd_mail_sent_24h 2"), "\(metrics)")
            #expect(metrics.contains(#"passkeyd_email_recoveries_7d{step="requested"} 1"#))
        }
    }
}
