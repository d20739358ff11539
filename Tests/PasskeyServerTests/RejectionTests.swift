import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// Every way a ceremony must fail, with its error code, and nothing written when it does.
@Suite("Native API: rejections")
struct RejectionTests {
    @Test func aReplayedAssertionIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            var (_, credential, _) = try await api.signUp("replay", authenticator: &authenticator)
            let options = try await api.post("/api/auth/authenticate/options", [String: String]())
            let assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self),
                origin: ServerHarness.origin, credential: &credential)
            let body = APIClient.CredentialBody(credential: assertion)
            #expect(try await api.post("/api/auth/authenticate/verify", body).status == .ok)
            let replay = try await api.post("/api/auth/authenticate/verify", body)
            #expect(replay.status == .badRequest && replay.errorCode == "challenge_unknown")
        }
    }

    /// A ceremony is finished only with the state the library made when it began (kept with
    /// its challenge). A row without one (written before migration 6) or with one that does not
    /// read is an unknown challenge, for sign-up and sign-in alike, and is taken all the same.
    @Test(arguments: [nil, Array("{}".utf8), Array("not json".utf8)] as [[UInt8]?])
    func aCeremonyWithoutItsStateCannotFinish(_ state: [UInt8]?) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            var (_, credential, _) = try await api.signUp("stateless", authenticator: &authenticator)
            // Sign-in: the options' challenge, its stored state replaced.
            let options = try await api.post("/api/auth/authenticate/options", [String: String]())
            let request = try options.decode(PublicKeyCredentialRequestOptionsJSON.self)
            var record = try #require(try await harness.store.challenge(request.challenge.bytes))
            record.state = state
            _ = try await harness.store.takeChallenge(request.challenge.bytes)
            try await harness.store.saveChallenge(record)
            let assertion = try authenticator.authenticate(options: request, origin: ServerHarness.origin, credential: &credential)
            let signIn = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
            #expect(signIn.status == .badRequest && signIn.errorCode == "challenge_unknown", "\(signIn.status)")
            #expect(try await harness.store.challenge(request.challenge.bytes) == nil)
            // Sign-up likewise.
            let creation = try await api.post("/api/auth/register/options", ["username": "stateless-2"])
            let creationOptions = try creation.decode(PublicKeyCredentialCreationOptionsJSON.self)
            var pending = try #require(try await harness.store.challenge(creationOptions.challenge.bytes))
            pending.state = state
            _ = try await harness.store.takeChallenge(creationOptions.challenge.bytes)
            try await harness.store.saveChallenge(pending)
            let (registration, _) = try authenticator.register(options: creationOptions, origin: ServerHarness.origin)
            let signUp = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(signUp.status == .badRequest && signUp.errorCode == "challenge_unknown", "\(signUp.status)")
            #expect(try await harness.store.account(username: "stateless-2") == nil)
        }
    }

    /// A sign-in reads its ceremony and takes it only when it completes; every failure takes it
    /// too. A rejected answer cannot be corrected and resent, an unknown passkey burns the
    /// challenge, and of one valid answer sent many times at once exactly one signs in.
    @Test func aChallengeIsSingleUseWhateverTheOutcome() async throws {
        let harness = try await ServerHarness()
        try await harness.run(live: true) { api in
            var authenticator = SoftwareAuthenticator(seed: Array("single-use".utf8))
            var (_, credential, _) = try await api.signUp("single", authenticator: &authenticator)
            func answer() async throws -> AuthenticationResponseJSON {
                let options = try await api.post("/api/auth/authenticate/options", [String: String]())
                return try authenticator.authenticate(
                    options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                    credential: &credential)
            }
            // A bad signature, then the good one for the same challenge.
            let good = try await answer()
            var forged = good
            forged.response.signature = Base64URLBytes(good.response.signature.bytes.reversed())
            let rejected = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: forged))
            #expect(rejected.status == .unauthorized && rejected.errorCode == "signature_invalid")
            let late = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: good))
            #expect(late.errorCode == "challenge_unknown")

            // A passkey the server does not know, then the real one.
            let real = try await answer()
            var unknown = real
            unknown.rawId = Base64URLBytes(Array(repeating: 7, count: 32))
            unknown.id = unknown.rawId.base64URL
            #expect(
                try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: unknown)).errorCode
                    == "credential_not_found")
            #expect(
                try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: real)).errorCode
                    == "challenge_unknown")

            // One valid answer, eight times at once: one session.
            let body = Array(try JSONEncoder().encode(APIClient.CredentialBody(credential: try await answer())))
            let answers = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let answer = try await api.request(.post, "/api/auth/authenticate/verify", body: body)
                        return (answer.status, answer.errorCode)
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String?)]()) { $0.append($1) }
            }
            #expect(answers.filter { $0.0 == .ok }.count == 1, "\(answers)")
            // The others are replays, whatever they met first (the counter the winner moved
            // included): `challenge_unknown`, and never a counter anomaly in the audit log.
            #expect(answers.filter { $0.1 == "challenge_unknown" }.count == 7, "\(answers)")
            let account = try #require(try await harness.store.account(username: "single"))
            #expect(try await harness.store.auditEvents(accountID: account.id, limit: 100).allSatisfy { $0.kind != "counter_anomaly" })
            // The sign-up's session and this one.
            #expect(try await harness.store.sessions(accountID: account.id, now: harness.clock.now).count == 2)
            #expect(try await harness.store.openChallengeCount(now: harness.clock.now) == 0)
        }
    }

    @Test func anExpiredChallengeIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let options = try await api.registrationOptions(username: "slow")
            harness.clock.advance(301)
            let (registration, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let late = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(late.errorCode == "challenge_expired")
            #expect(try await harness.store.account(username: "slow") == nil)
        }
    }

    @Test func aChallengeFromTheOtherCeremonyIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            var (_, credential, _) = try await api.signUp("cross", authenticator: &authenticator)
            // A registration challenge answered with an assertion.
            let registration = try await api.registrationOptions(username: "someone-else")
            let challenge = try registration.decode(PublicKeyCredentialCreationOptionsJSON.self).challenge
            let request = PublicKeyCredentialRequestOptionsJSON(
                challenge: challenge, timeout: nil, rpId: "localhost", allowCredentials: [],
                userVerification: "required", hints: [], extensions: nil)
            let assertion = try authenticator.authenticate(options: request, origin: ServerHarness.origin, credential: &credential)
            let answer = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
            #expect(answer.errorCode == "ceremony_mismatch")
        }
    }

    @Test func anotherAccountsPasskeyIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var a = SoftwareAuthenticator(seed: [0xa])
            var b = SoftwareAuthenticator(seed: [0xb])
            _ = try await api.signUp("account-a", authenticator: &a)
            var (_, credentialB, _) = try await api.signUp("account-b", authenticator: &b)
            // Sign-in started for A, answered with B's passkey.
            let wrong = try await api.signIn(username: "account-a", credential: &credentialB, authenticator: b)
            #expect(wrong.status == .unauthorized && wrong.errorCode == "credential_not_allowed")
            // A discoverable sign-in with B's passkey claiming A's user handle.
            let accountA = try #require(try await harness.store.account(username: "account-a"))
            let impostor = try await api.signIn(credential: &credentialB, authenticator: b) {
                $0.response.userHandle = Base64URLBytes(accountA.userHandle)
            }
            #expect(impostor.errorCode == "user_handle_mismatch")
            // Unknown usernames never sign in, whatever passkey answers.
            let ghost = try await api.signIn(username: "nobody", credential: &credentialB, authenticator: b)
            #expect(ghost.errorCode == "credential_not_allowed")
        }
    }

    @Test func anotherAccountsChallengeCannotAddAPasskey() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var a = SoftwareAuthenticator(seed: [1])
            var b = SoftwareAuthenticator(seed: [2])
            let (tokenA, _, _) = try await api.signUp("owner-a", authenticator: &a)
            let (tokenB, _, _) = try await api.signUp("owner-b", authenticator: &b)
            let optionsForA = try await api.registrationOptions(username: nil, token: tokenA)
            let (registration, _) = try b.register(
                options: try optionsForA.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let stolen = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: tokenB)
            #expect(stolen.errorCode == "account_mismatch")
        }
    }

    @Test func wrongOriginRPIDOrMissingUserVerificationAreRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            // Registration from another origin.
            let options = try await api.registrationOptions(username: "origin")
            let (fromEvil, _) = try authenticator.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: "https://evil.example")
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: fromEvil)).errorCode
                    == "origin_not_allowed")
            // Registration for another RP ID.
            let options2 = try await api.registrationOptions(username: "origin")
            let (otherRP, _) = try authenticator.register(
                options: try options2.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin,
                rpID: "evil.example")
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: otherRP)).errorCode
                    == "rp_id_hash_mismatch")
            // No user verification under the default `required`.
            var noUV = authenticator
            noUV.userVerified = false
            let options3 = try await api.registrationOptions(username: "origin")
            let (unverified, _) = try noUV.register(
                options: try options3.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: unverified)).errorCode
                    == "user_not_verified")
            #expect(try await harness.store.account(username: "origin") == nil)

            var (_, credential, _) = try await api.signUp("origin", authenticator: &authenticator)
            #expect(
                try await api.signIn(credential: &credential, authenticator: authenticator, origin: "https://evil.example").errorCode
                    == "origin_not_allowed")
            #expect(try await api.signIn(credential: &credential, authenticator: noUV).errorCode == "user_not_verified")
        }
    }

    @Test func aTamperedSignatureOrCounterIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            var (_, credential, _) = try await api.signUp("tamper", authenticator: &authenticator)
            let tampered = try await api.signIn(credential: &credential, authenticator: authenticator) {
                $0.response.signature.bytes[8] ^= 0x40
            }
            #expect(tampered.status == .unauthorized && tampered.errorCode == "signature_invalid")
            #expect(try await api.signIn(credential: &credential, authenticator: authenticator).status == .ok)
            // A cloned authenticator replaying an old counter value.
            credential.signCount = 0
            let cloned = try await api.signIn(credential: &credential, authenticator: authenticator)
            #expect(cloned.errorCode == "counter_regression")
            let events = try await harness.store.auditEvents(accountID: nil, limit: 20).map(\.kind)
            #expect(events.contains("counter_anomaly") && events.contains("sign_in_failed"))
        }
    }

    @Test func aDeletedPasskeyIsReportedAsUnknown() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (token, credential, _) = try await api.signUp("deleted", authenticator: &authenticator)
            var second = SoftwareAuthenticator(seed: [9])
            let options = try await api.registrationOptions(username: nil, token: token)
            let (registration, _) = try second.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: token).status
                    == .ok)
            #expect(
                try await api.request(.delete, "/api/auth/passkeys/\(Base64URLBytes(credential.id).base64URL)", token: token).status
                    == .noContent)
            var gone = credential
            let answer = try await api.signIn(credential: &gone, authenticator: authenticator)
            #expect(answer.status == .unauthorized && answer.errorCode == "credential_not_found")
        }
    }

    @Test func registeringTheSamePasskeyTwiceIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: [3])
            let (token, _, _) = try await api.signUp("twice", authenticator: &authenticator)
            var same = SoftwareAuthenticator(seed: [3])
            let options = try await api.registrationOptions(username: nil, token: token)
            let (registration, _) = try same.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let duplicate = try await api.post(
                "/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: token)
            #expect(duplicate.status == .conflict && duplicate.errorCode == "credential_already_registered")
        }
    }

    /// §7.1 step 26 on sign-up: a passkey already registered to one account cannot create
    /// another. The store's uniqueness decides (no read first), and nothing of the new account
    /// is written.
    @Test func signingUpWithAPasskeyAnotherAccountHasIsRejected() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator(seed: [4])
            var (_, credential, _) = try await api.signUp("first-owner", authenticator: &authenticator)
            var same = SoftwareAuthenticator(seed: [4])
            let options = try await api.registrationOptions(username: "second-owner")
            let (registration, _) = try same.register(
                options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let duplicate = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(duplicate.status == .conflict && duplicate.errorCode == "credential_already_registered")
            #expect(try await harness.service.store.account(username: "second-owner") == nil)
            // The name is still free, and the passkey still signs its first owner in.
            #expect(try await api.registrationOptions(username: "second-owner").status == .ok)
            let signedIn = try await api.signIn(credential: &credential, authenticator: authenticator)
            #expect(signedIn.status == .ok && signedIn.json["user"]?["username"] == .string("first-owner"))
        }
    }

    @Test(arguments: [
        ("{", "malformed_json"),
        ("[]", "malformed_json"),
        (#"{"credential": 5}"#, "malformed_json"),
        (
            #"{"credential": {"id": "AA", "rawId": "AA", "type": "public-key", "response": {"clientDataJSON": "%%%", "attestationObject": "AA"}}}"#,
            "malformed_json"
        ),
        (
            #"{"credential": {"id": "AA", "rawId": "AA", "type": "public-key", "response": {"clientDataJSON": "e30", "attestationObject": "AA"}}}"#,
            "malformed_client_data"
        ),
        (
            #"{"credential": {"id": "AA", "rawId": "AA", "type": "public-key", "response": {"clientDataJSON": "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiQUFBQSIsIm9yaWdpbiI6Imh0dHA6Ly9sb2NhbGhvc3Q6ODA4MCJ9", "attestationObject": "AA"}}}"#,
            "challenge_unknown"
        ),
        (#"{"username": 12}"#, "malformed_json"),
        (#"{"nothing": true}"#, "malformed_json"),
    ])
    func badBodiesGetA4xxWithACode(_ body: String, _ code: String) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let path = body.contains("username") ? "/api/auth/register/options" : "/api/auth/register/verify"
            let response = try await api.request(.post, path, body: Array(body.utf8))
            #expect(response.status == .badRequest, "\(body): \(response.status)")
            #expect(response.errorCode == code, "\(body): \(String(decoding: response.bytes, as: UTF8.self))")
        }
    }

    @Test func oversizedBodiesAreRefused() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let huge = Array(#"{"username":""#.utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 200_000) + Array(#""}"#.utf8)
            let response = try await api.request(.post, "/api/auth/register/options", body: huge)
            #expect(response.status == .contentTooLarge && response.errorCode == "body_too_large")
        }
    }

    @Test func unknownRoutesAnswerInJSON() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            let response = try await api.request(.get, "/api/nope")
            #expect(response.status == .notFound && response.errorCode == "not_found")
            #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
        }
    }

    @Test func randomBodiesNeverCauseA5xx() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.rateLimits.enabled = false
        }
        try await harness.run { api in
            var generator = SplitMix64.forTest()
            let paths = [
                "/api/auth/register/options", "/api/auth/register/verify", "/api/auth/authenticate/options",
                "/api/auth/authenticate/verify",
                "/api/auth/password/sign-in", "/api/auth/recovery/sign-in", "/api/auth/recovery/link",
            ]
            let fragments = [
                #"{"credential":{"id":"AA","rawId":"AA","type":"public-key","response":{"clientDataJSON":""#, "eyJ", "\"", "{", "}", "[",
                "null",
                "\\u0000", "AAAA", #"","attestationObject":""#, #"","authenticatorData":""#, "💥", "\u{0}", "-_", "==",
                #"{"username":"a","password":""#, #"{"username":"a","code":""#, #"{"token":""#, #"","mediation":"conditional"}"#,
            ]
            for round in 0..<280 {
                var body = ""
                for _ in 0..<Int.random(in: 1...12, using: &generator) { body += fragments.randomElement(using: &generator) ?? "" }
                let response = try await api.request(.post, paths[round % paths.count], body: Array(body.utf8))
                #expect(response.status.code < 500, "\(body) -> \(response.status) (seed \(generator.seed))")
                #expect(response.errorCode != nil || response.status == .ok)
            }
        }
    }
}

@Suite("Sign counter policy")
struct SignCountPolicyTests {
    @Test func underTheFlagPolicyACloneIsRecordedAndAllowed() async throws {
        let harness = try await ServerHarness { $0.signCountPolicy = .flag }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            var (_, credential, _) = try await api.signUp("flagged", authenticator: &authenticator)
            #expect(try await api.signIn(credential: &credential, authenticator: authenticator).status == .ok)
            credential.signCount = 0
            let clone = try await api.signIn(credential: &credential, authenticator: authenticator)
            #expect(clone.status == .ok)
            let stored = try await harness.store.passkey(credentialID: credential.id)
            #expect(stored?.counterAnomalies == 1 && stored?.signCount == 1)
            let events = try await harness.store.auditEvents(accountID: nil, limit: 10)
            #expect(events.contains { $0.kind == "counter_anomaly" && $0.detail == "flagged" })
        }
    }
}
