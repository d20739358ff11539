import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// The reference Vapor server's iOS and Android apps, replayed byte for byte against passkeyd.
@Suite("Compatibility API for the reference apps")
struct CompatibilityTests {
    static let releaseKey = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"
    static let debugKey = "01:02:03:04:05:06:07:08:09:0A:0B:0C:0D:0E:0F:10:11:12:13:14:15:16:17:18:19:1A:1B:1C:1D:1E:1F:20"
    static func androidOrigin(_ fingerprint: String) -> String {
        "android:apk-key-hash:" + Base64URLBytes((try? ServerConfiguration.fingerprintBytes(fingerprint, app: "")) ?? []).base64URL
    }

    static func harness() async throws -> ServerHarness {
        try await ServerHarness {
            $0.androidApps = [
                .init(packageName: "com.example.passkeys", sha256CertFingerprints: [releaseKey, debugKey]),
                .init(packageName: "com.example.other", sha256CertFingerprints: [debugKey.replacingOccurrences(of: "01:", with: "FF:")]),
            ]
        }
    }

    /// What the apps build from `/signup`: they hand the authenticator the UTF-8 bytes of the
    /// challenge and user id *strings*.
    static func appOptions(_ signup: APIResponse) throws -> (PublicKeyCredentialCreationOptionsJSON, userId: String) {
        guard let made = ReferenceApps.creationOptions(fromSignup: signup.json) else { throw HarnessError.unexpected(signup) }
        return made
    }

    static func appRequest(_ options: APIResponse) throws -> PublicKeyCredentialRequestOptionsJSON {
        guard let made = ReferenceApps.requestOptions(from: options.json) else { throw HarnessError.unexpected(options) }
        return made
    }

    static func iOSBody(_ registration: RegistrationResponseJSON, userId: String) -> [UInt8] {
        ReferenceApps.iOSBody(registration, userId: userId)
    }
    static func iOSBody(_ assertion: AuthenticationResponseJSON) -> [UInt8] { ReferenceApps.iOSBody(assertion) }
    static func rewriteFlags(_ registration: inout RegistrationResponseJSON) throws { try ReferenceApps.rewriteFlags(&registration) }

    @Test func theIOSAppSignsUpAndSignsIn() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            let signup = try await api.request(.get, "/signup?username=ios-user", origin: nil)
            #expect(signup.status == .ok)
            guard case .object(let top) = signup.json, case .object(let creation)? = top["challenge"] else {
                Issue.record("shape")
                return
            }
            #expect(top.keys.sorted() == ["challenge", "userId"])
            #expect(creation.keys.sorted() == ["attestation", "challenge", "pubKeyCredParams", "rp", "timeout", "user"])

            var authenticator = SoftwareAuthenticator(seed: Array("ios".utf8))
            let (appOptions, userId) = try Self.appOptions(signup)
            var (registration, credential) = try authenticator.register(options: appOptions, origin: ServerHarness.origin)
            let made = try await api.request(
                .post, "/makeCredential?userId=\(userId)", body: Self.iOSBody(registration, userId: userId), origin: nil)
            #expect(made.status == .ok && made.json == .object([:]), "\(made.json)")
            #expect(try await harness.store.account(username: "ios-user")?.id.uuidString == userId)
            #expect(try await api.request(.get, "/signup?username=ios-user", origin: nil).errorCode == "username_taken")

            let options = try await api.request(.get, "/authenticate?username=ios-user", origin: nil)
            guard case .object(let requestKeys) = options.json else {
                Issue.record("shape")
                return
            }
            #expect(requestKeys.keys.sorted() == ["allowCredentials", "challenge", "rpId", "timeout", "userVerification"])
            let assertion = try authenticator.authenticate(
                options: try Self.appRequest(options), origin: ServerHarness.origin, credential: &credential)
            let signedIn = try await api.request(.post, "/authenticate?username=ios-user", body: Self.iOSBody(assertion), origin: nil)
            #expect(signedIn.status == .ok && signedIn.string("token") != nil, "\(signedIn.json)")
            // The token works on the native API; the counter is real.
            #expect(try await api.request(.get, "/api/auth/session", token: signedIn.string("token")).status == .ok)
            #expect(try await harness.store.passkey(credentialID: credential.id)?.signCount == 1)
            // Single use: the same assertion again is refused.
            #expect(
                try await api.request(.post, "/authenticate?username=ios-user", body: Self.iOSBody(assertion), origin: nil).errorCode
                    == "challenge_unknown")
            _ = registration
        }
    }

    @Test func theAndroidAppWithItsFlagRewriteSignsUpAndSignsIn() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            let origin = Self.androidOrigin(Self.debugKey)
            var authenticator = SoftwareAuthenticator(seed: Array("android".utf8))
            let signup = try await api.request(.get, "/signup?username=droid", headers: [.userAgent: "okhttp/4.12.0"])
            let (appOptions, userId) = try Self.appOptions(signup)
            let extensions = CBORValue.map([CBORMapEntry(.text("credProtect"), .unsigned(1))])
            var (registration, credential) = try authenticator.register(options: appOptions, origin: origin, extensions: extensions)
            try Self.rewriteFlags(&registration)
            let made = try await api.post("/makeCredential?userId=\(userId)", registration, origin: nil)
            #expect(made.status == .ok, "\(made.json)")

            let options = try await api.request(.get, "/authenticate?username=droid", headers: [.userAgent: "okhttp/4.12.0"])
            let assertion = try authenticator.authenticate(options: try Self.appRequest(options), origin: origin, credential: &credential)
            #expect(try await api.post("/authenticate?username=droid", assertion, origin: nil).status == .ok)
        }
    }

    @Test func theRewriteIsToleratedOnlyForCompatibilityRegistrations() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: [7])
            let extensions = CBORValue.map([CBORMapEntry(.text("credProtect"), .unsigned(1))])
            // Native registration with the rewritten flags: malformed.
            let native = try await api.registrationOptions(username: "strict")
            var (registration, _) = try authenticator.register(
                options: try native.decode(PublicKeyCredentialCreationOptionsJSON.self),
                origin: ServerHarness.origin, extensions: extensions)
            try Self.rewriteFlags(&registration)
            let refused = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(refused.errorCode == "malformed_authenticator_data")
            // Assertions stay strict on the compatibility routes: an extension map with ED clear fails.
            let signup = try await api.request(.get, "/signup?username=strict2", origin: nil)
            let (appOptions, userId) = try Self.appOptions(signup)
            var (compat, credential) = try authenticator.register(options: appOptions, origin: ServerHarness.origin)
            #expect(try await api.post("/makeCredential?userId=\(userId)", compat, origin: nil).status == .ok)
            let options = try await api.request(.get, "/authenticate?username=strict2", origin: nil)
            var assertion = try authenticator.authenticate(
                options: try Self.appRequest(options), origin: ServerHarness.origin, credential: &credential)
            assertion.response.authenticatorData.bytes += CBORWriter.encode(extensions)
            #expect(
                try await api.post("/authenticate?username=strict2", assertion, origin: nil).errorCode == "malformed_authenticator_data")
            _ = compat
        }
    }

    @Test func compatibilityPayloadsAreRejectedOnTheNativeRoutes() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: [8])
            let signup = try await api.request(.get, "/signup?username=mixed", origin: nil)
            let (appOptions, userId) = try Self.appOptions(signup)
            let (registration, _) = try authenticator.register(options: appOptions, origin: ServerHarness.origin)
            let native = try await api.request(
                .post, "/api/auth/register/verify",
                body: Array(#"{"credential":"#.utf8) + Self.iOSBody(registration, userId: userId) + Array("}".utf8))
            #expect(native.errorCode == "ceremony_mismatch")
            // A native challenge answered the compatibility way (UTF-8 of the string) is unknown.
            let options = try await api.registrationOptions(username: "mixed2")
            guard case .string(let challenge)? = options.json["challenge"] else {
                Issue.record("no challenge")
                return
            }
            var quirky = try options.decode(PublicKeyCredentialCreationOptionsJSON.self)
            quirky.challenge = Base64URLBytes(Array(challenge.utf8))
            let (misencoded, _) = try authenticator.register(options: quirky, origin: ServerHarness.origin)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: misencoded)).errorCode
                    == "challenge_unknown")
            // And another sign-up's userId cannot claim this ceremony.
            let other = try await api.request(.get, "/signup?username=mixed3", origin: nil)
            let (otherOptions, _) = try Self.appOptions(other)
            let (stolen, _) = try authenticator.register(options: otherOptions, origin: ServerHarness.origin)
            #expect(try await api.post("/makeCredential?userId=\(userId)", stolen, origin: nil).errorCode == "account_mismatch")
        }
    }

    @Test func unknownUsersAndDisabledRoutes() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            // Decoy options, as on the native API (a 400 told passkey accounts from the rest).
            let unknown = try await api.request(.get, "/authenticate?username=nobody", origin: nil)
            guard case .array(let allow)? = unknown.json["allowCredentials"] else {
                Issue.record("\(unknown.json)")
                return
            }
            #expect(unknown.status == .ok && allow.count == 1)
        }
        let off = try await ServerHarness { $0.compatibilityRoutes = false }
        try await off.run { api in
            let signup = try await api.request(.get, "/signup?username=x", origin: nil)
            let authenticate = try await api.request(.get, "/authenticate?username=x", origin: nil)
            #expect(signup.status == .notFound && authenticate.status == .notFound)
        }
    }

    @Test func twoAndroidAppsAndTheWebShareOneRelyingParty() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            let origins = [
                ServerHarness.origin, Self.androidOrigin(Self.releaseKey), Self.androidOrigin(Self.debugKey),
                Self.androidOrigin(Self.debugKey.replacingOccurrences(of: "01:", with: "FF:")),
            ]
            for (index, origin) in origins.enumerated() {
                var authenticator = SoftwareAuthenticator(seed: [UInt8(index)])
                let options = try await api.registrationOptions(username: "user\(index)")
                let (registration, _) = try authenticator.register(
                    options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: origin)
                let answer = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
                #expect(answer.status == .ok, "\(origin): \(answer.json)")
            }
            var stranger = SoftwareAuthenticator(seed: [99])
            let options = try await api.registrationOptions(username: "stranger")
            let unknownApp = "android:apk-key-hash:" + Base64URLBytes(Array(repeating: 7, count: 32)).base64URL
            let (registration, _) = try stranger.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: unknownApp)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration)).errorCode
                    == "origin_not_allowed")
        }
    }
}
