import Foundation

/// What `beginAuthentication` returns: the options to send, and the state to keep until the
/// assertion comes back.
public struct AuthenticationBegin: Sendable {
    /// `PublicKeyCredentialRequestOptionsJSON` for the client, as is.
    public let options: PublicKeyCredentialRequestOptionsJSON
    /// What ``RelyingParty/finishAuthentication(response:state:credential:)`` needs back.
    public let state: AuthenticationState
    /// The challenge (also in ``state``).
    public var challenge: [UInt8] { options.challenge.bytes }
}

/// The credential record (§4 "Credential Record") the caller looked up by `rawId`.
public struct StoredCredential: Sendable {
    /// The credential ID, as raw bytes (the record's `id`; what `rawId` must equal, §7.2 step 7).
    public var id: [UInt8]
    /// The credential public key stored at registration (§7.2 step 22 verifies the signature with it).
    public var publicKey: CredentialPublicKey
    /// The signature counter stored after the last ceremony (§6.1.1); 0 when the authenticator keeps none.
    /// Compared with the assertion's counter in §7.2 step 23.
    public var signCount: UInt32
    /// The user handle of the account that owns the credential.
    public var userHandle: [UInt8]
    /// BE as recorded at registration; `nil` skips the §7.2 step 19 comparison.
    public var backupEligible: Bool?

    /// Makes a record from stored values; `backupEligible` defaults to `nil` (no BE comparison).
    public init(id: [UInt8], publicKey: CredentialPublicKey, signCount: UInt32, userHandle: [UInt8], backupEligible: Bool? = nil) {
        self.id = id
        self.publicKey = publicKey
        self.signCount = signCount
        self.userHandle = userHandle
        self.backupEligible = backupEligible
    }
}

/// An assertion that passed every check of §7.2. Only the `finishAuthentication` methods of
/// ``RelyingParty`` make one, such as ``RelyingParty/finishAuthentication(response:state:credential:)``.
public struct VerifiedAuthentication: Sendable {
    /// The ID of the credential that signed, as raw bytes.
    public let credentialID: [UInt8]
    /// The counter to store (the authenticator's new value, or the old one when it did not increase).
    public let newSignCount: UInt32
    /// A non-zero counter that did not increase: the authenticator may have been cloned
    /// (§7.2 step 23). Set only under ``SignCountPolicy/flag``.
    public let counterLooksCloned: Bool
    /// UV: the authenticator verified the user in this assertion (§6.1, §7.2 step 17).
    public let userVerified: Bool
    /// BE in this assertion: the passkey can be synced (§6.1.3); equal to the recorded value when the
    /// record had one (§7.2 step 19).
    public let backupEligible: Bool
    /// BS now: store it, the passkey may have become synced since registration.
    public let backedUp: Bool
    /// `platform` or `cross-platform` as the client reported it (§5.4.5); `nil` when it did not say.
    public let authenticatorAttachment: String?
    /// The origin the ceremony ran on (`clientData.origin`: a web or Android app origin, §7.2 step 13).
    public let origin: String
    /// The client extension outputs (§5.7.2), typed; `prf.results` never reaches here.
    public let clientExtensions: ClientExtensionOutputs
    /// The authenticator extension outputs in authenticator data (§6.1), typed.
    public let authenticatorExtensions: AuthenticatorExtensionOutputs
}

extension RelyingParty {
    /// Builds `PublicKeyCredentialRequestOptionsJSON` (§5.5). An empty `allowCredentials`
    /// asks for a discoverable credential (usernameless sign-in, passkey AutoFill).
    public func beginAuthentication(
        allowCredentials: [CredentialDescriptor] = [], userVerification: UserVerificationRequirement? = nil,
        hints: [String] = [], challenge: [UInt8]? = nil, profile: CeremonyProfile = .standard,
        extensions: AuthenticationExtensionInputs? = nil
    ) -> AuthenticationBegin {
        let requirement = userVerification ?? configuration.userVerification
        let options = PublicKeyCredentialRequestOptionsJSON(
            challenge: Base64URLBytes(challenge ?? Self.makeChallenge()),
            timeout: timeoutMilliseconds,
            rpId: configuration.rpID,
            allowCredentials: allowCredentials.map { PublicKeyCredentialDescriptorJSON(id: $0.id, transports: $0.transports) },
            userVerification: requirement.rawValue,
            hints: hints,
            extensions: extensions?.json)
        let state = AuthenticationState(
            challenge: options.challenge.bytes, userVerification: requirement, allowCredentials: allowCredentials.map(\.id), hints: hints,
            profile: profile)
        return AuthenticationBegin(options: options, state: state)
    }

    /// Verifies an assertion (§7.2) made with `credential` against the state its
    /// `beginAuthentication` made: its challenge, the `allowCredentials` really offered (§7.2
    /// step 5), and, for a discoverable sign-in, the user handle (§7.2 step 6).
    public func finishAuthentication(response: AuthenticationResponseJSON, state: AuthenticationState, credential: StoredCredential)
        throws(WebAuthnError) -> VerifiedAuthentication
    {
        try finishAuthentication(
            response: response, clientData: CollectedClientData(bytes: response.response.clientDataJSON.bytes), state: state,
            credential: credential)
    }

    /// ``finishAuthentication(response:state:credential:)`` with the client data already parsed;
    /// the signature is checked over `clientData.bytes`.
    public func finishAuthentication(
        response: AuthenticationResponseJSON, clientData: CollectedClientData, state: AuthenticationState, credential: StoredCredential
    ) throws(WebAuthnError) -> VerifiedAuthentication {
        try verifyAssertion(
            response: response, clientData: clientData, expectedChallenge: state.challenge.bytes, credential: credential,
            allowCredentials: state.allowCredentials.map(\.bytes), requireUserHandle: !state.userIdentified,
            userVerification: state.userVerification)
    }

    /// Verifies an assertion (§7.2) made with `credential` against a challenge the caller stored
    /// itself (a convenience over ``finishAuthentication(response:state:credential:)``).
    ///
    /// - Parameters:
    ///   - response: the assertion the client sent (`PublicKeyCredential.toJSON()`).
    ///   - expectedChallenge: the challenge of the options this ceremony sent.
    ///   - credential: the credential record looked up by `response.rawId`.
    ///   - allowCredentials: the IDs sent in `allowCredentials`, when the ceremony named them.
    ///   - requireUserHandle: the user was not identified before the ceremony (discoverable
    ///     sign-in), so `response.userHandle` must be present and name the credential's owner.
    ///   - userVerification: overrides the configured requirement for this ceremony.
    public func finishAuthentication(
        response: AuthenticationResponseJSON, expectedChallenge: [UInt8], credential: StoredCredential,
        allowCredentials: [[UInt8]]? = nil, requireUserHandle: Bool = false,
        userVerification: UserVerificationRequirement? = nil
    ) throws(WebAuthnError) -> VerifiedAuthentication {
        try verifyAssertion(
            response: response, clientData: CollectedClientData(bytes: response.response.clientDataJSON.bytes),
            expectedChallenge: expectedChallenge, credential: credential, allowCredentials: allowCredentials ?? [],
            requireUserHandle: requireUserHandle, userVerification: userVerification ?? configuration.userVerification)
    }

    private func verifyAssertion(
        response: AuthenticationResponseJSON, clientData parsed: CollectedClientData, expectedChallenge: [UInt8],
        credential: StoredCredential, allowCredentials allowed: [[UInt8]], requireUserHandle: Bool,
        userVerification: UserVerificationRequirement
    ) throws(WebAuthnError) -> VerifiedAuthentication {
        // §7.2 step 3: response must be an AuthenticatorAssertionResponse of a public-key credential.
        guard response.type == "public-key" else {
            throw WebAuthnError(.malformedCredential, "credential.type is \"\(response.type)\", expected \"public-key\"")
        }
        guard let idBytes = Base64.decode(response.id, flavor: .any), constantTimeEquals(idBytes, response.rawId.bytes) else {
            throw WebAuthnError(.credentialIDMismatch, "credential.id does not encode credential.rawId")
        }
        // §7.2 step 4: Let clientExtensionResults be the result of calling
        // credential.getClientExtensionResults(). Read (strictly, bounded) before any costly check.
        let clientExtensions = try ClientExtensionOutputs(response.clientExtensionResults)
        // §7.2 step 7: Using credential.id, look up the corresponding credential record
        // (done by the caller; the record it passed must be the one asked for).
        guard constantTimeEquals(response.rawId.bytes, credential.id) else {
            throw WebAuthnError(.credentialIDMismatch, "the stored credential passed in is not the one that signed")
        }
        // §7.2 step 5: If options.allowCredentials is not empty, verify that credential.id
        // identifies one of the public key credentials listed in options.allowCredentials.
        if !allowed.isEmpty {
            guard allowed.contains(where: { constantTimeEquals($0, response.rawId.bytes) }) else {
                throw WebAuthnError(.credentialNotAllowed, "the credential was not in allowCredentials")
            }
        }
        // §7.2 step 6: Identify the user being authenticated and verify that this user is the
        // owner of the public key credential source: if response.userHandle is present, verify
        // that it equals the owner's user handle; if the user was not identified before the
        // ceremony, userHandle must be present.
        if let userHandle = response.response.userHandle?.bytes, !userHandle.isEmpty {
            guard constantTimeEquals(userHandle, credential.userHandle) else {
                throw WebAuthnError(.userHandleMismatch, "response.userHandle does not belong to the credential's account")
            }
        } else if requireUserHandle {
            throw WebAuthnError(.userHandleMismatch, "response.userHandle is required for a discoverable sign-in")
        }
        // §7.2 step 8: Let cData, authData and sig denote the value of response's
        // clientDataJSON, authenticatorData, and signature respectively.
        let authData = try AuthenticatorData(bytes: response.response.authenticatorData.bytes)
        // §7.2 steps 9–14, 21: client data.
        let (clientData, clientDataHash) = try verifyClientData(parsed, type: "webauthn.get", challenge: expectedChallenge)
        // §7.2 steps 15–18: rpIdHash, UP, UV, BE/BS.
        try verifyAuthenticatorFlags(authData, userVerification: userVerification)
        // §7.2 step 19: If credentialRecord.backupEligible is set, verify that currentBe is set;
        // if it is not set, verify that currentBe is not set.
        if let recorded = credential.backupEligible, recorded != authData.backupEligible {
            throw WebAuthnError(.backupEligibilityChanged, "BE changed from \(recorded) to \(authData.backupEligible) since registration")
        }
        // §7.2 step 22: Using credentialRecord.publicKey, verify that sig is a valid signature
        // over the binary concatenation of authData and hash.
        try credential.publicKey.verify(signature: response.response.signature.bytes, over: authData.bytes + clientDataHash)
        // §7.2 step 23: If authData.signCount is nonzero or credentialRecord.signCount is
        // nonzero: if authData.signCount is greater than credentialRecord.signCount, update it;
        // otherwise this is a signal that the authenticator may be cloned.
        var newSignCount = credential.signCount
        var looksCloned = false
        if authData.signCount != 0 || credential.signCount != 0 {
            if authData.signCount > credential.signCount {
                newSignCount = authData.signCount
            } else if configuration.signCountPolicy == .reject {
                throw WebAuthnError(
                    .counterRegression,
                    "signature counter \(authData.signCount) did not increase from \(credential.signCount): possible cloned authenticator")
            } else {
                looksCloned = true
            }
        }
        return VerifiedAuthentication(
            credentialID: credential.id, newSignCount: newSignCount, counterLooksCloned: looksCloned,
            userVerified: authData.userVerified, backupEligible: authData.backupEligible, backedUp: authData.backedUp,
            authenticatorAttachment: response.authenticatorAttachment, origin: clientData.origin,
            // §7.2 step 23 (editor's draft, authn-ceremony-verify-extension-outputs): nothing a
            // sign-in asks for is required of its outputs; they are handed back typed.
            clientExtensions: clientExtensions, authenticatorExtensions: authData.extensionOutputs)
    }
}
