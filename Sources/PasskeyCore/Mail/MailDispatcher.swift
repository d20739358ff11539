import Foundation
import Logging
import PasskeyMail
import PasskeyStore
import ServiceLifecycle

/// What hands a mail to an SMTP server (``SMTPClient`` in production).
public protocol MailSender: Sendable {
    func send(_ message: [UInt8], from: MailAddress, to: MailAddress) async throws(SMTPError)
}

extension SMTPClient: MailSender {}

/// Sends the mail outbox (`mail_outbox`, filled in the same transaction as the tokens the mails
/// carry) in the background: requests never wait for SMTP. Each mail is leased before it is
/// sent, so of several instances on one PostgreSQL one sends it; a failure is tried again with
/// back-off (5 s doubling to 10 minutes) until it is a day old, so a mail server down for minutes
/// loses nothing and is caught up; a permanent refusal (5xx about the mail) ends it at once. A
/// round in flight when the server stops runs to its end (each send is bounded by the client's
/// timeouts), so no mail is left leased.
public struct MailDispatcher: Service {
    package let store: any PasskeyStore
    package let metrics: ServerMetrics
    package let logger: Logger
    package let sender: any MailSender
    /// The pause when nothing is due.
    package let interval: Duration
    /// Mails sent at once.
    package let concurrency: Int
    /// How long a lease lasts: longer than the longest send (the client's timeouts add up to
    /// 7 minutes at most: connect 10 s, 12 replies of 30 s, 60 s for the end of DATA; a
    /// lease of 10 minutes covers every send).
    package let lease: TimeInterval
    /// A mail not sent within this long after it was queued is given up.
    package let giveUpAfter: TimeInterval
    package let now: @Sendable () -> Date

    public init(
        service: PasskeyService, sender: any MailSender, logger: Logger, interval: Duration = .milliseconds(250), concurrency: Int = 4,
        lease: TimeInterval = 600, giveUpAfter: TimeInterval = 86_400
    ) {
        self.init(
            store: service.store, metrics: service.metrics, sender: sender, logger: logger, interval: interval, concurrency: concurrency,
            lease: lease, giveUpAfter: giveUpAfter, now: service.now)
    }

    /// The dispatcher of `store`'s outbox (every tenant's mail in its database).
    package init(
        store: any PasskeyStore, metrics: ServerMetrics, sender: any MailSender, logger: Logger, interval: Duration = .milliseconds(250),
        concurrency: Int = 4, lease: TimeInterval = 600, giveUpAfter: TimeInterval = 86_400, now: @escaping @Sendable () -> Date
    ) {
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.sender = sender
        self.interval = interval
        self.concurrency = concurrency
        self.lease = lease
        self.giveUpAfter = giveUpAfter
        self.now = now
    }

    /// The dispatcher of the server's mail relay (`email.smtpURL`), or nil without one. It sends
    /// every tenant's mail in `service`'s database, each with the sender it was queued with.
    /// `store`: another database's outbox sent through the same relay (a tenant's own).
    public static func make(service: PasskeyService, logger: Logger, store: (any PasskeyStore)? = nil) -> MailDispatcher? {
        guard let server = service.configuration.email.smtp else { return nil }
        return MailDispatcher(
            store: store ?? service.store, metrics: service.metrics, sender: SMTPClient(server: server), logger: logger, now: service.now)
    }

    public func run() async throws {
        while !Task.isCancelled && !Task.isShuttingDownGracefully {
            // A round runs to its end even when the service is cancelled (see above).
            let sent = await Task { await sendDue() }.value
            if sent == 0 {
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            }
        }
    }

    /// One round: claims what is due and sends it, `concurrency` at a time; how many it claimed.
    @discardableResult package func sendDue() async -> Int {
        let token = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let claimed: [QueuedMail]
        do {
            let time = now()
            claimed = try await store.claimMail(
                now: time, leaseUntil: time.addingTimeInterval(lease), leaseToken: token, limit: concurrency * 4)
        } catch {
            logger.warning("mail outbox could not be read", metadata: ["error": "\(error)"])
            return 0
        }
        guard !claimed.isEmpty else { return 0 }
        let secret: [UInt8]
        do {
            secret = try await store.serverSecret()
        } catch {
            logger.warning("mail outbox could not be read", metadata: ["error": "\(error)"])
            return 0
        }
        await withTaskGroup(of: Void.self) { group in
            var next = claimed.makeIterator()
            for _ in 0..<concurrency {
                guard let mail = next.next() else { break }
                group.addTask { await send(mail, leaseToken: token, secret: secret) }
            }
            while await group.next() != nil {
                if let mail = next.next() { group.addTask { await send(mail, leaseToken: token, secret: secret) } }
            }
        }
        return claimed.count
    }

    /// Sends one leased mail and settles its row.
    package func send(_ mail: QueuedMail, leaseToken: [UInt8], secret: [UInt8]) async {
        var failure: SMTPError?
        do {
            let from = try MailAddress(mail.sender)
            let to = try MailAddress(mail.recipient)
            // A message that does not open (another server secret) can never be sent: given up.
            let message = try OutboxSeal.open(mail.message, secret: secret)
            try await sender.send(message, from: from, to: to)
        } catch let error as SMTPError {
            failure = error
        } catch {
            failure = SMTPError(.configuration, "\(error)", permanent: true)
        }
        let time = now()
        do {
            guard let failure else {
                if !(try await store.markMailSent(id: mail.id, leaseToken: leaseToken, at: time)) {
                    logger.warning("mail sent after its lease ran out", metadata: ["mail": "\(mail.id)"])
                }
                metrics.mailAttempt(result: "sent", reason: nil)
                return
            }
            let tooOld = time.timeIntervalSince(mail.createdAt) >= giveUpAfter
            let retryAt = failure.permanent || tooOld ? nil : time.addingTimeInterval(Self.backoff(attempt: mail.attempts))
            _ = try await store.markMailFailed(id: mail.id, leaseToken: leaseToken, error: failure.description, retryAt: retryAt, at: time)
            metrics.mailAttempt(result: retryAt == nil ? "failed" : "retry", reason: failure.kind.rawValue)
            logger.warning(
                retryAt == nil ? "mail given up" : "mail not sent; trying again",
                metadata: ["mail": "\(mail.id)", "kind": "\(mail.kind)", "attempt": "\(mail.attempts)", "error": "\(failure)"])
        } catch {
            logger.warning("mail outcome could not be stored", metadata: ["mail": "\(mail.id)", "error": "\(error)"])
        }
    }

    /// 5 s after the first failure, doubling, at most 10 minutes.
    package static func backoff(attempt: Int) -> TimeInterval {
        min(600, 5 * pow(2, Double(max(0, min(attempt - 1, 10)))))
    }
}
