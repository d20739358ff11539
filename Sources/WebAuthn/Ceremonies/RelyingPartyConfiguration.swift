import Foundation

/// `UserVerificationRequirement` (§5.8.6).
public enum UserVerificationRequirement: String, Sendable, Codable, CaseIterable {
    /// `required`: a ceremony fails unless the UV flag is set (§7.1 step 15, §7.2 step 17).
    /// `preferred`: ask for user verification, accept a response without it.
    /// `discouraged`: do not ask for user verification.
    case required, preferred, discouraged
}

/// `AttestationConveyancePreference` (§5.4.7).
public enum AttestationConveyancePreference: String, Sendable, Codable, CaseIterable {
    /// `none`: no attestation wanted. `indirect`: the client may replace the statement with an
    /// anonymized one. `direct`: the statement as the authenticator made it. `enterprise`: a statement
    /// that may identify the individual authenticator, for managed deployments (§5.4.7).
    case none, indirect, direct, enterprise
}

/// What to do when a credential's signature counter did not increase (§7.2 step 23).
public enum SignCountPolicy: String, Sendable, Codable, CaseIterable {
    /// Fail the ceremony with `counter_regression`.
    case reject
    /// Accept, and set ``VerifiedAuthentication/counterLooksCloned`` for the caller to record.
    case flag
}

extension RelyingParty {
    /// The validated settings of one relying party. Build it, then pass it to
    /// ``RelyingParty/init(_:)``, which rejects inconsistent values with `invalid_configuration`.
    public struct Configuration: Sendable {
        /// The RP ID: a registrable domain suffix of every web origin (`example.com`), or
        /// `localhost` in development.
        public var rpID: String
        /// The human-palatable name shown by some authenticators.
        public var rpName: String
        /// Every origin accepted in clientDataJSON: web origins (`https://example.com`) and
        /// Android app origins (`android:apk-key-hash:…`). Exact string match.
        public var origins: [String]
        /// The user verification each ceremony asks for unless `begin…` overrides it; `required` fails a
        /// response without the UV flag (§7.1 step 15, §7.2 step 17).
        public var userVerification: UserVerificationRequirement
        /// Credential algorithms offered in `pubKeyCredParams`, in preference order, and accepted.
        public var algorithms: [COSEAlgorithmIdentifier]
        /// The attestation conveyance sent in creation options (§5.4.7).
        public var attestation: AttestationConveyancePreference
        /// How attestation statements are verified and trusted (§7.1 steps 21–24).
        public var attestationPolicy: AttestationPolicy
        /// How long a challenge lives, 1 second to 24 hours; sent as `timeout` (milliseconds) in the
        /// options. The relying party keeps no state: the caller that keeps the ceremony state expires it.
        public var timeout: Duration
        /// Accept clientData with `crossOrigin: true` (the ceremony ran in a cross-origin iframe).
        public var allowCrossOrigin: Bool
        /// Top-level origins allowed to embed a cross-origin ceremony (clientData `topOrigin`).
        public var allowedTopOrigins: [String]
        /// What a signature counter that did not increase does (§7.2 step 23).
        public var signCountPolicy: SignCountPolicy
        /// Require the UP flag. Only conditional create (automatic passkey upgrade) may clear it.
        public var requireUserPresence: Bool

        /// Makes a configuration. The defaults suit local development (`localhost`, origin
        /// `http://localhost:8080`): user verification required, ``RelyingParty/defaultAlgorithms``, no
        /// attestation, 5-minute timeout, no cross-origin use, counter regressions rejected, UP required.
        public init(
            rpID: String = "localhost", rpName: String = "passkeyd", origins: [String] = ["http://localhost:8080"],
            userVerification: UserVerificationRequirement = .required,
            algorithms: [COSEAlgorithmIdentifier] = RelyingParty.defaultAlgorithms,
            attestation: AttestationConveyancePreference = .none, attestationPolicy: AttestationPolicy = AttestationPolicy(),
            timeout: Duration = .seconds(300), allowCrossOrigin: Bool = false, allowedTopOrigins: [String] = [],
            signCountPolicy: SignCountPolicy = .reject, requireUserPresence: Bool = true
        ) {
            self.rpID = rpID
            self.rpName = rpName
            self.origins = origins
            self.userVerification = userVerification
            self.algorithms = algorithms
            self.attestation = attestation
            self.attestationPolicy = attestationPolicy
            self.timeout = timeout
            self.allowCrossOrigin = allowCrossOrigin
            self.allowedTopOrigins = allowedTopOrigins
            self.signCountPolicy = signCountPolicy
            self.requireUserPresence = requireUserPresence
        }
    }

    /// EdDSA and ES256 first (small, fast, what passkey providers create), then RS256 (Windows
    /// Hello), then ES384, ES512 and PS256. ML-DSA and the other RSA variants are verified too,
    /// but offered only when configured.
    public static let defaultAlgorithms: [COSEAlgorithmIdentifier] = [.edDSA, .es256, .rs256, .es384, .es512, .ps256]

    /// Algorithms a credential key may use. RS1 (SHA-1) only when the relying party lists it in
    /// ``Configuration/algorithms`` (it is never a default): some old Windows Hello credentials use it.
    static let verifiableAlgorithms: Set<COSEAlgorithmIdentifier> = [
        .edDSA, .ed25519, .es256, .es384, .es512, .rs256, .rs384, .rs512, .ps256, .ps384, .ps512, .mlDSA65, .mlDSA87, .rs1,
    ]

    static func validate(_ configuration: Configuration) throws(WebAuthnError) {
        let rpID = configuration.rpID
        let labelCharacters = Set("abcdefghijklmnopqrstuvwxyz0123456789-.")
        guard !rpID.isEmpty, rpID.count <= 253, rpID.allSatisfy({ labelCharacters.contains($0) }),
            !rpID.hasPrefix("."), !rpID.hasSuffix("."), !rpID.contains("..")
        else {
            throw WebAuthnError(.invalidConfiguration, "rpID \"\(rpID)\" is not a lower-case domain name (e.g. example.com or localhost)")
        }
        guard !configuration.origins.isEmpty else {
            throw WebAuthnError(.invalidConfiguration, "origins is empty: list every web origin and Android app origin allowed")
        }
        for origin in configuration.origins {
            try validateOrigin(origin, rpID: rpID)
        }
        guard !configuration.algorithms.isEmpty else {
            throw WebAuthnError(.invalidConfiguration, "algorithms is empty")
        }
        for algorithm in configuration.algorithms where !verifiableAlgorithms.contains(algorithm) {
            throw WebAuthnError(.invalidConfiguration, "algorithm \(algorithm) is not supported for credentials")
        }
        guard configuration.timeout > .zero, configuration.timeout <= .seconds(24 * 3600) else {
            throw WebAuthnError(.invalidConfiguration, "timeout must be between 1 second and 24 hours")
        }
    }

    /// A web origin is `scheme://host[:port]` with no path; https, or http only for localhost.
    /// Its host need not be under the RP ID: related origin requests (§5.11) let other domains
    /// use it, and the browser enforces that relation before the ceremony. Android origins are checked
    /// for shape: `android:apk-key-hash:` + 43 base64url characters (a SHA-256).
    static func validateOrigin(_ origin: String, rpID: String) throws(WebAuthnError) {
        if origin.hasPrefix("android:apk-key-hash:") {
            let hash = origin.dropFirst("android:apk-key-hash:".count)
            guard let bytes = Base64.decode(String(hash), flavor: .urlUnpadded), bytes.count == 32 else {
                throw WebAuthnError(
                    .invalidConfiguration,
                    "origin \"\(origin)\": the apk-key-hash must be the unpadded base64url SHA-256 of the signing certificate")
            }
            return
        }
        guard let components = URLComponents(string: origin), let scheme = components.scheme, let host = components.host,
            components.path.isEmpty, components.query == nil, components.fragment == nil, components.user == nil
        else {
            throw WebAuthnError(.invalidConfiguration, "origin \"\(origin)\" is not of the form scheme://host[:port]")
        }
        guard scheme == "https" || (scheme == "http" && (host == "localhost" || host.hasSuffix(".localhost") || host == "127.0.0.1")) else {
            throw WebAuthnError(.invalidConfiguration, "origin \"\(origin)\" must use https (http is allowed only for localhost)")
        }
    }
}
