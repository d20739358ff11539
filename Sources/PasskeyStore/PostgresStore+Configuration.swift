import Foundation
import NIOSSL
import PostgresNIO

/// How a ``PostgresStore`` connects: its ``Options``, and the `postgres://` URL read into the
/// pools' and the outage probe's configurations (server, user, TLS per `sslmode`, prepared
/// statements on or off, the pools sized per event loop).
extension PostgresStore {
    public struct Options: Sendable {
        public var maxConnections: Int = 20
        /// How long a connection may sit unused before the pool closes it.
        ///
        /// The pools keep no minimum of open connections: postgres-nio 1.33's pool stops the
        /// process (`precondition(minimumConcurrentConnections <= stats.active)` in
        /// `createNewDemandConnectionIfPossible`) when a request arrives while fewer connections
        /// are alive than its minimum, which is what a database outage under load brings about.
        /// With no minimum the pool arms an idle timer each time a connection goes back to it; a
        /// cancelled one holds ~0.8 KB until its deadline, so the timeout is short (at 2,000
        /// queries/s, 10 s is ~16 MB at most). Keep-alive pings stay off: a connection the
        /// database closes is dropped when the pool sees the close, and one the network drops
        /// silently fails its next query within `operationTimeout`.
        public var idleTimeout: Duration = .seconds(10)
        public var connectTimeout: Duration = .seconds(3)
        public var operationTimeout: Duration = .seconds(5)
        /// Migrations may rewrite large tables, and instances starting together wait for the one
        /// that migrates: they get far longer than an ordinary operation.
        public var migrationTimeout: Duration = .seconds(600)
        /// Prepare the statements every ceremony sends once per connection (see
        /// ``PreparedStoreStatement``). A URL's `prepared_statements=off` turns this off, for a
        /// connection pooler that cannot keep prepared statements across transactions
        /// (PgBouncer before 1.21, or without `max_prepared_statements`).
        public var preparesStatements = true
        /// The outage breaker (see ``DatabaseHealth``): an operation still waiting this long
        /// makes the store check the database on a connection of its own.
        public var suspectAfter: Duration = .milliseconds(500)
        /// How long that check may take (connect and `SELECT 1`) before the database counts as down.
        public var probeTimeout: Duration = .seconds(2)
        /// While the database is down, how often it is checked again.
        public var probeInterval: Duration = .milliseconds(250)
        public init() {}
    }

    /// `maxConnections` shared out over one pool per event loop (at most one pool per
    /// connection): 20 over 2 loops is 10 and 10, 1 is one pool of 1.
    static func connectionShares(_ maxConnections: Int, loops: Int) -> [Int] {
        let pools = max(1, min(loops, maxConnections))
        let total = max(1, maxConnections)
        return (0..<pools).map { total / pools + ($0 < total % pools ? 1 : 0) }
    }

    /// The pool's configuration: the URL's server and TLS, with the pool sized and kept as
    /// ``Options`` says: no minimum of open connections, no keep-alive timers (see
    /// ``Options/idleTimeout``).
    static func configuration(url: String, options: Options) throws -> PostgresClient.Configuration {
        var configuration = try configuration(url: url)
        configuration.options.maximumConnections = options.maxConnections
        configuration.options.minimumConnections = 0
        configuration.options.connectionIdleTimeout = options.idleTimeout
        configuration.options.connectTimeout = options.connectTimeout
        configuration.options.keepAliveBehavior = nil
        return configuration
    }

    /// The same server, user and TLS as one plain connection, for the outage probe (which must
    /// not go through the pools: they queue requests while they back off).
    static func probeConfiguration(url: String, timeout: Duration) throws -> PostgresConnection.Configuration {
        let pool = try configuration(url: url)
        var configuration: PostgresConnection.Configuration
        if let socket = pool.unixSocketPath {
            configuration = .init(unixSocketPath: socket, username: pool.username, password: pool.password, database: pool.database)
        } else {
            let components = URLComponents(string: url)
            let query = Dictionary((components?.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
            let tls: PostgresConnection.Configuration.TLS
            do {
                switch try tlsUse(sslmode: query["sslmode"], rootCertificate: query["sslrootcert"]) {
                case .disable: tls = .disable
                case .prefer(let settings): tls = .prefer(try NIOSSLContext(configuration: settings))
                case .require(let settings): tls = .require(try NIOSSLContext(configuration: settings))
                }
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(.invalidDatabase, "the TLS settings of \"\(Self.redacted(url))\" cannot be used: \(error)")
            }
            configuration = .init(
                host: pool.host ?? "localhost", port: pool.port ?? 5432, username: pool.username, password: pool.password,
                database: pool.database, tls: tls)
        }
        let (seconds, attoseconds) = timeout.components
        configuration.options.connectTimeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        return configuration
    }

    static func configuration(url: String) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw StoreError(.invalidDatabase, "\"\(Self.redacted(url))\" is not postgres://user:password@host:port/database")
        }
        let query = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let username = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        let password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let database = path.isEmpty ? nil : path.removingPercentEncoding
        let tls = try tlsMode(sslmode: query["sslmode"], rootCertificate: query["sslrootcert"])
        if let socketDirectory = query["host"], socketDirectory.hasPrefix("/") {
            let port = components.port ?? 5432
            return .init(unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: username, password: password, database: database)
        }
        guard let host = components.host, !host.isEmpty else {
            throw StoreError(.invalidDatabase, "\"\(Self.redacted(url))\" names no host")
        }
        return .init(host: host, port: components.port ?? 5432, username: username, password: password, database: database, tls: tls)
    }

    /// The URL's `prepared_statements` (`on`, the default, or `off`).
    static func preparesStatements(url: String) throws -> Bool {
        let value = URLComponents(string: url)?.queryItems?.last { $0.name == "prepared_statements" }?.value
        switch value?.lowercased() {
        case nil, "on", "true", "1": return true
        case "off", "false", "0": return false
        case let other?: throw StoreError(.invalidDatabase, "prepared_statements \"\(other)\" is not on or off")
        }
    }

    /// How TLS is used, with libpq's meanings of `sslmode`:
    /// - `disable`: never; `allow`/`prefer` (default): when the server offers it, unverified;
    /// - `require`: always, certificate unverified (encryption against passive listeners only),
    ///   unless `sslrootcert` names a CA file: then it is verified as in `verify-ca` (as libpq does);
    /// - `verify-ca`: always, the certificate must chain to `sslrootcert` (or the system roots),
    ///   any host name;
    /// - `verify-full`: always, chain and host name verified. Use this in production.
    static func tlsMode(sslmode: String?, rootCertificate: String?) throws -> PostgresClient.Configuration.TLS {
        switch try tlsUse(sslmode: sslmode, rootCertificate: rootCertificate) {
        case .disable: .disable
        case .prefer(let configuration): .prefer(configuration)
        case .require(let configuration): .require(configuration)
        }
    }

    enum TLSUse {
        case disable
        case prefer(TLSConfiguration)
        case require(TLSConfiguration)
    }

    static func tlsUse(sslmode: String?, rootCertificate: String?) throws -> TLSUse {
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificate, !rootCertificate.isEmpty { configuration.trustRoots = .file(rootCertificate) }
        switch sslmode ?? "prefer" {
        case "disable":
            return .disable
        case "allow", "prefer":
            configuration.certificateVerification = .none
            return .prefer(configuration)
        case "require":
            configuration.certificateVerification = rootCertificate == nil ? .none : .noHostnameVerification
            return .require(configuration)
        case "verify-ca":
            configuration.certificateVerification = .noHostnameVerification
            return .require(configuration)
        case "verify-full":
            configuration.certificateVerification = .fullVerification
            return .require(configuration)
        case let other:
            throw StoreError(.invalidDatabase, "sslmode \"\(other)\" is not disable, allow, prefer, require, verify-ca or verify-full")
        }
    }

    /// The URL without its password, for messages and logs: from the first `:` after `://` to
    /// the last `@`, read as text (URLComponents reads no host in `user:pass/word@host`, and so no
    /// password either), so that a password holding any character goes whole.
    public static func redacted(_ url: String) -> String {
        guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@"),
            let colon = url[scheme.upperBound..<at].firstIndex(of: ":")
        else { return url }
        return String(url[...colon]) + "***" + url[at...]
    }
}
