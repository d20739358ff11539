import Foundation
import HTTPTypes
import PasskeyCore
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyStore

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

    /// Each notice says what its undo does, and only that.
    @Test func noticesSayWhatTheirUndoDoes() {
        let values = MailValues(rpName: "Example", username: "ann", link: "https://example.com/#undo=x", subject: "Phone")
        let added = MailTemplates.render(.passkeyAdded, language: "en", values: values).text
        let removed = MailTemplates.render(.passkeyRemoved, language: "en", values: values).text
        let password = MailTemplates.render(.passwordOff, language: "fr", values: values).text
        #expect(added.contains("It removes that passkey"))
        #expect(!removed.contains("removes that passkey") && removed.contains("It signs you out everywhere"))
        #expect(password.contains("Il vous déconnecte partout") && !password.contains("retire"))
    }

    /// A blank address is not a removal (DELETE is): refused, and the verified one stays.
    @Test func aBlankAddressIsRefusedNotTakenAsARemoval() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let token = try await Self.verifiedAccount(api, mail, "rae", device: &device)
            let put = try await api.request(.put, "/api/auth/email", body: Array(#"{"address":"   "}"#.utf8), token: token)
            #expect(put.status == .badRequest && put.errorCode == "invalid_email")
            #expect(try await api.request(.get, "/api/auth/email", token: token).json["verified"] == .bool(true))
        }
    }

    /// Past 20 code attempts in a day an account's codes are refused, the right one too (its
    /// link still works): 5 tries a token and 5 mails an hour would otherwise allow 600 a day.
    @Test func anAccountTakesTwentyCodeAttemptsADay() async throws {
        // The per-address limits of secrets out of the way: the day's count is what is tested.
        guard let mail = try await Self.setup(limits: .init(perAccount: 1000, perAccountTotal: 1000), { $0.mailsPerAddressPerHour = 100 })
        else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            _ = try await Self.verifiedAccount(api, mail, "sol", device: &device)
            var sent = 1
            for round in 0..<5 {
                #expect(try await api.post("/api/auth/recovery/email", ["identifier": "sol"]).status == .accepted)
                sent += 1
                let code = try #require(try await mail.mails(to: "sol@example.com", count: sent).last?.code)
                let wrong = code == "000000" ? "111111" : "000000"
                for _ in 0..<(round < 4 ? 5 : 0) {
                    #expect(
                        try await api.post("/api/auth/recovery/email/options", ["identifier": "sol", "code": wrong]).status == .unauthorized
                    )
                }
                if round == 4 {
                    // 20 attempts made: the right code of a live token is refused now.
                    let refused = try await api.post("/api/auth/recovery/email/options", ["identifier": "sol", "code": code])
                    #expect(refused.errorCode == "invalid_email_code", "\(refused.json)")
                }
            }
        }
    }

    /// A username and an address of one account are one mailbox: its hourly limit holds after
    /// the lookup, whichever identifier asked.
    @Test func oneMailboxGetsItsHourlyMailsWhicheverIdentifierAsks() async throws {
        guard let mail = try await Self.setup({ $0.mailsPerAddressPerHour = 2 }) else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            _ = try await Self.verifiedAccount(api, mail, "tia", device: &device)
            // Two names and two addresses of the sign-up's mail count: three requests pass the
            // limits on what they name; the mailbox's own limit sends two.
            for identifier in ["tia", "tia@example.com", "TIA"] {
                #expect(try await api.post("/api/auth/recovery/email", ["identifier": identifier]).status == .accepted)
            }
            try await mail.detachedWorkDone()
            // The SMTP server records a mail a moment after it is handed over: waited for (at
            // most 10 s), then every mail sent once more, and still two.
            var recoveries = await mail.allMails().filter { $0.token("email-recover") != nil }
            for _ in 0..<100 where recoveries.count < 2 {
                try await Task.sleep(for: .milliseconds(100))
                recoveries = await mail.allMails().filter { $0.token("email-recover") != nil }
            }
            try await mail.detachedWorkDone()
            recoveries = await mail.allMails().filter { $0.token("email-recover") != nil }
            #expect(recoveries.count == 2, "\(recoveries.count) recovery mails")
        }
    }

    /// Issue 43 item 4 for OpenID Connect: `email` is the verified address with
    /// `email_verified: true`; a username that looks like an address is marked unverified in the
    /// ID token too (a relying party merging accounts on it would be pre-hijacked).
    @Test func openIDsEmailClaimIsVerifiedOnlyWhenTheAddressIs() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (_, _, _, tokens) = try await OpenIDAttackTests.tokens(api, harness, "uma@example.com", scope: "openid email")
            func payload(_ jwt: String) throws -> [String: Any] {
                let part = String(jwt.split(separator: ".")[1])
                let bytes = try #require(Base64URLBytes(encoded: part)?.bytes)
                return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
            }
            let idToken = try payload(try #require(tokens.string("id_token")))
            #expect(idToken["email"] as? String == "uma@example.com" && idToken["email_verified"] as? Bool == false, "\(idToken)")
            let account = try #require(try await harness.store.account(username: "uma@example.com"))
            try await harness.store.verifyEmail(
                accountID: account.id, address: "uma.real@example.com", key: "uma.real@example.com", at: Date(), audit: [])
            let info = try await api.request(.get, "/oauth2/userinfo", token: try #require(tokens.string("access_token")), origin: nil)
            #expect(info.json["email"] == .string("uma.real@example.com") && info.json["email_verified"] == .bool(true), "\(info.json)")
        }
    }

    /// A queued mail holds its link and code until sent: sealed (AES-GCM under a key from the
    /// server secret), so the outbox is not a place to read them from.
    @Test func aQueuedMailHoldsNoLinkOrCodeInTheClear() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            _ = try await Self.verifiedAccount(api, mail, "val", device: &device)
            mail.smtp.stop()
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "val"]).status == .accepted)
            let store = try #require(mail.harness.store as? SQLStore)
            var rows: [[UInt8]] = []
            for _ in 0..<50 where rows.isEmpty {
                rows = try await store.reader.rows("SELECT message FROM mail_outbox WHERE sent_at IS NULL AND message IS NOT NULL")
                    .map { try $0.bytes("message") }
                if rows.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
            }
            let sealed = try #require(rows.first)
            let text = String(decoding: sealed, as: UTF8.self)
            #expect(!text.contains("email-recover") && !text.contains("Subject") && !text.contains("val@example.com"))
            // It opens with the secret, and holds the link.
            let opened = try OutboxSeal.open(sealed, secret: try await mail.harness.store.serverSecret())
            #expect(String(decoding: opened, as: UTF8.self).contains("email-recover="))
        }
    }

    /// The mail routes' refusals: mail not set up (404 on each, the policy says off), a
    /// cross-site browser request (403), a body that is not JSON (415), no session (401).
    @Test func theMailRoutesRefuseWhatTheyMust() async throws {
        let plain = try await ServerHarness()
        try await plain.run { api in
            let policy = try await api.request(.get, "/api/auth/email/policy")
            #expect(policy.json["mailEnabled"] == .bool(false) && policy.json["signUp"] == .string("off"))
            for (path, body) in [
                ("/api/auth/recovery/email", #"{"identifier":"a@example.com"}"#), ("/api/auth/email/verify", #"{"token":"x"}"#),
                ("/api/auth/email/undo", #"{"token":"x"}"#), ("/api/auth/recovery/email/options", #"{"token":"x"}"#),
            ] {
                let answer = try await api.request(.post, path, body: Array(body.utf8))
                #expect(answer.status == .notFound && answer.errorCode == "email_not_enabled", "\(path)")
            }
            let signUp = try await api.post("/api/auth/register/options", SignUpBody(username: "wes", email: "wes@example.com"))
            #expect(signUp.errorCode == "email_not_enabled")
        }
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            let crossSite = try await api.request(
                .post, "/api/auth/recovery/email", body: Array(#"{"identifier":"a@example.com"}"#.utf8), origin: "https://evil.example",
                headers: [.init("Sec-Fetch-Site")!: "cross-site"])
            #expect(crossSite.status == .forbidden, "\(crossSite.json)")
            let form = try await api.request(
                .post, "/api/auth/recovery/email", body: Array("identifier=a%40example.com".utf8),
                headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(form.status == .unsupportedMediaType)
            for (method, path) in [(HTTPRequest.Method.get, "/api/auth/email"), (.delete, "/api/auth/email"), (.put, "/api/auth/email")] {
                let answer = try await api.request(method, path, body: method == .put ? Array(#"{"address":"a@example.com"}"#.utf8) : nil)
                #expect(answer.status == .unauthorized && answer.errorCode == "not_signed_in", "\(method) \(path)")
            }
            let removeOthers = try await api.request(.post, "/api/auth/passkeys/remove-others", body: Array("{}".utf8))
            #expect(removeOthers.errorCode == "not_signed_in")
            // A bad token's shape and a code without a session.
            #expect(
                try await api.post("/api/auth/email/verify", ["token": String(repeating: "A", count: 500)]).errorCode
                    == "invalid_email_link")
            #expect(try await api.post("/api/auth/email/verify", [String: String]()).errorCode == "invalid_email_link")
        }
    }
}
