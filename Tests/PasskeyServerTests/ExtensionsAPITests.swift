import Foundation
import PasskeyCore
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn
import WebAuthnTesting

/// WebAuthn extensions through the native API (docs/extensions.md): what the options ask for,
/// what a registration stores, the per-passkey PRF salt, and every refusal. Runs on SQLite, and
/// on PostgreSQL with `PASSKEYD_TEST_STORE=postgres`.
@Suite struct ExtensionsAPITests {
    struct OptionsBody: Encodable {
        var username: String?
        var extensions: [String: JSONValue]?
        var credentialId: String?
    }

    /// The client's part of a response with PRF results: they stay on the client.
    static func withoutPRFResults(_ results: [String: JSONValue]?) -> [String: JSONValue]? {
        guard var results, case .object(var prf)? = results["prf"] else { return results }
        prf["results"] = nil
        results["prf"] = .object(prf)
        return results
    }

    static func salt(_ value: JSONValue?) -> [UInt8]? {
        guard case .string(let text)? = value?["first"] else { return nil }
        return Base64URLBytes(encoded: text)?.bytes
    }

    /// Signs `username` up asking for `extensions`; returns the options, the verify answer and the credential.
    static func signUp(
        _ api: APIClient, _ username: String, extensions: [String: JSONValue]?, authenticator: inout SoftwareAuthenticator,
        keepPRFResults: Bool = false
    ) async throws -> (options: PublicKeyCredentialCreationOptionsJSON, verify: APIResponse, credential: SoftwareCredential) {
        let answer = try await api.post("/api/auth/register/options", OptionsBody(username: username, extensions: extensions))
        guard answer.status == .ok else { throw HarnessError.unexpected(answer) }
        let options = try answer.decode(PublicKeyCredentialCreationOptionsJSON.self)
        var (registration, credential) = try authenticator.register(options: options, origin: ServerHarness.origin)
        if !keepPRFResults { registration.clientExtensionResults = withoutPRFResults(registration.clientExtensionResults) }
        let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
        return (options, verify, credential)
    }

    static func signInOptions(_ api: APIClient, _ body: OptionsBody) async throws -> APIResponse {
        try await api.post("/api/auth/authenticate/options", body)
    }

    @Test func signUpWithPRFStoresTheSaltAndWhatTheClientReported() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (options, verify, credential) = try await Self.signUp(
                api, "ada", extensions: ["prf": .bool(true)], authenticator: &authenticator)
            // §10.1.3 / §10.1.4: credProps always, and PRF evaluated with a fresh 32-byte salt.
            #expect(options.extensions?["credProps"] == .bool(true))
            let salt = try #require(Self.salt(options.extensions?["prf"]?["eval"]))
            #expect(salt.count == 32)
            #expect(verify.status == .ok)
            #expect(verify.json["passkey"]?["prf"] == .bool(true))
            #expect(verify.json["passkey"]?["discoverable"] == .bool(true))
            let stored = try #require(try await harness.store.passkey(credentialID: credential.id))
            #expect(stored.prfSalt == salt)
            #expect(stored.extensions.prfEnabled == true)
            #expect(stored.extensions.discoverable == true)

            // A plain sign-up asks for credProps only and its passkey gets no salt until asked.
            var other = SoftwareAuthenticator()
            let plain = try await Self.signUp(api, "bob", extensions: nil, authenticator: &other)
            #expect(plain.options.extensions == ["credProps": .bool(true)])
            #expect(plain.verify.json["passkey"]?["prf"] == nil)
            #expect(try await harness.store.passkey(credentialID: plain.credential.id)?.prfSalt == nil)
        }
    }

    @Test func aPostedPRFOutputIsRefusedAndNothingIsStored() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let (_, verify, credential) = try await Self.signUp(
                api, "ada", extensions: ["prf": .bool(true)], authenticator: &authenticator, keepPRFResults: true)
            #expect(verify.status == .badRequest)
            #expect(verify.errorCode == "prf_output_posted")
            #expect(!String(decoding: verify.bytes, as: UTF8.self).contains("results\":{"))
            #expect(try await harness.store.passkey(credentialID: credential.id) == nil)
            #expect(try await harness.store.account(username: "ada") == nil)

            // On a sign-in too: 400, not the 401 of a failed sign-in, and no session.
            let good = try await Self.signUp(api, "bob", extensions: ["prf": .bool(true)], authenticator: &authenticator)
            var signer = good.credential
            let options = try await Self.signInOptions(api, OptionsBody(username: "bob", extensions: ["prf": .bool(true)]))
            let assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin, credential: &signer)
            #expect(assertion.clientExtensionResults?["prf"]?["results"] != nil)
            let refused = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
            #expect(refused.status == .badRequest)
            #expect(refused.errorCode == "prf_output_posted")
        }
    }

    /// A sign-in answer names the stored `prf` fact of the passkey that signed in (`prfEnabled`),
    /// so a client that asked for PRF and got no output can tell a passkey without PRF
    /// (`unsupported`: asking again never helps) from one the client did not evaluate this time
    /// (`not-evaluated`). Absent when registration never reported it.
    @Test func theSignInAnswerCarriesThePasskeysStoredPRFFact() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var withoutPRF = SoftwareAuthenticator()
            withoutPRF.supportsPRF = false
            // (username, PRF asked at sign-up, its authenticator, the stored fact)
            var cases: [(String, [String: JSONValue]?, SoftwareAuthenticator, JSONValue?)] = [
                ("ada", ["prf": .bool(true)], SoftwareAuthenticator(), .bool(true)),
                ("bob", ["prf": .bool(true)], withoutPRF, .bool(false)),
                ("cid", nil, SoftwareAuthenticator(), nil),
            ]
            for index in cases.indices {
                let (username, extensions, _, fact) = cases[index]
                let up = try await Self.signUp(api, username, extensions: extensions, authenticator: &cases[index].2)
                #expect(up.verify.status == .ok)
                #expect(up.verify.json["passkey"]?["prf"] == fact, "\(username)")
                var signer = up.credential
                let options = try await Self.signInOptions(api, OptionsBody(username: username, extensions: ["prf": .bool(true)]))
                var assertion = try cases[index].2.authenticate(
                    options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin,
                    credential: &signer)
                assertion.clientExtensionResults = Self.withoutPRFResults(assertion.clientExtensionResults)
                let signIn = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
                #expect(signIn.status == .ok)
                #expect(signIn.json["prfEnabled"] == fact, "\(username)")
            }
        }
    }

    @Test func signInAsksEachPasskeyWithItsOwnSaltAndRotationChangesIt() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let first = try await Self.signUp(api, "ada", extensions: ["prf": .bool(true)], authenticator: &authenticator)
            let token = try #require(first.verify.string("token"))
            // A second passkey, added signed in, without PRF at registration.
            let addOptions = try await api.post("/api/auth/register/options", [String: String](), token: token)
            let (added, secondCredential) = try authenticator.register(
                options: try addOptions.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            var addedBody = added
            addedBody.clientExtensionResults = Self.withoutPRFResults(added.clientExtensionResults)
            #expect(
                try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: addedBody), token: token).status == .ok
            )

            func saltsOffered() async throws -> [String: [UInt8]] {
                let answer = try await Self.signInOptions(api, OptionsBody(username: "ada", extensions: ["prf": .bool(true)]))
                #expect(answer.status == .ok)
                guard case .object(let byCredential)? = answer.json["extensions"]?["prf"]?["evalByCredential"] else { return [:] }
                return byCredential.compactMapValues { Self.salt($0) }
            }
            let ids = [first.credential.id, secondCredential.id].map { Base64URLBytes($0).base64URL }
            let offered = try await saltsOffered()
            #expect(Set(offered.keys) == Set(ids))
            #expect(offered[ids[0]] == first.options.extensions.flatMap { Self.salt($0["prf"]?["eval"]) })
            // The passkey registered without PRF got a salt at its first PRF sign-in, and keeps it.
            #expect(offered[ids[1]]?.count == 32)
            #expect(offered[ids[0]] != offered[ids[1]])
            #expect(try await saltsOffered() == offered)

            // A sign-in with PRF verifies (its outputs stay with the client) and says nothing of them.
            var signer = first.credential
            let options = try await Self.signInOptions(api, OptionsBody(username: "ada", extensions: ["prf": .bool(true)]))
            var assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin, credential: &signer)
            assertion.clientExtensionResults = Self.withoutPRFResults(assertion.clientExtensionResults)
            let signedIn = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
            #expect(signedIn.status == .ok)
            let fresh = try #require(signedIn.string("token"))

            // Rotation: signed in and recent; the next options carry a new salt for that passkey only.
            let rotated = try await api.request(.post, "/api/auth/passkeys/\(ids[0])/prf-salt", token: fresh)
            #expect(rotated.status == .ok)
            #expect(rotated.json["id"] == .string(ids[0]))
            let after = try await saltsOffered()
            #expect(after[ids[0]] != offered[ids[0]])
            #expect(after[ids[0]]?.count == 32)
            #expect(after[ids[1]] == offered[ids[1]])
            #expect(try await api.request(.post, "/api/auth/passkeys/\(ids[0])/prf-salt").status == .unauthorized)
            // A cookie session from another origin (CSRF) changes nothing.
            let forged = try await api.request(
                .post, "/api/auth/passkeys/\(ids[0])/prf-salt", cookie: "passkeyd_session=\(fresh)", origin: "https://evil.example")
            #expect(forged.status == .forbidden && forged.errorCode == "csrf_origin_mismatch")
            #expect(try await saltsOffered()[ids[0]] == after[ids[0]])
            // Another account's passkey is not found, and its salt stays.
            var bobsAuthenticator = SoftwareAuthenticator()
            let bob = try await Self.signUp(api, "bob", extensions: ["prf": .bool(true)], authenticator: &bobsAuthenticator)
            let bobsID = Base64URLBytes(bob.credential.id).base64URL
            let foreign = try await api.request(.post, "/api/auth/passkeys/\(bobsID)/prf-salt", token: fresh)
            #expect(foreign.status == .notFound)
            #expect(
                try await harness.store.passkey(credentialID: bob.credential.id)?.prfSalt
                    == Self.salt(bob.options.extensions?["prf"]?["eval"]))
            // Long after the sign-in, rotation needs a new one.
            harness.clock.advance(3600)
            let stale = try await api.request(.post, "/api/auth/passkeys/\(ids[0])/prf-salt", token: fresh)
            #expect(stale.errorCode == "reauthentication_required")
        }
    }

    @Test func prfOptionsForUnknownNamesLookLikeRealOnes() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            _ = try await Self.signUp(api, "ada", extensions: ["prf": .bool(true)], authenticator: &authenticator)
            func shape(_ username: String) async throws -> (ids: [String], salts: [Int]) {
                let answer = try await Self.signInOptions(api, OptionsBody(username: username, extensions: ["prf": .bool(true)]))
                #expect(answer.status == .ok)
                guard case .object(let byCredential)? = answer.json["extensions"]?["prf"]?["evalByCredential"] else { return ([], []) }
                return (byCredential.keys.sorted(), byCredential.values.compactMap { Self.salt($0)?.count })
            }
            let real = try await shape("ada")
            let unknown = try await shape("nobody")
            #expect(real.salts == [32])
            #expect(unknown.salts == [32])
            // Stable: asking twice gives the same decoy, so it cannot be told from a real passkey.
            #expect(try await shape("nobody").ids == unknown.ids)
            #expect(unknown.ids != real.ids)

            // Naming a credential: the salt follows the ID for a real account and a decoy alike
            // (a decoy salt of the name alone would be the same for every ID: an oracle).
            func salt(_ username: String, _ credentialId: String?) async throws -> [UInt8]? {
                let answer = try await Self.signInOptions(
                    api, OptionsBody(username: username, extensions: ["prf": .bool(true)], credentialId: credentialId))
                guard case .object(let byCredential)? = answer.json["extensions"]?["prf"]?["evalByCredential"], byCredential.count == 1
                else { return nil }
                return Self.salt(byCredential.values.first)
            }
            let madeUp = "bWFkZS11cC1jcmVkZW50aWFs"
            for (name, ids) in [("ada", real.ids), ("nobody", unknown.ids)] {
                let listed = try await salt(name, nil)
                #expect(try await salt(name, ids[0]) == listed, "\(name)")
                let other = try await salt(name, madeUp)
                #expect(other != nil && other != listed, "\(name)")
            }
        }
    }

    @Test func extensionRequestsThatCannotWorkAreRefused() async throws {
        let harness = try await ServerHarness { $0.extensions.largeBlobMaxBytes = 64 }
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let ada = try await Self.signUp(api, "ada", extensions: nil, authenticator: &authenticator)
            let id = Base64URLBytes(ada.credential.id).base64URL
            let refusals: [(String, OptionsBody, String)] = [
                (
                    "/api/auth/register/options", OptionsBody(username: "x1", extensions: ["hmacCreateSecret": .bool(true)]),
                    "invalid_extension"
                ),
                ("/api/auth/register/options", OptionsBody(username: "x2", extensions: ["prf": .string("yes")]), "invalid_extension"),
                (
                    "/api/auth/register/options", OptionsBody(username: "x3", extensions: ["largeBlob": .string("always")]),
                    "invalid_extension"
                ),
                ("/api/auth/authenticate/options", OptionsBody(extensions: ["prf": .bool(true)]), "invalid_extension"),
                (
                    "/api/auth/authenticate/options", OptionsBody(username: "ada", extensions: ["credProps": .bool(true)]),
                    "invalid_extension"
                ),
                (
                    "/api/auth/authenticate/options",
                    OptionsBody(username: "ada", extensions: ["largeBlob": .object(["write": .string("AAAA")])]), "invalid_extension"
                ),
                (
                    "/api/auth/authenticate/options",
                    OptionsBody(username: "ada", extensions: ["largeBlob": .object(["read": .bool(true), "write": .string("AAAA")])]),
                    "invalid_extension"
                ),
                (
                    "/api/auth/authenticate/options",
                    OptionsBody(
                        username: "ada",
                        extensions: ["largeBlob": .object(["write": .string(Base64URLBytes([UInt8](repeating: 7, count: 65)).base64URL)])],
                        credentialId: id), "large_blob_too_large"
                ),
                ("/api/auth/authenticate/options", OptionsBody(username: "ada", credentialId: "not base64url!"), "malformed_json"),
            ]
            for (path, body, code) in refusals {
                let answer = try await api.post(path, body)
                #expect(answer.status == .badRequest, "\(path) \(code)")
                #expect(answer.errorCode == code, "\(path): \(String(decoding: answer.bytes, as: UTF8.self))")
            }
            // The body is bounded and never echoed: an extension name is cut in the message.
            let long = String(repeating: "<script>", count: 100)
            let echoed = try await api.post("/api/auth/register/options", OptionsBody(username: "x4", extensions: [long: .bool(true)]))
            #expect(echoed.errorCode == "invalid_extension")
            #expect(echoed.bytes.count < 600)
            #expect(try await harness.store.account(username: "x1") == nil)
        }
    }

    @Test func aLargeBlobIsWrittenToTheOnePasskeyNamed() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let ada = try await Self.signUp(api, "ada", extensions: ["largeBlob": .string("preferred")], authenticator: &authenticator)
            #expect(ada.options.extensions?["largeBlob"] == .object(["support": .string("preferred")]))
            #expect(ada.verify.json["passkey"]?["largeBlob"] == .bool(true))
            let id = Base64URLBytes(ada.credential.id).base64URL
            let blob = Array("a note".utf8)
            let answer = try await Self.signInOptions(
                api,
                OptionsBody(
                    username: "ada", extensions: ["largeBlob": .object(["write": .string(Base64URLBytes(blob).base64URL)])],
                    credentialId: id))
            #expect(answer.status == .ok)
            let options = try answer.decode(PublicKeyCredentialRequestOptionsJSON.self)
            #expect(options.allowCredentials.map(\.id.bytes) == [ada.credential.id])
            var signer = ada.credential
            let written = try authenticator.authenticate(options: options, origin: ServerHarness.origin, credential: &signer)
            #expect(written.clientExtensionResults?["largeBlob"]?["written"] == .bool(true))
            #expect(try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: written)).status == .ok)
            // Read back on the client; the server keeps none of it.
            let read = try await Self.signInOptions(
                api, OptionsBody(username: "ada", extensions: ["largeBlob": .object(["read": .bool(true)])]))
            let readBack = try authenticator.authenticate(
                options: try read.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin, credential: &signer)
            #expect(readBack.clientExtensionResults?["largeBlob"]?["blob"] == .string(Base64URLBytes(blob).base64URL))
            // A passkey that is not the account's gets the same answer shape as an unknown name.
            let foreign = try await Self.signInOptions(
                api,
                OptionsBody(
                    username: "ada", extensions: ["largeBlob": .object(["read": .bool(true)])], credentialId: "AAAAAAAAAAAAAAAAAAAAAA"))
            #expect(foreign.status == .ok)
            #expect(
                try foreign.decode(PublicKeyCredentialRequestOptionsJSON.self).allowCredentials.map(\.id.base64URL) == [
                    "AAAAAAAAAAAAAAAAAAAAAA"
                ])
        }
    }

    @Test func largeBlobRequiredNeedsTheClientsSupport() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            authenticator.supportsLargeBlob = false
            let answer = try await api.post(
                "/api/auth/register/options", OptionsBody(username: "ada", extensions: ["largeBlob": .string("required")]))
            let options = try answer.decode(PublicKeyCredentialCreationOptionsJSON.self)
            // A browser would refuse to create; a client that creates anyway and says it has no support is refused.
            var registration: RegistrationResponseJSON
            do {
                (registration, _) = try authenticator.register(options: options, origin: ServerHarness.origin)
            } catch {
                authenticator.supportsLargeBlob = true
                (registration, _) = try authenticator.register(options: options, origin: ServerHarness.origin)
            }
            registration.clientExtensionResults?["largeBlob"] = .object(["supported": .bool(false)])
            let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
            #expect(verify.status == .badRequest)
            #expect(verify.errorCode == "large_blob_unsupported")
            #expect(try await harness.store.account(username: "ada") == nil)
        }
    }

    @Test func aCredProtectPolicyIsRequiredOfDeviceBoundPasskeys() async throws {
        let harness = try await ServerHarness {
            $0.extensions.credentialProtection = .userVerificationRequired
            $0.extensions.minPinLength = true
        }
        try await harness.run { api in
            // A security key (not backup eligible) behind a client that ignores credProtect (it
            // never reaches the authenticator): refused, nothing stored.
            var key = SoftwareAuthenticator()
            key.backupEligible = false
            key.backedUp = false
            let answer = try await api.post("/api/auth/register/options", OptionsBody(username: "ada"))
            var options = try answer.decode(PublicKeyCredentialCreationOptionsJSON.self)
            #expect(options.extensions?["credentialProtectionPolicy"] == .string("userVerificationRequired"))
            #expect(options.extensions?["minPinLength"] == .bool(true))
            options.extensions?["credentialProtectionPolicy"] = nil
            let (ignored, _) = try key.register(options: options, origin: ServerHarness.origin)
            let refused = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: ignored))
            #expect(refused.status == .forbidden)
            #expect(refused.errorCode == "credential_protection_not_applied")
            #expect(try await harness.store.account(username: "ada") == nil)
            // A key that applied a lower level than required: refused too.
            let lower = try await api.post("/api/auth/register/options", OptionsBody(username: "ada"))
            var lowered = try lower.decode(PublicKeyCredentialCreationOptionsJSON.self)
            lowered.extensions?["credentialProtectionPolicy"] = .string("userVerificationOptionalWithCredentialIDList")
            let (level2, _) = try key.register(options: lowered, origin: ServerHarness.origin)
            let refusedLower = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: level2))
            #expect(refusedLower.errorCode == "credential_protection_not_applied")
            // A key without credProtect support: the client makes the credential (nothing is
            // enforced), and the server refuses it with its own code, not a cancelled ceremony.
            key.supportsCredProtect = false
            let unprotected = try await api.post("/api/auth/register/options", OptionsBody(username: "ada"))
            let (bare, _) = try key.register(
                options: try unprotected.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let refusedBare = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: bare))
            #expect(refusedBare.status == .forbidden)
            #expect(refusedBare.errorCode == "credential_protection_not_applied")

            // The same key applying the policy: stored with its level and PIN length.
            key.supportsCredProtect = true
            let applied = try await Self.signUp(api, "ada", extensions: nil, authenticator: &key)
            #expect(applied.verify.status == .ok)
            #expect(applied.verify.json["passkey"]?["credProtect"] == .number(3))
            #expect(applied.verify.json["passkey"]?["minPinLength"] == .number(6))
            #expect(try await harness.store.passkey(credentialID: applied.credential.id)?.extensions.credProtect == 3)

            // A synced passkey's provider (BE set) ignores credProtect, and the policy does not cover it.
            var synced = SoftwareAuthenticator()
            synced.supportsCredProtect = false
            let bob = try await Self.signUp(api, "bob", extensions: nil, authenticator: &synced)
            #expect(bob.verify.status == .ok)
            #expect(bob.verify.json["passkey"]?["credProtect"] == nil)
        }
    }

    /// `enforceCredentialProtectionPolicy: true` makes the browser refuse every authenticator
    /// without credProtect, synced passkeys' providers included (Chromium shows a cancelled
    /// ceremony). So it is sent only where the server refuses all such passkeys anyway
    /// (`credentialProtectionRequiredFor: all`); under the default (`device-bound`) and `none`
    /// the server judges the answer, and a synced passkey without credProtect signs up.
    @Test(arguments: [
        (RegistrationExtensionInputs.CredentialProtection.Scope.deviceBound, false), (.none, false), (.all, true),
    ])
    func onlyTheAllScopeAsksTheClientToEnforceCredProtect(
        scope: RegistrationExtensionInputs.CredentialProtection.Scope, enforced: Bool
    ) async throws {
        let harness = try await ServerHarness {
            $0.extensions.credentialProtection = .userVerificationRequired
            $0.extensions.credentialProtectionRequiredFor = scope
        }
        try await harness.run { api in
            var synced = SoftwareAuthenticator()
            synced.supportsCredProtect = false
            let answer = try await api.post("/api/auth/register/options", OptionsBody(username: "ada"))
            #expect(answer.status == .ok)
            let options = try answer.decode(PublicKeyCredentialCreationOptionsJSON.self)
            #expect(options.extensions?["credentialProtectionPolicy"] == .string("userVerificationRequired"))
            #expect(options.extensions?["enforceCredentialProtectionPolicy"] == (enforced ? .bool(true) : .bool(false)))
            if enforced {
                // The client refuses an authenticator that cannot apply the policy.
                #expect(throws: SoftwareAuthenticator.ClientError("NotAllowedError", "")) {
                    _ = try synced.register(options: options, origin: ServerHarness.origin)
                }
            } else {
                let (registration, _) = try synced.register(options: options, origin: ServerHarness.origin)
                let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
                #expect(verify.status == .ok)
            }
        }
    }

    @Test func clientExtensionResultsAreBounded() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var nested: JSONValue = .bool(true)
            for _ in 0..<6 { nested = .object(["x": nested]) }
            let cases: [[String: JSONValue]] = [
                ["someExtension": .string(String(repeating: "a", count: 5000))],
                ["someExtension": nested],
                ["credProps": .string("yes")],
                ["credProps": .object(["rk": .string("true")])],
                ["prf": .object(["enabled": .number(1)])],
            ]
            for (index, results) in cases.enumerated() {
                var authenticator = SoftwareAuthenticator()
                let answer = try await api.post("/api/auth/register/options", OptionsBody(username: "user\(index)"))
                var (registration, _) = try authenticator.register(
                    options: try answer.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
                registration.clientExtensionResults = results
                let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration))
                #expect(verify.status == .badRequest)
                #expect(verify.errorCode == "malformed_extension_results", "case \(index)")
                #expect(try await harness.store.account(username: "user\(index)") == nil)
            }
            // Unknown members a client adds are ignored.
            var authenticator = SoftwareAuthenticator()
            let answer = try await api.post("/api/auth/register/options", OptionsBody(username: "fine"))
            var (registration, _) = try authenticator.register(
                options: try answer.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            registration.clientExtensionResults?["appidExclude"] = .bool(false)
            registration.clientExtensionResults?["devicePubKey"] = .object(["dpk": .string("AAAA")])
            #expect(try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration)).status == .ok)
        }
    }

    /// A posted response as JSON members, its `clientExtensionResults` replaced by `results`.
    static func withExtensionResults(_ credential: some Encodable, _ results: JSONValue) throws -> [String: JSONValue] {
        var members = try JSONDecoder().decode([String: JSONValue].self, from: JSONEncoder().encode(credential))
        members["clientExtensionResults"] = results
        return members
    }

    /// `clientExtensionResults` is an object (§5.1): a number, a string, an array or a boolean is
    /// a malformed extension output, 400 `malformed_extension_results` (it was `malformed_json`),
    /// on a registration and on a sign-in alike, and nothing is stored or started.
    @Test(arguments: [JSONValue.number(5), .string("{}"), .array([.object([:])]), .bool(true)])
    func clientExtensionResultsThatAreNotAnObjectAreMalformedExtensionResults(_ results: JSONValue) async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let answer = try await api.post("/api/auth/register/options", OptionsBody(username: "ada"))
            let (registration, _) = try authenticator.register(
                options: try answer.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
            let refused = try await api.post(
                "/api/auth/register/verify", APIClient.CredentialBody(credential: try Self.withExtensionResults(registration, results)))
            #expect(refused.status == .badRequest)
            #expect(refused.errorCode == "malformed_extension_results")
            #expect(try await harness.store.account(username: "ada") == nil)

            let good = try await Self.signUp(api, "bob", extensions: nil, authenticator: &authenticator)
            var signer = good.credential
            let options = try await Self.signInOptions(api, OptionsBody(username: "bob"))
            let assertion = try authenticator.authenticate(
                options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin, credential: &signer)
            let signIn = try await api.post(
                "/api/auth/authenticate/verify", APIClient.CredentialBody(credential: try Self.withExtensionResults(assertion, results)))
            #expect(signIn.status == .badRequest)
            #expect(signIn.errorCode == "malformed_extension_results")
            #expect(signIn.string("token") == nil)
        }
    }

    /// The first salt of a passkey is made once: sixteen PRF option requests released together
    /// (PostgreSQL lets them overlap) all offer the same salt, and that salt is the stored one.
    @Test func theFirstSaltIsMadeOnceUnderConcurrentRequests() async throws {
        let harness = try await ServerHarness()
        try await harness.run { api in
            var authenticator = SoftwareAuthenticator()
            let ada = try await Self.signUp(api, "ada", extensions: nil, authenticator: &authenticator)
            let id = Base64URLBytes(ada.credential.id).base64URL
            let results = await Race.run(16) { _ in
                let answer = try await Self.signInOptions(api, OptionsBody(username: "ada", extensions: ["prf": .bool(true)]))
                return Self.salt(answer.json["extensions"]?["prf"]?["evalByCredential"]?[id]) ?? []
            }
            let salts = Set(results.compactMap { try? $0.get() })
            #expect(salts.count == 1)
            let stored = try await harness.store.passkey(credentialID: ada.credential.id)?.prfSalt
            #expect(salts.first == stored)
            #expect(stored?.count == 32)
        }
    }
}
