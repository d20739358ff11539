import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyCore
import PasskeyModels
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

    // MARK: The HTTP layer's own refusals

    static let csrf = APIError(.forbidden, "csrf_origin_mismatch", "This request did not come from an allowed origin.")
    static let bodyTooLarge = APIError(.contentTooLarge, "body_too_large", "The request body is too large.")
    static let internalError = APIError(.internalServerError, "internal_error", "Something went wrong on the server.")
    static let notFound = APIError(.notFound, "not_found", "No such endpoint.")
    static let methodNotAllowed = APIError(.methodNotAllowed, "method_not_allowed", "Method not allowed here.")
    static let badHTTP = APIError(.badRequest, "bad_request", "The request is not valid HTTP.")
    static let unsupportedMediaType = APIError(
        .unsupportedMediaType, "unsupported_media_type", "Send the body as Content-Type: application/json.")
    static let crossSite = APIError(.forbidden, "cross_site_request", "Cross-site requests cannot start or finish a sign-in here.")
    static let metricsUnauthorized = APIError(.unauthorized, "not_signed_in", "Sign in first.")

    // MARK: Codes to statuses: the one table

    /// The status of each service code. A test checks every ``PasskeyServiceError/Code/all``
    /// code is here and documented.
    static let statuses: [PasskeyServiceError.Code: HTTPResponse.Status] = [
        .notSignedIn: .unauthorized, .reauthenticationRequired: .forbidden,
        .challengeUnknown: .badRequest, .challengeExpired: .badRequest, .ceremonyMismatch: .badRequest, .accountMismatch: .badRequest,
        .credentialNotFound: .unauthorized, .credentialNotAllowed: .unauthorized, .credentialAlreadyRegistered: .conflict,
        .usernameTaken: .conflict, .lastPasskey: .conflict, .passkeyNotFound: .notFound, .sessionNotFound: .notFound,
        .accountDisabled: .forbidden, .counterConflict: .conflict,
        .rateLimited: .tooManyRequests, .busy: .serviceUnavailable,
        .invalidUsername: .badRequest, .invalidDisplayName: .badRequest, .invalidName: .badRequest, .invalidMediation: .badRequest,
        .invalidCredentials: .unauthorized, .invalidPassword: .badRequest, .noPassword: .conflict, .noPasskey: .conflict,
        .invalidRecoveryCode: .unauthorized, .invalidRecoveryLink: .unauthorized,
        .invalidUserID: .badRequest, .malformedJSON: .badRequest, .invalidHints: .badRequest,
        .invalidExternalID: .badRequest, .invalidRegistrationToken: .unauthorized, .invalidAPIKey: .unauthorized,
        .insufficientScope: .forbidden, .accountNotFound: .notFound,
        .invalidAuthorizationRequest: .notFound, .consentRequired: .forbidden, .signUpNotAllowed: .forbidden,
        .alreadySignedIn: .conflict, .invalidWebhookURL: .badRequest, .invalidValue: .badRequest, .notFound: .notFound,
        .invalidExtension: .badRequest, .largeBlobTooLarge: .badRequest,
        .adminRequired: .forbidden, .adminRoleRequired: .forbidden, .csrfTokenInvalid: .forbidden, .bootstrapInvalid: .badRequest,
        .confirmationMismatch: .badRequest, .reasonRequired: .badRequest, .invalidQuery: .badRequest, .lastAdmin: .conflict,
        .emailNotEnabled: .notFound, .invalidEmail: .badRequest, .emailRequired: .badRequest, .invalidEmailLink: .unauthorized,
        .invalidEmailCode: .unauthorized, .emailTaken: .conflict, .operatorRoleRequired: .forbidden, .tenantNotFound: .notFound,
        .invalidTenant: .badRequest, .tenantHasAccounts: .conflict,
    ]

    /// Ceremony codes the authenticator policy refuses with (403).
    private static let policyRefusals: Set<String> = [
        WebAuthnError.Code.authenticatorNotAllowed.rawValue, WebAuthnError.Code.credentialProtectionNotApplied.rawValue,
    ]
    /// Ceremony codes that say the client sent what it must not (400, on a sign-in too).
    private static let clientMistakes: Set<String> = [
        WebAuthnError.Code.prfOutputPosted.rawValue, WebAuthnError.Code.largeBlobUnsupported.rawValue,
    ]

    /// A service error as the API answers it. Ceremony failures: malformed input (and a client's
    /// misuse of an extension) 400, a server misconfiguration 500, the authenticator policy's
    /// refusal 403, any other refusal 401 for a sign-in and 400 for a registration.
    static func from(_ error: PasskeyServiceError) -> APIError {
        switch error.origin {
        case .ceremony(let signIn):
            if error.code.rawValue == WebAuthnError.Code.invalidConfiguration.rawValue { return internalError }
            let code = error.code.rawValue
            let status: HTTPResponse.Status =
                policyRefusals.contains(code)
                ? .forbidden
                : code.hasPrefix("malformed_") || clientMistakes.contains(code) ? .badRequest : signIn ? .unauthorized : .badRequest
            return APIError(status, error.code.rawValue, error.message)
        case .service:
            return APIError(statuses[error.code] ?? .badRequest, error.code.rawValue, error.message, retryAfter: error.retryAfter)
        }
    }

    static func from(_ error: StoreError) -> APIError {
        switch error.code {
        case .conflict: APIError(.conflict, "conflict", "That already exists.")
        case .invalidQuery: APIError(.badRequest, "invalid_query", error.reason)
        default: APIError(.serviceUnavailable, "database_unavailable", "The database is unavailable; try again shortly.")
        }
    }
}

/// JSON string quoting for hand-built bodies (and the JSON log lines).
public enum JSONText {
    public static func quote(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 2)
        appendQuoted(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text` as a JSON string (``JSONWriter``'s escapes, and `<` as `\u003c`).
    public static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        JSONWriter.appendString(text, to: &out, escapingLessThan: true)
    }
}
