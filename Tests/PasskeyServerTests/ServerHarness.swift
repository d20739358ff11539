import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import PasskeyCore
import PasskeyServer
import PasskeyStore
import PasskeyStoreTesting
import Synchronization
import WebAuthn
import WebAuthnTesting

/// A passkeyd application on a fresh database (SQLite in a temporary folder; PostgreSQL when the
/// suite runs with `PASSKEYD_TEST_STORE=postgres`), driven through Hummingbird's in-process test client.
struct ServerHarness: Sendable {
    static let origin = "http://localhost:8080"
    /// The repository's web UI folder.
    static var publicDirectory: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Public").path
    }
    let service: PasskeyService
    let edge: EdgeConfiguration
    let store: any PasskeyStore
    let clock: TestClock

    /// The domain's and the edge's settings, set by a test as one (`$0.rpID`, `$0.metricsToken`).
    @dynamicMemberLookup
    struct Settings {
        var domain = ServerConfiguration()
        var edge = EdgeConfiguration()
        subscript<T>(dynamicMember path: WritableKeyPath<ServerConfiguration, T>) -> T {
            get { domain[keyPath: path] }
            set { domain[keyPath: path] = newValue }
        }
        subscript<T>(dynamicMember path: WritableKeyPath<EdgeConfiguration, T>) -> T {
            get { edge[keyPath: path] }
            set { edge[keyPath: path] = newValue }
        }
    }

    init(store: (any PasskeyStore)? = nil, _ configure: (inout Settings) -> Void = { _ in }) async throws {
        if let store {
            self.store = store
        } else {
            self.store = try await TestDatabase.makeStore(TestDatabase.httpSuiteKind)
        }
        var settings = Settings()
        configure(&settings)
        try settings.edge.validate()
        let clock = TestClock()
        self.clock = clock
        edge = settings.edge
        service = try PasskeyService(configuration: settings.domain, store: self.store, now: { clock.now })
    }

    /// Runs `body` against the application: in process, or (`live`) over a real loopback socket,
    /// where the client address is 127.0.0.1 (limits per address, X-Forwarded-For from a trusted proxy).
    /// `settings`: the server's settings, for a server that serves tenants (the tenants'
    /// registry polled, `/api/admin/tenants` and the console's operator pages served).
    func run(
        live: Bool = false, settings: ServerSettings? = nil, _ body: @escaping @Sendable (APIClient) async throws -> Void
    ) async throws {
        var logger = Logger(label: "passkeyd-test")
        logger.logLevel = .warning
        let app = PasskeyServer.application(service: service, edge: edge, port: live ? 0 : 8080, logger: logger, settings: settings)
        try await app.test(live ? .live : .router) { client in
            try await body(APIClient(client: client))
        }
    }
}

/// A JSON response: status, headers and the body parsed.
struct APIResponse: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let bytes: [UInt8]
    var json: JSONValue { (try? JSONReader.parse(bytes)) ?? .null }
    var errorCode: String? {
        if case .string(let code)? = json["error"]?["code"] { return code }
        return nil
    }
    func string(_ key: String) -> String? {
        if case .string(let s)? = json[key] { return s }
        return nil
    }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: Data(bytes)) }
}

struct APIClient: Sendable {
    let client: any TestClientProtocol
    /// A live server asked on a host of its own (tenants): requests go on this connection with
    /// this `Host`.
    var hosted: (client: TestClient, authority: String, origin: String)? = nil

    init(client: any TestClientProtocol) { self.client = client }

    /// A client of the live server `client` runs, whose requests name `host` (`Host`).
    /// Requests that name no other origin carry `http://HOST:8080` (the tenant's own).
    init(live client: any TestClientProtocol, host: String) throws {
        guard let port = client.port else { throw HarnessError.notLive }
        let connection = TestClient(host: "127.0.0.1", port: port)
        connection.connect()
        self.client = client
        hosted = (connection, host, "http://\(host):8080")
    }

    @discardableResult
    func request(
        _ method: HTTPRequest.Method, _ path: String, body: [UInt8]? = nil, token: String? = nil, cookie: String? = nil,
        origin: String? = ServerHarness.origin, headers extra: HTTPFields = [:]
    ) async throws -> APIResponse {
        var headers = extra
        if body != nil && headers[.contentType] == nil { headers[.contentType] = "application/json" }
        if let token { headers[.authorization] = "Bearer \(token)" }
        if let cookie { headers[.cookie] = cookie }
        if let origin { headers[.origin] = origin == ServerHarness.origin ? hosted?.origin ?? origin : origin }
        if let hosted {
            let response = try await hosted.client.execute(
                TestClient.Request(
                    path, method: method, authority: hosted.authority, headers: headers, body: body.map { ByteBuffer(bytes: $0) }))
            return APIResponse(
                status: response.status, headers: response.headers, bytes: response.body.map { Array($0.readableBytesView) } ?? [])
        }
        let response = try await client.execute(uri: path, method: method, headers: headers, body: body.map { ByteBuffer(bytes: $0) })
        return APIResponse(status: response.status, headers: response.headers, bytes: Array(response.body.readableBytesView))
    }

    func post(_ path: String, _ object: some Encodable, token: String? = nil, cookie: String? = nil, origin: String? = ServerHarness.origin)
        async throws -> APIResponse
    {
        try await request(.post, path, body: Array(try JSONEncoder().encode(object)), token: token, cookie: cookie, origin: origin)
    }

    // MARK: Ceremonies

    func registrationOptions(username: String?, displayName: String? = nil, token: String? = nil) async throws -> APIResponse {
        var body: [String: String] = [:]
        if let username { body["username"] = username }
        if let displayName { body["displayName"] = displayName }
        return try await post("/api/auth/register/options", body, token: token)
    }

    struct CredentialBody<C: Encodable>: Encodable {
        let credential: C
        var name: String? = nil
    }

    /// Signs up `username` with a new passkey; returns the session token and the passkey.
    func signUp(
        _ username: String, authenticator: inout SoftwareAuthenticator, origin: String = ServerHarness.origin,
        requestOrigin: String = ServerHarness.origin
    ) async throws
        -> (token: String, credential: SoftwareCredential, response: APIResponse)
    {
        let options = try await post("/api/auth/register/options", ["username": username], origin: requestOrigin)
        guard options.status == .ok else { throw HarnessError.unexpected(options) }
        let (registration, credential) = try authenticator.register(
            options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: origin)
        let verify = try await post("/api/auth/register/verify", CredentialBody(credential: registration), origin: requestOrigin)
        guard verify.status == .ok, let token = verify.string("token") else { throw HarnessError.unexpected(verify) }
        return (token, credential, verify)
    }

    /// Runs a sign-in and returns the verify response.
    func signIn(
        username: String? = nil, credential: inout SoftwareCredential, authenticator: SoftwareAuthenticator,
        origin: String = ServerHarness.origin, counterStep: UInt32 = 1,
        mutate: (inout AuthenticationResponseJSON) -> Void = { _ in }
    ) async throws -> APIResponse {
        let options = try await post("/api/auth/authenticate/options", username.map { ["username": $0] } ?? [:])
        guard options.status == .ok else { throw HarnessError.unexpected(options) }
        var assertion = try authenticator.authenticate(
            options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: origin,
            credential: &credential, counterStep: counterStep)
        mutate(&assertion)
        return try await post("/api/auth/authenticate/verify", CredentialBody(credential: assertion))
    }
}

enum HarnessError: Error, CustomStringConvertible {
    case unexpected(APIResponse)
    case notLive
    var description: String {
        switch self {
        case .notLive: "the server is not live (no port)"
        case .unexpected(let r): "unexpected \(r.status): \(String(decoding: r.bytes, as: UTF8.self))"
        }
    }
}
