import Foundation
import HTTPTypes
import PasskeyStore
import Testing
import WebAuthn

@testable import PasskeyCore
@testable import PasskeyServer

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
            guard case .array(let statements) = links.json, let statement = statements.first else {
                Issue.record("no statements")
                return
            }
            #expect(
                statement["relation"]
                    == .array([
                        .string("delegate_permission/common.handle_all_urls"), .string("delegate_permission/common.get_login_creds"),
                    ]))
            #expect(statement["target"]?["namespace"] == .string("android_app"))
            #expect(statement["target"]?["sha256_cert_fingerprints"] == .array([.string(Self.fingerprint)]))

            let related = try await api.request(.get, "/.well-known/webauthn")
            #expect(related.json["origins"] == .array([.string("http://localhost:8080"), .string("https://example.co.uk")]))
            let endpoints = try await api.request(.get, "/.well-known/passkey-endpoints")
            #expect(endpoints.json["enroll"] != nil && endpoints.json["manage"] != nil)
        }
    }

    @Test func androidOriginsAreDerivedFromFingerprints() throws {
        let configuration = ServerConfiguration(
            rpID: "localhost", androidApps: [.init(packageName: "com.example", sha256CertFingerprints: [Self.fingerprint])])
        let origins = try configuration.androidOrigins()
        let bytes = try ServerConfiguration.fingerprintBytes(Self.fingerprint, app: "x")
        #expect(origins == ["android:apk-key-hash:" + Base64URLBytes(bytes).base64URL])
        #expect(throws: ConfigurationError.self) { try ServerConfiguration.fingerprintBytes("AB:CD", app: "x") }
    }

    @Test func theOpenAPIDocumentIsServedAndDescribesEveryRoute() async throws {
        let harness = try await ServerHarness {
            $0.metricsPublic = true
            $0.publicDirectory = nil
        }
        let document = try JSONReader.parse(OpenAPIDocument.bytes)
        guard case .object(let paths)? = document["paths"] else {
            Issue.record("no paths")
            return
        }
        // The routes the router really has (Hummingbird's own list), `:id` written `{id}`. The
        // console's own API (/admin/api, for its page; docs/admin.md) is not the apps' API.
        // With the tenants' administration, as a server that serves tenants has it.
        let settings = try ServerSettings(environment: ["PASSKEYD_RP_ID": "localhost"], file: nil)
        let tenants = TenantAdmin(store: harness.store, server: settings, namesFiles: false)
        let routes = PasskeyServer.router(service: harness.service, edge: harness.edge, tenants: tenants).routes.filter {
            !"\($0.path)".drop(while: { $0 == "/" }).hasPrefix("admin/api")
        }.map { route in
            (
                route.method,
                "\(route.path)".split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
                    .reduce("") { $0 + "/" + $1 }
            )
        }
        #expect(routes.count > 30)
        var documented: [String] = []
        for (path, item) in paths {
            if case .object(let operations) = item {
                documented += operations.keys.filter { $0 != "parameters" }.map { "\($0.uppercased()) \(path)" }
            }
        }
        // Every route the server answers is documented, and every documented route is served.
        #expect(
            Set(documented) == Set(routes.map { "\($0.0.rawValue) \($0.1)" }),
            "undocumented: \(Set(routes.map { "\($0.0.rawValue) \($0.1)" }).subtracting(documented)); not served: \(Set(documented).subtracting(routes.map { "\($0.0.rawValue) \($0.1)" }))"
        )
        try await harness.run(settings: settings) { api in
            let served = try await api.request(.get, "/openapi.json")
            #expect(served.status == .ok && served.bytes == OpenAPIDocument.bytes)
            for (method, path) in routes {
                let response = try await api.request(
                    method,
                    path.replacingOccurrences(of: "{id}", with: "AAAA").replacingOccurrences(of: "{passkey}", with: "AAAA")
                        .replacingOccurrences(of: "{session}", with: "AAAA").replacingOccurrences(of: "{name}", with: "nobody"),
                    body: method == .get ? nil : Array("{}".utf8))
                #expect(response.errorCode != "not_found" && response.errorCode != "method_not_allowed", "\(method) \(path) is not served")
                if let code = response.errorCode {
                    #expect(OpenAPIDocument.text.contains("\"\(code)\""), "error code \(code) is not documented")
                }
            }
        }
    }

    @Test func everyErrorCodeHasOneStatusAndIsDocumented() {
        let documented = OpenAPIDocument.text
        for code in PasskeyServiceError.Code.all {
            #expect(APIError.statuses[code] != nil, "\(code) has no status")
            #expect(documented.contains("`\(code.rawValue)`"), "\(code) is not documented")
        }
        #expect(APIError.statuses.count == PasskeyServiceError.Code.all.count)
        for error in [
            APIError.csrf, .bodyTooLarge, .internalError, .notFound, .methodNotAllowed, .badHTTP, .unsupportedMediaType, .crossSite,
            .metricsUnauthorized, .from(StoreError(.unavailable, "x")), .from(StoreError(.conflict, "x")),
        ] {
            #expect(documented.contains("`\(error.code)`"), "\(error.code) is not documented")
            #expect(Self.errorCodeEnum.contains(error.code), "\(error.code) is not in the Error schema's code enum")
        }
        // Clients (passkeyd.js, PasskeyClient) translate by the schema's enum: every code is in it.
        for code in PasskeyServiceError.Code.all {
            #expect(Self.errorCodeEnum.contains(code.rawValue), "\(code) is not in the Error schema's code enum")
        }
        // Ceremony refusals carry the library's codes (a misconfiguration answers internal_error).
        let library: [WebAuthnError.Code] = [
            .malformedCBOR, .malformedJSON, .malformedClientData, .malformedAuthenticatorData,
            .malformedAttestationObject, .malformedPublicKey, .malformedSignature, .malformedCredential, .typeMismatch,
            .challengeMismatch, .originNotAllowed, .crossOriginNotAllowed, .topOriginNotAllowed, .rpIDHashMismatch, .userNotPresent,
            .userNotVerified, .invalidBackupFlags, .backupEligibilityChanged, .unsupportedAlgorithm, .credentialIDMismatch,
            .credentialNotAllowed, .userHandleMismatch, .signatureInvalid, .counterRegression, .credentialIDTooLong,
            .unsupportedAttestationFormat, .attestationInvalid, .attestationUntrusted, .attestationNotAllowed, .authenticatorNotAllowed,
        ]
        for code in library {
            #expect(Self.errorCodeEnum.contains(code.rawValue), "\(code) is not in the Error schema's code enum")
        }
        // Audit kinds are one list too.
        #expect(Set(AuditEvent.Kind.allCases.map(\.rawValue)).count == AuditEvent.Kind.allCases.count)
    }

    /// `components.schemas.Error.properties.error.properties.code.enum` of the API document.
    static var errorCodeEnum: Set<String> {
        guard let document = try? JSONReader.parse(Array(OpenAPIDocument.text.utf8)),
            case .array(let codes)? = document["components"]?["schemas"]?["Error"]?["properties"]?["error"]?["properties"]?["code"]?["enum"]
        else { return [] }
        return Set(codes.compactMap { if case .string(let code) = $0 { code } else { nil } })
    }
}
