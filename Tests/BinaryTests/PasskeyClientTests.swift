import Foundation
import PasskeyClient
import PasskeyClientSoftware
import PasskeyCore
import PasskeyServer
import Testing
import WebAuthn
import WebAuthnTesting

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The Swift client library against a real `passkeyd serve`, with the software authenticator
/// behind its `PasskeyAuthenticator` protocol: every flow and every typed error, as an app sees them.
@Suite("PasskeyClient against passkeyd serve")
struct PasskeyClientTests {
    /// A server on a free port with a fresh database; the client's provider speaks for its origin.
    struct Fixture {
        let directory: URL
        let server: ServeBinaryTests.Server
        var url: URL { URL(string: "http://127.0.0.1:\(server.port)")! }

        init(environment: [String: String] = [:], prepare: ((String) throws -> Void)? = nil) async throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("passkeyd-client-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            let database = "sqlite://" + directory.appendingPathComponent("client.sqlite").path
            try prepare?(database)
            server = try ServeBinaryTests.Server(
                database: database,
                environment: ["PASSKEYD_RATE_LIMIT_PER_IP": "1000", "PASSKEYD_RATE_LIMIT_PER_ACCOUNT": "1000"].merging(environment) { $1 })
            try await server.waitUntilReady()
        }

        func provider() -> SoftwarePasskeyProvider { SoftwarePasskeyProvider(origin: server.origin) }

        func client(_ provider: SoftwarePasskeyProvider, sessions: any SessionStore = MemorySessionStore()) -> PasskeyClient {
            PasskeyClient(server: url, authenticator: provider, sessions: sessions)
        }

        func stop() {
            server.stop()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// Runs `body` and gives back the ``PasskeyClientError`` it threw.
    func failure(_ body: () async throws -> some Any) async -> PasskeyClientError? {
        do {
            _ = try await body()
            return nil
        } catch let error as PasskeyClientError {
            return error
        } catch {
            Issue.record("not a PasskeyClientError: \(error)")
            return nil
        }
    }

    @Test func signUpSignInAndManagePasskeys() async throws {
        let fixture = try await Fixture()
        defer { fixture.stop() }
        let phone = fixture.provider()
        let sessions = MemorySessionStore()
        let client = fixture.client(phone, sessions: sessions)

        let signedUp = try await client.signUp(username: "ada", displayName: "Ada Lovelace")
        #expect(signedUp.user.username == "ada" && signedUp.user.displayName == "Ada Lovelace" && signedUp.method == .signUp)
        #expect(signedUp.passkey != nil && signedUp.accessToken != nil && !signedUp.canCreatePasskey)
        #expect(try await client.session()?.user.id == signedUp.user.id)

        // The same device again: it already holds this account's passkey (excludeCredentials).
        #expect(await failure { try await client.addPasskey() } == .passkeyAlreadyOnDevice)
        // A second device of the same person (same session): a second passkey.
        let laptop = fixture.provider()
        let second = try await fixture.client(laptop, sessions: sessions).addPasskey(name: "Laptop")
        #expect(second.name == "Laptop")
        var list = try await client.passkeys()
        #expect(list.count == 2)

        let renamed = try await client.rename(passkey: second.id, to: "Work laptop")
        #expect(renamed.name == "Work laptop")
        #expect(try await client.passkeys().map(\.name).contains("Work laptop"))
        try await client.delete(passkey: second.id)
        list = try await client.passkeys()
        #expect(list.map(\.id) == [signedUp.passkey?.id])
        // The last passkey stays: the server's refusal, with its code and a message.
        let last = await failure { try await client.delete(passkey: list[0].id) }
        #expect(last?.code == "last_passkey")
        if case .refused(_, let message, let status, _)? = last { #expect(status == 409 && !message.isEmpty) }

        try await client.signOut()
        #expect(try await client.session() == nil)
        #expect(await failure { try await client.passkeys() } == .notSignedIn)
        #expect(await sessions.load(server: fixture.url.absoluteString) == nil)

        // Username-first (allowCredentials), then discoverable.
        let again = try await client.signIn(username: "ada")
        #expect(again.user.username == "ada" && again.method == .passkey)
        try await client.signOut()
        let discoverable = try await client.signIn()
        #expect(discoverable.user.id == signedUp.user.id)
        // The laptop's passkey was deleted on the server: the server says so, the provider drops it.
        try await client.signOut()
        #expect(await failure { try await fixture.client(laptop).signIn() } == .passkeyRemoved)
        #expect(await laptop.credentials.isEmpty)
        #expect(await failure { try await fixture.client(laptop).signIn() } == .noPasskeyOnDevice)
    }

    @Test func autoFillAndAccessTokens() async throws {
        let fixture = try await Fixture()
        defer { fixture.stop() }
        let provider = fixture.provider()
        let client = fixture.client(provider)
        _ = try await client.signUp(username: "grace")
        _ = try await client.signUp(username: "alan")
        try await client.signOut()

        await provider.pickNext(userName: "grace")
        let signedIn = try await client.signInWithAutoFill()
        #expect(signedIn.user.username == "grace")

        let fromSignIn = try await client.accessToken()
        #expect(fromSignIn.token == signedIn.accessToken?.token)
        // Asking for more life than it has left gets a new one from POST /api/auth/token.
        let fresh = try await client.accessToken(validFor: .seconds(3600))
        #expect(fresh.token != fromSignIn.token && fresh.token.split(separator: ".").count == 3)
        #expect(try await client.deviceSessions().contains { $0.current && $0.method == "passkey" })
    }

    @Test func typedErrors() async throws {
        let fixture = try await Fixture()
        defer { fixture.stop() }
        let provider = fixture.provider()
        let client = fixture.client(provider)
        _ = try await client.signUp(username: "kim")

        let taken = await failure { try await fixture.client(fixture.provider()).signUp(username: "kim") }
        #expect(taken?.code == "username_taken")
        #expect(taken?.message(languages: ["fr-FR", "en"]).contains("nom d'utilisateur") == true)
        #expect(taken?.message(languages: ["de-DE", "en-GB"]).contains("username is taken") == true)

        await provider.refuseNext(.cancelled)
        #expect(await failure { try await client.signIn(username: "kim") } == .cancelled)
        #expect(PasskeyClientError.cancelled.message(languages: ["fr"]) != PasskeyClientError.cancelled.message(languages: ["en"]))
        await provider.refuseNext(.unsupported("no passkeys here"))
        #expect(await failure { try await client.signIn() } == .unsupported("no passkeys here"))
        #expect(await failure { try await fixture.client(fixture.provider()).signIn(username: "kim") } == .noPasskeyOnDevice)

        let invalid = await failure { try await fixture.client(fixture.provider()).signUp(username: "no spaces allowed") }
        #expect(invalid?.code == "invalid_username")

        // Nothing listens: a network error, and nothing stored changes.
        let closedPort = try ServeBinaryTests.ClosedPort()
        let closed = PasskeyClient(
            server: URL(string: "http://127.0.0.1:\(closedPort.port)")!, authenticator: provider,
            sessions: MemorySessionStore())
        let offline = await failure { try await closed.signIn() }
        #expect(offline?.code == "network")

        // Not passkeyd (a proxy's HTML error page): an invalid response, never a crash.
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [HTMLErrorPage.self]
        let proxied = PasskeyClient(
            server: fixture.url, authenticator: provider, sessions: MemorySessionStore(),
            urlSession: URLSession(configuration: configuration))
        #expect(await failure { try await proxied.signIn() }?.code == "invalid_response")
    }

    @Test func passwordUpgradeRecoveryAndStoredSessions() async throws {
        let hash = Bcrypt(hashing: "correct horse", cost: 4).text
        let fixture = try await Fixture { database in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID().uuidString).csv")
            try "username,passwordHash\r\nlin,\(hash)\r\n".write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            let result = try PasskeyCLITests.run(
                ServeBinaryTests.binary, ["import", file.path, "--database", database], environment: ["PASSKEYD_CONFIG": ""])
            #expect(result.status == 0, "\(result.stderr)")
        }
        defer { fixture.stop() }
        let file = fixture.directory.appendingPathComponent("state/sessions.json").path
        let provider = fixture.provider()
        let client = fixture.client(provider, sessions: FileSessionStore(path: file))

        let wrong = await failure { try await client.signIn(username: "lin", password: "not it") }
        #expect(wrong?.code == "invalid_credentials")
        let signedIn = try await client.signIn(username: "lin", password: "correct horse")
        #expect(signedIn.method == .password && signedIn.canCreatePasskey)
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)

        _ = try await client.upgradeToPasskey(removingPassword: true)
        #expect(try await client.session()?.hasPassword == false)
        #expect(await failure { try await client.signIn(username: "lin", password: "correct horse") }?.code == "invalid_credentials")

        // Another launch of the app: the session is read back from the file.
        let relaunched = fixture.client(provider, sessions: FileSessionStore(path: file))
        #expect(try await relaunched.session()?.user.username == "lin")

        let codes = try await relaunched.newRecoveryCodes()
        #expect(codes.count == 10)
        try await relaunched.signOut()
        let recovered = try await relaunched.signIn(username: "lin", recoveryCode: codes[0])
        #expect(recovered.method == .recoveryCode && recovered.recovery)
        #expect(await failure { try await relaunched.signIn(username: "lin", recoveryCode: codes[0]) }?.code == "invalid_recovery_code")
    }

    /// A new sign-in ends the session it replaces on the server (not just here); signing out
    /// offline still signs out here.
    @Test func sessionsAreReplacedAndSignOutForgetsOffline() async throws {
        let fixture = try await Fixture()
        let provider = fixture.provider()
        let sessions = MemorySessionStore()
        let client = fixture.client(provider, sessions: sessions)
        _ = try await client.signUp(username: "ines")
        _ = try await client.signIn(username: "ines")
        _ = try await client.signIn()
        #expect(try await client.deviceSessions().count == 1)
        // Another account from the same app: the first account's session ends too.
        let first = try #require(await sessions.load(server: fixture.url.absoluteString)?.sessionToken)
        _ = try await client.signUp(username: "jo")
        let (status, _) = try await fixture.server.call("GET", "/api/auth/session", token: first)
        #expect(status == 401)

        fixture.stop()
        let offline = await failure { try await client.signOut() }
        #expect(offline?.code == "network")
        #expect(await sessions.load(server: fixture.url.absoluteString) == nil)
        #expect(try await client.session() == nil)
    }

    /// A sensitive action long after the sign-in: the client confirms with a passkey by itself.
    @Test func reauthenticatesWhenTheServerAsks() async throws {
        let fixture = try await Fixture(environment: ["PASSKEYD_REAUTHENTICATION_SECONDS": "10"])
        defer { fixture.stop() }
        let provider = fixture.provider()
        let client = fixture.client(provider)
        _ = try await client.signUp(username: "noor")
        try await Task.sleep(for: .seconds(11))
        #expect(try await client.newRecoveryCodes().count == 10)
        let sessions = try await client.deviceSessions()
        #expect(sessions.contains { $0.current && $0.method == "passkey" })
    }
}

extension PasskeyClientTests {
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Examples/PasskeysApp")

    /// The Swift client's sentences are the web client's (`Public/i18n/<language>.json`), word for
    /// word, and every code the Swift client produces has one.
    @Test func theSwiftCataloguesSayWhatTheWebCataloguesSay() throws {
        let root = Self.example.deletingLastPathComponent().deletingLastPathComponent()
        for language in Messages.languages {
            let web = try JSONDecoder().decode(
                [String: String].self, from: Data(contentsOf: root.appendingPathComponent("Public/i18n/\(language).json")))
            let swift = Messages.catalogue(for: [language])
            #expect(!swift.isEmpty)
            for (key, text) in swift {
                #expect(web[key] == text, "\(language): \(key) differs from Public/i18n/\(language).json")
            }
            let codes: [PasskeyClientError] = [
                .cancelled, .noPasskeyOnDevice, .passkeyAlreadyOnDevice, .passkeyRemoved, .notSignedIn, .network(""), .unsupported(""),
                .invalidResponse(""),
            ]
            for error in codes {
                #expect(swift["error." + error.code] != nil, "\(language): no sentence for \(error.code)")
                #expect(error.message(languages: [language]) == web["error." + error.code])
            }
        }
    }

    /// The example app's entitlement, its passkeyd.json and what passkeyd serves agree: the
    /// domain is the RP ID, and the app ID is in apple-app-site-association.
    @Test func theExampleAppAndItsServerConfigurationAgree() async throws {
        let entitlements = try String(
            contentsOf: Self.example.appendingPathComponent("PasskeysApp/PasskeysApp.entitlements"), encoding: .utf8)
        let configuration = try JSONReader.parse(Array(Data(contentsOf: Self.example.appendingPathComponent("passkeyd.json"))))
        guard case .string(let rpID)? = configuration["rpID"], case .array(let apps)? = configuration["appleAppIDs"],
            case .string(let app)? = apps.first
        else {
            Issue.record("passkeyd.json lacks rpID or appleAppIDs")
            return
        }
        #expect(entitlements.contains("<string>webcredentials:\(rpID)</string>"))
        let project = try String(contentsOf: Self.example.appendingPathComponent("project.yml"), encoding: .utf8)
        #expect(app.hasSuffix("." + (project.split(separator: "PRODUCT_BUNDLE_IDENTIFIER: ").last?.prefix { $0 != "\n" } ?? "")))

        let fixture = try await Fixture(environment: ["PASSKEYD_CONFIG": Self.example.appendingPathComponent("passkeyd.json").path])
        defer { fixture.stop() }
        let (status, association) = try await fixture.server.call("GET", "/.well-known/apple-app-site-association")
        #expect(status == 200)
        #expect(association["webcredentials"]?["apps"] == .array([.string(app)]))
    }
}

/// A proxy in front that answers every request with an HTML error page.
final class HTMLErrorPage: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
    override func startLoading() {
        let response = HTTPURLResponse(
            url: request.url!, statusCode: 502, httpVersion: "HTTP/1.1", headerFields: ["Content-Type": "text/html"])!
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: Data("<html><h1>502 Bad Gateway</h1></html>".utf8))
        client?.urlProtocolDidFinishLoading(self)
    }
    override func stopLoading() {}
}
