import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

extension CeremonyHarness {
    /// Registers a passkey and returns what a store would keep.
    mutating func enroll(keyType: SoftwareCredential.KeyType = .es256, signCount: UInt32 = 0) async throws -> (
        StoredCredential, SoftwareCredential
    ) {
        authenticator.keyType = keyType
        let begin = rp.beginRegistration(user: user)
        let (response, credential) = try authenticator.register(options: begin.options, origin: Self.origin, signCount: signCount)
        let verified = try await rp.finishRegistration(response: response, expectedChallenge: begin.challenge)
        return (
            StoredCredential(
                id: verified.credentialID, publicKey: verified.publicKey, signCount: verified.signCount,
                userHandle: user.id, backupEligible: verified.backupEligible), credential
        )
    }

    func signIn(
        _ stored: StoredCredential, _ credential: inout SoftwareCredential, origin: String = origin,
        overrides: SoftwareAuthenticator.ClientDataOverrides = .init(), counterStep: UInt32 = 1, includeUserHandle: Bool = true,
        allowCredentials: [[UInt8]]? = nil, requireUserHandle: Bool = false, expectedChallenge: [UInt8]? = nil,
        mutate: (inout AuthenticationResponseJSON) -> Void = { _ in }
    ) throws -> VerifiedAuthentication {
        let begin = rp.beginAuthentication()
        var response = try authenticator.authenticate(
            options: begin.options, origin: origin, credential: &credential, overrides: overrides,
            counterStep: counterStep, includeUserHandle: includeUserHandle)
        mutate(&response)
        return try rp.finishAuthentication(
            response: response, expectedChallenge: expectedChallenge ?? begin.challenge, credential: stored,
            allowCredentials: allowCredentials, requireUserHandle: requireUserHandle)
    }
}

@Suite("Authentication ceremony (§7.2)")
struct AuthenticationCeremonyTests {
    @Test(arguments: SoftwareCredential.KeyType.allCases)
    func aPasskeySignsIn(_ keyType: SoftwareCredential.KeyType) async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll(keyType: keyType)
        let verified = try harness.signIn(stored, &credential, requireUserHandle: true)
        #expect(verified.newSignCount == 1 && !verified.counterLooksCloned)
        #expect(verified.credentialID == stored.id && verified.userVerified && verified.backedUp)
        stored.signCount = verified.newSignCount
        #expect(try harness.signIn(stored, &credential).newSignCount == 2)
    }

    @Test func syncedPasskeysWithZeroCountersSignIn() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        #expect(try harness.signIn(stored, &credential, counterStep: 0).newSignCount == 0)
        #expect(try harness.signIn(stored, &credential, counterStep: 0).newSignCount == 0)
    }

    @Test func optionsForDiscoverableSignInHaveNoAllowList() async throws {
        let harness = try CeremonyHarness()
        let options = harness.rp.beginAuthentication().options
        #expect(options.allowCredentials.isEmpty && options.rpId == "example.com" && options.userVerification == "required")
        let named = harness.rp.beginAuthentication(allowCredentials: [CredentialDescriptor(id: [1], transports: ["internal"])]).options
        #expect(named.allowCredentials.count == 1)
    }

    // §7.2 step 23
    @Test func aCounterThatDidNotIncreaseIsRejectedOrFlagged() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll(signCount: 10)
        #expect(throws: WebAuthnError(.counterRegression, "")) { try harness.signIn(stored, &credential, counterStep: 0) }
        credential.signCount = 3
        #expect(throws: WebAuthnError(.counterRegression, "")) { try harness.signIn(stored, &credential) }

        var flagging = try CeremonyHarness { $0.signCountPolicy = .flag }
        (stored, credential) = try await flagging.enroll(signCount: 10)
        let verified = try flagging.signIn(stored, &credential, counterStep: 0)
        #expect(verified.counterLooksCloned && verified.newSignCount == 10)
    }

    // §7.2 step 22
    @Test func aTamperedSignatureIsRejected() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        #expect(throws: WebAuthnError(.signatureInvalid, "")) {
            try harness.signIn(stored, &credential) { $0.response.signature.bytes[10] ^= 1 }
        }
        #expect(throws: WebAuthnError(.signatureInvalid, "")) {
            try harness.signIn(stored, &credential) { $0.response.authenticatorData.bytes[33] ^= 0x01 }
        }
        #expect(throws: WebAuthnError(.signatureInvalid, "")) {
            try harness.signIn(stored, &credential) { $0.response.signature = Base64URLBytes([]) }
        }
    }

    @Test func aSignatureByAnotherKeyIsRejected() async throws {
        var harness = try CeremonyHarness()
        let (stored, _) = try await harness.enroll()
        var (_, other) = try await harness.enroll()
        other.id = stored.id
        #expect(throws: WebAuthnError(.signatureInvalid, "")) { try harness.signIn(stored, &other) }
    }

    // §7.2 step 6
    @Test func thePasskeyOfAnotherAccountIsRejected() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        stored.userHandle = [1, 2, 3]
        #expect(throws: WebAuthnError(.userHandleMismatch, "")) { try harness.signIn(stored, &credential) }
    }

    @Test func discoverableSignInNeedsAUserHandle() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        #expect(throws: WebAuthnError(.userHandleMismatch, "")) {
            try harness.signIn(stored, &credential, includeUserHandle: false, requireUserHandle: true)
        }
        #expect(throws: Never.self) { try harness.signIn(stored, &credential, includeUserHandle: false) }
    }

    // §7.2 step 5
    @Test func aCredentialOutsideAllowCredentialsIsRejected() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        #expect(throws: WebAuthnError(.credentialNotAllowed, "")) {
            try harness.signIn(stored, &credential, allowCredentials: [[1, 2, 3]])
        }
        #expect(throws: Never.self) { try harness.signIn(stored, &credential, allowCredentials: [stored.id]) }
    }

    // §7.2 step 7
    @Test func theRecordPassedInMustBeTheOneThatSigned() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        stored.id = [7, 7, 7]
        #expect(throws: WebAuthnError(.credentialIDMismatch, "")) { try harness.signIn(stored, &credential) }
    }

    // §7.2 steps 11–14
    @Test func clientDataIsChecked() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        #expect(throws: WebAuthnError(.typeMismatch, "")) {
            try harness.signIn(stored, &credential, overrides: .init(type: "webauthn.create"))
        }
        #expect(throws: WebAuthnError(.challengeMismatch, "")) {
            try harness.signIn(stored, &credential, expectedChallenge: RelyingParty.makeChallenge())
        }
        #expect(throws: WebAuthnError(.originNotAllowed, "")) {
            try harness.signIn(stored, &credential, origin: "https://example.com.evil.example")
        }
        #expect(throws: WebAuthnError(.crossOriginNotAllowed, "")) {
            try harness.signIn(stored, &credential, overrides: .init(crossOrigin: true))
        }
    }

    // §7.2 steps 15–17
    @Test func authenticatorFlagsAreChecked() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        var wrongRP = credential
        wrongRP.rpID = "evil.example"
        #expect(throws: WebAuthnError(.rpIDHashMismatch, "")) { try harness.signIn(stored, &wrongRP) }
        harness.authenticator.userVerified = false
        #expect(throws: WebAuthnError(.userNotVerified, "")) { try harness.signIn(stored, &credential) }
        harness.authenticator.userVerified = true
        harness.authenticator.userPresent = false
        #expect(throws: WebAuthnError(.userNotPresent, "")) { try harness.signIn(stored, &credential) }
    }

    // §7.2 step 19
    @Test func backupEligibilityCannotChange() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        harness.authenticator.backupEligible = false
        harness.authenticator.backedUp = false
        #expect(throws: WebAuthnError(.backupEligibilityChanged, "")) { try harness.signIn(stored, &credential) }
        stored.backupEligible = nil
        #expect(throws: Never.self) { try harness.signIn(stored, &credential) }
    }

    @Test func authenticationResponseJSONAcceptsStandardBase64FromNativeApps() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        let begin = harness.rp.beginAuthentication()
        let response = try harness.authenticator.authenticate(
            options: begin.options, origin: CeremonyHarness.origin, credential: &credential)
        // What an iOS app sends: base64EncodedString() of every binary field.
        let json = """
            {"id":"\(response.rawId.base64)","rawId":"\(response.rawId.base64)","type":"public-key","response":{
            "clientDataJSON":"\(response.response.clientDataJSON.base64)","authenticatorData":"\(response.response.authenticatorData.base64)",
            "signature":"\(response.response.signature.base64)","userHandle":"\(response.response.userHandle!.base64)"}}
            """
        let decoded = try AuthenticationResponseJSON.decode(Array(json.utf8))
        stored.signCount = 0
        #expect(
            try harness.rp.finishAuthentication(response: decoded, expectedChallenge: begin.challenge, credential: stored).newSignCount == 1
        )
    }
}

/// The ceremony state a `begin…` returns and a `finish…` takes back (webauthn-rs' shape).
@Suite("Ceremony state")
struct CeremonyStateTests {
    @Test func theStateSurvivesACodableRoundTripAndFinishesTheCeremony() async throws {
        var harness = try CeremonyHarness()
        let begin = harness.rp.beginRegistration(user: harness.user, hints: ["client-device"])
        let kept = try JSONDecoder().decode(RegistrationState.self, from: JSONEncoder().encode(begin.state))
        #expect(kept == begin.state && kept.challenge.bytes == begin.challenge && kept.hints == ["client-device"])
        let (response, credential) = try harness.authenticator.register(options: begin.options, origin: CeremonyHarness.origin)
        let verified = try await harness.rp.finishRegistration(response: response, state: kept)
        var signing = credential
        let stored = StoredCredential(
            id: verified.credentialID, publicKey: verified.publicKey, signCount: 0, userHandle: harness.user.id, backupEligible: true)

        // Username-first: the state lists what was offered.
        let offered = harness.rp.beginAuthentication(allowCredentials: [CredentialDescriptor(id: stored.id)])
        let assertion = try harness.authenticator.authenticate(
            options: offered.options, origin: CeremonyHarness.origin, credential: &signing)
        #expect(try harness.rp.finishAuthentication(response: assertion, state: offered.state, credential: stored).newSignCount == 1)
    }

    @Test func aCredentialThatWasNotOfferedIsRefused() async throws {
        var harness = try CeremonyHarness()
        var (stored, credential) = try await harness.enroll()
        // §7.2 step 5: the options offered another credential only.
        let begin = harness.rp.beginAuthentication(allowCredentials: [CredentialDescriptor(id: [1, 2, 3])])
        let assertion = try harness.authenticator.authenticate(
            options: begin.options, origin: CeremonyHarness.origin, credential: &credential)
        #expect(throws: WebAuthnError.self) {
            try harness.rp.finishAuthentication(response: assertion, state: begin.state, credential: stored)
        }
        do {
            _ = try harness.rp.finishAuthentication(response: assertion, state: begin.state, credential: stored)
        } catch {
            #expect(error.code == .credentialNotAllowed)
        }
        // Discoverable (nothing offered): the user handle is required (§7.2 step 6).
        let discoverable = harness.rp.beginAuthentication()
        let anonymous = try harness.authenticator.authenticate(
            options: discoverable.options, origin: CeremonyHarness.origin, credential: &credential, includeUserHandle: false)
        stored.signCount = 0
        do {
            _ = try harness.rp.finishAuthentication(response: anonymous, state: discoverable.state, credential: stored)
            Issue.record("a discoverable assertion without a user handle was accepted")
        } catch {
            #expect(error.code == .userHandleMismatch)
        }
    }

    @Test func theProfileChosenAtTheStartDecidesTheFinish() async throws {
        let harness = try CeremonyHarness()
        let strict = harness.rp.beginRegistration(user: harness.user)
        let tolerant = harness.rp.beginRegistration(user: harness.user, profile: CeremonyProfile(unsafeToleratesRewrittenFlags: true))
        #expect(strict.state.profile == .standard && tolerant.state.profile.unsafeToleratesRewrittenFlags)
        let conditional = harness.rp.beginRegistration(user: harness.user, userVerification: .preferred, conditional: true)
        #expect(conditional.options.authenticatorSelection?.userVerification == "preferred" && conditional.state.conditional)
    }
}
