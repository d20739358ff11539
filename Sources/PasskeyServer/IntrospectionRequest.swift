import Hummingbird
import PasskeyCore

/// The token of an introspection request: `application/x-www-form-urlencoded` (`token=…`, as
/// RFC 7662 §2.1 says) or a JSON object with `token`.
func introspectionToken(_ request: Request, limit: Int) async throws -> String {
    let type = request.headers[.contentType]?.lowercased() ?? ""
    if type.hasPrefix("application/x-www-form-urlencoded") {
        let buffer = try await request.body.collect(upTo: limit)
        guard let token = OpenIDProvider.fields(String(buffer: buffer))["token"] else {
            throw PasskeyServiceError.invalid(.malformedJSON, "token is missing")
        }
        return token
    }
    guard JSONRequestMiddleware.isJSON(request.headers[.contentType]) else { throw APIError.unsupportedMediaType }
    let json = try await HTTP.jsonBody(request, limit: limit)
    do {
        return try json.string("token")
    } catch {
        throw PasskeyServiceError.invalid(.malformedJSON, "token is missing")
    }
}
