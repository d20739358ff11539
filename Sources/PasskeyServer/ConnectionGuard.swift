import NIOCore
import NIOHTTPTypes
import Synchronization

/// The listener's connection budget: at most `maxConnections` open in all and
/// `maxConnectionsPerAddress` from one address (trusted proxies exempt: every client behind
/// them shares their address).
final class ConnectionLimits: Sendable {
    let configuration: ServerConfiguration.Connections
    let trustedProxies: Set<String>
    let metrics: ServerMetrics
    private let counts = Mutex<(total: Int, perAddress: [String: Int])>((0, [:]))

    init(configuration: ServerConfiguration.Connections, trustedProxies: [String], metrics: ServerMetrics) {
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
/// connection for seconds, not forever. No timer runs while the server itself is answering.
final class ConnectionGuardHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let limits: ConnectionLimits
    private var admitted = false
    private var address: String?
    private var timer: Scheduled<Void>?
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

    private func admit(_ context: ChannelHandlerContext) {
        guard !admitted else { return }
        address = context.channel.remoteAddress?.ipAddress
        if let refusal = limits.open(address) {
            limits.metrics.connectionClosed(reason: refusal)
            context.close(promise: nil)
            return
        }
        admitted = true
        arm(context, seconds: limits.configuration.headerTimeoutSeconds, reason: "header_timeout")
    }

    private func arm(_ context: ChannelHandlerContext, seconds: Int, reason: String) {
        timer?.cancel()
        let metrics = limits.metrics
        let channel = context.channel
        timer = context.eventLoop.scheduleTask(in: .seconds(Int64(seconds))) {
            metrics.connectionClosed(reason: reason)
            channel.close(promise: nil)
        }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }
}
