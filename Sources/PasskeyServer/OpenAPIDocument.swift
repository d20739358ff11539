import HTTPTypes
import Hummingbird
import NIOCore

/// The OpenAPI 3.1 description of the whole HTTP API (docs/openapi.json, embedded at build time
/// by scripts/gen-openapi so the binary serves it from anywhere).
public enum OpenAPIDocument {
    static func response() -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: json)))
    }

    /// The document text.
    public static var text: String { json }
}
