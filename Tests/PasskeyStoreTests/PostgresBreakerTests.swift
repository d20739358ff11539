import Foundation
import Testing

@testable import PasskeyStore

#if canImport(Glibc)
    import Glibc
#endif

/// The outage breaker of a store that is let go: a tenant's database that cannot be opened is
/// tried again with a new store every few seconds, and each store dropped must stop probing
/// (they used to probe on, one more every retry, until the database came back).
@Suite struct PostgresBreakerTests {
    /// A loopback port bound but not listening: a connection there is refused at once.
    final class RefusingPort {
        let fd: Int32
        let port: Int
        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            self.fd = fd
            port = Int(UInt16(bigEndian: address.sin_port))
            guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        }
        deinit { close(fd) }
    }

    @Test(.timeLimit(.minutes(1))) func aClosedStoreStopsProbingADatabaseThatIsDown() async throws {
        let refusing = try RefusingPort()
        var options = PostgresStore.Options()
        options.probeInterval = .milliseconds(20)
        options.probeTimeout = .milliseconds(500)
        options.connectTimeout = .milliseconds(500)
        options.operationTimeout = .seconds(1)
        let store = try PostgresStore(url: "postgres://app:secret@127.0.0.1:\(refusing.port)/none?sslmode=disable", options: options)
        // Nothing answers there: the operation fails, the check fails, the breaker opens and
        // probes every 20 ms.
        while !store.databaseIsDown {
            _ = try? await store.ping()
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(store.postgres.health.probing)
        store.close()
        // It stops at its next turn (a probe in flight ends within its timeout first); a store
        // that probes on never gets past this loop, and the test's time limit fails it.
        while store.postgres.health.probing {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(!store.postgres.health.probing)
        withExtendedLifetime(refusing) {}
    }
}
