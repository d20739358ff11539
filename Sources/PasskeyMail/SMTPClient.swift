import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// Sends one mail per connection over SMTP (RFC 5321): the greeting, EHLO, STARTTLS (RFC 3207)
/// or implicit TLS, AUTH PLAIN or LOGIN (RFC 4954) when the server has credentials, MAIL FROM
/// (with SMTPUTF8, RFC 6531, when an address needs it and the server offers it), RCPT TO, DATA
/// with the body dot-stuffed (§4.5.2), QUIT. Every step has a deadline: a server that stalls at
/// any point (even mid-DATA) costs at most that step's time, then the connection is closed.
///
/// ```swift
/// let client = SMTPClient(server: try SMTPServer(url: "smtps://mailer:secret@smtp.example.com"))
/// try await client.send(message.rendered(messageID: id, date: .now), from: message.from, to: message.to)
/// ```
public struct SMTPClient: Sendable {
    public struct Timeouts: Sendable, Hashable {
        public var connect: Duration
        /// The greeting, and each command's reply.
        public var command: Duration
        /// The reply to the final `.` of DATA (RFC 5321 §4.5.3.2.6 allows 10 minutes; a relay
        /// answers in seconds).
        public var dataEnd: Duration
        public init(connect: Duration = .seconds(10), command: Duration = .seconds(30), dataEnd: Duration = .seconds(60)) {
            self.connect = connect
            self.command = command
            self.dataEnd = dataEnd
        }
        /// The longest one send can take.
        public var total: Duration { connect + command * 12 + dataEnd }
    }

    public let server: SMTPServer
    public let timeouts: Timeouts
    let group: any EventLoopGroup

    public init(server: SMTPServer, timeouts: Timeouts = Timeouts(), group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) {
        self.server = server
        self.timeouts = timeouts
        self.group = group
    }

    /// Delivers `message` (RFC 5322 bytes, CRLF lines) from `from` to `to`, or throws an
    /// ``SMTPError`` saying whether trying again may help.
    public func send(_ message: [UInt8], from: MailAddress, to: MailAddress) async throws(SMTPError) {
        let context = try makeTLSContext()
        let connection = try await connect(tls: context)
        do {
            try await converse(connection, tls: context, message: message, from: from, to: to)
            await connection.close()
        } catch {
            await connection.close()
            throw error
        }
    }

    private func makeTLSContext() throws(SMTPError) -> NIOSSLContext {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.minimumTLSVersion = .tlsv12
        do {
            if let pem = server.trustedCertificatesPEM {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(pem))
            }
            return try NIOSSLContext(configuration: configuration)
        } catch {
            throw SMTPError(.configuration, "the TLS settings cannot be used: \(error)")
        }
    }

    /// The name the certificate must carry: the host, or for an IP address nil (NIOSSL then
    /// checks the certificate's IP addresses against the peer's).
    private var serverHostname: String? {
        server.host.contains(":") || server.host.split(separator: ".").allSatisfy({ UInt8($0) != nil }) ? nil : server.host
    }

    private func connect(tls: NIOSSLContext) async throws(SMTPError) -> SMTPConnection {
        let implicit = server.security == .implicitTLS
        let hostname = serverHostname
        // Why the connection ended, should it end before the handler can be asked (an implicit
        // TLS handshake refused at once closes the channel, handlers and all).
        let early = EarlyFailure()
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(TimeAmount(timeouts.connect))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if implicit {
                        try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: hostname))
                    }
                    try channel.pipeline.syncOperations.addHandler(SMTPReplyHandler(early: early))
                }
            }
        do {
            let channel = try await bootstrap.connect(host: server.host, port: server.port).get()
            return try await SMTPConnection.over(channel, timeouts: timeouts)
        } catch ChannelError.connectTimeout {
            throw SMTPError(.timeout, "no connection to \(server.host):\(server.port) within the connect timeout")
        } catch {
            if let recorded = early.value.withLock({ $0 }) { throw recorded }
            throw SMTPError(.refused, "cannot connect to \(server.host):\(server.port): \(error)")
        }
    }

    private func converse(_ connection: SMTPConnection, tls: NIOSSLContext, message: [UInt8], from: MailAddress, to: MailAddress)
        async throws(SMTPError)
    {
        var underTLS = server.security == .implicitTLS
        // §4.3.1: the greeting is 220; 554 says the server will not talk.
        try connection.expect(try await connection.reply(timeout: timeouts.command), 220, step: "greeting")
        var extensions = try await ehlo(connection)
        if !underTLS {
            if extensions.keys.contains("STARTTLS") {
                try connection.expect(try await connection.command("STARTTLS"), 220, step: "STARTTLS")
                try await connection.startTLS(context: tls, serverHostname: serverHostname)
                underTLS = true
                // RFC 3207 §4.2: forget everything learnt before TLS; ask again.
                extensions = try await ehlo(connection)
            } else if !server.plaintextAllowed {
                throw SMTPError(
                    .tls,
                    "\(server.host) does not offer STARTTLS: refused (plain SMTP only to a loopback relay or with PASSKEYD_SMTP_ALLOW_PLAINTEXT=1)"
                )
            }
        }
        if let user = server.username, let password = server.password {
            try await authenticate(connection, user: user, password: password, mechanisms: extensions["AUTH"] ?? [])
        }
        let utf8 = from.needsSMTPUTF8 || to.needsSMTPUTF8
        if utf8 && !extensions.keys.contains("SMTPUTF8") {
            throw SMTPError(.rejected, "\(to) needs SMTPUTF8 (RFC 6531), which \(server.host) does not offer", permanent: true)
        }
        try connection.expect(try await connection.command("MAIL FROM:<\(from)>" + (utf8 ? " SMTPUTF8" : "")), 250, step: "MAIL FROM")
        let rcpt = try await connection.command("RCPT TO:<\(to)>")
        try connection.expect(rcpt, 250, 251, step: "RCPT TO")
        try connection.expect(try await connection.command("DATA"), 354, step: "DATA")
        try connection.expect(try await connection.data(Self.dotStuffed(message), timeout: timeouts.dataEnd), 250, step: "end of DATA")
        // The mail is accepted: QUIT's answer changes nothing.
        _ = try? await connection.command("QUIT")
    }

    /// EHLO (§4.1.1.1); the extensions offered, by keyword, with their parameters.
    private func ehlo(_ connection: SMTPConnection) async throws(SMTPError) -> [String: [String]] {
        let reply = try await connection.command("EHLO \(server.heloName)")
        try connection.expect(reply, 250, step: "EHLO")
        var extensions: [String: [String]] = [:]
        for line in reply.lines.dropFirst() {
            let words = line.split(separator: " ").map(String.init)
            guard let keyword = words.first?.uppercased() else { continue }
            extensions[keyword] = words.dropFirst().map { $0.uppercased() }
        }
        return extensions
    }

    /// AUTH PLAIN (RFC 4616) when offered, else LOGIN; only under TLS or to a loopback relay.
    private func authenticate(_ connection: SMTPConnection, user: String, password: String, mechanisms: [String])
        async throws(SMTPError)
    {
        // Plain AUTH only to a loopback relay: `allowPlaintext` lets mail go in the clear, never
        // a password (a STARTTLS stripped on the way would hand it over).
        guard connection.underTLS || server.isLoopback else {
            throw SMTPError(.tls, "no TLS: the password is not sent")
        }
        if mechanisms.contains("PLAIN") {
            let token = Data([0] + Array(user.utf8) + [0] + Array(password.utf8)).base64EncodedString()
            let reply = try await connection.command("AUTH PLAIN \(token)", redacted: "AUTH PLAIN ***")
            try Self.authenticated(reply)
        } else if mechanisms.contains("LOGIN") {
            try connection.expect(try await connection.command("AUTH LOGIN"), 334, step: "AUTH LOGIN")
            try connection.expect(
                try await connection.command(Data(user.utf8).base64EncodedString(), redacted: "***"), 334, step: "AUTH LOGIN user")
            try Self.authenticated(try await connection.command(Data(password.utf8).base64EncodedString(), redacted: "***"))
        } else {
            throw SMTPError(
                .auth, "\(server.host) offers neither AUTH PLAIN nor AUTH LOGIN (offered: \(mechanisms.joined(separator: " ")))")
        }
    }

    private static func authenticated(_ reply: SMTPReply) throws(SMTPError) {
        guard reply.code == 235 else { throw SMTPError(.auth, "authentication refused: \(reply)") }
    }

    /// §4.5.2: a line starting with `.` gets one more; every line ends in CRLF (a lone CR or LF
    /// becomes CRLF); then `.` CRLF ends the data.
    static func dotStuffed(_ message: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(message.count + 64)
        var atLineStart = true
        var index = 0
        while index < message.count {
            let byte = message[index]
            if byte == 0x0D || byte == 0x0A {
                output += [0x0D, 0x0A]
                if byte == 0x0D && index + 1 < message.count && message[index + 1] == 0x0A { index += 1 }
                atLineStart = true
            } else {
                if atLineStart && byte == 0x2E { output.append(0x2E) }
                output.append(byte)
                atLineStart = false
            }
            index += 1
        }
        if !atLineStart { output += [0x0D, 0x0A] }
        return output + [0x2E, 0x0D, 0x0A]
    }
}
