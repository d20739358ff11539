import Foundation
import HTTPTypes
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

/// The authorization and logout endpoints by form POST (OpenID Connect Core §3.1.2.1,
/// RP-Initiated Logout 1.0 §2: the provider must take POST as well as GET), posted from the
/// relying party's page on another site.
extension OpenIDAttackTests {
    static let relyingPartyPage = "https://app.example.com"

    static func form(_ api: APIClient, _ path: String, _ body: String, contentType: String = "application/x-www-form-urlencoded")
        async throws -> APIResponse
    {
        try await api.request(
            .post, path, body: Array(body.utf8), origin: Self.relyingPartyPage, headers: [.contentType: contentType])
    }

    @Test func formPostsGoOnToTheGETAndWorkAsItDoes() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let (session, _, _, request) = try await Self.signedInCodeRequest(api, harness, "fern", scope: "openid+profile")
            let fields = request.joined(separator: "&")

            // Posted from the relying party's page: a 303 to the GET with the form as its query.
            let posted = try await Self.form(api, "/oauth2/authorize", fields)
            #expect(posted.status == .seeOther && posted.headers[.location] == "/oauth2/authorize?" + fields)
            let followed = try await api.request(.get, try #require(posted.headers[.location]), token: session, origin: nil)
            #expect(Flow.parameters(followed)["code"] != nil && Flow.parameters(followed)["state"] == "s1")
            // A repeated redirect_uri in the form is refused by the GET, as in a query.
            let repeated = try await Self.form(api, "/oauth2/authorize", fields + "&redirect_uri=https%3A%2F%2Fattacker.example%2Fcb")
            let refused = try await api.request(.get, try #require(repeated.headers[.location]), token: session, origin: nil)
            #expect(refused.status == .badRequest && refused.headers[.location] == nil)

            // Logout by form: the GET it goes on to ends the session the browser's cookie names.
            let (signedIn, logoutClient, _, tokens) = try await Self.tokens(api, harness, "fenn")
            let idToken = try #require(tokens.string("id_token"))
            let logoutFields =
                "id_token_hint=\(idToken)&client_id=\(logoutClient.id)&post_logout_redirect_uri=https%3A%2F%2Fapp.example.com%2Fbye&state=z"
            let logout = try await Self.form(api, "/oauth2/logout", logoutFields)
            #expect(logout.status == .seeOther && logout.headers[.setCookie] == nil)
            #expect(try await api.request(.get, "/api/auth/session", token: signedIn).status == .ok)
            let out = try await api.request(.get, try #require(logout.headers[.location]), token: signedIn, origin: nil)
            #expect(out.status == .found && out.headers[.location] == "https://app.example.com/bye?state=z")
            #expect(try await api.request(.get, "/api/auth/session", token: signedIn).status == .unauthorized)
        }
    }

    @Test func formPostsThatAreNotPlainFormsGetAPageNeverARedirect() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            for path in ["/oauth2/authorize", "/oauth2/logout"] {
                let bad: [(String, String, String)] = [
                    (path + "?client_id=a", "state=s", "application/x-www-form-urlencoded"),  // both address and form
                    (path, #"{"client_id":"a"}"#, "application/json"),
                    (path, "client_id=a", "text/plain"),
                    (path, "state=a#b", "application/x-www-form-urlencoded"),
                    (path, "state=a b", "application/x-www-form-urlencoded"),
                    (path, "state=a\r\nLocation: https://attacker.example", "application/x-www-form-urlencoded"),
                    (path, "state=caf\u{E9}", "application/x-www-form-urlencoded"),
                    (path, "state=<script>", "application/x-www-form-urlencoded"),
                ]
                for (target, body, type) in bad {
                    let answer = try await Self.form(api, target, body, contentType: type)
                    #expect(answer.status == .badRequest && answer.headers[.location] == nil, "\(target) \(body) \(type)")
                    #expect(answer.headers[.contentType]?.hasPrefix("text/html") == true, "\(target) \(body)")
                }
                let large = try await Self.form(api, path, "state=" + String(repeating: "a", count: 2 << 20))
                #expect(large.status == .contentTooLarge && large.headers[.location] == nil)
                // With the right type in another case and a charset, and an empty form: on to the GET.
                let empty = try await Self.form(api, path, "", contentType: "Application/X-WWW-Form-URLEncoded; charset=utf-8")
                #expect(empty.status == .seeOther && empty.headers[.location] == path)
            }
            // Only these two take another site's POST: the edge still refuses cross-site writes.
            let elsewhere = try await Self.form(api, "/api/auth/register/options", "username=x")
            #expect(elsewhere.status == .forbidden && elsewhere.errorCode == "csrf_origin_mismatch")
        }
    }
}
