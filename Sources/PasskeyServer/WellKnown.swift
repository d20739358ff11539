import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import PasskeyCore

/// The well-known files platforms fetch to tie apps and origins to this relying party. Each is
/// served as `application/json`, directly (no redirect: Apple's CDN and Google's verifier do not
/// follow them).
struct WellKnown: Sendable {
    let configuration: ServerConfiguration

    func register(on router: Router<PasskeyRequestContext>) {
        router.get(".well-known/apple-app-site-association") { _, _ in try Self.document(appleAppSiteAssociation) }
        router.get(".well-known/assetlinks.json") { _, _ in try Self.document(assetLinks) }
        router.get(".well-known/webauthn") { _, _ in try Self.document(relatedOrigins) }
        router.get(".well-known/passkey-endpoints") { _, _ in try Self.document(passkeyEndpoints) }
    }

    /// `{"webcredentials": {"apps": ["TEAMID.bundle.id"]}}` (Apple: Supporting associated domains).
    var appleAppSiteAssociation: [String: [String: [String]]] {
        ["webcredentials": ["apps": configuration.appleAppIDs]]
    }

    struct AssetStatement: Encodable {
        struct Target: Encodable {
            let namespace = "android_app"
            let package_name: String
            let sha256_cert_fingerprints: [String]
        }
        let relation = ["delegate_permission/common.handle_all_urls", "delegate_permission/common.get_login_creds"]
        let target: Target
    }

    /// Digital Asset Links statements for every configured Android app, fingerprints in the
    /// upper-case `AA:BB:…` form Google's validator expects.
    var assetLinks: [AssetStatement] {
        configuration.androidApps.map { app in
            AssetStatement(
                target: .init(
                    package_name: app.packageName, sha256_cert_fingerprints: app.sha256CertFingerprints.map(Self.canonicalFingerprint)))
        }
    }

    static func canonicalFingerprint(_ text: String) -> String {
        let hex = Array(text.replacingOccurrences(of: ":", with: "").uppercased())
        return stride(from: 0, to: hex.count, by: 2).map { String(hex[$0..<min($0 + 2, hex.count)]) }.joined(separator: ":")
    }

    /// WebAuthn Level 3 §5.11 related origins: `{"origins": [...]}`.
    var relatedOrigins: [String: [String]] {
        [
            "origins": configuration.relatedOrigins.isEmpty
                ? configuration.webOrigins
                : configuration.webOrigins + configuration.relatedOrigins.filter { !configuration.webOrigins.contains($0) }
        ]
    }

    /// W3C "A Well-Known URL for Passkey Endpoints": where to create and manage passkeys.
    var passkeyEndpoints: [String: String] {
        let base = configuration.webOrigins.first ?? ""
        return ["enroll": configuration.enrollURL ?? base + "/#account", "manage": configuration.manageURL ?? base + "/#account"]
    }

    static func document(_ value: some Encodable) throws -> Response {
        let data = try JSONEncoder.wellKnown.encode(value)
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "public, max-age=3600"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension JSONEncoder {
    static let wellKnown: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        return encoder
    }()
}
