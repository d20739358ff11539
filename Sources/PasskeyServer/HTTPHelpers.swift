import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyCore
import WebAuthn

extension HTTPField.Name {
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}

enum HTTP {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return encoder
    }()

    /// A JSON response (never cached: API answers carry challenges and personal data).
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) throws -> Response {
        try json(bytes: jsonBytes(value), status: status, headers: extra)
    }

    /// A JSON response of bytes already written.
    static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) throws -> Response {
        var headers = extra
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// `value` as JSON: by ``JSONWriter`` when it can write itself, else by the encoder.
    static func jsonBytes(_ value: some Encodable) throws -> [UInt8] {
        if let writable = value as? any JSONWritable {
            var writer = JSONWriter()
            writable.write(to: &writer)
            return writer.bytes
        }
        return Array(try encoder.encode(value))
    }

    static func noContent(headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.cacheControl] = "no-store"
        return Response(status: .noContent, headers: headers)
    }

    /// Reads the body as a JSON object, within the size limit. An empty body reads as `{}`.
    static func jsonBody(_ request: Request, limit: Int) async throws -> JSONObject {
        let buffer: ByteBuffer
        do {
            buffer = try await request.body.collect(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.bodyTooLarge
        } catch is NIOTooManyBytesError {
            throw APIError.bodyTooLarge
        }
        let bytes = Array(buffer.readableBytesView)
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x0a || $0 == 0x0d || $0 == 0x09 }) {
            return try JSONObject(bytes: Array("{}".utf8))
        }
        do {
            return try JSONObject(bytes: bytes)
        } catch {
            throw PasskeyServiceError.invalid(.malformedJSON, error.reason)
        }
    }

    /// `Set-Cookie` for a session (or its removal): HttpOnly, SameSite, for `/`, host-only; on
    /// https origins also Secure with the `__Host-` name prefix.
    static func sessionCookie(_ configuration: EdgeConfiguration, token: String?, maxAge: Int) -> String {
        var cookie =
            "\(configuration.sessionCookieName)=\(token ?? ""); Path=/; Max-Age=\(token == nil ? 0 : maxAge); HttpOnly; "
            + "SameSite=\(configuration.cookieSameSite.rawValue)"
        if configuration.cookieSecure { cookie += "; Secure" }
        return cookie
    }
}
