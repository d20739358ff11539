import NIOCore
import NIOHTTPTypes
import PasskeyCore
import Synchronization

/// The listener's connection budget: at most `maxConnections` open in all and
/// `maxConnectionsPerAddress` from one address (trusted proxies exempt: every client behind
/// them shares their address).
final class ConnectionLimits: Sendable {
    let configuration: EdgeConfiguration.Connections
    let trustedProxies: Set<String>
    let metrics: ServerMetrics
    private let counts = Mutex<(total: Int, perAddress: [String: Int])>((0, [:]))

    init(configuration: EdgeConfiguration.Connections, trustedProxies: [String], metrics: ServerMetrics) {
        self.configuration = configuration
        self.trustedProxies = Set(trustedProxies)
        self.metrics = metrics
    }

    /// Counts a new connection from `address`; the reason when it is over a cap (then nothing
    /// is counted).
    func open(_ address: String?) -> String? {
        counts.withLock { counts in
            guard counts.total < configuration.maxConnections else { return "global_cap" }
            if let address, !trustedProxies.contains(address) {
                let current = counts.perAddress[address, default: 0]
                guard current < configuration.maxConnectionsPerAddress else { return "address_cap" }
                counts.perAddress[address] = current + 1
            }
            counts.total += 1
            return nil
        }
    }

    func close(_ address: String?) {
        counts.withLock { counts in
            counts.total -= 1
            if let address, let current = counts.perAddress[address], !trustedProxies.contains(address) {
                counts.perAddress[address] = current > 1 ? current - 1 : nil
            }
        }
    }

    /// Connections open now.
    var open: Int { counts.withLock { $0.total } }
}

/// Sits after the HTTP codec on every connection: applies ``ConnectionLimits`` when the
/// connection opens and closes connections that are too slow. A request's head must arrive
/// within `headerTimeoutSeconds` of the connection opening, its body within `bodyTimeoutSeconds`
/// of its head, and a kept-alive connection with nothing in progress is closed after
/// `idleTimeoutSeconds`. A client trickling one byte every few seconds therefore holds a
/// connection for seconds, not forever. No clock runs while the server itself is answering.
///
/// The clock is a deadline, checked by at most one scheduled task per connection: arming or
/// stopping it only sets the deadline, and the task, when it fires, closes the connection if the
/// deadline has passed or waits again for a later one. Scheduling and cancelling a NIO task on
/// every request head, request end and response end (three of each per request) cost ~3% of a
/// sign-in's CPU.
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: ConnectionLimits
    private var admitted = false
    private var address: String?
    /// When the connection is closed unless something happens first, and why; nil: no clock.
    private var deadline: (at: NIODeadline, reason: String)?
    /// The one scheduled check, and when it fires.
    private var check: (task: Scheduled<Void>, at: NIODeadline)?
    /// Requests whose head arrived and whose response has not ended.
    private var inFlight = 0

    init(limits: ConnectionLimits) {
        self.limits = limits
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { admit(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    /// Stops the clock and gives the connection's place back (once).
    private func release() {
        disarm()
        check?.task.cancel()
        check = nil
        if admitted {
            admitted = false
            limits.close(address)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            inFlight += 1
            arm(context, seconds: limits.configuration.bodyTimeoutSeconds, reason: "body_timeout")
        case .body:
            break
        case .end:
            // The request is in; the server answers without a clock running. If it already
            // answered (early, before the body ended), the connection is idle: its clock runs.
            if inFlight == 0 {
                arm(context, seconds: limits.configuration.idleTimeoutSeconds, reason: "idle_timeout")
            } else {
                disarm()
            }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            inFlight = max(0, inFlight - 1)
            if inFlight == 0 { arm(context, seconds: limits.configuration.idleTimeoutSeconds, reason: "idle_timeout") }
        }
        context.write(data, promise: promise)
    }

    /// How long an idle connection stays open after the server is told to stop (SIGTERM), so
    /// that a request already on its way is read and answered instead of met by a reset.
    static let quiesceGrace = TimeAmount.milliseconds(250)

    /// Graceful shutdown: a connection answering a request is told at once (it closes after the
    /// answer). An idle one is told after ``quiesceGrace``: closing it at once, with a request
    /// the client sent just before the signal unread in the socket, reset that request (2 of ~8
    /// drain runs lost one sent 0.4–1.4 ms before the signal). A request that arrives in the
    /// grace is answered, and the connection closes after it.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent, inFlight == 0 else {
            context.fireUserInboundEventTriggered(event)
            return
        }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: Self.quiesceGrace) {
            bound.value.fireUserInboundEventTriggered(event)
        }
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard !admitted else { return }
        address = context.channel.remoteAddress?.addressText
        if let refusal = limits.open(address) {
            limits.metrics.connectionClosed(reason: refusal)
            context.close(promise: nil)
            return
        }
        admitted = true
        arm(context, seconds: limits.configuration.headerTimeoutSeconds, reason: "header_timeout")
    }

    private func arm(_ context: ChannelHandlerContext, seconds: Int, reason: String) {
        let at = NIODeadline.now() + .seconds(Int64(seconds))
        deadline = (at, reason)
        // A check already due at or before the deadline will look again when it fires.
        if let check, check.at <= at { return }
        schedule(context, at: at)
    }

    private func disarm() {
        deadline = nil
    }

    private func schedule(_ context: ChannelHandlerContext, at: NIODeadline) {
        check?.task.cancel()
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        check = (context.eventLoop.scheduleTask(deadline: at) { handler.value.deadlineCheck(bound.value) }, at)
    }

    /// The scheduled check: closes the connection if its deadline has passed, else waits for it.
    private func deadlineCheck(_ context: ChannelHandlerContext) {
        check = nil
        guard let deadline else { return }
        if NIODeadline.now() >= deadline.at {
            self.deadline = nil
            limits.metrics.connectionClosed(reason: deadline.reason)
            context.channel.close(promise: nil)
        } else {
            schedule(context, at: deadline.at)
        }
    }
}
