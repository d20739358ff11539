import HTTPTypes
import Hummingbird

/// Cross-origin requests from the single-page apps in `corsOrigins`: preflights answered (the
/// methods and headers the API uses, cached 10 minutes), every answer to a listed origin
/// carries `Access-Control-Allow-Origin: <that origin>` with credentials, and every answer says
/// `Vary: Origin`. Nothing is ever allowed to `*`; unlisted origins get no CORS headers (the
/// browser then withholds the answer), and their state-changing requests are refused by the
/// Origin check.
struct CORSMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let origins: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let origin = request.headers[.origin].flatMap { origins.contains($0) ? $0 : nil }
        if request.method == .options, request.headers[.accessControlRequestMethod] != nil {
            var headers = HTTPFields()
            headers[.vary] = "Origin"
            if let origin {
                headers[.accessControlAllowOrigin] = origin
                headers[.accessControlAllowCredentials] = "true"
                headers[.accessControlAllowMethods] = "GET, POST, PATCH, DELETE, OPTIONS"
                headers[.accessControlAllowHeaders] = "Authorization, Content-Type"
                headers[.accessControlMaxAge] = "600"
            }
            return Response(status: .noContent, headers: headers)
        }
        var response = try await next(request, context)
        response.headers[.vary] = "Origin"
        if let origin {
            response.headers[.accessControlAllowOrigin] = origin
            response.headers[.accessControlAllowCredentials] = "true"
            response.headers[.accessControlExposeHeaders] = "Retry-After"
        }
        return response
    }
}
