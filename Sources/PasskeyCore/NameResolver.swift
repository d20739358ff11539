import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Name resolution for outbound addresses (webhook URLs are checked against
/// ``OutboundURLPolicy`` on the addresses their name resolves to).
public enum NameResolver {
    /// The IPv4 and IPv6 addresses of a name (`getaddrinfo`, on a thread of its own), or nil when
    /// it does not answer within `limit`.
    public static func resolve(_ name: String, within limit: Duration) async -> [[UInt8]]? {
        let waiter = Mutex<CheckedContinuation<[[UInt8]]?, Never>?>(nil)
        return await withCheckedContinuation { continuation in
            waiter.withLock { $0 = continuation }
            DispatchQueue.global(qos: .utility).async {
                let addresses = lookUp(name)
                waiter.withLock { $0.take() }?.resume(returning: addresses)
            }
            DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .nanoseconds(Int(limit.nanoseconds))) {
                waiter.withLock { $0.take() }?.resume(returning: nil)
            }
        }
    }

    package static func lookUp(_ name: String) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [[UInt8]] = []
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry, addresses.count < 64 {
            if let socketAddress = current.pointee.ai_addr {
                switch Int32(socketAddress.pointee.sa_family) {
                case AF_INET:
                    socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        addresses.append(withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) })
                    }
                case AF_INET6:
                    socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        addresses.append(withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) })
                    }
                default: break
                }
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }
}
