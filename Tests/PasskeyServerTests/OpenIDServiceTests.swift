import Crypto
import Foundation
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// The OpenID provider's parts below the routes: the service's values (no HTTP), the page
/// writer's escaping, the form parser and the secret comparison.
@Suite("OpenID Connect: the service, pages and forms")
struct OpenIDServiceTests {
    @Test(arguments: [
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("a & b", "a &amp; b"),
        (#"" onload="x"#, "&quot; onload=&quot;x"),
        ("it's", "it&#39;s"),
        ("&amp;", "&amp;amp;"),
        ("plain text, é 🔑", "plain text, é 🔑"),
    ])
    func pageTextIsEscapedForTextAndAttributes(input: String, escaped: String) {
        #expect(HTMLPage.escape(input) == escaped)
    }

    @Test func aPageCarriesNoMarkupFromItsText() {
        let html = HTMLPage.render(title: "<b>\"x\"</b>", message: "'<img src=x onerror=alert(1)>'")
        #expect(!html.contains("<b>") && !html.contains("<img") && !html.contains("'<"))
        #expect(html.contains("<h1>&lt;b&gt;&quot;x&quot;&lt;/b&gt;</h1>"))
        #expect(html.contains("<p>&#39;&lt;img src=x onerror=alert(1)&gt;&#39;</p>"))
    }

    @Test func formFieldsDecodeAndNameTheFirstRepeatedParameter() {
        let form = FormFields("a=1+2%2B3&b=&c&a=again&b=x")
        #expect(form["a"] == "1 2+3" && form["b"] == "" && form["c"] == "")
        #expect(form.repeated == "a")
        #expect(FormFields("token=t%20k").repeated == nil)
    }

    @Test func secretsCompareEqualOnlyByteForByte() {
        let digest = Array(SHA256.hash(data: Array("pcs_secret".utf8)))
        #expect(ConstantTime.equals(digest, Array(SHA256.hash(data: Array("pcs_secret".utf8)))))
        var last = digest
        last[31] ^= 1
        var first = digest
        first[0] ^= 0x80
        #expect(!ConstantTime.equals(digest, last) && !ConstantTime.equals(digest, first))
        #expect(!ConstantTime.equals(digest, Array(digest.prefix(31))) && ConstantTime.equals([], []))
    }

    /// The service answers with values: a page where nothing may be redirected, the error on
    /// the redirect once the client and its redirect URI are known, the pending request's id
    /// otherwise; and `invalid_client` for a wrong secret.
    @Test func authorizationOutcomesAndClientAuthenticationAreValues() async throws {
        let harness = try await ServerHarness()
        let openID = OpenIDService(service: harness.service)
        let (client, secret) = try await OpenIDTests.client(harness, firstParty: false)
        let nobody = PasskeyService.Client(ipAddress: "192.0.2.1")
        func authorize(_ query: [String: String]) async throws -> OpenIDService.AuthorizationOutcome {
            try await openID.authorize(query, queryBytes: 100, signedIn: nil, from: nobody)
        }

        #expect(try await openID.authorize([:], queryBytes: 8193, signedIn: nil, from: nobody) == .page(.requestTooLong))
        #expect(try await authorize(["client_id": "pkc_nobody"]) == .page(.unknownClient))
        #expect(try await authorize(["client_id": client.id, "redirect_uri": "https://evil.example/"]) == .page(.invalidRedirect))
        let base = ["client_id": client.id, "redirect_uri": OpenIDTests.redirect, "state": "s1"]
        guard case .error(let error, let location) = try await authorize(base.merging(["response_type": "token"]) { $1 }) else {
            Issue.record("no error redirect")
            return
        }
        #expect(error.code == .unsupportedResponseType && location.hasPrefix(OpenIDTests.redirect + "?error=unsupported_response_type"))
        guard
            case .error(let none, _) = try await authorize(
                base.merging(["response_type": "code", "scope": "openid", "prompt": "none"]) { $1 })
        else {
            Issue.record("no error redirect")
            return
        }
        #expect(none.code == .loginRequired)
        guard case .interaction(let id) = try await authorize(base.merging(["response_type": "code", "scope": "openid profile"]) { $1 })
        else {
            Issue.record("no pending request")
            return
        }
        let prompt = try await openID.prompt(requestID: id, signedIn: nil)
        #expect(prompt.clientID == client.id && prompt.scopes == ["openid", "profile"] && prompt.signInNeeded && prompt.consentNeeded)

        await #expect(throws: OAuthError(.invalidClient, "")) {
            try await openID.authenticateClient(.init(id: client.id, secret: secret + "x"))
        }
        await #expect(throws: OAuthError(.invalidClient, "")) { try await openID.authenticateClient(.init(id: client.id, secret: nil)) }
        #expect(try await openID.authenticateClient(.init(id: client.id, secret: secret)).id == client.id)
        #expect(openID.discovery["issuer"] == .string(ServerHarness.origin))
    }

    /// A session that cannot be read because the database failed is not "nobody signed in":
    /// the OpenID routes answer 503, as every route does (a `try?` there used to send the
    /// person to sign in again, or sign nobody out), and work again once the database does.
    @Test func aDatabaseFailureWhileReadingTheSessionIs503() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oidc-outage".utf8))
            let (session, _, _) = try await api.signUp("ola", authenticator: &authenticator)
            let (client, _) = try await OpenIDTests.client(harness)
            let (_, challenge) = OpenIDTests.pkce()
            let store = try #require(harness.store as? SQLStore)

            try await store.writer.execute("ALTER TABLE sessions RENAME TO sessions_away")
            let authorize = try await OpenIDTests.authorize(api, client: client, challenge: challenge, token: session)
            #expect(authorize.status == .serviceUnavailable && authorize.errorCode == "database_unavailable", "\(authorize.status)")
            let logout = try await api.request(.get, "/oauth2/logout", token: session, origin: nil)
            #expect(logout.status == .serviceUnavailable && logout.headers[.setCookie] == nil)

            try await store.writer.execute("ALTER TABLE sessions_away RENAME TO sessions")
            // (On PostgreSQL the connection that failed to prepare the session statement keeps
            // that failure until it closes: postgres-nio remembers it per connection.)
            guard TestDatabase.httpSuiteKind == .sqlite else { return }
            let back = try await OpenIDTests.authorize(api, client: client, challenge: challenge, token: session)
            #expect(OpenIDTests.parameters(back)["code"] != nil, "\(back.status)")
        }
    }
}
