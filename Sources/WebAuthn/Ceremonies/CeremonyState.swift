/// Client quirks a ceremony accepts on purpose. Everything else is checked as the specification
/// says; a profile only ever loosens what its name says.
public struct CeremonyProfile: Codable, Sendable, Hashable {
    /// Accept registration authenticator data whose ED flag is clear although an extension map
    /// follows: only for a client known to rewrite the flags (the reference Android app).
    public var unsafeToleratesRewrittenFlags: Bool

    /// Makes a profile; the default loosens nothing, like ``standard``.
    public init(unsafeToleratesRewrittenFlags: Bool = false) {
        self.unsafeToleratesRewrittenFlags = unsafeToleratesRewrittenFlags
    }

    /// Nothing loosened.
    public static let standard = CeremonyProfile()
}

/// A registration between `beginRegistration(user:…)` and ``RelyingParty/finishRegistration(response:state:now:)``:
/// everything the finish needs and nothing it may not trust. `Codable`: the caller keeps it (a database row, a session) as an
/// opaque value and hands it back; it holds no secret.
///
/// ```swift
/// let begin = rp.beginRegistration(user: user)
/// try store.save(JSONEncoder().encode(begin.state))            // send begin.options to the client
/// let state = try JSONDecoder().decode(RegistrationState.self, from: saved)
/// let passkey = try await rp.finishRegistration(response: response, state: state)
/// ```
public struct RegistrationState: Codable, Sendable, Hashable {
    /// The challenge sent in the options.
    public var challenge: Base64URLBytes
    /// What this ceremony asked of user verification (§7.1 step 15).
    public var userVerification: UserVerificationRequirement
    /// The options were for `mediation: "conditional"` (automatic creation after a password
    /// sign-in): user presence is not required (§7.1 step 14).
    public var conditional: Bool
    /// The user handle the options carried.
    public var userHandle: Base64URLBytes
    /// The credential IDs the options excluded.
    public var excludeCredentials: [Base64URLBytes]
    /// The hints the options carried.
    public var hints: [String]
    /// The client quirks this ceremony accepts; ``CeremonyProfile/standard`` loosens nothing.
    public var profile: CeremonyProfile
    /// The extensions the options asked for: the finish checks the outputs against them
    /// (credProtect and largeBlob requirements).
    public var extensions: RegistrationExtensionInputs

    /// Makes the state from raw bytes (`challenge`, `userHandle`, `excludeCredentials`); they encode as
    /// unpadded base64url. Usually made by ``RelyingParty``'s `beginRegistration(user:…)`.
    public init(
        challenge: [UInt8], userVerification: UserVerificationRequirement, conditional: Bool = false, userHandle: [UInt8] = [],
        excludeCredentials: [[UInt8]] = [], hints: [String] = [], profile: CeremonyProfile = .standard,
        extensions: RegistrationExtensionInputs = RegistrationExtensionInputs()
    ) {
        self.challenge = Base64URLBytes(challenge)
        self.userVerification = userVerification
        self.conditional = conditional
        self.userHandle = Base64URLBytes(userHandle)
        self.excludeCredentials = excludeCredentials.map(Base64URLBytes.init)
        self.hints = hints
        self.profile = profile
        self.extensions = extensions
    }

    private enum CodingKeys: String, CodingKey {
        case challenge, userVerification, conditional, userHandle, excludeCredentials, hints, profile, extensions
    }

    /// Decodes a kept state; a state kept before extensions were recorded asked for `credProps` only.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        challenge = try container.decode(Base64URLBytes.self, forKey: .challenge)
        userVerification = try container.decode(UserVerificationRequirement.self, forKey: .userVerification)
        conditional = try container.decode(Bool.self, forKey: .conditional)
        userHandle = try container.decode(Base64URLBytes.self, forKey: .userHandle)
        excludeCredentials = try container.decode([Base64URLBytes].self, forKey: .excludeCredentials)
        hints = try container.decode([String].self, forKey: .hints)
        profile = try container.decode(CeremonyProfile.self, forKey: .profile)
        extensions = try container.decodeIfPresent(RegistrationExtensionInputs.self, forKey: .extensions) ?? RegistrationExtensionInputs()
    }
}

/// An authentication between ``RelyingParty/beginAuthentication(allowCredentials:userVerification:hints:challenge:profile:extensions:)``
/// and ``RelyingParty/finishAuthentication(response:state:credential:)``: kept by the caller as an
/// opaque `Codable` value, like ``RegistrationState``.
public struct AuthenticationState: Codable, Sendable, Hashable {
    /// The challenge sent in the options.
    public var challenge: Base64URLBytes
    /// What this ceremony asked of user verification (§7.2 step 17).
    public var userVerification: UserVerificationRequirement
    /// The credential IDs really offered in `allowCredentials` (§7.2 step 5): empty for a
    /// discoverable sign-in (AutoFill), where the user handle then identifies the account.
    public var allowCredentials: [Base64URLBytes]
    /// The hints the options carried.
    public var hints: [String]
    /// The client quirks this ceremony accepts; ``CeremonyProfile/standard`` loosens nothing.
    public var profile: CeremonyProfile

    /// Makes the state from raw bytes (`challenge`, `allowCredentials`); they encode as unpadded
    /// base64url. An empty `allowCredentials` means a discoverable sign-in (see ``userIdentified``).
    public init(
        challenge: [UInt8], userVerification: UserVerificationRequirement, allowCredentials: [[UInt8]] = [], hints: [String] = [],
        profile: CeremonyProfile = .standard
    ) {
        self.challenge = Base64URLBytes(challenge)
        self.userVerification = userVerification
        self.allowCredentials = allowCredentials.map(Base64URLBytes.init)
        self.hints = hints
        self.profile = profile
    }

    /// The user was identified before the ceremony (username-first): `allowCredentials` lists
    /// their passkeys. Otherwise the response must carry a user handle (§7.2 step 6).
    public var userIdentified: Bool { !allowCredentials.isEmpty }
}
