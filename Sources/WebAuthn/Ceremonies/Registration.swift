import Foundation

/// `PublicKeyCredentialUserEntity` (§5.4.3): the account a passkey is created for.
public struct PublicKeyCredentialUserEntity: Sendable, Hashable {
    /// The user handle: random, at most 64 bytes, never personal data (§14.6.1).
    public var id: [UInt8]
    /// A human-palatable identifier for the account, such as a username or email address (§5.4.3);
    /// shown to the user to pick among passkeys.
    public var name: String
    /// A human-palatable name for the account, for display only (§5.4.3); may be empty.
    public var displayName: String
    /// Makes the entity; `id` is raw bytes (``RelyingParty/makeUserHandle()`` makes one) and is sent
    /// base64url-encoded.
    public init(id: [UInt8], name: String, displayName: String) {
        self.id = id
        self.name = name
        self.displayName = displayName
    }
}

/// A credential ID with the transports its authenticator reported, for
/// `excludeCredentials` / `allowCredentials`.
public struct CredentialDescriptor: Sendable, Hashable {
    /// The credential ID, as raw bytes (sent base64url-encoded).
    public var id: [UInt8]
    /// `AuthenticatorTransport` values (§5.8.4: `usb`, `nfc`, `ble`, `internal`, `hybrid`) as recorded at
    /// registration; empty sends none.
    public var transports: [String]
    /// Makes a descriptor from raw credential ID bytes and the transports recorded for it.
    public init(id: [UInt8], transports: [String] = []) {
        self.id = id
        self.transports = transports
    }
}

/// What `beginRegistration` returns: the options to send, and the state to keep until the
/// response comes back.
public struct RegistrationBegin: Sendable {
    /// `PublicKeyCredentialCreationOptionsJSON` for the client, as is.
    public let options: PublicKeyCredentialCreationOptionsJSON
    /// What ``RelyingParty/finishRegistration(response:state:now:)`` needs back.
    public let state: RegistrationState
    /// The challenge (also in ``state``).
    public var challenge: [UInt8] { options.challenge.bytes }
}

/// A registration that passed every check of §7.1: everything the store keeps for a passkey.
/// Only the `finishRegistration` methods of ``RelyingParty`` make one, such as
/// ``RelyingParty/finishRegistration(response:state:now:)``.
public struct VerifiedRegistration: Sendable {
    /// The credential ID from the attested credential data (§6.5.1), as raw bytes; equal to `rawId`.
    public let credentialID: [UInt8]
    /// The credential public key from the attested credential data (§6.5.1); its algorithm was offered
    /// in `pubKeyCredParams` (§7.1 step 19).
    public let publicKey: CredentialPublicKey
    /// The signature counter at registration (§6.1.1); 0 when the authenticator keeps none.
    public let signCount: UInt32
    /// The authenticator model or passkey provider (§6.5.1); all zeros when not disclosed.
    public let aaguid: AAGUID
    /// `response.transports`, as the client reported them (hints for later `allowCredentials`).
    public let transports: [String]
    /// UV: the authenticator verified the user (§6.1, §7.1 step 15).
    public let userVerified: Bool
    /// BE: the passkey can be synced (multi-device).
    public let backupEligible: Bool
    /// BS: the passkey is synced now.
    public let backedUp: Bool
    /// What the attestation statement established: format, type and trust (§7.1 steps 21–24).
    public let attestation: AttestationVerdict
    /// `platform` or `cross-platform`, when the client said.
    public let authenticatorAttachment: String?
    /// The origin the ceremony ran on (web or Android app).
    public let origin: String
    /// `clientExtensionResults.credProps.rk`, when the client reported it.
    public let discoverable: Bool?
    /// The client extension outputs (§5.7.2), typed; `prf.results` never reaches here.
    public let clientExtensions: ClientExtensionOutputs
    /// The authenticator extension outputs in authenticator data (§6.1), typed.
    public let authenticatorExtensions: AuthenticatorExtensionOutputs

    /// Whether the credential supports the PRF: the client said `prf.enabled`, or the
    /// authenticator reported `hmac-secret`; `nil` when neither said anything.
    public var prfEnabled: Bool? {
        if clientExtensions.prfEnabled == true || authenticatorExtensions.hmacSecret == true { return true }
        return clientExtensions.prfEnabled ?? authenticatorExtensions.hmacSecret
    }
}

extension RelyingParty {
    /// Builds `PublicKeyCredentialCreationOptionsJSON` for a new passkey (§5.4).
    ///
    /// Resident key `required` (a passkey), the configured algorithms in preference order,
    /// attestation conveyance from the configuration, and `excludeCredentials` so one
    /// authenticator does not register twice for the same account.
    public func beginRegistration(
        user: PublicKeyCredentialUserEntity, excludeCredentials: [CredentialDescriptor] = [],
        userVerification: UserVerificationRequirement? = nil, authenticatorAttachment: String? = nil,
        hints: [String] = [], challenge: [UInt8]? = nil, conditional: Bool = false, profile: CeremonyProfile = .standard,
        extensions: RegistrationExtensionInputs = RegistrationExtensionInputs()
    ) -> RegistrationBegin {
        let requirement = userVerification ?? configuration.userVerification
        let options = PublicKeyCredentialCreationOptionsJSON(
            rp: PublicKeyCredentialRpEntity(id: configuration.rpID, name: configuration.rpName),
            user: PublicKeyCredentialUserEntityJSON(id: user.id, name: user.name, displayName: user.displayName),
            challenge: Base64URLBytes(challenge ?? Self.makeChallenge()),
            pubKeyCredParams: configuration.algorithms.map { PublicKeyCredentialParameters(alg: $0) },
            timeout: timeoutMilliseconds,
            excludeCredentials: excludeCredentials.map { PublicKeyCredentialDescriptorJSON(id: $0.id, transports: $0.transports) },
            authenticatorSelection: AuthenticatorSelectionCriteria(
                authenticatorAttachment: authenticatorAttachment, residentKey: "required", requireResidentKey: true,
                userVerification: requirement.rawValue),
            hints: hints,
            attestation: configuration.attestation.rawValue,
            extensions: extensions.json
        )
        let state = RegistrationState(
            challenge: options.challenge.bytes, userVerification: requirement, conditional: conditional, userHandle: user.id,
            excludeCredentials: excludeCredentials.map(\.id), hints: hints, profile: profile, extensions: extensions)
        return RegistrationBegin(options: options, state: state)
    }

    /// Verifies a registration response (§7.1) against the state its `beginRegistration` made.
    ///
    /// - Parameters:
    ///   - response: the new credential the client sent (`PublicKeyCredential.toJSON()`).
    ///   - state: ``RegistrationBegin/state``, as kept since `beginRegistration`.
    ///   - now: the time attestation certificates are checked at.
    /// - Returns: the verified passkey. The caller must still check that ``VerifiedRegistration/credentialID``
    ///   is not registered yet (§7.1 step 26) before storing it.
    public func finishRegistration(response: RegistrationResponseJSON, state: RegistrationState, now: Date = Date())
        async throws(WebAuthnError)
        -> VerifiedRegistration
    {
        try await finishRegistration(
            response: response, clientData: CollectedClientData(bytes: response.response.clientDataJSON.bytes),
            state: state, now: now)
    }

    /// ``finishRegistration(response:state:now:)`` with the client data already parsed (a server
    /// that read the challenge from it to find the ceremony parses it once). The signature and
    /// attestation are checked over `clientData.bytes`.
    public func finishRegistration(
        response: RegistrationResponseJSON, clientData: CollectedClientData, state: RegistrationState, now: Date = Date()
    ) async throws(WebAuthnError) -> VerifiedRegistration {
        try await verifyRegistration(
            response: response, clientData: clientData, expectedChallenge: state.challenge.bytes, userVerification: state.userVerification,
            now: now, conditionalCreate: state.conditional, unsafeToleratesRewrittenFlags: state.profile.unsafeToleratesRewrittenFlags,
            extensions: state.extensions)
    }

    /// Verifies a registration response (§7.1) against a challenge the caller stored itself
    /// (a convenience over ``finishRegistration(response:state:now:)``).
    ///
    /// - Parameters:
    ///   - response: the new credential the client sent (`PublicKeyCredential.toJSON()`).
    ///   - expectedChallenge: the challenge of the options this ceremony sent.
    ///   - userVerification: overrides the configured requirement for this ceremony.
    ///   - now: the time attestation certificates are checked at.
    ///   - conditionalCreate: the options were used with `mediation: "conditional"` (automatic
    ///     passkey creation after a password sign-in): user presence is not required (§7.1
    ///     step 14), and the authenticator is expected not to verify the user either, so pass a
    ///     `userVerification` that is not `required`.
    ///   - unsafeToleratesRewrittenFlags: accept authenticator data whose ED flag is clear
    ///     although an extension map follows. Only for a client known to rewrite the flags
    ///     (the reference Android app); every other check stays as is.
    ///   - extensions: the extensions the options asked for; the outputs are checked against them.
    /// - Returns: the verified passkey. The caller must still check that ``VerifiedRegistration/credentialID``
    ///   is not registered yet (§7.1 step 26) before storing it.
    public func finishRegistration(
        response: RegistrationResponseJSON, expectedChallenge: [UInt8],
        userVerification: UserVerificationRequirement? = nil, now: Date = Date(), conditionalCreate: Bool = false,
        unsafeToleratesRewrittenFlags: Bool = false, extensions: RegistrationExtensionInputs = RegistrationExtensionInputs()
    ) async throws(WebAuthnError) -> VerifiedRegistration {
        try await verifyRegistration(
            response: response, clientData: CollectedClientData(bytes: response.response.clientDataJSON.bytes),
            expectedChallenge: expectedChallenge, userVerification: userVerification ?? configuration.userVerification, now: now,
            conditionalCreate: conditionalCreate, unsafeToleratesRewrittenFlags: unsafeToleratesRewrittenFlags, extensions: extensions)
    }

    private func verifyRegistration(
        response: RegistrationResponseJSON, clientData parsed: CollectedClientData, expectedChallenge: [UInt8],
        userVerification: UserVerificationRequirement, now: Date, conditionalCreate: Bool, unsafeToleratesRewrittenFlags: Bool,
        extensions requested: RegistrationExtensionInputs
    ) async throws(WebAuthnError) -> VerifiedRegistration {
        // §7.1 step 3: Let response be credential.response (an AuthenticatorAttestationResponse).
        guard response.type == "public-key" else {
            throw WebAuthnError(.malformedCredential, "credential.type is \"\(response.type)\", expected \"public-key\"")
        }
        // §7.1 step 4: Let clientExtensionResults be the result of calling
        // credential.getClientExtensionResults(). Read (strictly, bounded) before any costly check.
        let clientExtensions = try ClientExtensionOutputs(response.clientExtensionResults)
        // credential.id is the base64url encoding of credential.rawId (§5.1).
        guard let idBytes = Base64.decode(response.id, flavor: .any), constantTimeEquals(idBytes, response.rawId.bytes) else {
            throw WebAuthnError(.credentialIDMismatch, "credential.id does not encode credential.rawId")
        }
        // §7.1 steps 5–11: client data.
        let (clientData, clientDataHash) = try verifyClientData(parsed, type: "webauthn.create", challenge: expectedChallenge)
        // §7.1 step 12: Perform CBOR decoding on the attestationObject field to obtain the
        // attestation statement format fmt, the authenticator data authData, and the attestation
        // statement attStmt.
        let attestationObject = try AttestationObject(
            bytes: response.response.attestationObject.bytes,
            extensionFlagHandling: unsafeToleratesRewrittenFlags ? .unsafeAllowExtensionsWithoutFlag : .strict)
        let authData = attestationObject.authenticatorData
        // §7.1 steps 13–16: rpIdHash, UP, UV, BE/BS.
        try verifyAuthenticatorFlags(
            authData, userVerification: userVerification, conditionalCreate: conditionalCreate)
        guard let credential = authData.attestedCredentialData else {
            throw WebAuthnError(.malformedAuthenticatorData, "registration authenticator data has no attested credential data (AT)")
        }
        // §7.1 step 19: Verify that the "alg" parameter in the credential public key in authData
        // matches the alg attribute of one of the items in options.pubKeyCredParams.
        guard configuration.algorithms.contains(credential.publicKey.algorithm) else {
            throw WebAuthnError(
                .unsupportedAlgorithm, "credential algorithm \(credential.publicKey.algorithm) was not offered in pubKeyCredParams")
        }
        // §7.1 steps 21–24: attestation statement format, verification and trust.
        let attestation = try await Attestation.verify(
            AttestationInput(
                format: attestationObject.format, statement: attestationObject.statement, authenticatorData: authData,
                credential: credential, clientDataHash: clientDataHash, policy: configuration.attestationPolicy, verificationTime: now))
        // §7.1 step 25: Verify that the credentialId is ≤ 1023 bytes (enforced while parsing).
        // Level 3 §7.1 (credential record): credential.rawId must be the credentialId the
        // authenticator attested, or the record would be stored under a different ID.
        guard constantTimeEquals(response.rawId.bytes, credential.credentialID) else {
            throw WebAuthnError(.credentialIDMismatch, "credential.rawId differs from the credential ID in authenticator data")
        }
        // §7.1 step 28 (editor's draft, reg-ceremony-verify-extension-outputs): process the client
        // and authenticator extension outputs as the relying party requires. Outputs nobody asked
        // for are ignored; what the options required is checked.
        try Self.verifyRequestedOutputs(requested, client: clientExtensions, authData: authData)
        return VerifiedRegistration(
            credentialID: credential.credentialID, publicKey: credential.publicKey, signCount: authData.signCount,
            aaguid: credential.aaguid, transports: response.response.transports ?? [], userVerified: authData.userVerified,
            backupEligible: authData.backupEligible, backedUp: authData.backedUp, attestation: attestation,
            authenticatorAttachment: response.authenticatorAttachment, origin: clientData.origin,
            discoverable: clientExtensions.discoverable, clientExtensions: clientExtensions,
            authenticatorExtensions: authData.extensionOutputs)
    }

    /// The registration extension outputs checked against what the options required.
    static func verifyRequestedOutputs(
        _ requested: RegistrationExtensionInputs, client: ClientExtensionOutputs, authData: AuthenticatorData
    ) throws(WebAuthnError) {
        // credProtect (CTAP 2.1 §12.1): a credential the policy covers must report at least the
        // level asked for. BE is a signed flag, so a client cannot talk its way out of the scope.
        if let protection = requested.credentialProtection {
            let covered: Bool
            switch protection.requireFor {
            case .none: covered = false
            case .deviceBound: covered = !authData.backupEligible
            case .all: covered = true
            }
            if covered {
                // No credProtect output: the credential has the authenticator's default, level 1
                // (CTAP 2.1 §12.1: userVerificationOptional).
                let reported = authData.extensionOutputs.credProtect?.level ?? 1
                guard reported >= protection.policy.level else {
                    throw WebAuthnError(
                        .credentialProtectionNotApplied,
                        "credProtect level \(protection.policy.level) is required and the authenticator reported "
                            + (authData.extensionOutputs.credProtect == nil ? "none (level 1)" : "level \(reported)"))
                }
            }
        }
        // largeBlob (§10.1.5): with support "required", the client must report support.
        if requested.largeBlob == .required, client.largeBlobSupported != true {
            throw WebAuthnError(.largeBlobUnsupported, "largeBlob support is required and the client did not report largeBlob.supported")
        }
    }
}
