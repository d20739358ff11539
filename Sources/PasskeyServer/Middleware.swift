import HTTPTypes
import Hummingbird
import Logging
import PasskeyStore
import WebAuthn

/// Turns every error into the API's JSON error shape. Nothing reaches the client as a stack
/// trace or a framework default page; unexpected errors are logged and answered 500.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as WebAuthnError {
            return try APIError.from(error, signIn: request.uri.path.contains("authenticate")).response(from: request, context: context)
        } catch let error as StoreError {
            context.logger.error("store error", metadata: ["error": "\(error)"])
            return try APIError.from(error).response(from: request, context: context)
        } catch let error as HTTPError {
            let mapped: APIError = switch error.status {
            case .notFound: APIError(.notFound, "not_found", "No such endpoint.")
            case .methodNotAllowed: APIError(.methodNotAllowed, "method_not_allowed", "Method not allowed here.")
            case .contentTooLarge: APIError.bodyTooLarge
            case .badRequest: APIError(.badRequest, "bad_request", "Bad request.")
            default: APIError(error.status, "http_\(error.status.code)", error.status.reasonPhrase)
            }
            return try mapped.response(from: request, context: context)
        } catch {
            context.logger.error("unexpected error", metadata: ["error": "\(error)"])
            return try APIError.internalError.response(from: request, context: context)
        }
    }
}

/// Headers every response carries.
struct SecurityHeadersMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response = try await next(request, context)
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        if response.headers[.contentSecurityPolicy] == nil {
            response.headers[.contentSecurityPolicy] =
                "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        }
        return response
    }
}
