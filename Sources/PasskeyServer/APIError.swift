import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyStore
import WebAuthn

/// The one error shape of the HTTP API: `{"error": {"code": "…", "message": "…"}}` with a
/// status. Codes are stable and listed in docs/openapi.json; messages are for people.
///
/// This file is the only place where library errors become HTTP statuses.
public struct APIError: Error, Sendable, HTTPResponseError {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    /// Seconds for `Retry-After` (429 and 503).
    public let retryAfter: Int?

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = #"{"error":{"code":"# + JSONText.quote(code) + #","message":"# + JSONText.quote(message) + "}}"
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        if status == .tooManyRequests || status == .serviceUnavailable { headers[.retryAfter] = "\(retryAfter ?? 5)" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    // MARK: Server-side codes

    static let notSignedIn = APIError(.unauthorized, "not_signed_in", "Sign in first.")
    static let csrf = APIError(.forbidden, "csrf_origin_mismatch", "This request did not come from an allowed origin.")
    static let bodyTooLarge = APIError(.contentTooLarge, "body_too_large", "The request body is too large.")
    static let unknownChallenge = APIError(.badRequest, "challenge_unknown",
                                           "This sign-in or sign-up attempt is unknown or was already used. Start again.")
    static let expiredChallenge = APIError(.badRequest, "challenge_expired", "This attempt took too long and expired. Start again.")
    static let ceremonyMismatch = APIError(.badRequest, "ceremony_mismatch", "This challenge belongs to another kind of ceremony.")
    static let accountMismatch = APIError(.badRequest, "account_mismatch", "This challenge was issued for another account.")
    static let credentialNotFound = APIError(.unauthorized, "credential_not_found", "This passkey is not registered here (it may have been deleted).")
    static let credentialNotAllowed = APIError(.unauthorized, "credential_not_allowed", "This passkey cannot be used for this account.")
    static let credentialExists = APIError(.conflict, "credential_already_registered", "This passkey is already registered.")
    static let usernameTaken = APIError(.conflict, "username_taken", "That username is taken.")
    static let lastPasskey = APIError(.conflict, "last_passkey", "This is the account's only passkey; add another before deleting it.")
    static let passkeyNotFound = APIError(.notFound, "passkey_not_found", "No such passkey on this account.")
    static let accountDisabled = APIError(.forbidden, "account_disabled", "This account is disabled.")
    static let counterRace = APIError(.conflict, "counter_conflict", "This passkey was used twice at once; try again.")
    static let tooManyCeremonies = APIError(.serviceUnavailable, "too_many_ceremonies", "Too many sign-ins in progress; try again shortly.")
    static func rateLimited(retryAfter: Int) -> APIError {
        APIError(.tooManyRequests, "rate_limited", "Too many attempts; try again in \(retryAfter) seconds.", retryAfter: retryAfter)
    }
    static let internalError = APIError(.internalServerError, "internal_error", "Something went wrong on the server.")
    static let notFound = APIError(.notFound, "not_found", "No such endpoint.")
    static let unsupportedMediaType = APIError(.unsupportedMediaType, "unsupported_media_type", "Send the body as Content-Type: application/json.")
    static let crossSite = APIError(.forbidden, "cross_site_request", "Cross-site requests cannot sign in here.")
    static let reauthenticationRequired = APIError(.forbidden, "reauthentication_required",
                                                   "Sign in again with your passkey to do this (your last sign-in was too long ago).")
    static let sessionNotFound = APIError(.notFound, "session_not_found", "No such session on this account.")
    static let busy = APIError(.serviceUnavailable, "busy", "The server is busy checking passwords; try again shortly.")

    static func badRequest(_ code: String, _ message: String) -> APIError { APIError(.badRequest, code, message) }

    /// A verification failure. Registration failures are 400; sign-in failures 401.
    static func from(_ error: WebAuthnError, signIn: Bool) -> APIError {
        let code = error.code.rawValue
        if code.hasPrefix("malformed_") { return APIError(.badRequest, code, error.reason) }
        if error.code == .invalidConfiguration { return internalError }
        return APIError(signIn ? .unauthorized : .badRequest, code, message(for: error))
    }

    /// Short, human text per code; the developer-facing reason goes to the log.
    private static func message(for error: WebAuthnError) -> String {
        switch error.code {
        case .challengeMismatch: "The response does not answer this challenge."
        case .originNotAllowed: "The response comes from an origin this server does not accept."
        case .rpIDHashMismatch: "The passkey was made for another site."
        case .userNotVerified: "The authenticator did not verify the user (PIN or biometrics)."
        case .userNotPresent: "The authenticator did not confirm user presence."
        case .signatureInvalid: "The passkey's signature does not verify."
        case .counterRegression: "This passkey's counter went backwards; it may have been cloned."
        case .unsupportedAlgorithm: "The passkey uses an algorithm this server does not accept."
        case .attestationUntrusted: "The authenticator's attestation is not trusted by this server."
        default: error.reason
        }
    }

    static func from(_ error: StoreError) -> APIError {
        switch error.code {
        case .conflict: APIError(.conflict, "conflict", "That already exists.")
        default: APIError(.serviceUnavailable, "database_unavailable", "The database is unavailable; try again shortly.")
        }
    }
}

/// JSON string quoting for hand-built bodies (and the JSON log lines).
public enum JSONText {
    public static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c"
            case _ where scalar.value < 0x20:
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
