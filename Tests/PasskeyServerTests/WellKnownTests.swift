import Foundation
import HTTPTypes
import PasskeyServer
import Testing
import WebAuthn

@Suite("Well-known files and the API description")
struct WellKnownTests {
    static let fingerprint = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"

    @Test func wellKnownFilesComeFromConfiguration() async throws {
        let harness = try await ServerHarness {
            $0.appleAppIDs = ["ABCDE12345.com.example.app"]
            $0.androidApps = [.init(packageName: "com.example.app", sha256CertFingerprints: [Self.fingerprint.lowercased()])]
            $0.relatedOrigins = ["https://example.co.uk"]
        }
        try await harness.run { api in
            let aasa = try await api.request(.get, "/.well-known/apple-app-site-association")
            #expect(aasa.status == .ok && aasa.headers[.contentType] == "application/json")
            #expect(aasa.json == .object(["webcredentials": .object(["apps": .array([.string("ABCDE12345.com.example.app")])])]))

            let links = try await api.request(.get, "/.well-known/assetlinks.json")
            #expect(links.headers[.contentType] == "application/json")
            guard case .array(let statements) = links.json, let statement = statements.first else { Issue.record("no statements"); return }
            #expect(statement["relation"] == .array([.string("delegate_permission/common.handle_all_urls"), .string("delegate_permission/common.get_login_creds")]))
            #expect(statement["target"]?["namespace"] == .string("android_app"))
            #expect(statement["target"]?["sha256_cert_fingerprints"] == .array([.string(Self.fingerprint)]))

            let related = try await api.request(.get, "/.well-known/webauthn")
            #expect(related.json["origins"] == .array([.string("http://localhost:8080"), .string("https://example.co.uk")]))
            let endpoints = try await api.request(.get, "/.well-known/passkey-endpoints")
            #expect(endpoints.json["enroll"] != nil && endpoints.json["manage"] != nil)
        }
    }

    @Test func androidOriginsAreDerivedFromFingerprints() throws {
        let configuration = ServerConfiguration(rpID: "localhost", androidApps: [.init(packageName: "com.example", sha256CertFingerprints: [Self.fingerprint])])
        let origins = try configuration.androidOrigins()
        let bytes = try ServerConfiguration.fingerprintBytes(Self.fingerprint, app: "x")
        #expect(origins == ["android:apk-key-hash:" + Base64URLBytes(bytes).base64URL])
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.fingerprintBytes("AB:CD", app: "x") }
    }

    @Test func theOpenAPIDocumentIsServedAndDescribesEveryRoute() async throws {
        let harness = try await ServerHarness { $0.metricsPublic = true }
        let docURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/openapi.json")
        let onDisk = try String(contentsOf: docURL, encoding: .utf8)
        #expect(OpenAPIDocument.text.trimmingCharacters(in: .whitespacesAndNewlines) == onDisk.trimmingCharacters(in: .whitespacesAndNewlines),
                "run scripts/gen-openapi after editing docs/openapi.json")
        let document = try JSONReader.parse(Array(onDisk.utf8))
        guard case .object(let paths)? = document["paths"] else { Issue.record("no paths"); return }
        // Every route the server answers is documented, and every documented route answers.
        let routes: [(HTTPRequest.Method, String)] = [
            (.post, "/api/auth/register/options"), (.post, "/api/auth/register/verify"), (.post, "/api/auth/authenticate/options"),
            (.get, "/api/auth/authenticate/options"), (.post, "/api/auth/authenticate/verify"), (.get, "/api/auth/session"),
            (.delete, "/api/auth/session"), (.get, "/api/auth/passkeys"), (.patch, "/api/auth/passkeys/{id}"), (.delete, "/api/auth/passkeys/{id}"),
            (.post, "/api/auth/password/sign-in"), (.delete, "/api/auth/password"), (.post, "/api/auth/recovery-codes"),
            (.post, "/api/auth/recovery/sign-in"), (.post, "/api/auth/recovery/link"), (.post, "/api/auth/password"),
            (.get, "/api/auth/sessions"), (.post, "/api/auth/sessions/revoke-others"), (.delete, "/api/auth/sessions/{id}"),
            (.get, "/.well-known/apple-app-site-association"), (.get, "/.well-known/assetlinks.json"), (.get, "/.well-known/webauthn"),
            (.get, "/.well-known/passkey-endpoints"), (.get, "/openapi.json"), (.get, "/healthz"), (.get, "/readyz"), (.get, "/metrics"),
            (.get, "/signup"), (.post, "/makeCredential"), (.get, "/authenticate"), (.post, "/authenticate"),
        ]
        var documented = 0
        for (_, item) in paths { if case .object(let operations) = item { documented += operations.keys.filter { $0 != "parameters" }.count } }
        #expect(documented == routes.count)
        try await harness.run { api in
            for (method, path) in routes {
                #expect(paths[path]?[method.rawValue.lowercased()] != nil, "\(method) \(path) is not in docs/openapi.json")
                let response = try await api.request(method, path.replacingOccurrences(of: "{id}", with: "AAAA"), body: method == .get ? nil : Array("{}".utf8))
                #expect(response.errorCode != "not_found" && response.errorCode != "method_not_allowed", "\(method) \(path) is not served")
                if let code = response.errorCode {
                    #expect(OpenAPIDocument.text.contains("\"\(code)\""), "error code \(code) is not documented")
                }
            }
        }
    }
}
