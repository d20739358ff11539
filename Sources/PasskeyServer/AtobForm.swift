import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyCore

/// Answers for browser clients that decode binary members with `window.atob` (the widely
/// copied guide's `PasskeyWebManager`, shared/seeds/000): standard base64 instead of base64url.
///
/// Level 3 clients (`parseCreationOptionsFromJSON`, Android Credential Manager) need base64url,
/// so the form is chosen per client, never guessed from a User-Agent:
/// - `GET /api/auth/authenticate/options` is the guide's form of that request (Level 3 clients
///   POST), see ``AtobRequestOptionsJSON``.
/// - `register/options` is a POST for every client. A browser whose client finished a
///   ceremony the guide's way (`{username, credential}` to register/verify, `{username,
///   assertion}` to authenticate/verify: both shapes only that client sends) gets the cookie
///   ``cookieName`` beside its session, and its later creation options come in this form.
///   The first sign-up needs none: a new account has no passkeys to exclude, and the challenge
///   and user handle are alphabet-neutral already.
enum AtobForm {
    static let cookieName = "passkeyd_atob"
    /// The binary members of creation options: `challenge`, `user.id`, `excludeCredentials[].id`.
    static let creationMembers: [[String]] = [["challenge"], ["user", "id"], ["excludeCredentials", "*", "id"]]

    /// After a ceremony (or a sign-out): sets the marker when the client finished it the
    /// guide's way, and removes one the browser holds when it did not (passkeyd's own pages or
    /// another Level 3 client took over in that browser, and need base64url again) or on
    /// sign-out.
    static func mark(
        _ headers: inout HTTPFields, _ request: Request, decodesWithAtob: Bool, _ configuration: EdgeConfiguration, maxAge: Int
    ) {
        if decodesWithAtob {
            headers.append(cookie(configuration, value: "1", maxAge: maxAge))
        } else if request.cookies[cookieName] != nil {
            headers.append(cookie(configuration, value: "", maxAge: 0))
        }
    }

    /// `Set-Cookie` for the marker: HttpOnly, for the API only, as long as a session.
    static func cookie(_ configuration: EdgeConfiguration, value: String, maxAge: Int) -> HTTPField {
        var cookie =
            "\(cookieName)=\(value); Path=/api/auth; Max-Age=\(maxAge); HttpOnly; SameSite=\(configuration.cookieSameSite.rawValue)"
        if configuration.cookieSecure { cookie += "; Secure" }
        return HTTPField(name: .setCookie, value: cookie)
    }

    /// `value` as JSON with the string `members` (paths; `*` for each array element) rewritten
    /// from base64url to unpadded standard base64: `-` → `+`, `_` → `/` (the two alphabets
    /// differ in those two characters only).
    static func json(_ value: some Encodable, members: [[String]]) throws -> Response {
        var object = try JSONSerialization.jsonObject(with: Data(try HTTP.jsonBytes(value)))
        for path in members { object = rewrite(object, path[...]) }
        return try HTTP.json(bytes: Array(JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes, .sortedKeys])))
    }

    private static func rewrite(_ value: Any, _ path: ArraySlice<String>) -> Any {
        guard let key = path.first else {
            guard let text = value as? String else { return value }
            return String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        }
        if key == "*", let array = value as? [Any] { return array.map { rewrite($0, path.dropFirst()) } }
        guard var object = value as? [String: Any], let member = object[key] else { return value }
        object[key] = rewrite(member, path.dropFirst())
        return object
    }
}
