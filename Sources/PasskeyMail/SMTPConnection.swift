import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// Why a mail was not handed over, and whether trying again later may help.
public struct SMTPError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// No connection (refused, unreachable, name unknown).
        case refused
        /// A step passed its deadline (connect, a reply, the end of DATA).
        case timeout
        /// TLS failed (handshake, certificate, another name) or was required and not offered.
        case tls
        /// The server refused the credentials or offers no mechanism passkeyd speaks.
        case auth
        /// The server refused the mail (a 4xx or 5xx reply to MAIL, RCPT or DATA).
        case rejected
        /// The server broke the protocol (an unexpected or malformed reply, the connection closed).
        case `protocol`
        /// The settings cannot be used (a CA file that is not PEM).
        case configuration
    }

    public let kind: Kind
    public let message: String
    /// A 5xx answer about this mail: sending it again will fail again.
    public let permanent: Bool
    public var description: String { "\(kind.rawValue): \(message)" }

    public init(_ kind: Kind, _ message: String, permanent: Bool = false) {
        self.kind = kind
        self.message = String(message.prefix(500))
        self.permanent = permanent
    }
}

extension SMTPError {
    /// A TLS error (handshake, certificate, name) is `tls`; anything else of the connection `protocol`.
    static func kind(of error: any Error) -> Kind {
        if let error = error as? SMTPError { return error.kind }
        return error is NIOSSLError || error is BoringSSLError || error is NIOSSLExtraError ? .tls : .protocol
    }
}

/// One reply (RFC 5321 §4.2): a three-digit code and its lines of text.
struct SMTPReply: Sendable, CustomStringConvertible {
    let code: Int
    let lines: [String]
    var description: String { "\(code) \(lines.joined(separator: " / "))" }
}

/// One SMTP connection: a command out, its reply in, each within its deadline.
final class SMTPConnection: Sendable {
    let channel: any Channel
    let timeouts: SMTPClient.Timeouts
    private let handler: NIOLoopBound<SMTPReplyHandler>
    private let tls = Mutex(false)

    private init(channel: any Channel, timeouts: SMTPClient.Timeouts, handler: NIOLoopBound<SMTPReplyHandler>, underTLS: Bool) {
        self.channel = channel
        self.timeouts = timeouts
        self.handler = handler
        tls.withLock { $0 = underTLS }
    }

    /// The connection over `channel`, whose initializer added an ``SMTPReplyHandler`` (and, for
    /// implicit TLS, the TLS handler before it).
    static func over(_ channel: any Channel, timeouts: SMTPClient.Timeouts) async throws -> SMTPConnection {
        let (handler, underTLS) = try await channel.eventLoop.submit {
            let operations = channel.pipeline.syncOperations
            let handler = try operations.handler(type: SMTPReplyHandler.self)
            let underTLS = (try? operations.handler(type: NIOSSLClientHandler.self)) != nil
            return (NIOLoopBound(handler, eventLoop: channel.eventLoop), underTLS)
        }.get()
        return SMTPConnection(channel: channel, timeouts: timeouts, handler: handler, underTLS: underTLS)
    }

    var underTLS: Bool { tls.withLock { $0 } }

    /// The next reply, within `timeout`.
    func reply(timeout: Duration) async throws(SMTPError) -> SMTPReply {
        let handler = self.handler
        let loop = channel.eventLoop
        do {
            return try await loop.flatSubmit { handler.value.next(timeout: TimeAmount(timeout), on: loop) }.get()
        } catch let error as SMTPError {
            throw error
        } catch {
            throw SMTPError(SMTPError.kind(of: error), "\(error)")
        }
    }

    /// Sends `line` and waits for its reply. `redacted` is what an error may quote instead.
    func command(_ line: String, redacted: String? = nil) async throws(SMTPError) -> SMTPReply {
        try await write(Array((line + "\r\n").utf8))
        do {
            return try await reply(timeout: timeouts.command)
        } catch {
            throw SMTPError(error.kind, "\(redacted ?? String(line.prefix(40))): \(error.message)", permanent: error.permanent)
        }
    }

    /// The message's data (already dot-stuffed and ended) and the reply to its end.
    func data(_ bytes: [UInt8], timeout: Duration) async throws(SMTPError) -> SMTPReply {
        try await write(bytes)
        return try await reply(timeout: timeout)
    }

    private func write(_ bytes: [UInt8]) async throws(SMTPError) {
        // A server that stops reading holds a write forever: past the step's deadline the
        // connection is closed (and the write fails).
        let channel = self.channel
        let deadline = channel.eventLoop.scheduleTask(in: TimeAmount(bytes.count > 4096 ? timeouts.dataEnd : timeouts.command)) {
            channel.close(promise: nil)
        }
        defer { deadline.cancel() }
        do {
            try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
        } catch {
            // A failed TLS handshake closes the connection before the write that follows
            // STARTTLS: the handler kept why.
            let handler = self.handler
            if let recorded = try? await channel.eventLoop.submit({ handler.value.failure }).get() { throw recorded }
            throw SMTPError(SMTPError.kind(of: error), "the connection closed: \(error)")
        }
    }

    /// Refuses a reply whose code is not one of `codes`: 4xx may pass, 5xx will not.
    func expect(_ reply: SMTPReply, _ codes: Int..., step: String) throws(SMTPError) {
        guard !codes.contains(reply.code) else { return }
        let kind: SMTPError.Kind = ["MAIL FROM", "RCPT TO", "DATA", "end of DATA"].contains(step) ? .rejected : .protocol
        throw SMTPError(kind, "\(step) answered \(reply)", permanent: (500..<600).contains(reply.code) && kind == .rejected)
    }

    /// RFC 3207 §4: TLS starts right after the 220. Anything the server sent after that reply
    /// in the clear is refused: it could be a reply injected before the handshake.
    func startTLS(context: NIOSSLContext, serverHostname: String?) async throws(SMTPError) {
        let handler = self.handler
        let channel = self.channel
        do {
            try await channel.eventLoop.flatSubmit { () -> EventLoopFuture<Void> in
                guard handler.value.isIdle else {
                    return channel.eventLoop.makeFailedFuture(SMTPError(.protocol, "the server sent data after its STARTTLS reply"))
                }
                do {
                    let tls = try NIOSSLClientHandler(context: context, serverHostname: serverHostname)
                    try channel.pipeline.syncOperations.addHandler(tls, position: .first)
                    return channel.eventLoop.makeSucceededVoidFuture()
                } catch {
                    return channel.eventLoop.makeFailedFuture(SMTPError(.tls, "\(error)"))
                }
            }.get()
        } catch let error as SMTPError {
            throw error
        } catch {
            throw SMTPError(.tls, "\(error)")
        }
        tls.withLock { $0 = true }
    }

    func close() async {
        try? await channel.close()
    }
}

/// Reads replies line by line (at most 1,000 octets a line, 100 lines a reply: RFC 5321
/// §4.5.3.1.5 allows 512) and hands each to the oldest waiter. A TLS error, the connection's
/// end or a deadline fails every waiter and closes the connection.
final class SMTPReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private var buffer = ByteBuffer()
    private var lines: [String] = []
    private var code: Int?
    private var ready: [SMTPReply] = []
    private var waiters: [(EventLoopPromise<SMTPReply>, Scheduled<Void>?)] = []
    private(set) var failure: SMTPError?
    private var context: ChannelHandlerContext?

    /// Shared with the client that connects: the first failure, readable once the handler is gone.
    private let early: EarlyFailure?

    init(early: EarlyFailure? = nil) { self.early = early }

    /// Nothing received and not yet read.
    var isIdle: Bool { ready.isEmpty && buffer.readableBytes == 0 && lines.isEmpty }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func next(timeout: TimeAmount, on loop: any EventLoop) -> EventLoopFuture<SMTPReply> {
        if !ready.isEmpty { return loop.makeSucceededFuture(ready.removeFirst()) }
        if let failure { return loop.makeFailedFuture(failure) }
        guard context != nil else { return loop.makeFailedFuture(SMTPError(.protocol, "the connection closed")) }
        let promise = loop.makePromise(of: SMTPReply.self)
        let this = NIOLoopBound(self, eventLoop: loop)
        let deadline = loop.scheduleTask(in: timeout) {
            this.value.fail(SMTPError(.timeout, "no reply within \(timeout.nanoseconds / 1_000_000) ms"))
        }
        waiters.append((promise, deadline))
        return promise.futureResult
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = unwrapInboundIn(data)
        buffer.writeBuffer(&bytes)
        while let newline = buffer.readableBytesView.firstIndex(of: 0x0A) {
            let length = newline - buffer.readerIndex + 1
            guard var line = buffer.readString(length: length) else { break }
            line = String(line.dropLast())
            if line.hasSuffix("\r") { line = String(line.dropLast()) }
            do {
                try take(line)
            } catch {
                fail(error)
                return
            }
        }
        if buffer.readableBytes > 1000 { fail(SMTPError(.protocol, "a reply line is longer than 1000 octets")) }
        buffer.discardReadBytes()
    }

    /// `Reply-line = *( Reply-code "-" [ textstring ] CRLF ) Reply-code [ SP textstring ] CRLF`.
    private func take(_ line: String) throws(SMTPError) {
        let bytes = Array(line.utf8)
        guard bytes.count >= 3, bytes.prefix(3).allSatisfy({ (0x30...0x39).contains($0) }),
            let code = Int(String(decoding: bytes.prefix(3), as: UTF8.self)), (200...599).contains(code)
        else { throw SMTPError(.protocol, "not a reply: \(line.prefix(80))") }
        if let current = self.code, current != code { throw SMTPError(.protocol, "a reply's lines carry two codes") }
        let separator = bytes.count > 3 ? bytes[3] : 0x20
        guard separator == 0x20 || separator == 0x2D else { throw SMTPError(.protocol, "not a reply: \(line.prefix(80))") }
        lines.append(bytes.count > 4 ? String(decoding: bytes[4...], as: UTF8.self) : "")
        guard lines.count <= 100 else { throw SMTPError(.protocol, "a reply of more than 100 lines") }
        if separator == 0x2D {
            self.code = code
            return
        }
        let reply = SMTPReply(code: code, lines: lines)
        lines = []
        self.code = nil
        if waiters.isEmpty {
            ready.append(reply)
            guard ready.count <= 4 else { throw SMTPError(.protocol, "replies nobody asked for") }
        } else {
            let (promise, deadline) = waiters.removeFirst()
            deadline?.cancel()
            promise.succeed(reply)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(SMTPError(SMTPError.kind(of: error), "\(error)"))
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(SMTPError(.protocol, "the server closed the connection"))
        context.fireChannelInactive()
    }

    private func fail(_ error: SMTPError) {
        if failure == nil { failure = error }
        early?.value.withLock { $0 = $0 ?? error }
        let waiting = waiters
        waiters = []
        for (promise, deadline) in waiting {
            deadline?.cancel()
            promise.fail(failure ?? error)
        }
        context?.close(promise: nil)
    }
}

/// The first failure of a connection, kept where the client can read it after the channel (and
/// its handlers) went away.
final class EarlyFailure: Sendable {
    let value = Mutex<SMTPError?>(nil)
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
