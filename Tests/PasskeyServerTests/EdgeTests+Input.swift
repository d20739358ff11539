import Foundation
import HTTPTypes
import Testing
import WebAuthn
import WebAuthnTesting

@testable import PasskeyCore
@testable import PasskeyServer
@testable import PasskeyStore

// Edge tests, part 3: usernames, closed metrics, bad input, no account oracle, and bounded costly work.
extension EdgeTests {
    // MARK: 6. Usernames

    @Test func usernamesThatLookAlikeAreOneAccount() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("alike".utf8))
            _ = try await api.signUp("José.ADA", authenticator: &authenticator)
            for twin in ["josé.ada", "Jose\u{301}.ada", "ＪＯＳÉ．ａｄａ", " jOSÉ.ada "] {
                let response = try await api.registrationOptions(username: twin)
                #expect(response.status == .conflict && response.errorCode == "username_taken", "\(twin)")
            }
            for bad in [
                "аlice", "ali\u{200B}ce", "ﬁle", "a b", String(repeating: "a", count: 65), String(repeating: "é", count: 200),
                "\u{301}abc", "tab\there", String(repeating: "x", count: 40_000),
                // Invisible (default-ignorable) code points and Hangul fillers: a second account
                // that looks like the first.
                "ada\u{FE0F}", "a\u{34F}da", "ad\u{E0100}a", "a\u{180B}da", "ada\u{17B4}", "\u{115F}ada", "ada\u{1160}",
                "\u{3164}ada", "\u{FFA0}ada", "ada\u{AD}", "ada\u{2060}",
                // Conjoining jamo NFC cannot compose (old Hangul), and a compatibility jamo.
                "\u{1100}\u{1100}\u{1161}", "\u{3131}",
            ] {
                let response = try await api.registrationOptions(username: bad)
                #expect(response.status == .badRequest && response.errorCode == "invalid_username", "\(bad.prefix(20))")
            }
            #expect(try await api.registrationOptions(username: "山田たろう").status == .ok)
            #expect(try await api.registrationOptions(username: "Ελένη").status == .ok)
            // Modern jamo compose to syllables under NFC and are one name with the syllables.
            #expect(try await api.registrationOptions(username: "\u{1112}\u{1161}\u{11AB}\u{1100}\u{1173}\u{11AF}").status == .ok)
            #expect(try await api.registrationOptions(username: "한글").status == .ok)
        }
    }

    @Test func oldKeysAreReKeyedAndCollisionsReportedNotMerged() {
        let a = UUID(), b = UUID(), c = UUID()
        let plan = UsernameRekeying.plan([
            (a, "ada", "ada"), (b, "ＡＤＡ", "ａｄａ"), (c, "José", "josé"),
        ])
        #expect(plan.changes.isEmpty || plan.changes.allSatisfy { $0.id != b })
        #expect(plan.collisions.map(\.accountID) == [b] && plan.collisions.first?.otherAccountID == a)
        let decomposed = UsernameRekeying.plan([(c, "Jose\u{301}", "jose\u{301}")])
        #expect(decomposed.changes.map { Array($0.key.utf8) } == [Array("jos\u{E9}".utf8)] && decomposed.collisions.isEmpty)
    }

    // MARK: 8. Metrics closed by default

    @Test func metricsAreClosedUnlessOpened() async throws {
        try await ServerHarness().run { (api: APIClient) async throws in
            #expect(try await api.request(.get, "/metrics").status == .notFound)
        }
        try await ServerHarness { $0.metricsPublic = true }.run { (api: APIClient) async throws in
            #expect(try await api.request(.get, "/metrics").status == .ok)
            for path in ["/metrics/", "//metrics", "/./metrics", "/metrics%2F"] {
                #expect(try await api.request(.get, path).status == .notFound, "\(path)")
            }
        }
    }

    // MARK: 9. Bad input

    @Test(arguments: [0, 1024, 4000])
    func credentialIDsOfNoOrTooManyBytesAreRefused(_ length: Int) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("ids".utf8))
            authenticator.credentialIDLength = length
            let options = try await api.registrationOptions(username: "hal")
            let (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self),
                origin: ServerHarness.origin)
            let response = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(response.status == .badRequest)
            #expect(
                ["malformed_authenticator_data", "credential_id_too_long", "malformed_json", "credential_id_mismatch"].contains(
                    response.errorCode ?? ""),
                "\(response.json)")
            #expect(try await harness.store.account(username: "hal") == nil)
        }
    }

    @Test(arguments: ["=", "padded"])
    func aChallengeIsAnsweredOnlyInItsBase64URLSpelling(_ variant: String) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("spelling".utf8))
            let options = try await api.registrationOptions(username: "ian")
            let decoded = try options.decode(PublicKeyCredentialCreationOptionsJSON.self)
            // The same bytes in standard base64 with padding.
            let standard = Data(decoded.challenge.bytes).base64EncodedString()
            let (registration, _) = try authenticator.register(
                options: decoded, origin: ServerHarness.origin,
                overrides: .init(challenge: variant == "=" ? standard : decoded.challenge.base64URL + "="))
            let response = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(response.status == .badRequest && response.errorCode == "malformed_client_data", "\(response.json)")
        }
    }

    @Test func errorMessagesNameNoLibraryInternals() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("internals".utf8))
            let options = try await api.registrationOptions(username: "jo")
            var (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self),
                origin: ServerHarness.origin)
            // Move the P-256 point off the curve: the crypto library refuses it.
            var object = registration.response.attestationObject.bytes
            if let index = object.indices.reversed().first(where: { object[$0] == 0x58 && object.count - $0 == 34 }) {
                object[index + 5] ^= 0xFF
            }
            registration.response.attestationObject = Base64URLBytes(object)
            let response = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(response.status == .badRequest)
            let message = String(decoding: response.bytes, as: UTF8.self)
            for leak in ["CryptoKit", "BoringSSL", "underlying", "Error(", "error:"] { #expect(!message.contains(leak), "\(message)") }
        }
    }

    // MARK: 10. No account oracle

    @Test func usernameFirstOptionsLookTheSameForEveryKindOfAccount() async throws {
        let harness = try await ServerHarness { $0.passwordScryptCost = 10 }
        let password = Account(username: "pat", displayName: "Pat", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let disabled = Account(username: "dan", displayName: "Dan", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(
            try await harness.store.importAccounts([
                (password, Bcrypt(hashing: "pat's password", cost: 4).text),
                (disabled, Bcrypt(hashing: "dan's password", cost: 4).text),
            ]) == [true, true])
        _ = try await harness.store.setDisabled(accountID: disabled.id, disabled: true)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("oracle".utf8))
            _ = try await api.signUp("kay", authenticator: &authenticator)
            func shape(_ username: String) async throws -> [String] {
                let response = try await api.post("/api/auth/authenticate/options", ["username": username])
                #expect(response.status == .ok)
                guard case .object(let object) = response.json, case .array(let allow)? = object["allowCredentials"] else { return [] }
                let entry: [String] =
                    allow.first.flatMap { if case .object(let e) = $0 { return e.keys.sorted() } else { return nil } } ?? []
                return object.keys.sorted() + ["allow:\(allow.count)"] + entry
            }
            let known = try await shape("kay")
            #expect(try await shape("nobody") == known)
            #expect(try await shape("pat") == known)
            #expect(try await shape("dan") == known)

            // A disabled account's wrong password answers exactly like an unknown username.
            let wrong = try await api.post("/api/auth/password/sign-in", ["username": "dan", "password": "guess"])
            let unknown = try await api.post("/api/auth/password/sign-in", ["username": "nobody", "password": "guess"])
            #expect(wrong.status == unknown.status && wrong.bytes == unknown.bytes)

            // Their timings: OptionsTimingTests, in the serial group (beside a hundred suites on
            // two cores, what a timing sees is the machine's load).
        }
    }

    /// The compatibility `GET /authenticate?username=` answered 400 `unknown_user` for unknown,
    /// password-only and disabled accounts and real options for passkey accounts: an oracle
    /// beyond what sign-up reveals. It now answers like the native API.
    @Test func compatibilityOptionsLookTheSameForEveryKindOfAccount() async throws {
        let harness = try await ServerHarness { $0.passwordScryptCost = 10 }
        let password = Account(username: "pat", displayName: "Pat", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let disabled = Account(username: "dan", displayName: "Dan", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        #expect(
            try await harness.store.importAccounts([
                (password, Bcrypt(hashing: "pat's password", cost: 4).text),
                (disabled, Bcrypt(hashing: "dan's password", cost: 4).text),
            ]) == [true, true])
        _ = try await harness.store.setDisabled(accountID: disabled.id, disabled: true)
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("compat-oracle".utf8))
            _ = try await api.signUp("kay", authenticator: &authenticator)
            func shape(_ username: String) async throws -> [String] {
                let response = try await api.request(.get, "/authenticate?username=\(username)", origin: nil)
                #expect(response.status == .ok, "\(username): \(response.status)")
                guard case .object(let object) = response.json, case .array(let allow)? = object["allowCredentials"] else { return [] }
                let entry: [String] =
                    allow.first.flatMap { if case .object(let e) = $0 { return e.keys.sorted() } else { return nil } } ?? []
                return object.keys.sorted() + ["allow:\(allow.count)"] + entry
            }
            let known = try await shape("kay")
            for other in ["nobody", "pat", "dan"] { #expect(try await shape(other) == known, "\(other)") }
            // The decoy is stable, like a real account's list.
            let first = try await api.request(.get, "/authenticate?username=nobody", origin: nil).json["allowCredentials"]
            let again = try await api.request(.get, "/authenticate?username=nobody", origin: nil).json["allowCredentials"]
            #expect(first == again)
        }
    }

    // MARK: 11. Costly work

    /// `maxOpenChallenges` bounds storage without being a switch: at the cap the oldest
    /// ceremonies make room, and new ones are never refused.
    @Test func theCeremonyCapMakesRoomInsteadOfRefusing() async throws {
        let harness = try await ServerHarness { $0.maxOpenChallenges = 10 }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: Array("cap".utf8))
            var (_, credential, _) = try await api.signUp("cap", authenticator: &authenticator)
            let oldest = try await api.post("/api/auth/authenticate/options", [String: String]())
            for index in 0..<40 {
                harness.clock.advance(0.01)
                let response = try await api.post("/api/auth/authenticate/options", [String: String]())
                #expect(response.status == .ok, "\(index): \(response.status)")
            }
            let open = try await harness.store.openChallengeCount(now: harness.clock.now)
            #expect(open <= 11, "\(open) open")
            // The oldest ceremony was deleted to make room; a fresh one completes.
            let stale = try authenticator.authenticate(
                options: try oldest.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                credential: &credential)
            let refused = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: stale))
            #expect(refused.errorCode == "challenge_unknown")
            #expect(try await api.signIn(credential: &credential, authenticator: authenticator).status == .ok)
        }
    }

    @Test func namesAreBoundedInBytesToo() async throws {
        // One character, ~600 bytes: a letter with 300 combining marks.
        let heavy = "e" + String(repeating: "\u{301}", count: 300)
        #expect(heavy.count == 1)
        #expect(throws: PasskeyServiceError.self) { try PasskeyService.validDisplayName(heavy, default: "x") }
        #expect(throws: PasskeyServiceError.self) { try PasskeyService.validPasskeyName(heavy) }
        #expect(throws: PasskeyServiceError.self) { try PasskeyService.validPasskeyName(String(repeating: "a", count: 40_000)) }
        #expect(try PasskeyService.validPasskeyName(" Work laptop ") == "Work laptop")
        #expect(try PasskeyService.validDisplayName(String(repeating: "é", count: 64), default: "x").count == 64)
        let harness = try await ServerHarness()
        try await harness.run { api in
            let refused = try await api.registrationOptions(username: "heavy", displayName: heavy)
            #expect(refused.status == .badRequest && refused.errorCode == "invalid_display_name")
            var authenticator = SoftwareAuthenticator(seed: Array("heavy".utf8))
            let (token, credential, _) = try await api.signUp("light", authenticator: &authenticator)
            let id = Base64URLBytes(credential.id).base64URL
            let rename = try await api.request(
                .patch, "/api/auth/passkeys/\(id)", body: Array(try JSONEncoder().encode(["name": heavy])), token: token)
            #expect(rename.status == .badRequest && rename.errorCode == "invalid_name")
        }
    }

    @Test func aLimiterTableOneAddressCanFillIsFlagged() throws {
        var limits = ServerConfiguration.RateLimits()
        #expect(!limits.oneAddressCanEvict)
        limits.perIP = 600
        limits.maxKeys = 1201
        #expect(limits.oneAddressCanEvict)
        limits.maxKeys = 1202
        #expect(!limits.oneAddressCanEvict)
    }

    @Test func thePasswordPoolRunsABoundedNumberAndRefusesPastItsQueue() async throws {
        // Every admitted job holds its place until the test has seen the three refusals: which
        // jobs are refused does not depend on how fast the machine is.
        let pool = BoundedWorkPool(width: 1, maxWaiting: 2)
        let gate = DispatchSemaphore(value: 0)
        let results = await withTaskGroup(of: Int?.self) { group in
            for index in 0..<6 {
                group.addTask {
                    await pool.run {
                        // Bounded, so a pool that admitted too many fails the count below rather than hanging.
                        _ = gate.wait(timeout: .now() + .seconds(60))
                        return index
                    }
                }
            }
            var results: [Int?] = []
            for await result in group {
                results.append(result)
                if results.count == 3 { for _ in 0..<3 { gate.signal() } }
            }
            return results
        }
        #expect(results.compactMap { $0 }.count == 3)
        #expect(results.filter { $0 == nil }.count == 3)
    }
}
