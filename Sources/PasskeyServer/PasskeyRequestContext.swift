import Hummingbird
import NIOCore

/// The request context: Hummingbird's core storage plus the client's address.
public struct PasskeyRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer IP address (audit log, rate limits). A proxy in front supplies the real one in
    /// X-Forwarded-For; passkeyd reads that only when configured to trust its proxy.
    public let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }

    /// Bodies are read by the handlers with the configured limit; this is the hard ceiling.
    public var maxUploadSize: Int { 16 * 1024 * 1024 }
}
