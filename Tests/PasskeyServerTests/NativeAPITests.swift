import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

@Suite("Native API: sign-up, sign-in, passkeys, sessions")
struct NativeAPITests {
    @Test func signUpThenSignInBothWays() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("alice".utf8))
            var (token, credential, signUp) = try await api.signUp("alice", authenticator: &authenticator)
            #expect(signUp.json["user"]?["username"] == .string("alice"))
            #expect(signUp.json["passkey"]?["backedUp"] == .bool(true))
            let cookie = try #require(signUp.headers[.setCookie])
            #expect(cookie.contains("passkeyd_session=\(token)") && cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"))

            let session = try await api.request(.get, "/api/auth/session", token: token)
            #expect(session.status == .ok && session.json["user"]?["username"] == .string("alice"))

            // Usernameless (discoverable, AutoFill) sign-in.
            let discoverable = try await api.signIn(credential: &credential, authenticator: authenticator)
            #expect(discoverable.status == .ok, "\(discoverable.json)")
            #expect(discoverable.json["user"]?["username"] == .string("alice"))
            // Username-first sign-in: allowCredentials names the passkey.
            let options = try await api.post("/api/auth/authenticate/options", ["username": "Alice"])
            #expect(
                options.json["allowCredentials"]
                    == .array([
                        .object([
                            "type": .string("public-key"), "id": .string(Base64URLBytes(credential.id).base64URL),
                            "transports": .array([.string("internal"), .string("hybrid")]),
                        ])
                    ]))
            let usernameFirst = try await api.signIn(username: "alice", credential: &credential, authenticator: authenticator)
            #expect(usernameFirst.status == .ok)
            token = try #require(usernameFirst.string("token"))
            // The stored counter followed the authenticator.
            let stored = try await harness.store.passkey(credentialID: credential.id)
            #expect(stored?.signCount == 2 && stored?.lastUsedAt != nil)
        }
    }

    /// Signed in, register/options adds a passkey to this account; a sign-up for another name
    /// (a form left open, the Back button) is refused instead of adding to the wrong account.
    @Test func aSignUpForAnotherNameWhileSignedInIsRefused() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (token, _, _) = try await api.signUp("alice", authenticator: &authenticator)
            let other = try await api.registrationOptions(username: "bob", token: token)
            #expect(other.status == .conflict && other.errorCode == "already_signed_in")
            // The account's own name (any case), or none: a passkey for this account.
            for name in ["alice", "ALICE", nil] {
                let own = try await api.registrationOptions(username: name, token: token)
                #expect(own.status == .ok, "\(String(describing: name))")
                #expect(own.json["user"]?["name"] == .string("alice"))
            }
        }
    }

    @Test func passkeyManagement() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var phone = SoftwareAuthenticator(seed: Array("phone".utf8))
            let (token, first, _) = try await api.signUp("bob", authenticator: &phone)
            // Add a second passkey while signed in (a security key: device-bound).
            var key = SoftwareAuthenticator(seed: Array("key".utf8))
            key.backupEligible = false
            key.backedUp = false
            let options = try await api.registrationOptions(username: nil, token: token)
            #expect(
                options.json["excludeCredentials"]
                    == .array([
                        .object([
                            "type": .string("public-key"), "id": .string(Base64URLBytes(first.id).base64URL),
                            "transports": .array([.string("internal"), .string("hybrid")]),
                        ])
                    ]))
            #expect(options.json["user"]?["name"] == .string("bob"))
            let (registration, second) = try key.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let added = try await api.post(
                "/api/auth/register/verify", APIClient.CredentialBody(credential: registration, name: "YubiKey"), token: token)
            #expect(added.status == .ok && added.json["passkey"]?["name"] == .string("YubiKey") && added.json["token"] == nil)
            #expect(added.json["passkey"]?["deviceBound"] == .bool(true))

            var list = try await api.request(.get, "/api/auth/passkeys", token: token)
            #expect(list.json["passkeys"].map { if case .array(let a) = $0 { a.count } else { 0 } } == 2)
            // Whose list it is, from the same read (the browser's signalAllAcceptedCredentials).
            let session = try await api.request(.get, "/api/auth/session", token: token)
            #expect(list.json["userHandle"] != nil && list.json["userHandle"] == session.json["user"]?["userHandle"])
            #expect(list.json["rpId"] == session.json["rpId"])

            let secondID = Base64URLBytes(second.id).base64URL
            let renamed = try await api.request(
                .patch, "/api/auth/passkeys/\(secondID)", body: Array(#"{"name":"Keychain fob"}"#.utf8), token: token)
            #expect(renamed.status == .ok && renamed.json["name"] == .string("Keychain fob"))
            let badName = try await api.request(.patch, "/api/auth/passkeys/\(secondID)", body: Array(#"{"name":"  "}"#.utf8), token: token)
            #expect(badName.errorCode == "invalid_name")

            let deleted = try await api.request(.delete, "/api/auth/passkeys/\(secondID)", token: token)
            #expect(deleted.status == .noContent)
            let again = try await api.request(.delete, "/api/auth/passkeys/\(secondID)", token: token)
            #expect(again.status == .notFound && again.errorCode == "passkey_not_found")
            // The last way in cannot be deleted.
            let last = try await api.request(.delete, "/api/auth/passkeys/\(Base64URLBytes(first.id).base64URL)", token: token)
            #expect(last.status == .conflict && last.errorCode == "last_passkey")
            list = try await api.request(.get, "/api/auth/passkeys", token: token)
            #expect(list.json["passkeys"].map { if case .array(let a) = $0 { a.count } else { 0 } } == 1)
        }
    }

    @Test func signOutRevokesTheSession() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (token, _, _) = try await api.signUp("carol", authenticator: &authenticator)
            let out = try await api.request(.delete, "/api/auth/session", token: token)
            #expect(out.status == .noContent && out.headers[.setCookie]?.contains("Max-Age=0") == true)
            let after = try await api.request(.get, "/api/auth/session", token: token)
            #expect(after.status == .unauthorized && after.errorCode == "not_signed_in")
            #expect(try await api.request(.get, "/api/auth/passkeys").errorCode == "not_signed_in")
            #expect(try await api.request(.get, "/api/auth/session", token: "garbage").errorCode == "not_signed_in")
        }
    }

    @Test func cookieSessionsNeedAnAllowedOriginToChangeState() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (token, _, _) = try await api.signUp("dave", authenticator: &authenticator)
            let cookie = "passkeyd_session=\(token)"
            #expect(try await api.request(.get, "/api/auth/session", cookie: cookie, origin: nil).status == .ok)
            let forged = try await api.request(.delete, "/api/auth/session", cookie: cookie, origin: "https://evil.example")
            #expect(forged.status == .forbidden && forged.errorCode == "csrf_origin_mismatch")
            let missing = try await api.request(.delete, "/api/auth/session", cookie: cookie, origin: nil)
            #expect(missing.errorCode == "csrf_origin_mismatch")
            #expect(try await api.request(.delete, "/api/auth/session", cookie: cookie).status == .noContent)
        }
    }

    @Test func unknownUsernamesLookLikeKnownOnes() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            _ = try await api.signUp("erin", authenticator: &authenticator)
            let known = try await api.post("/api/auth/authenticate/options", ["username": "erin"])
            let unknown = try await api.post("/api/auth/authenticate/options", ["username": "mallory"])
            let unknownAgain = try await api.request(.get, "/api/auth/authenticate/options?username=mallory")
            #expect(known.status == .ok && unknown.status == .ok)
            func shape(_ r: APIResponse) -> [String] {
                guard case .object(let o) = r.json else { return [] }
                return o.keys.sorted()
            }
            #expect(shape(known) == shape(unknown))
            guard case .array(let allow)? = unknown.json["allowCredentials"],
                case .array(let allowAgain)? = unknownAgain.json["allowCredentials"]
            else {
                Issue.record("allowCredentials missing")
                return
            }
            // The same decoy both times (the GET form writes IDs in standard base64: compare bytes).
            func ids(_ list: [JSONValue]) -> [[UInt8]?] { list.map { Base64URLBytes(encoded: $0["id"]?.string ?? "")?.bytes } }
            #expect(allow.count == 1 && ids(allow) == ids(allowAgain) && ids(allow).first??.isEmpty == false)
        }
    }

    @Test func usernamesAreUniqueWithoutRegardToCase() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            _ = try await api.signUp("Frank", authenticator: &authenticator)
            let taken = try await api.registrationOptions(username: "frank")
            #expect(taken.status == .conflict && taken.errorCode == "username_taken")
            #expect(try await api.registrationOptions(username: "").errorCode == "invalid_username")
            #expect(try await api.registrationOptions(username: "has space").errorCode == "invalid_username")
            #expect(try await api.registrationOptions(username: String(repeating: "x", count: 65)).errorCode == "invalid_username")
        }
    }

    @Test func twoSignUpsRacingForOneUsernameCreateOneAccount() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var first = SoftwareAuthenticator(seed: [1])
            var second = SoftwareAuthenticator(seed: [2])
            let optionsA = try await api.registrationOptions(username: "grace")
            let optionsB = try await api.registrationOptions(username: "grace")
            let (a, _) = try first.register(
                options: try optionsA.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let (b, _) = try second.register(
                options: try optionsB.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            #expect(try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: a)).status == .ok)
            let loser = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: b))
            #expect(loser.status == .conflict && loser.errorCode == "username_taken")
        }
    }

    @Test func hintsComeFromTheConfigurationOrTheRequest() async throws {
        let harness = try await ServerHarness { $0.hints = ["security-key"] }
        try await harness.run { api in
            let configured = try await api.post("/api/auth/authenticate/options", [String: String]())
            #expect(configured.json["hints"] == .array([.string("security-key")]))
            struct Body: Encodable {
                var username: String?
                var hints: [String]
            }
            let asked = try await api.post("/api/auth/register/options", Body(username: "hal", hints: ["hybrid", "client-device"]))
            #expect(asked.json["hints"] == .array([.string("hybrid"), .string("client-device")]))
            let bad = try await api.post("/api/auth/authenticate/options", Body(hints: ["usb"]))
            #expect(bad.status == .badRequest && bad.errorCode == "invalid_hints")
            let twice = try await api.post("/api/auth/authenticate/options", Body(hints: ["hybrid", "hybrid"]))
            #expect(twice.errorCode == "invalid_hints")
        }
        #expect(throws: ConfigurationError.self) { try ServerConfiguration(hints: ["usb"]).relyingParty() }
    }
}
