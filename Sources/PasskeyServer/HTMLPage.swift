import HTTPTypes
import Hummingbird
import PasskeyCore

/// The pages passkeyd writes itself (the OpenID provider's errors, "Sign out?", "Signed out"):
/// one fixed layout, and every text put in it through ``escape(_:)``, so nothing a request
/// carries becomes markup.
enum HTMLPage {
    /// `&`, `<`, `>`, `"` and `'` as character references: safe in element text and in quoted
    /// attribute values alike.
    static func escape(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: "&#39;".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }

    /// The page: a title and one paragraph, in the web UI's stylesheet.
    static func render(title: String, message: String) -> String {
        """
        <!doctype html><html lang="en"><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
        <title>\(escape(title))</title><link rel="stylesheet" href="/app.css">
        <main><section class="card"><h1>\(escape(title))</h1><p>\(escape(message))</p></section></main></html>
        """
    }

    /// `page` as an answer: HTML, never cached.
    static func response(_ page: OpenIDPage, status: HTTPResponse.Status, headers extra: HTTPFields = [:]) -> Response {
        var headers = extra
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(
            status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: render(title: page.title, message: page.message))))
    }
}
