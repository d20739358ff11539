import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// What an attacker tries against the mail routes (found by review, each failing before its fix).
extension EmailTests {
    @Test(arguments: [";", "en,;", ";;,fr", ",", "", "fr;q=0.9,;"])
    func anyAcceptLanguageIsReadWithoutCrashing(header: String) async throws {
        #expect(MailTemplates.languages.contains(MailTemplates.language(header)))
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            let answer = try await api.request(
                .post, "/api/auth/recovery/email", body: Array(#"{"identifier":"someone@example.com"}"#.utf8),
                headers: [.acceptLanguage: header])
            #expect(answer.status == .accepted)
        }
    }

    /// A code tried with an identifier answers alike whether or not the account exists and has a
    /// live recovery: no "tries left" to nobody signed in.
    @Test func aWrongRecoveryCodeDoesNotTellAnAccountExists() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            _ = try await Self.verifiedAccount(api, mail, "olga", device: &device)
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "olga"]).status == .accepted)
            let code = try #require(try await mail.mails(to: "olga@example.com", count: 2).last?.code)
            let wrong = code == "000000" ? "111111" : "000000"
            let known = try await api.post("/api/auth/recovery/email/options", ["identifier": "olga", "code": wrong])
            let unknown = try await api.post("/api/auth/recovery/email/options", ["identifier": "nobody-here", "code": wrong])
            #expect(known.status == .unauthorized && known.bytes == unknown.bytes, "\(known.json) vs \(unknown.json)")
        }
    }

    /// "This wasn't me" closes recovery by mail: a recovery step opened before it cannot finish.
    @Test func undoEndsARecoveryAlreadyUnderWay() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let token = try await Self.verifiedAccount(api, mail, "pia", device: &device)
            // A passkey added: its notice's undo link.
            var second = SoftwareAuthenticator()
            let added = try await api.post("/api/auth/register/options", [String: String](), token: token)
            let (registration, _) = try second.register(
                options: try added.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: token).status
                    == .ok)
            let undoLink = try #require(try await mail.mails(to: "pia@example.com", count: 2).last?.token("undo"))
            // An attacker with the mailbox opens a recovery step…
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "pia"]).status == .accepted)
            let link = try #require(try await mail.mails(to: "pia@example.com", count: 3).last?.token("email-recover"))
            let options = try await api.post("/api/auth/recovery/email/options", ["token": link])
            #expect(options.status == .ok)
            // …the owner says "this wasn't me" meanwhile…
            #expect(try await api.post("/api/auth/email/undo", ["token": undoLink]).status == .ok)
            // …and the step cannot finish.
            var attacker = SoftwareAuthenticator()
            let (late, _) = try attacker.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let finished = try await api.post("/api/auth/recovery/email/verify", APIClient.CredentialBody(credential: late))
            #expect(finished.errorCode == "invalid_email_link", "\(finished.json)")
            let account = try #require(try await mail.harness.store.account(username: "pia"))
            #expect(try await mail.harness.store.passkeys(accountID: account.id).count == 1)
        }
    }

    /// Only the first proof of an address may take an account back from whoever made it: a
    /// change of a verified address, verified where its owner is not signed in, removes
    /// nothing and opens no recovery step.
    @Test func aChangedAddressVerifiedElsewhereRemovesNothing() async throws {
        guard let mail = try await Self.setup({ $0.beforeVerification = .remove }) else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let token = try await Self.verifiedAccount(api, mail, "quinn", device: &device)
            let put = try await api.request(.put, "/api/auth/email", body: Array(#"{"address":"quinn2@example.com"}"#.utf8), token: token)
            #expect(put.status == .accepted)
            let link = try #require(try await mail.mails(to: "quinn2@example.com").first?.token("verify-email"))
            let verified = try await api.post("/api/auth/email/verify", ["token": link])
            #expect(
                verified.status == .ok && verified.json["removed"] == .bool(false) && verified.json["recoveryToken"] == nil,
                "\(verified.json)")
            #expect(try await api.request(.get, "/api/auth/session", token: token).status == .ok)
        }
    }
}
