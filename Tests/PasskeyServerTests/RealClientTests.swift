import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// What the web client of the widely copied guide (`PasskeyWebManager`, run unmodified in
/// Chromium by e2e/test_seed_client.py) needs from the server, and the authenticator policy as
/// the API shows it.
@Suite("Real clients and the authenticator policy over HTTP")
struct RealClientTests {
    /// `window.atob` decodes the standard alphabet only.
    static func atobDecodes(_ text: String) -> Bool {
        !text.contains("-") && !text.contains("_") && text.count % 4 != 1
    }

    @Test func challengesAndUserHandlesAreAlphabetNeutral() {
        for _ in 0..<2000 {
            let challenge = RelyingParty.makeChallenge()
            let handle = RelyingParty.makeUserHandle()
            #expect(challenge.count == 32 && handle.count == 64)
            #expect(Self.atobDecodes(Base64URLBytes(challenge).base64URL) && Self.atobDecodes(Base64URLBytes(handle).base64URL))
            #expect(Base64URLBytes(challenge).base64URL == Base64URLBytes(challenge).base64Unpadded)
        }
        // Not a constant: 2,000 draws are all different.
        #expect(Set((0..<2000).map { _ in RelyingParty.makeChallenge() }).count == 2000)
    }

    /// Every length is neutral; each character of the text is uniform over the 62 allowed ones
    /// (4,000 challenges: ~2,709 of each, 6 standard deviations either side), and the last,
    /// partial group takes all 16 of its values.
    @Test func alphabetNeutralBytesAreUniformOverTheAllowedCharacters() {
        for count in 1...70 {
            let bytes = RelyingParty.alphabetNeutralRandomBytes(count)
            #expect(bytes.count == count && Self.atobDecodes(Base64URLBytes(bytes).base64URL), "\(count)")
        }
        var full: [Character: Int] = [:]
        var last: [Character: Int] = [:]
        for _ in 0..<4000 {
            let text = Array(Base64URLBytes(RelyingParty.makeChallenge()).base64URL)
            #expect(text.count == 43)
            for character in text.dropLast() { full[character, default: 0] += 1 }
            last[text[42], default: 0] += 1
        }
        #expect(
            full.count == 62 && full.values.allSatisfy { (2400...3020).contains($0) }, "\(full.sorted { $0.value < $1.value }.prefix(3))")
        #expect(Set(last.keys) == Set("AEIMQUYcgkosw048"))
    }

    @Test func theGuideClientsRequestsWork() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var signedUp: [(String, SoftwareCredential, SoftwareAuthenticator)] = []
            for index in 0..<12 {
                var authenticator = SoftwareAuthenticator(seed: Array("guide-\(index)".utf8))
                // Authenticator-chosen IDs: long enough that most carry `-` or `_` in base64url.
                authenticator.credentialIDLength = 32
                let username = "guide\(index)"
                let options = try await api.post("/api/auth/register/options", ["username": username])
                #expect(Self.atobDecodes(options.json["challenge"]?.string ?? "-"))
                #expect(Self.atobDecodes(options.json["user"]?["id"]?.string ?? "-"))
                let (registration, credential) = try authenticator.register(
                    options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
                // {username, credential}, binary fields in standard base64 as `btoa` writes them.
                let body = """
                    {"username":"\(username)","credential":{"id":"\(registration.rawId.base64URL)","rawId":"\(registration.rawId.base64)",
                    "type":"public-key","response":{"clientDataJSON":"\(registration.response.clientDataJSON.base64)",
                    "attestationObject":"\(registration.response.attestationObject.base64)"},
                    "clientExtensionResults":{"credProps":{"rk":true},"largeBlob":{"supported":false}}}}
                    """
                let verify = try await api.request(.post, "/api/auth/register/verify", body: Array(body.utf8))
                #expect(verify.status == .ok && verify.json["verified"] == .bool(true), "\(verify.json)")
                signedUp.append((username, credential, authenticator))
            }
            var sawURLOnlyCharacters = false
            for (username, credential, authenticator) in signedUp {
                // GET ?username=: the IDs come in standard base64, which `atob` decodes to the same bytes.
                let options = try await api.request(.get, "/api/auth/authenticate/options?username=\(username)")
                #expect(options.status == .ok)
                let id = try #require(options.json["allowCredentials"]?.array?.first?["id"]?.string)
                #expect(Self.atobDecodes(id) && Self.atobDecodes(options.json["challenge"]?.string ?? "-"))
                #expect(Base64URLBytes(encoded: id)?.bytes == credential.id)
                if Base64URLBytes(credential.id).base64URL != id { sawURLOnlyCharacters = true }
                // The POST form stays Level 3 (base64url).
                let post = try await api.post("/api/auth/authenticate/options", ["username": username])
                #expect(post.json["allowCredentials"]?.array?.first?["id"]?.string == Base64URLBytes(credential.id).base64URL)

                // {username, assertion}, standard base64.
                let request = PublicKeyCredentialRequestOptionsJSON(
                    challenge: Base64URLBytes(encoded: options.json["challenge"]?.string ?? "")!, timeout: nil, rpId: "localhost",
                    allowCredentials: [.init(id: credential.id)], userVerification: "required")
                var signing = credential
                let assertion = try authenticator.authenticate(options: request, origin: ServerHarness.origin, credential: &signing)
                let body = """
                    {"username":"\(username)","assertion":{"id":"\(assertion.rawId.base64URL)","rawId":"\(assertion.rawId.base64)",
                    "type":"public-key","response":{"clientDataJSON":"\(assertion.response.clientDataJSON.base64)",
                    "authenticatorData":"\(assertion.response.authenticatorData.base64)","signature":"\(assertion.response.signature.base64)",
                    "userHandle":"\(assertion.response.userHandle?.base64 ?? "")"},"clientExtensionResults":{}}}
                    """
                let verify = try await api.request(.post, "/api/auth/authenticate/verify", body: Array(body.utf8))
                #expect(verify.status == .ok && verify.json["verified"] == .bool(true), "\(verify.json)")
                #expect(verify.json["user"]?["username"]?.string == username && verify.string("token") != nil)

                let check = try await api.request(.get, "/api/auth/passkeys/check?username=\(username)")
                #expect(check.status == .ok && check.json["hasPasskeys"] == .bool(true))
            }
            #expect(sawURLOnlyCharacters, "some of the 12 IDs must have needed the standard alphabet, or the test proves nothing")
            // Unknown: false. A password-only account: true, like a passkey account, since sign-up
            // says "taken" for both and telling them apart would single out password accounts.
            let unknown = try await api.request(.get, "/api/auth/passkeys/check?username=nobody")
            #expect(unknown.status == .ok && unknown.json == .object(["hasPasskeys": .bool(false)]))
            try await harness.store.createAccount(
                Account(
                    username: "passwordonly", displayName: "P", userHandle: RelyingParty.makeUserHandle(), createdAt: Date(),
                    passwordHash: "$2b$04$abcdefghijklmnopqrstuu5s2v8.iXieOjg/.AySBTTZIIVFJeBui"), audit: [])
            let passwordOnly = try await api.request(.get, "/api/auth/passkeys/check?username=passwordonly")
            #expect(passwordOnly.json == .object(["hasPasskeys": .bool(true)]))
            #expect(try await api.post("/api/auth/register/options", ["username": "passwordonly"]).errorCode == "username_taken")
            let invalid = try await api.request(.get, "/api/auth/passkeys/check?username=%20")
            #expect(invalid.status == .badRequest && invalid.errorCode == "invalid_username")
        }
    }

    /// The guide's client adding a second passkey while signed in: its register/options answer
    /// lists the first passkey in excludeCredentials, which it decodes with `atob`. A browser
    /// that finished a ceremony the guide's way carries the `passkeyd_atob` cookie and gets every
    /// binary member in standard base64; without the cookie the answer stays base64url; a Level
    /// 3 verify or a sign-out removes the cookie.
    @Test func theGuideClientAddsASecondPasskeyWhileSignedIn() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var sawURLOnlyCharacters = false
            for index in 0..<12 {
                var authenticator = SoftwareAuthenticator(seed: Array("second-\(index)".utf8))
                authenticator.credentialIDLength = 32
                let username = "second\(index)"
                let first = try await api.post("/api/auth/register/options", ["username": username])
                let (registration, credential) = try authenticator.register(
                    options: try first.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
                let body = """
                    {"username":"\(username)","credential":{"id":"\(registration.rawId.base64URL)","rawId":"\(registration.rawId.base64)",
                    "type":"public-key","response":{"clientDataJSON":"\(registration.response.clientDataJSON.base64)",
                    "attestationObject":"\(registration.response.attestationObject.base64)"},"clientExtensionResults":{}}}
                    """
                let verify = try await api.request(.post, "/api/auth/register/verify", body: Array(body.utf8))
                let token = try #require(verify.string("token"))
                let cookies = verify.headers[values: .setCookie]
                #expect(cookies.contains { $0.hasPrefix("passkeyd_atob=1;") && $0.contains("HttpOnly") && $0.contains("Path=/api/auth") })

                // Signed in, with the marker: every binary member decodes with atob to its bytes.
                let second = try await api.post(
                    "/api/auth/register/options", ["username": username], token: token, cookie: "passkeyd_atob=1")
                #expect(second.status == .ok, "\(second.json)")
                let excluded = try #require(second.json["excludeCredentials"]?.array?.first?["id"]?.string)
                #expect(Self.atobDecodes(excluded) && Base64URLBytes(encoded: excluded)?.bytes == credential.id)
                #expect(Self.atobDecodes(second.json["challenge"]?.string ?? "-"))
                #expect(Self.atobDecodes(second.json["user"]?["id"]?.string ?? "-"))
                if Base64URLBytes(credential.id).base64URL != excluded { sawURLOnlyCharacters = true }
                // Without it (a Level 3 client): base64url, as parseCreationOptionsFromJSON needs.
                let level3 = try await api.post("/api/auth/register/options", ["username": username], token: token)
                #expect(level3.json["excludeCredentials"]?.array?.first?["id"]?.string == Base64URLBytes(credential.id).base64URL)

                if index == 0 {
                    // A Level 3 verify in that browser removes the marker.
                    var device = SoftwareAuthenticator(seed: Array("second-device".utf8))
                    let (added, _) = try device.register(
                        options: try second.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
                    let finished = try await api.request(
                        .post, "/api/auth/register/verify",
                        body: Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: added))),
                        token: token, cookie: "passkeyd_atob=1")
                    #expect(finished.status == .ok, "\(finished.json)")
                    #expect(finished.headers[values: .setCookie].contains { $0.hasPrefix("passkeyd_atob=;") && $0.contains("Max-Age=0") })
                }
                // A sign-out removes it too.
                let out = try await api.request(.delete, "/api/auth/session", token: token, cookie: "passkeyd_atob=1")
                #expect(out.headers[values: .setCookie].contains { $0.hasPrefix("passkeyd_atob=;") && $0.contains("Max-Age=0") })
            }
            #expect(sawURLOnlyCharacters, "some of the 12 IDs must have needed the standard alphabet, or the test proves nothing")
        }
    }

    @Test func thePasskeyCheckSpendsTheSignUpBudgetAndRefusesCrossSiteRequests() async throws {
        let harness = try await ServerHarness { $0.rateLimits.perIP = 4 }
        try await harness.run(live: true) { api in
            var crossSite = HTTPFields()
            crossSite[HTTPField.Name("Sec-Fetch-Site")!] = "cross-site"
            let blocked = try await api.request(.get, "/api/auth/passkeys/check?username=ada", origin: nil, headers: crossSite)
            #expect(blocked.status == .forbidden && blocked.errorCode == "cross_site_request")
            for _ in 0..<2 {
                #expect(try await api.request(.get, "/api/auth/passkeys/check?username=ada").status == .ok)
                #expect(try await api.post("/api/auth/register/options", ["username": "ada"]).status == .ok)
            }
            let limited = try await api.request(.get, "/api/auth/passkeys/check?username=ada")
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited")
            #expect(try await api.post("/api/auth/register/options", ["username": "ada"]).status == .tooManyRequests)
        }
    }

    @Test func theAuthenticatorPolicyRefusesWithASentenceNamingWhatIsAccepted() async throws {
        let yubikey = AAGUID("ee882879-721c-4913-9775-3dfcce97072a")!
        let harness = try await ServerHarness {
            $0.attestationPolicy.allowedAAGUIDs = [yubikey]
            $0.attestationPolicy.requireDeviceBound = true
        }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("policy".utf8))
            do {
                _ = try await api.signUp("eve", authenticator: &authenticator)
                Issue.record("a model outside allowedAAGUIDs registered")
            } catch HarnessError.unexpected(let response) {
                #expect(response.status == .forbidden && response.errorCode == "authenticator_not_allowed")
                let message = response.json["error"]?["message"]?.string ?? ""
                #expect(message.contains("This site accepts passkeys from:") && message.contains("synced passkeys are not"), "\(message)")
            }
            // The allowed model, device-bound: registers.
            authenticator.aaguid = yubikey
            authenticator.backupEligible = false
            authenticator.backedUp = false
            let (_, _, response) = try await api.signUp("eve", authenticator: &authenticator)
            #expect(response.json["passkey"]?["backedUp"] == .bool(false))
            // Synced (backup eligible), even from the allowed model: refused.
            var synced = SoftwareAuthenticator(seed: Array("synced".utf8))
            synced.aaguid = yubikey
            await #expect(throws: HarnessError.self) { _ = try await api.signUp("mallory", authenticator: &synced) }
        }
    }

    @Test func userVerificationCanDifferPerCeremony() async throws {
        let harness = try await ServerHarness {
            $0.registrationUserVerification = .required
            $0.authenticationUserVerification = .preferred
        }
        try await harness.run { api in
            let registration = try await api.post("/api/auth/register/options", ["username": "uv"])
            #expect(registration.json["authenticatorSelection"]?["userVerification"]?.string == "required")
            let authentication = try await api.post("/api/auth/authenticate/options", [String: String]())
            #expect(authentication.json["userVerification"]?.string == "preferred")
            // A sign-in without UV is accepted under "preferred".
            var authenticator = SoftwareAuthenticator(seed: Array("uv".utf8))
            var (_, credential, _) = try await api.signUp("uv", authenticator: &authenticator)
            authenticator.userVerified = false
            let signIn = try await api.signIn(credential: &credential, authenticator: authenticator)
            #expect(signIn.status == .ok, "\(signIn.json)")
        }
    }
}
