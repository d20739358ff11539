/// The two PRF inputs of one evaluation (§10.1.4 `AuthenticationExtensionsPRFValues`): `first`,
/// and optionally `second` (for rotating a key: both outputs come back from one ceremony).
public struct PRFValues: Codable, Sendable, Hashable {
    /// The first input; any length, hashed by the client before it reaches the authenticator.
    public var first: Base64URLBytes
    /// The second input; `nil` asks for one output.
    public var second: Base64URLBytes?

    /// Makes the inputs from raw bytes.
    public init(first: [UInt8], second: [UInt8]? = nil) {
        self.first = Base64URLBytes(first)
        self.second = second.map(Base64URLBytes.init)
    }

    /// The Level 3 JSON encoding (§5.1.8 rules: `BufferSource` members as base64url).
    var json: JSONValue {
        var values: [String: JSONValue] = ["first": .string(first.base64URL)]
        if let second { values["second"] = .string(second.base64URL) }
        return .object(values)
    }
}

/// The credProtect policy an authenticator applies to a new credential (§10.1.2 /
/// CTAP 2.1 §12.1 `credentialProtectionPolicy`), and the level its authenticator data reports.
public enum CredentialProtectionPolicy: String, Codable, Sendable, Hashable, CaseIterable {
    /// Level 1: the credential may be used without user verification.
    case userVerificationOptional
    /// Level 2: a discoverable credential needs user verification unless its ID is named
    /// (`allowCredentials`): nobody can list the credentials of a lost key without its PIN.
    case userVerificationOptionalWithCredentialIDList
    /// Level 3: every use needs user verification.
    case userVerificationRequired

    /// The CTAP level, 1 to 3, the authenticator data's `credProtect` output carries.
    public var level: Int {
        switch self {
        case .userVerificationOptional: 1
        case .userVerificationOptionalWithCredentialIDList: 2
        case .userVerificationRequired: 3
        }
    }

    /// The policy of a CTAP level (1 to 3); `nil` for any other number.
    public init?(level: Int) {
        switch level {
        case 1: self = .userVerificationOptional
        case 2: self = .userVerificationOptionalWithCredentialIDList
        case 3: self = .userVerificationRequired
        default: return nil
        }
    }
}

/// The registration extensions a relying party asks for (§5.7.1 inputs of `create()`), written in
/// their Level 3 JSON encodings by ``json``. The defaults ask for `credProps` only.
///
/// ```swift
/// var extensions = RegistrationExtensionInputs()
/// extensions.prf = .init(eval: PRFValues(first: salt))          // evaluate the PRF at creation when the platform can
/// extensions.credentialProtection = .init(policy: .userVerificationRequired, enforce: false, requireFor: .deviceBound)
/// let begin = rp.beginRegistration(user: user, extensions: extensions)
/// ```
public struct RegistrationExtensionInputs: Codable, Sendable, Hashable {
    /// `credProps: true` (§10.1.3): the client reports whether the credential is discoverable.
    public var credProps: Bool
    /// `prf` (§10.1.4): `nil` does not ask; an empty `eval` only asks whether the passkey supports
    /// it; inputs also ask for an evaluation at creation, which some platforms answer.
    public var prf: PRFRequest?
    /// `largeBlob.support` (§10.1.5); `nil` does not ask.
    public var largeBlob: LargeBlobSupport?
    /// `credentialProtectionPolicy` with `enforceCredentialProtectionPolicy` (§10.1.2; CTAP 2.1
    /// §12.1), and which credentials must come back protected; `nil` does not ask.
    public var credentialProtection: CredentialProtection?
    /// `minPinLength: true` (CTAP 2.1 §12.4): the authenticator reports its minimum PIN length to
    /// relying parties it was configured to tell.
    public var minPinLength: Bool

    /// Whether the PRF is asked for, and with which inputs (§10.1.4 `AuthenticationExtensionsPRFInputs`).
    public struct PRFRequest: Codable, Sendable, Hashable {
        /// The inputs to evaluate at creation; `nil` only asks for support (`prf: {}`).
        public var eval: PRFValues?
        /// Asks for PRF support, and for an evaluation at creation when `eval` is given.
        public init(eval: PRFValues? = nil) { self.eval = eval }
    }

    /// `largeBlob.support` (§10.1.5 `LargeBlobSupport`).
    public enum LargeBlobSupport: String, Codable, Sendable, Hashable {
        /// Creation fails on a client or authenticator without large blob storage.
        case required
        /// Large blob storage is used when there is some.
        case preferred
    }

    /// The credProtect policy to ask for and what to require of the answer.
    public struct CredentialProtection: Codable, Sendable, Hashable {
        /// Which credentials must come back with at least ``policy``'s level.
        public enum Scope: String, Codable, Sendable, Hashable {
            /// None: the policy is asked for, never required.
            case none
            /// Credentials that cannot be synced (BE clear, a signed flag): security keys and
            /// device-bound platform credentials. Synced passkeys ignore credProtect.
            case deviceBound
            /// Every credential.
            case all
        }
        /// The policy asked for.
        public var policy: CredentialProtectionPolicy
        /// `enforceCredentialProtectionPolicy`: with a policy above `userVerificationOptional`, the
        /// client fails creation on any authenticator that cannot apply it, synced passkeys'
        /// providers included (they have no credProtect), and the person sees a cancelled
        /// ceremony. Pair it with ``Scope/all`` only; with ``Scope/deviceBound`` leave it `false`
        /// and let the finish judge the credential.
        public var enforce: Bool
        /// Which credentials the relying party refuses (`credential_protection_not_applied`)
        /// when their authenticator data reports a lower level or none.
        public var requireFor: Scope
        /// Makes the request.
        public init(policy: CredentialProtectionPolicy, enforce: Bool, requireFor: Scope) {
            self.policy = policy
            self.enforce = enforce
            self.requireFor = requireFor
        }
    }

    /// Makes the inputs; the defaults ask for `credProps` only.
    public init(
        credProps: Bool = true, prf: PRFRequest? = nil, largeBlob: LargeBlobSupport? = nil,
        credentialProtection: CredentialProtection? = nil, minPinLength: Bool = false
    ) {
        self.credProps = credProps
        self.prf = prf
        self.largeBlob = largeBlob
        self.credentialProtection = credentialProtection
        self.minPinLength = minPinLength
    }

    private enum CodingKeys: String, CodingKey { case credProps, prf, largeBlob, credentialProtection, minPinLength }

    /// Decodes a kept state; members added later default to "not asked".
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        credProps = try container.decodeIfPresent(Bool.self, forKey: .credProps) ?? true
        prf = try container.decodeIfPresent(PRFRequest.self, forKey: .prf)
        largeBlob = try container.decodeIfPresent(LargeBlobSupport.self, forKey: .largeBlob)
        credentialProtection = try container.decodeIfPresent(CredentialProtection.self, forKey: .credentialProtection)
        minPinLength = try container.decodeIfPresent(Bool.self, forKey: .minPinLength) ?? false
    }

    /// The `extensions` member of `PublicKeyCredentialCreationOptionsJSON`; `nil` when nothing is asked.
    public var json: [String: JSONValue]? {
        var out: [String: JSONValue] = [:]
        if credProps { out["credProps"] = .bool(true) }
        if let prf { out["prf"] = .object(prf.eval.map { ["eval": $0.json] } ?? [:]) }
        if let largeBlob { out["largeBlob"] = .object(["support": .string(largeBlob.rawValue)]) }
        if let credentialProtection {
            out["credentialProtectionPolicy"] = .string(credentialProtection.policy.rawValue)
            out["enforceCredentialProtectionPolicy"] = .bool(credentialProtection.enforce)
        }
        if minPinLength { out["minPinLength"] = .bool(true) }
        return out.isEmpty ? nil : out
    }
}

/// The authentication extensions a relying party asks for (§5.7.1 inputs of `get()`), written in
/// their Level 3 JSON encodings by ``json``. The defaults ask for none.
public struct AuthenticationExtensionInputs: Codable, Sendable, Hashable {
    /// `prf` (§10.1.4): inputs for every credential (`eval`) and per credential
    /// (`evalByCredential`, keyed by credential ID; only with a non-empty `allowCredentials`).
    public var prf: PRFRequest?
    /// `largeBlob` (§10.1.5): read the credential's blob, or write one (one credential allowed).
    public var largeBlob: LargeBlobRequest?

    /// The PRF inputs of a sign-in.
    public struct PRFRequest: Codable, Sendable, Hashable {
        /// Inputs for a credential not named in ``evalByCredential``.
        public var eval: PRFValues?
        /// Inputs per credential ID (raw bytes; written base64url).
        public var evalByCredential: [Base64URLBytes: PRFValues]
        /// Makes the request.
        public init(eval: PRFValues? = nil, evalByCredential: [[UInt8]: PRFValues] = [:]) {
            self.eval = eval
            self.evalByCredential = Dictionary(
                evalByCredential.map { (Base64URLBytes($0.key), $0.value) }, uniquingKeysWith: { first, _ in first })
        }
    }

    /// `largeBlob.read` or `largeBlob.write` (§10.1.5 `AuthenticationExtensionsLargeBlobInputs`).
    public enum LargeBlobRequest: Codable, Sendable, Hashable {
        /// `read: true`: the client returns the stored blob, if any.
        case read
        /// `write`: the client stores these bytes with the credential (the ceremony must allow
        /// exactly one credential).
        case write(Base64URLBytes)
    }

    /// Makes the inputs; the defaults ask for none.
    public init(prf: PRFRequest? = nil, largeBlob: LargeBlobRequest? = nil) {
        self.prf = prf
        self.largeBlob = largeBlob
    }

    /// The `extensions` member of `PublicKeyCredentialRequestOptionsJSON`; `nil` when nothing is asked.
    public var json: [String: JSONValue]? {
        var out: [String: JSONValue] = [:]
        if let prf {
            var inputs: [String: JSONValue] = [:]
            if let eval = prf.eval { inputs["eval"] = eval.json }
            if !prf.evalByCredential.isEmpty {
                inputs["evalByCredential"] = .object(
                    Dictionary(prf.evalByCredential.map { ($0.key.base64URL, $0.value.json) }, uniquingKeysWith: { first, _ in first }))
            }
            out["prf"] = .object(inputs)
        }
        switch largeBlob {
        case nil: break
        case .read: out["largeBlob"] = .object(["read": .bool(true)])
        case .write(let blob): out["largeBlob"] = .object(["write": .string(blob.base64URL)])
        }
        return out.isEmpty ? nil : out
    }
}
