import Foundation
import Testing
import WebAuthnTesting

@testable import PasskeyMail

/// The SMTP client against a real SMTP server (`scripts/smtp_server.py`, aiosmtpd with a
/// throwaway CA), never a mock: STARTTLS and implicit TLS, AUTH, SMTPUTF8, dot-stuffing, and
/// every way a server can fail.
@Suite(.serialized) struct SMTPClientTests {
    static let required = ProcessInfo.processInfo.environment["PASSKEYD_REQUIRE_ORACLE"] == "1"

    /// The server, or nil (the test skipped; recorded as a failure where `./scripts/test` runs).
    func server(_ options: [String] = []) throws -> SMTPTestServer? {
        guard let server = try SMTPTestServer.start(options) else {
            if Self.required { Issue.record("no Python with aiosmtpd (PASSKEYD_PYTHON): ./scripts/test installs it") }
            return nil
        }
        return server
    }

    func message(to: String = "ann@example.com", text: String = "Hello") throws -> (MailMessage, [UInt8]) {
        let message = MailMessage(
            fromName: "Example", from: try MailAddress("no-reply@example.com"), to: try MailAddress(to), subject: "Test", text: text,
            html: "<p>\(text)</p>")
        return (message, message.rendered(messageID: "m1", date: Date()))
    }

    func client(_ server: SMTPTestServer, url: String, timeouts: SMTPClient.Timeouts = .init(), remote: Bool = false) throws -> SMTPClient {
        var settings = try SMTPServer(url: url, trustedCertificatesPEM: server.caPEM)
        if remote { settings.isLoopback = false }
        return SMTPClient(server: settings, timeouts: timeouts)
    }

    @Test func startTLSWithAuthPlainDeliversTheExactMessage() async throws {
        guard let server = try server(["--auth", "mailer:s3cret pass"]) else { return }
        defer { server.close() }
        let (mail, bytes) = try message(text: ".a line with a leading dot\n..two\n.")
        try await client(server, url: "smtp://mailer:s3cret%20pass@localhost:\(server.smtpPort)", remote: true).send(
            bytes, from: mail.from, to: mail.to)
        let received = try #require(try await server.waitFor { $0.count == 1 }.first)
        #expect(received.data == bytes)
        #expect(received.tls)
        #expect(received.authUser == "mailer")
        #expect(received.mailFrom == "no-reply@example.com" && received.recipients == ["ann@example.com"])
    }

    @Test func implicitTLSDelivers() async throws {
        guard let server = try server(["--auth", "mailer:pw"]) else { return }
        defer { server.close() }
        let (mail, bytes) = try message()
        try await client(server, url: "smtps://mailer:pw@localhost:\(server.smtpsPort)", remote: true).send(
            bytes, from: mail.from, to: mail.to)
        let received = try #require(try await server.waitFor { $0.count == 1 }.first)
        #expect(received.tls && received.authUser == "mailer" && received.data == bytes)
    }

    @Test func aRemoteServerWithoutSTARTTLSIsRefused() async throws {
        guard let server = try server(["--no-starttls"]) else { return }
        defer { server.close() }
        let (mail, bytes) = try message()
        let error = await #expect(throws: SMTPError.self) {
            try await client(server, url: "smtp://localhost:\(server.smtpPort)", remote: true).send(bytes, from: mail.from, to: mail.to)
        }
        #expect(error?.kind == .tls)
        #expect(server.received().isEmpty)
        // Plain SMTP to a loopback relay is allowed, and anywhere with allowPlaintext.
        try await client(server, url: "smtp://localhost:\(server.smtpPort)").send(bytes, from: mail.from, to: mail.to)
        var allowed = try SMTPServer(url: "smtp://localhost:\(server.smtpPort)", allowPlaintext: true)
        allowed.isLoopback = false
        try await SMTPClient(server: allowed).send(bytes, from: mail.from, to: mail.to)
        // …but never a password in the clear to a server off this machine.
        var withPassword = try SMTPServer(url: "smtp://mailer:pw@localhost:\(server.smtpPort)", allowPlaintext: true)
        withPassword.isLoopback = false
        let refused = await #expect(throws: SMTPError.self) {
            try await SMTPClient(server: withPassword).send(bytes, from: mail.from, to: mail.to)
        }
        #expect(refused?.kind == .tls)
        #expect(try await server.waitFor { $0.count == 2 }.allSatisfy { !$0.tls })
    }

    @Test(arguments: [["--cert-name", "mail.other.example"], ["--self-signed"]])
    func aCertificateThatDoesNotProveTheServerIsRefused(options: [String]) async throws {
        guard let server = try server(options + ["--auth", "mailer:secret-password"]) else { return }
        defer { server.close() }
        let (mail, bytes) = try message()
        for url in [
            "smtp://mailer:secret-password@localhost:\(server.smtpPort)", "smtps://mailer:secret-password@localhost:\(server.smtpsPort)",
        ] {
            let error = await #expect(throws: SMTPError.self) {
                try await client(server, url: url, remote: true).send(bytes, from: mail.from, to: mail.to)
            }
            #expect(error?.kind == .tls, "\(url): \(error.map { "\($0)" } ?? "")")
        }
        #expect(server.received().isEmpty)
    }

    @Test func aWrongPasswordIsAnAuthErrorThatNeverShowsThePassword() async throws {
        guard let server = try server(["--auth", "mailer:right"]) else { return }
        defer { server.close() }
        let (mail, bytes) = try message()
        let password = "wrong-Pa55word"
        let error = await #expect(throws: SMTPError.self) {
            try await client(server, url: "smtp://mailer:\(password)@localhost:\(server.smtpPort)", remote: true).send(
                bytes, from: mail.from, to: mail.to)
        }
        #expect(error?.kind == .auth)
        let plain = Data([0] + Array("mailer".utf8) + [0] + Array(password.utf8)).base64EncodedString()
        let text = error.map { "\($0)" } ?? ""
        for secret in [password, plain, Data(password.utf8).base64EncodedString()] {
            #expect(!text.contains(secret))
        }
        // Nor does any description of the settings or the client (service lifecycle logs them).
        let settings = try SMTPServer(url: "smtp://mailer:\(password)@localhost:25")
        for shown in [
            "\(settings)", String(reflecting: settings), "\(SMTPClient(server: settings))",
            String(reflecting: SMTPClient(server: settings)),
        ] {
            #expect(!shown.contains(password), "\(shown)")
        }
    }

    @Test func refusalsSayWhetherTryingAgainCanHelp() async throws {
        let (mail, bytes) = try message()
        if let server = try server(["--rcpt-reply", "550 5.1.1 no such user"]) {
            defer { server.close() }
            let error = await #expect(throws: SMTPError.self) {
                try await client(server, url: "smtp://localhost:\(server.smtpPort)").send(bytes, from: mail.from, to: mail.to)
            }
            #expect(error?.kind == .rejected && error?.permanent == true)
        }
        if let server = try server(["--data-reply", "451 4.3.0 try later"]) {
            defer { server.close() }
            let error = await #expect(throws: SMTPError.self) {
                try await client(server, url: "smtp://localhost:\(server.smtpPort)").send(bytes, from: mail.from, to: mail.to)
            }
            #expect(error?.kind == .rejected && error?.permanent == false)
        }
    }

    @Test(arguments: [["--stall-data"], ["--stall-greeting"]])
    func aServerThatStallsCostsOneStepsTimeout(options: [String]) async throws {
        guard let server = try server(options) else { return }
        defer { server.close() }
        let (mail, bytes) = try message()
        let timeouts = SMTPClient.Timeouts(connect: .seconds(5), command: .milliseconds(800), dataEnd: .milliseconds(800))
        let error = await #expect(throws: SMTPError.self) {
            try await client(server, url: "smtp://localhost:\(server.smtpPort)", timeouts: timeouts).send(
                bytes, from: mail.from, to: mail.to)
        }
        #expect(error?.kind == .timeout, "\(String(describing: error))")
    }

    @Test func aStoppedServerIsRefused() async throws {
        guard let server = try server() else { return }
        let port = server.smtpPort
        server.close()
        let (mail, bytes) = try message()
        let error = await #expect(throws: SMTPError.self) {
            try await SMTPClient(server: try SMTPServer(url: "smtp://localhost:\(port)")).send(bytes, from: mail.from, to: mail.to)
        }
        #expect(error?.kind == .refused)
    }

    @Test func aUTF8LocalPartNeedsSMTPUTF8() async throws {
        let (mail, bytes) = try message(to: "josé@example.com")
        if let server = try server() {
            defer { server.close() }
            try await client(server, url: "smtp://localhost:\(server.smtpPort)").send(bytes, from: mail.from, to: mail.to)
            let received = try #require(try await server.waitFor { $0.count == 1 }.first)
            #expect(received.recipients == ["josé@example.com"])
            #expect(received.mailOptions.contains("SMTPUTF8"))
        }
        if let server = try server(["--no-smtputf8"]) {
            defer { server.close() }
            let error = await #expect(throws: SMTPError.self) {
                try await client(server, url: "smtp://localhost:\(server.smtpPort)").send(bytes, from: mail.from, to: mail.to)
            }
            #expect(error?.kind == .rejected && error?.permanent == true)
        }
    }

    @Test func urlsAreReadStrictly() throws {
        let server = try SMTPServer(url: "smtps://user%40corp:p%3Ass@smtp.example.com")
        #expect(server.port == 465 && server.security == .implicitTLS && server.username == "user@corp" && server.password == "p:ss")
        #expect(try SMTPServer(url: "smtp://smtp.example.com").port == 587)
        #expect(try !SMTPServer(url: "smtp://smtp.example.com").plaintextAllowed)
        #expect(try SMTPServer(url: "smtp://127.0.0.1:25").plaintextAllowed)
        for bad in [
            "http://smtp.example.com", "smtp://", "smtp://user@smtp.example.com", "smtp://h.example.com/path", "smtp://h.example.com:0",
            "nonsense",
        ] {
            #expect(throws: SMTPServer.Invalid.self, "\(bad)") { try SMTPServer(url: bad) }
        }
    }
}
