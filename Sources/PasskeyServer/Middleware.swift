import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import PasskeyCore
import PasskeyModels
import WebAuthn

/// Turns every error into the API's JSON error shape. Nothing reaches the client as a stack
/// trace or a framework default page; unexpected errors are logged and answered 500.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as PasskeyServiceError {
            return try APIError.from(error).response(from: request, context: context)
        } catch let error as WebAuthnError {
            // Only parsing errors reach here (the service maps ceremony failures itself): 400.
            return try APIError.from(PasskeyServiceError(error, signIn: false)).response(from: request, context: context)
        } catch let error as StoreError {
            metrics.storeError(code: error.code.rawValue)
            // A known outage is logged once by the store when it begins and ends; each request
            // refused during it is counted (and has its request line), not an error line each.
            context.logger.log(level: error.isKnownOutage ? .debug : .error, "store error", metadata: ["error": "\(error)"])
            return try APIError.from(error).response(from: request, context: context)
        } catch let error as HTTPError {
            let mapped: APIError =
                switch error.status {
                case .notFound: APIError.notFound
                case .methodNotAllowed: APIError.methodNotAllowed
                case .contentTooLarge: APIError.bodyTooLarge
                case .badRequest: APIError.badHTTP
                default: APIError(error.status, "request_refused", error.status.reasonPhrase)
                }
            return try mapped.response(from: request, context: context)
        } catch let error as HTTPParserError {
            // The connection ended in the middle of the request: the client went away.
            if error == .invalidEOFState || context.clientWentAway { throw ClientAborted() }
            return try APIError.badHTTP.response(from: request, context: context)
        } catch let error as ChannelError
            where error == .ioOnClosedChannel || error == .outputClosed || error == .inputClosed || error == .eof
        {
            throw ClientAborted()
        } catch {
            // A client that went away mid-request is not a server error.
            if context.clientWentAway { throw ClientAborted() }
            context.logger.error("unexpected error", metadata: ["error": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }
}

/// The client closed its connection before the answer: nothing to answer, logged at info and
/// counted apart by ``RequestLogMiddleware``.
struct ClientAborted: Error {}

/// Headers every response carries, errors included.
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    /// Made (and their values checked) once: an `HTTPField` validates its value byte by byte
    /// when it is made, and the policy is ~170 bytes, twice per sign-in.
    private static let always = [
        HTTPField(name: .xContentTypeOptions, value: "nosniff"),
        HTTPField(name: HTTPField.Name("Referrer-Policy")!, value: "same-origin"),
        HTTPField(name: HTTPField.Name("X-Frame-Options")!, value: "DENY"),
    ]
    private static let contentSecurityPolicy = HTTPField(
        name: .contentSecurityPolicy,
        value:
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    )

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        // These replace whatever a handler set; a policy a handler sets stands.
        for field in Self.always {
            if response.headers.contains(field.name) { response.headers[field.name] = nil }
            response.headers.append(field)
        }
        if !response.headers.contains(.contentSecurityPolicy) { response.headers.append(Self.contentSecurityPolicy) }
        return response
    }
}
