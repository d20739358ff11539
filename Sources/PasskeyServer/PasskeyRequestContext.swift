import Hummingbird
import NIOCore
import PasskeyCore

/// The request context: Hummingbird's core storage, the client's address, the connection (to
/// tell a client that went away from a server error) and the signed-in session, resolved once
/// by ``SessionMiddleware`` on the routes that use one.
public struct PasskeyRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer IP address (audit log, rate limits). A proxy in front supplies the real one in
    /// X-Forwarded-For; passkeyd reads that only when configured to trust its proxy.
    public let peerAddress: String?
    /// The connection the request came on.
    let channel: any Channel
    /// Whether it was open when the request began (in-process test clients have no live channel).
    let channelWasActive: Bool
    /// The client: its address, User-Agent and trace, worked out once by ``ClientMiddleware``.
    public internal(set) var client = PasskeyService.Client()
    /// The session the request carries, when a route resolved it.
    public var signedIn: PasskeyService.SignedIn?
    /// The API key a server route was called with.
    public var apiKey: APIKeyCaller?
    /// The console session of an `/admin/api` route (``ConsoleSessionMiddleware``).
    public var console: ConsoleService.Session?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.addressText
        channel = source.channel
        channelWasActive = source.channel.isActive
    }

    /// The client closed the connection while its request was being answered.
    var clientWentAway: Bool { channelWasActive && !channel.isActive }

    /// Bodies are read by the handlers with the configured limit; this is the hard ceiling.
    public var maxUploadSize: Int { 16 * 1024 * 1024 }
}

extension SocketAddress {
    /// The IP address as text, as NIO's `ipAddress` writes it. An IPv4 address (every request's
    /// peer, read once per request) is written here digit by digit: NIO formats it with
    /// `inet_ntop`, which runs `sprintf`. IPv6 goes through NIO.
    var addressText: String? {
        guard case .v4(let address) = self else { return ipAddress }
        // `s_addr` is in network order: the first octet is the most significant byte.
        let value = UInt32(bigEndian: address.address.sin_addr.s_addr)
        return String(unsafeUninitializedCapacity: 15) { buffer in
            var count = 0
            for shift in [24, 16, 8, 0] as [UInt32] {
                let octet = UInt8(truncatingIfNeeded: value >> shift)
                if shift != 24 {
                    buffer[count] = UInt8(ascii: ".")
                    count += 1
                }
                if octet >= 100 {
                    buffer[count] = UInt8(ascii: "0") + octet / 100
                    count += 1
                }
                if octet >= 10 {
                    buffer[count] = UInt8(ascii: "0") + octet / 10 % 10
                    count += 1
                }
                buffer[count] = UInt8(ascii: "0") + octet % 10
                count += 1
            }
            return count
        }
    }
}
