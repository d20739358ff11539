import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyModels
import WebAuthn

/// One spelling per resource: a path with an empty segment (`//api`, a trailing `/`), a dot
/// segment, a percent-encoded `/`, `\`, `.` or control byte, or a raw control byte is refused
/// with 404 before anything else looks at it. Routes, limits and a proxy's `location` rules then
/// all see the same path (`/metrics/` cannot slip past a `location = /metrics` rule, and
/// `/api/auth/authenticate/verify/` cannot slip past the route's limits).
struct CanonicalPathMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.isCanonical(request.uri.path) else { throw APIError.notFound }
        return try await next(request, context)
    }

    static func isCanonical(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        // The one folder page: the operator's console (its file server sends /admin here).
        if path == "/admin/" { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        for segment in bytes.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            guard !segment.isEmpty, segment.elementsEqual(".".utf8) == false, segment.elementsEqual("..".utf8) == false else {
                return false
            }
        }
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\\") { return false }
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = ASCIIHex.value(of: bytes[index + 1]),
                    let low = ASCIIHex.value(of: bytes[index + 2])
                else {
                    return false
                }
                let decoded = high << 4 | low
                if decoded < 0x20 || decoded == 0x7F || decoded == UInt8(ascii: "/") || decoded == UInt8(ascii: "\\")
                    || decoded == UInt8(ascii: "%") || isUnreserved(decoded)
                {
                    return false
                }
                index += 3
                continue
            }
            index += 1
        }
        return true
    }

    /// RFC 3986 §2.3: an encoded unreserved character (`%65` for `e`, `%2E` for `.`) is a second
    /// spelling of the same path; the canonical one has it plain.
    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: false
        }
    }
}

/// Static files are served whole: `Range` and `If-Range` are dropped before the file middleware
/// sees them (RFC 9110 §14.2 lets a server ignore `Range`), and no `Accept-Ranges` is offered.
/// The files are small, and Hummingbird's range handling answered an out-of-bounds range with a
/// 206 and a negative `Content-Length`.
struct WholeFilesMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        if request.headers[.range] != nil || request.headers[.ifRange] != nil {
            var head = request.head
            head.headerFields[.range] = nil
            head.headerFields[.ifRange] = nil
            request = Request(head: head, body: request.body)
        }
        var response = try await next(request, context)
        response.headers[.acceptRanges] = nil
        // A file of the web UI (`passkeyd.js` included, which other sites import): browsers ask
        // again each time (a 304 when unchanged), so an upgrade reaches them at once.
        if response.headers[.eTag] != nil && response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-cache" }
        return response
    }
}

/// Cross-site writes are refused: a request that changes state (not GET, HEAD or OPTIONS) and
/// carries an `Origin` must name one of the relying party's web origins (related origins
/// included). Native apps send no `Origin` and are unaffected.
struct OriginCheckMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let allowed: Set<String>
    /// The OpenID endpoints a relying party's page posts a form to (a top-level navigation
    /// from another site, as their GET is): they write and count nothing but send the form on
    /// to their GET (`OpenIDProvider.formAsQuery`).
    static let crossSiteForms: Set<String> = ["/oauth2/authorize", "/oauth2/logout"]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.method != .get && request.method != .head && request.method != .options,
            let origin = request.headers[.origin], !allowed.contains(origin), !Self.crossSiteForms.contains(request.uri.path)
        {
            throw APIError.csrf
        }
        return try await next(request, context)
    }
}

/// JSON endpoints take JSON only: a body must be sent as `application/json` (415 otherwise), so a
/// cross-site HTML form or a `text/plain` fetch, which need no CORS preflight, cannot reach
/// them. Routes that always need a body (the session-issuing ones) refuse a missing type too.
struct JSONRequestMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    /// Refuse a request without `Content-Type: application/json` even when it has no body.
    var bodyRequired = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.method == .post || request.method == .put || request.method == .patch {
            if bodyRequired || Self.hasBody(request) {
                guard Self.isJSON(request.headers[.contentType]) else { throw APIError.unsupportedMediaType }
            }
        }
        return try await next(request, context)
    }

    static func hasBody(_ request: Request) -> Bool {
        if request.headers[.transferEncoding] != nil { return true }
        if let length = request.headers[.contentLength] { return length != "0" }
        return false
    }

    /// `application/json`, with parameters (`; charset=utf-8`) and in any case. A client that
    /// sends the header twice (an OkHttp interceptor and the body's own type) is read as the
    /// list of both: each must be JSON.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType, !contentType.isEmpty else { return false }
        // Byte by byte (Foundation's trimming and lower-casing cost ~2% of an options request).
        return contentType.utf8.split(separator: UInt8(ascii: ",")).allSatisfy { value in
            var type = value.prefix { $0 != UInt8(ascii: ";") }
            while let first = type.first, first == 0x20 || first == 0x09 { type = type.dropFirst() }
            while let last = type.last, last == 0x20 || last == 0x09 { type = type.dropLast() }
            return type.count == 16 && zip(type, "application/json".utf8).allSatisfy { ((0x41...0x5A).contains($0) ? $0 | 0x20 : $0) == $1 }
        }
    }
}

/// Ceremony routes refuse a browser's `Sec-Fetch-Site: cross-site` request unless its Origin is
/// an allowed one, before anything is counted or written:
/// - on the routes that issue a session (sign-up, sign-in by passkey, password or recovery): no
///   login CSRF (signing a victim's browser into the attacker's account);
/// - on the options routes a browser can reach with a plain GET (`<img src>`, no CORS, no
///   Origin): another site cannot make its visitors spend their own address's rate limit or
///   write ceremonies into the database.
/// Native apps send no `Sec-Fetch-Site`; a cross-origin fetch from a related origin sends its
/// Origin and passes.
struct CrossSiteRequestMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let allowed: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if request.headers[.secFetchSite]?.lowercased() == "cross-site" {
            guard let origin = request.headers[.origin], allowed.contains(origin) else { throw APIError.crossSite }
        }
        return try await next(request, context)
    }
}

/// The per-address limit of the routes it is attached to (every ceremony, password and recovery
/// route): each request counts, whatever its outcome.
struct ClientRateLimitMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let service: PasskeyService

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await service.limitClient(context.client)
        return try await next(request, context)
    }
}

/// Resolves the request's session once (Bearer token or cookie) into `context.signedIn`.
struct SessionMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    enum Mode: Sendable {
        /// 401 `not_signed_in` without a live session.
        case required
        /// No session is fine; a Bearer token that is not a live session is 401 (the app must
        /// sign in again rather than, say, start a sign-up by mistake).
        case optional
        /// Whatever the request carries, a failed resolution reads as no session (sign-in
        /// routes: a stale token must not stop a new sign-in).
        case lenient
    }

    let sessions: SessionResolver
    var mode: Mode

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        switch mode {
        case .required:
            guard let signedIn = try await sessions.optional(request) else { throw PasskeyServiceError.notSignedIn }
            context.signedIn = signedIn
        case .optional:
            context.signedIn = try await sessions.optional(request)
        case .lenient:
            do {
                context.signedIn = try await sessions.optional(request)
            } catch is PasskeyServiceError {
                context.signedIn = nil
            } catch let error as APIError where error.status == .forbidden {
                context.signedIn = nil
            }
        }
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!
}
