import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyCore

/// The OpenAPI 3.1 description of the whole HTTP API: `Resources/openapi.json`, edited by hand as
/// the source of truth (docs/openapi.json links to it), embedded in the binary at build time
/// (SwiftPM `embedInCode`), so the server serves it from anywhere without a resource bundle.
public enum OpenAPIDocument {
    /// The document's bytes.
    public static let bytes: [UInt8] = PackageResources.openapi_json

    static func response() -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The document text.
    public static var text: String { String(decoding: bytes, as: UTF8.self) }
}
