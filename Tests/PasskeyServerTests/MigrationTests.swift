import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// From passwords to passkeys and back in, through the HTTP API.
@Suite("Passwords, upgrade to passkeys, recovery")
struct MigrationTests {
    static func harness(perAccount: Int = 30) async throws -> ServerHarness {
        try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.rateLimits = .init(windowSeconds: 60, perIP: 1000, perAccount: perAccount)
        }
    }

    static func importUser(_ harness: ServerHarness, _ username: String, password: String) async throws -> Account {
        let account = Account(
            username: username, displayName: username.capitalized, userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(try await harness.store.importAccounts([(account, Bcrypt(hashing: password, cost: 4).text)]) == [true])
        return account
    }

    static func addPasskey(_ api: APIClient, token: String, authenticator: inout SoftwareAuthenticator, replaces: String? = nil)
        async throws
        -> (APIResponse, SoftwareCredential)
    {
        let options = try await api.post("/api/auth/register/options", [String: String](), token: token)
        let (registration, credential) = try authenticator.register(
            options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self),
            origin: ServerHarness.origin)
        struct Body: Encodable {
            let credential: RegistrationResponseJSON
            let replaces: String?
        }
        return (
            try await api.post("/api/auth/register/verify", Body(credential: registration, replaces: replaces), token: token), credential
        )
    }

    @Test func aPasswordAccountSignsInUpgradesAndTurnsThePasswordOff() async throws {
        let harness = try await Self.harness()
        let grace = try await Self.importUser(harness, "grace", password: "cobol 1959")
        try await harness.run { api in
            let wrong = try await api.post("/api/auth/password/sign-in", ["username": "grace", "password": "fortran"])
            let unknown = try await api.post("/api/auth/password/sign-in", ["username": "nobody", "password": "fortran"])
            #expect(wrong.status == .unauthorized && wrong.errorCode == "invalid_credentials")
            #expect(unknown.status == wrong.status && unknown.bytes == wrong.bytes, "unknown users answer exactly like wrong passwords")
            #expect(try await api.post("/api/auth/password/sign-in", ["username": "grace"]).errorCode == "invalid_password")

            let signedIn = try await api.post("/api/auth/password/sign-in", ["username": "GRACE", "password": "cobol 1959"])
            #expect(
                signedIn.status == .ok && signedIn.json["canCreatePasskey"] == .bool(true) && signedIn.json["method"] == .string("password")
            )
            #expect(signedIn.headers[.setCookie]?.contains("HttpOnly") == true)
            let token = try #require(signedIn.string("token"))
            let session = try await api.request(.get, "/api/auth/session", token: token)
            #expect(session.json["hasPassword"] == .bool(true) && session.json["recoveryCodesLeft"] == .number(0))

            // The password stays until there is a passkey.
            let early = try await api.request(.delete, "/api/auth/password", token: token)
            #expect(early.status == .conflict && early.errorCode == "no_passkey")
            var authenticator = SoftwareAuthenticator(seed: Array("grace".utf8))
            let (added, credential) = try await Self.addPasskey(api, token: token, authenticator: &authenticator)
            #expect(added.status == .ok)
            let again = try await api.post("/api/auth/password/sign-in", ["username": "grace", "password": "cobol 1959"])
            #expect(again.json["canCreatePasskey"] == .bool(false))
            #expect(try await api.request(.delete, "/api/auth/password", token: token).status == .noContent)
            #expect(
                try await api.post("/api/auth/password/sign-in", ["username": "grace", "password": "cobol 1959"]).errorCode
                    == "invalid_credentials")
            var signingIn = credential
            #expect(try await api.signIn(credential: &signingIn, authenticator: authenticator).status == .ok)

            let kinds = try await harness.store.auditEvents(accountID: grace.id, limit: 20).reversed().map {
                "\($0.kind):\($0.detail ?? "")"
            }
            #expect(
                kinds == [
                    "account_imported:", "sign_in_failed:invalid_credentials", "sign_in:password", "passkey_added:Passkey",
                    "sign_in:password",
                    "password_removed:", "sign_in_failed:invalid_credentials", "sign_in:passkey",
                ], "\(kinds)")
        }
    }

    @Test func passwordAttemptsAreLimitedPerAccount() async throws {
        let harness = try await Self.harness(perAccount: 3)
        _ = try await Self.importUser(harness, "alan", password: "enigma")
        try await harness.run { api in
            for _ in 0..<3 {
                #expect(
                    try await api.post("/api/auth/password/sign-in", ["username": "alan", "password": "bombe"]).status == .unauthorized)
            }
            let limited = try await api.post("/api/auth/password/sign-in", ["username": "alan", "password": "enigma"])
            #expect(limited.status == .tooManyRequests && limited.errorCode == "rate_limited" && limited.headers[.retryAfter] != nil)
            harness.clock.advance(61)
            #expect(try await api.post("/api/auth/password/sign-in", ["username": "alan", "password": "enigma"]).status == .ok)
        }
    }

    @Test func recoveryCodesAreSingleUseAndEndOtherSessions() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("lin".utf8))
            let (token, _, _) = try await api.signUp("lin", authenticator: &authenticator)
            let made = try await api.post("/api/auth/recovery-codes", [String: String](), token: token)
            guard case .array(let list)? = made.json["codes"] else {
                Issue.record("no codes: \(made.json)")
                return
            }
            let codes = list.compactMap { if case .string(let code) = $0 { return code } else { return nil } }
            #expect(codes.count == 10 && Set(codes).count == 10 && codes.allSatisfy { $0.count == 14 })
            #expect(try await api.request(.get, "/api/auth/session", token: token).json["recoveryCodesLeft"] == .number(10))

            #expect(
                try await api.post("/api/auth/recovery/sign-in", ["username": "lin", "code": "aaaa-bbbb-cccc"]).errorCode
                    == "invalid_recovery_code")
            #expect(
                try await api.post("/api/auth/recovery/sign-in", ["username": "nobody", "code": codes[0]]).errorCode
                    == "invalid_recovery_code")
            // Typed in capitals and without dashes: still the code.
            let typed = codes[0].uppercased().replacingOccurrences(of: "-", with: "")
            let recovered = try await api.post("/api/auth/recovery/sign-in", ["username": "lin", "code": typed])
            #expect(
                recovered.status == .ok && recovered.json["recovery"] == .bool(true) && recovered.json["method"] == .string("recovery_code")
            )
            let newToken = try #require(recovered.string("token"))
            #expect(try await api.request(.get, "/api/auth/session", token: token).status == .unauthorized, "other sessions end")
            #expect(try await api.request(.get, "/api/auth/session", token: newToken).json["recoveryCodesLeft"] == .number(9))
            #expect(
                try await api.post("/api/auth/recovery/sign-in", ["username": "lin", "code": codes[0]]).errorCode == "invalid_recovery_code"
            )

            // New codes replace the old ones.
            let second = try await api.post("/api/auth/recovery-codes", [String: String](), token: newToken)
            #expect(
                try await api.post("/api/auth/recovery/sign-in", ["username": "lin", "code": codes[1]]).errorCode == "invalid_recovery_code"
            )
            let account = try #require(try await harness.store.account(username: "lin"))
            // A disabled account cannot recover, and its codes are not spent trying.
            guard case .array(let secondCodes)? = second.json["codes"], case .string(let fresh)? = secondCodes.first else {
                Issue.record("no second codes")
                return
            }
            _ = try await harness.store.setDisabled(accountID: account.id, disabled: true)
            #expect(
                try await api.post("/api/auth/recovery/sign-in", ["username": "lin", "code": fresh]).errorCode == "invalid_recovery_code")
            #expect(try await harness.store.recoveryCodesLeft(accountID: account.id) == 10)
            _ = try await harness.store.setDisabled(accountID: account.id, disabled: false)
            #expect(try await api.post("/api/auth/recovery/sign-in", ["username": "lin", "code": fresh]).status == .ok)
            let kinds = try await harness.store.auditEvents(accountID: account.id, limit: 20).map(\.kind)
            #expect(
                kinds.contains("recovery_sign_in") && kinds.filter { $0 == "recovery_codes_created" }.count == 2
                    && kinds.contains("recovery_failed"))
        }
    }

    @Test func recoveryAttemptsAreLimitedPerAccount() async throws {
        let harness = try await Self.harness(perAccount: 2)
        try await harness.run { (api: APIClient) async throws in
            for _ in 0..<2 {
                #expect(
                    try await api.post("/api/auth/recovery/sign-in", ["username": "kim", "code": "0000-0000-0000"]).status == .unauthorized)
            }
            #expect(
                try await api.post("/api/auth/recovery/sign-in", ["username": "kim", "code": "0000-0000-0000"]).status == .tooManyRequests)
        }
    }

    @Test func anAdminRecoveryLinkWorksOnceAndExpires() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("mae".utf8))
            let (token, _, _) = try await api.signUp("mae", authenticator: &authenticator)
            let account = try #require(try await harness.store.account(username: "mae"))
            let link = try await harness.service.issueRecoveryLink(for: account, lifetime: 3600, issuer: "test")
            let used = try await api.post("/api/auth/recovery/link", ["token": link])
            #expect(used.status == .ok && used.json["recovery"] == .bool(true) && used.json["method"] == .string("recovery_link"))
            #expect(try await api.request(.get, "/api/auth/session", token: token).status == .unauthorized)
            #expect(try await api.post("/api/auth/recovery/link", ["token": link]).errorCode == "invalid_recovery_link")
            let late = try await harness.service.issueRecoveryLink(for: account, lifetime: 60, issuer: "test")
            harness.clock.advance(61)
            #expect(try await api.post("/api/auth/recovery/link", ["token": late]).errorCode == "invalid_recovery_link")
            #expect(try await api.post("/api/auth/recovery/link", ["token": "not-a-token"]).errorCode == "invalid_recovery_link")
        }
    }

    @Test func replacingAPasskeyKeepsTheUserHandleAndRemovesTheOldOne() async throws {
        let harness = try await Self.harness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("replace".utf8))
            let (token, old, signUp) = try await api.signUp("ria", authenticator: &authenticator)
            var other = SoftwareAuthenticator(seed: Array("someone".utf8))
            let (_, stranger, _) = try await api.signUp("sam", authenticator: &other)
            let refused = try await Self.addPasskey(
                api, token: token, authenticator: &authenticator, replaces: Base64URLBytes(stranger.id).base64URL
            ).0
            #expect(refused.status == .notFound && refused.errorCode == "passkey_not_found")
            let (replaced, new) = try await Self.addPasskey(
                api, token: token, authenticator: &authenticator, replaces: Base64URLBytes(old.id).base64URL)
            #expect(replaced.status == .ok)
            #expect(replaced.json["user"]?["userHandle"] == signUp.json["user"]?["userHandle"])
            let list = try await api.request(.get, "/api/auth/passkeys", token: token)
            guard case .array(let passkeys)? = list.json["passkeys"] else {
                Issue.record("no list")
                return
            }
            #expect(passkeys.map { $0["id"] } == [.string(Base64URLBytes(new.id).base64URL)])
            #expect(try await harness.store.passkey(credentialID: stranger.id) != nil)
            let account = try #require(try await harness.store.account(username: "ria"))
            #expect(try await harness.store.auditEvents(accountID: account.id, limit: 5).first?.kind == "passkey_replaced")
        }
    }

    /// Automatic passkey creation: authenticators answer a conditional create without UP and UV
    /// (WebAuthn L3 §5.1.3); §7.1 step 14 skips the UP check for exactly those options.
    @Test func conditionalCreateAcceptsNoPresenceOnlyForConditionalOptions() async throws {
        let harness = try await Self.harness()
        _ = try await Self.importUser(harness, "ida", password: "open sesame")
        try await harness.run { api in
            #expect(
                try await api.post("/api/auth/register/options", ["username": "new", "mediation": "conditional"]).errorCode
                    == "not_signed_in")
            #expect(
                try await api.post("/api/auth/register/options", ["username": "new", "mediation": "sometimes"]).errorCode
                    == "invalid_mediation")
            let token = try #require(
                try await api.post("/api/auth/password/sign-in", ["username": "ida", "password": "open sesame"]).string("token"))
            var silent = SoftwareAuthenticator(seed: Array("silent".utf8))
            silent.userPresent = false
            silent.userVerified = false
            struct Body: Encodable { let credential: RegistrationResponseJSON }

            // Ordinary options: no presence, refused.
            let modal = try await api.post("/api/auth/register/options", [String: String](), token: token)
            let (refusedRegistration, _) = try silent.register(
                options: try modal.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let refused = try await api.post("/api/auth/register/verify", Body(credential: refusedRegistration), token: token)
            #expect(refused.status == .badRequest && refused.errorCode == "user_not_present")

            // Conditional options: accepted, and they ask for UV only as "preferred".
            let conditional = try await api.post("/api/auth/register/options", ["mediation": "conditional"], token: token)
            #expect(conditional.json["authenticatorSelection"]?["userVerification"] == .string("preferred"))
            let (registration, _) = try silent.register(
                options: try conditional.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let accepted = try await api.post("/api/auth/register/verify", Body(credential: registration), token: token)
            #expect(accepted.status == .ok, "\(String(decoding: accepted.bytes, as: UTF8.self))")
        }
    }
}
