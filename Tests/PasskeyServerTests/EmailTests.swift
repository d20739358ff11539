import Foundation
import HTTPTypes
import Logging
import PasskeyCore
import PasskeyMail
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

/// Issue 43 through the HTTP API, with mail going through the outbox and the real SMTP client to
/// a real SMTP server (`scripts/smtp_server.py` on loopback): verified addresses, recovery by
/// mail ending in a new passkey, notices whose "this wasn't me" undoes the change, and no
/// account enumeration or pre-account takeover.
@Suite(.serialized) struct EmailTests {
    /// A server with mail set up and the SMTP server it sends to; nil (skipped) without aiosmtpd.
    struct MailSetup: Sendable {
        let harness: ServerHarness
        let smtp: SMTPTestServer
        let dispatcher: MailDispatcher

        /// The mails to `address` once there are `count` (sending what is due meanwhile).
        func mails(to address: String, count: Int = 1) async throws -> [Mail] {
            for _ in 0..<100 {
                await dispatcher.sendDue()
                let mails = smtp.received().filter { $0.recipients.contains(address) }.map(Mail.init)
                if mails.count >= count { return mails }
                try await Task.sleep(for: .milliseconds(100))
            }
            Issue.record("no \(count) mails to \(address): \(smtp.received().map(\.recipients))")
            return smtp.received().filter { $0.recipients.contains(address) }.map(Mail.init)
        }

        /// Waits until the recovery lookups answered requests left behind (``DetachedWork``)
        /// have ended: a request's answer comes after its work is counted, so none is missed.
        func detachedWorkDone() async throws {
            for _ in 0..<400 {
                if harness.service.mailRequests.inFlight == 0 { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            Issue.record("recovery lookups still running after 20 s")
        }

        /// Sends what is due, then every mail the server has.
        func allMails() async -> [Mail] {
            await dispatcher.sendDue()
            return smtp.received().map(Mail.init)
        }
    }

    /// A received mail: its plain-text part decoded, the link's token and the code.
    struct Mail: Sendable {
        let raw: SMTPTestServer.Received
        let text: String
        init(_ raw: SMTPTestServer.Received) {
            self.raw = raw
            text = raw.plainText
        }
        func token(_ action: String) -> String? {
            guard let range = text.range(of: "#\(action)=") else { return nil }
            return String(text[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        }
        var code: String? {
            text.components(separatedBy: "\n").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
                .first { $0.count == 6 && $0.allSatisfy(\.isNumber) }
        }
        var subject: String { raw.text.components(separatedBy: "\r\n").first { $0.hasPrefix("Subject: ") } ?? "" }
    }

    static let required = ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_ORACLE"] == "1"

    static func setup(
        smtpOptions: [String] = ["--no-starttls"], limits: ServerConfiguration.RateLimits? = nil,
        _ configure: @escaping (inout ServerConfiguration.Email) -> Void = { _ in }
    ) async throws -> MailSetup? {
        guard let smtp = try SMTPTestServer.start(smtpOptions) else {
            if required { Issue.record("no Python with aiosmtpd (PASSKEYD_PYTHON): ./scripts/test installs it") }
            return nil
        }
        let server = try SMTPServer(url: "smtp://127.0.0.1:\(smtp.smtpPort)")
        let harness = try await ServerHarness {
            var email = ServerConfiguration.Email(smtp: server, fromName: "Example \"Co\"", from: try? MailAddress("no-reply@example.com"))
            configure(&email)
            $0.email = email
            if let limits { $0.rateLimits = limits }
        }
        var logger = Logger(label: "mail-test")
        logger.logLevel = .critical
        let dispatcher = MailDispatcher(
            service: harness.service,
            sender: SMTPClient(server: server, timeouts: .init(connect: .seconds(2), command: .seconds(5), dataEnd: .seconds(5))),
            logger: logger)
        return MailSetup(harness: harness, smtp: smtp, dispatcher: dispatcher)
    }

    struct SignUpBody: Encodable {
        let username: String
        var email: String? = nil
    }

    /// Signs up `username` (with `email` when given): the session token and the credential.
    static func signUp(_ api: APIClient, _ username: String, email: String?, authenticator: inout SoftwareAuthenticator) async throws
        -> (String, SoftwareCredential)
    {
        let options = try await api.post("/api/auth/register/options", SignUpBody(username: username, email: email))
        guard options.status == .ok else { throw HarnessError.unexpected(options) }
        let (registration, credential) = try authenticator.register(
            options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
        let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
        guard verify.status == .ok, let token = verify.string("token") else { throw HarnessError.unexpected(verify) }
        return (token, credential)
    }

    /// The recovery step with `body` (a token, or an identifier and a code): a new passkey made
    /// on a new device; the verify answer.
    static func recover(_ api: APIClient, _ body: [String: String], authenticator: inout SoftwareAuthenticator) async throws -> APIResponse
    {
        let options = try await api.post("/api/auth/recovery/email/options", body)
        guard options.status == .ok else { return options }
        let (registration, _) = try authenticator.register(
            options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
        return try await api.post("/api/auth/recovery/email/verify", APIClient.CredentialBody(credential: registration))
    }

    @Test func anAddressGivenAtSignUpIsVerifiedByItsCodeOnce() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let (token, _) = try await Self.signUp(api, "ann", email: "Ann@Example.com", authenticator: &device)
            var status = try await api.request(.get, "/api/auth/email", token: token)
            #expect(status.json["address"] == .string("Ann@example.com") && status.json["verified"] == .bool(false))
            let verification = try #require(try await mail.mails(to: "Ann@example.com").first)
            #expect(verification.raw.mailFrom == "no-reply@example.com")
            #expect(verification.raw.text.contains("From: \"Example \\\"Co\\\"\" <no-reply@example.com>"))
            let code = try #require(verification.code)
            #expect(verification.token("verify-email") != nil)
            // The code works for its account only, and once.
            let wrong = try await api.post("/api/auth/email/verify", ["code": code == "000000" ? "111111" : "000000"], token: token)
            #expect(wrong.status == .unauthorized && wrong.errorCode == "invalid_email_code")
            // To the signed-in account it was sent for, the refusal counts down.
            #expect(String(decoding: wrong.bytes, as: UTF8.self).contains("4 tries left"))
            #expect(try await api.post("/api/auth/email/verify", ["code": code]).errorCode == "not_signed_in")
            let verified = try await api.post("/api/auth/email/verify", ["code": code], token: token)
            #expect(verified.status == .ok, "\(verified.json)")
            status = try await api.request(.get, "/api/auth/email", token: token)
            #expect(status.json["verified"] == .bool(true) && status.json["recoveryOpen"] == .bool(true))
            #expect(try await api.post("/api/auth/email/verify", ["code": code], token: token).errorCode == "invalid_email_code")
        }
    }

    @Test func recoveryByMailEndsInANewPasskeyAndItsNoticeUndoesEverything() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var phone = SoftwareAuthenticator()
            let (oldSession, _) = try await Self.signUp(api, "bea", email: "bea@example.com", authenticator: &phone)
            let code = try #require(try await mail.mails(to: "bea@example.com").first?.code)
            #expect(try await api.post("/api/auth/email/verify", ["code": code], token: oldSession).status == .ok)

            // Every device lost: "Lost your passkey?" with the address.
            let asked = try await api.post("/api/auth/recovery/email", ["identifier": "BEA@example.com"])
            #expect(asked.status == .accepted && asked.json["sent"] == .bool(true))
            let recovery = try #require(try await mail.mails(to: "bea@example.com", count: 2).last)
            let link = try #require(recovery.token("email-recover"))
            // Another purpose's route never takes it.
            #expect(try await api.post("/api/auth/email/verify", ["token": link]).errorCode == "invalid_email_link")
            #expect(try await api.post("/api/auth/email/undo", ["token": link]).errorCode == "invalid_email_link")
            var laptop = SoftwareAuthenticator()
            let recovered = try await Self.recover(api, ["token": link], authenticator: &laptop)
            #expect(recovered.status == .ok, "\(recovered.json)")
            #expect(recovered.json["recovery"] == .bool(true) && recovered.json["otherPasskeys"] == .number(1))
            let newSession = try #require(recovered.string("token"))
            // The link worked once.
            var again = SoftwareAuthenticator()
            #expect(try await Self.recover(api, ["token": link], authenticator: &again).errorCode == "invalid_email_link")
            // The old device's passkey and session (the one it made) go in one step.
            let removed = try await api.request(.post, "/api/auth/passkeys/remove-others", body: Array("{}".utf8), token: newSession)
            #expect(removed.json["passkeysRemoved"] == .number(1), "\(removed.json)")
            #expect(try await api.request(.get, "/api/auth/session", token: oldSession).status == .unauthorized)

            // The notice: "recovery used", with "this wasn't me".
            // Two notices: the recovery, and the old passkey's removal.
            let notices = try await mail.mails(to: "bea@example.com", count: 4).suffix(2)
            #expect(notices.contains { $0.subject.contains("removed") }, "\(notices.map(\.subject))")
            let notice = try #require(notices.first { $0.subject.contains("recovered") })
            let undo = try #require(notice.token("undo"))
            let undone = try await api.post("/api/auth/email/undo", ["token": undo])
            #expect(undone.status == .ok && undone.json["passkeyRemoved"] == .bool(true), "\(undone.json)")
            #expect(try await api.request(.get, "/api/auth/session", token: newSession).status == .unauthorized)
            #expect(try await api.post("/api/auth/email/undo", ["token": undo]).errorCode == "invalid_email_link")
            #expect(
                try await mail.harness.store.passkeys(accountID: try #require(try await mail.harness.store.account(username: "bea")).id)
                    .isEmpty)
            // Recovery by mail is closed: a request answers the same and sends nothing.
            let before = await mail.allMails().count
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "bea@example.com"]).status == .accepted)
            try await mail.detachedWorkDone()
            #expect(await mail.allMails().count == before)
        }
    }

    @Test func unknownAndUnverifiedAddressesGetTheSameAnswerAndNoRecoveryMail() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            _ = try await Self.signUp(api, "cy", email: "cy@example.com", authenticator: &device)
            _ = try await mail.mails(to: "cy@example.com")
            let answers = [
                try await api.post("/api/auth/recovery/email", ["identifier": "nobody@example.com"]),
                try await api.post("/api/auth/recovery/email", ["identifier": "cy@example.com"]),  // not verified
                try await api.post("/api/auth/recovery/email", ["identifier": "cy"]),
                try await api.post("/api/auth/recovery/email", ["identifier": "nobody"]),
            ]
            #expect(answers.allSatisfy { $0.status == .accepted && $0.bytes == answers[0].bytes })
            try await mail.detachedWorkDone()
            // The unverified address gets a fresh verification (a claim, never a recovery), one
            // per request naming its account; nobody else gets anything.
            let mails = try await mail.mails(to: "cy@example.com", count: 3)
            #expect(await mail.allMails().count == 3)
            #expect(mails.allSatisfy { $0.token("email-recover") == nil && $0.token("verify-email") != nil }, "\(mails.map(\.subject))")
        }
    }

    @Test func anUnknownAddressMayBeToldSomeoneTried() async throws {
        guard let mail = try await Self.setup({ $0.notifyUnknownAddresses = true }) else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "stranger@example.com"]).status == .accepted)
            let tried = try #require(try await mail.mails(to: "stranger@example.com").first)
            #expect(tried.token("email-recover") == nil && tried.code == nil)
            #expect(tried.text.contains("no account has verified it"))
        }
    }

    @Test func aCodeTakesFiveTriesThenTheTokenIsSpent() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var device = SoftwareAuthenticator()
            let (token, _) = try await Self.signUp(api, "dee", email: "dee@example.com", authenticator: &device)
            let code = try #require(try await mail.mails(to: "dee@example.com").first?.code)
            #expect(try await api.post("/api/auth/email/verify", ["code": code], token: token).status == .ok)
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "dee"]).status == .accepted)
            let right = try #require(try await mail.mails(to: "dee@example.com", count: 2).last?.code)
            let wrong = right == "123456" ? "654321" : "123456"
            var messages: [String] = []
            for _ in 0..<5 {
                let answer = try await api.post("/api/auth/recovery/email/options", ["identifier": "dee", "code": wrong])
                #expect(answer.errorCode == "invalid_email_code")
                messages.append(answer.json["error"]?["message"].flatMap { if case .string(let m) = $0 { m } else { nil } } ?? "")
            }
            // Nobody is signed in: the refusal never counts down (it would tell the account exists).
            #expect(Set(messages).count == 1 && messages.first?.contains("tries left") == false, "\(messages)")
            var laptop = SoftwareAuthenticator()
            #expect(
                try await Self.recover(api, ["identifier": "dee", "code": right], authenticator: &laptop).errorCode == "invalid_email_code")
        }
    }

    @Test func anotherAccountsCodeOrAnExpiredOneNeverOpensRecovery() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            for name in ["eve", "fay"] {
                var device = SoftwareAuthenticator()
                let (token, _) = try await Self.signUp(api, name, email: "\(name)@example.com", authenticator: &device)
                let code = try #require(try await mail.mails(to: "\(name)@example.com").first?.code)
                #expect(try await api.post("/api/auth/email/verify", ["code": code], token: token).status == .ok)
                #expect(try await api.post("/api/auth/recovery/email", ["identifier": name]).status == .accepted)
            }
            let eveCode = try #require(try await mail.mails(to: "eve@example.com", count: 2).last?.code)
            let fayMail = try #require(try await mail.mails(to: "fay@example.com", count: 2).last)
            var device = SoftwareAuthenticator()
            // Eve's code with Fay's name: refused (bound to the account it was sent for).
            if eveCode != fayMail.code {
                #expect(
                    try await Self.recover(api, ["identifier": "fay", "code": eveCode], authenticator: &device).errorCode
                        == "invalid_email_code")
            }
            // Ten minutes on, Fay's link is dead.
            mail.harness.clock.advance(601)
            #expect(
                try await Self.recover(api, ["token": try #require(fayMail.token("email-recover"))], authenticator: &device).errorCode
                    == "invalid_email_link")
            #expect(
                try await Self.recover(api, ["identifier": "eve", "code": eveCode], authenticator: &device).errorCode
                    == "invalid_email_code")
        }
    }

    /// Issue 43 item 4: someone signs up with another person's address. It proves nothing until
    /// its owner verifies it; when they do (not signed in to that account), what was made before
    /// is listed with a recovery step, or removed at once (`beforeVerification: remove`).
    @Test(arguments: [ServerConfiguration.Email.BeforeVerification.list, .remove])
    func theAddressOwnerTakesBackAnAccountSomeoneElseMadeWithIt(mode: ServerConfiguration.Email.BeforeVerification) async throws {
        guard let mail = try await Self.setup({ $0.beforeVerification = mode }) else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var attacker = SoftwareAuthenticator()
            let (attackerSession, _) = try await Self.signUp(api, "victim-name", email: "victim@example.com", authenticator: &attacker)
            // Unverified, the address opens no recovery: asking sends its owner a fresh
            // verification instead (the sign-up's may have expired), which is how they claim it.
            _ = try await mail.mails(to: "victim@example.com")
            #expect(try await api.post("/api/auth/recovery/email", ["identifier": "victim@example.com"]).status == .accepted)
            let verification = try #require(try await mail.mails(to: "victim@example.com", count: 2).last)
            #expect(verification.token("email-recover") == nil)
            // The address's owner opens the verification link (no session).
            let verified = try await api.post("/api/auth/email/verify", ["token": try #require(verification.token("verify-email"))])
            #expect(verified.status == .ok, "\(verified.json)")
            let ticket = try #require(verified.string("recoveryToken"))
            if mode == .remove {
                #expect(verified.json["removed"] == .bool(true))
                #expect(try await api.request(.get, "/api/auth/session", token: attackerSession).status == .unauthorized)
            } else {
                #expect(verified.json["passkeysBefore"]?.array?.count == 1 && verified.json["sessionsBefore"] == .number(1))
            }
            // The owner's own passkey, then the rest removed in one step.
            var owner = SoftwareAuthenticator()
            let recovered = try await Self.recover(api, ["token": ticket], authenticator: &owner)
            #expect(recovered.status == .ok, "\(recovered.json)")
            let session = try #require(recovered.string("token"))
            _ = try await api.request(.post, "/api/auth/passkeys/remove-others", body: Array("{}".utf8), token: session)
            #expect(try await api.request(.get, "/api/auth/session", token: attackerSession).status == .unauthorized)
            let account = try #require(try await mail.harness.store.account(username: "victim-name"))
            #expect(try await mail.harness.store.passkeys(accountID: account.id).count == 1)
        }
    }

    @Test func aVerifiedAddressBelongsToOneAccount() async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            var first = SoftwareAuthenticator()
            let (one, _) = try await Self.signUp(api, "gus", email: "shared@example.com", authenticator: &first)
            let code = try #require(try await mail.mails(to: "shared@example.com").first?.code)
            #expect(try await api.post("/api/auth/email/verify", ["code": code], token: one).status == .ok)
            var second = SoftwareAuthenticator()
            let (two, _) = try await Self.signUp(api, "hal", email: "shared@example.com", authenticator: &second)
            let other = try #require(try await mail.mails(to: "shared@example.com", count: 2).last?.code)
            let taken = try await api.post("/api/auth/email/verify", ["code": other], token: two)
            #expect(taken.status == .conflict && taken.errorCode == "email_taken")
        }
    }

    @Test(arguments: [
        "ann@example.com\r\nBcc: eve@evil.example", "ann@example.com\nX: y", "not-an-address", "ann@[127.0.0.1]",
        String(repeating: "a", count: 65) + "@example.com",
    ])
    func badAddressesAreRefusedAndNothingIsSent(address: String) async throws {
        guard let mail = try await Self.setup() else { return }
        defer { mail.smtp.close() }
        try await mail.harness.run { api in
            let options = try await api.post("/api/auth/register/options", SignUpBody(username: "ivy", email: address))
            #expect(options.status == .badRequest && options.errorCode == "invalid_email", "\(options.json)")
            var device = SoftwareAuthenticator()
            let (token, _) = try await Self.signUp(api, "ivy", email: nil, authenticator: &device)
            let put = try await api.request(
                .put, "/api/auth/email", body: Array(try JSONEncoder().encode(["address": address])), token: token)
            #expect(put.status == .badRequest && put.errorCode == "invalid_email")
            #expect(await mail.allMails().isEmpty)
        }
    }

    /// A mail server down for a while under load: every request still answers at once, nothing
    /// is lost, and once it is back each mail arrives exactly once.
    @Test func aMailServerDownUnderLoadLosesNothingAndSendsNothingTwice() async throws {
        guard let mail = try await Self.setup() else { return }
        let smtp = mail.smtp
        defer { smtp.close() }
        let store = mail.harness.store
        let accounts = 16
        for index in 0..<accounts {
            let account = Account(
                username: "user\(index)", displayName: "User \(index)", userHandle: Array(repeating: UInt8(index), count: 64),
                createdAt: Date())
            try await store.createAccount(
                account, passkey: StoreConformanceTestsPasskey.make(for: account, index: index), session: nil, audit: [])
            try await store.verifyEmail(
                accountID: account.id, address: "user\(index)@example.com", key: "user\(index)@example.com", at: Date(), audit: [])
        }
        smtp.stop()
        try await mail.harness.run { api in
            // Two rounds of 16 requests released together, while the mail server is down.
            for _ in 0..<2 {
                let answers = await Race.run(accounts) { index in
                    try await api.post("/api/auth/recovery/email", ["identifier": "user\(index)"]).status
                }
                #expect(answers.allSatisfy { (try? $0.get()) == .accepted }, "\(answers)")
            }
            // The lookups after the answers queue their mails.
            var stats = MailStatistics()
            for _ in 0..<100 {
                stats = try await store.mailStatistics(now: mail.harness.clock.now)
                if stats.queued + stats.failing >= accounts { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            await mail.dispatcher.sendDue()
            stats = try await store.mailStatistics(now: mail.harness.clock.now)
            #expect(stats.failing >= 1 && stats.sentLastDay == 0, "\(stats)")
        }
        // Back up: each queued mail arrives once, after its back-off.
        let back = try smtp.restarted()
        defer { back.close() }
        for _ in 0..<20 {
            mail.harness.clock.advance(60)
            await mail.dispatcher.sendDue()
            if try await store.mailStatistics(now: mail.harness.clock.now).queued
                + store.mailStatistics(now: mail.harness.clock.now).failing == 0
            {
                break
            }
        }
        let received = back.received()
        let stats = try await store.mailStatistics(now: mail.harness.clock.now)
        #expect(stats.queued == 0 && stats.failing == 0 && stats.failedLastDay == 0, "\(stats)")
        #expect(received.count == stats.sentLastDay && received.count >= accounts, "\(received.count) received, \(stats)")
        let ids = received.compactMap { $0.text.components(separatedBy: "\r\n").first { $0.hasPrefix("Message-ID:") } }
        #expect(Set(ids).count == received.count, "a mail was sent twice")
        // Each account got its own (the newest code replaced the older; both mails went out).
        #expect(Set(received.flatMap(\.recipients)).count == accounts)
    }
}

/// A passkey row for accounts made directly in the store.
enum StoreConformanceTestsPasskey {
    static func make(for account: Account, index: Int) -> Passkey {
        Passkey(
            credentialID: Array(repeating: UInt8(index), count: 16) + Array(account.id.uuidString.utf8.prefix(16)), accountID: account.id,
            publicKey: [1, 2, 3], signCount: 0, aaguid: "00000000-0000-0000-0000-000000000000", transports: [], backupEligible: false,
            backedUp: false, userVerified: true, attestationFormat: "none", attestationTrusted: false, name: "Key", createdAt: Date())
    }
}
