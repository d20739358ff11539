import Foundation
import WebAuthn

/// The sections of ``ServerConfiguration``: abuse limits, extensions and tokens.
extension ServerConfiguration {
    /// Abuse limits (docs/security.md), in fixed windows. Over a limit: 429 with Retry-After.
    ///
    /// - Every request to a ceremony, password or recovery route counts against its address.
    /// - Per account, only what an attacker cannot produce without failing against the
    ///   account's secrets counts: wrong passwords and wrong recovery codes. Those are limited
    ///   per (account, address); past the much higher account-wide ceiling, password and recovery
    ///   attempts on the account are slowed, never refused. Passkey assertions are not guessable
    ///   and have no per-account limit: failures from other addresses never block a passkey.
    public struct RateLimits: Sendable, Hashable, Codable {
        public var enabled: Bool
        public var windowSeconds: Int
        /// Requests per window from one IP address to the limited endpoints.
        public var perIP: Int
        /// Failed password or recovery-code attempts per window on one account from one address.
        public var perAccount: Int
        /// Failed attempts per window on one account from all addresses, past which every
        /// password or recovery-code attempt on it waits ``slowdownSeconds`` first.
        public var perAccountTotal: Int
        public var slowdownSeconds: Int
        /// How long a per-address refusal is held before it is sent when the address was already
        /// refused in this window (it did not wait as Retry-After told it): 0 sends it at once.
        /// The connection waits, no CPU is spent, and a flood from one address that waits for its
        /// answers gets at most `maxConnectionsPerAddress` of them per hold (issue 44, the noisy
        /// neighbour). A process setting: one budget of held refusals (``RefusalHold``: 64 per
        /// address, 1,024 in all) serves every tenant.
        public var refusalHoldMilliseconds: Int
        /// Most counters kept in memory (single instance); the oldest is evicted past it. Should
        /// be more than `2 × perIP + 1`, the keys one address can make in a window (see
        /// ``oneAddressCanEvict``).
        public var maxKeys: Int

        /// One address makes at most `2 × perIP + 1` keys a window (its own, and per password or
        /// recovery attempt an account-and-address key and an account key): when the table
        /// holds no more, one address alone can evict the counts meant to stop it. `serve`
        /// warns (a load test may want exactly that: a huge perIP to switch the address limit off).
        public var oneAddressCanEvict: Bool {
            let (twice, overflow) = perIP.multipliedReportingOverflow(by: 2)
            return enabled && (overflow || maxKeys <= twice + 1)
        }
        public init(
            enabled: Bool = true, windowSeconds: Int = 60, perIP: Int = 300, perAccount: Int = 10, perAccountTotal: Int = 100,
            slowdownSeconds: Int = 2, maxKeys: Int = 100_000, refusalHoldMilliseconds: Int = 1000
        ) {
            self.enabled = enabled
            self.windowSeconds = windowSeconds
            self.perIP = perIP
            self.perAccount = perAccount
            self.perAccountTotal = perAccountTotal
            self.slowdownSeconds = slowdownSeconds
            self.maxKeys = maxKeys
            self.refusalHoldMilliseconds = refusalHoldMilliseconds
        }
    }

    /// The WebAuthn extensions the server asks for on its own (a native API request can add PRF
    /// and largeBlob per ceremony; see docs/extensions.md).
    public struct Extensions: Sendable, Hashable {
        /// Ask every registration for PRF support (`prf` with the new passkey's salt), so every
        /// passkey's `prf` fact is known. A request's `extensions.prf` asks for one ceremony.
        public var prf: Bool
        /// The credProtect policy asked of every new passkey (`nil`: not asked).
        public var credentialProtection: CredentialProtectionPolicy?
        /// Which new passkeys must report at least ``credentialProtection``'s level
        /// (`credential_protection_not_applied` otherwise): device-bound ones by default (BE
        /// clear: security keys), since synced passkeys ignore credProtect.
        public var credentialProtectionRequiredFor: RegistrationExtensionInputs.CredentialProtection.Scope
        /// Ask every registration for the authenticator's minimum PIN length (`minPinLength`).
        public var minPinLength: Bool
        /// The largest `largeBlob.write` a sign-in request may carry, in bytes (CTAP 2.1 gives
        /// an authenticator at least 1024 bytes for all its credentials' blobs).
        public var largeBlobMaxBytes: Int

        public init(
            prf: Bool = false, credentialProtection: CredentialProtectionPolicy? = nil,
            credentialProtectionRequiredFor: RegistrationExtensionInputs.CredentialProtection.Scope = .deviceBound,
            minPinLength: Bool = false, largeBlobMaxBytes: Int = 1024
        ) {
            self.prf = prf
            self.credentialProtection = credentialProtection
            self.credentialProtectionRequiredFor = credentialProtectionRequiredFor
            self.minPinLength = minPinLength
            self.largeBlobMaxBytes = largeBlobMaxBytes
        }
    }

    /// Access tokens (JWT) for apps that trust passkeyd's sign-ins (docs/integration.md).
    public struct Tokens: Sendable, Hashable, Codable {
        /// `iss`; nil: the first web origin.
        public var issuer: String?
        /// `aud`; empty: the issuer.
        public var audiences: [String]
        /// How long an access token lives (at most 3600 s, and never past its session).
        public var lifetimeSeconds: Int
        /// `ES256` (default), `EdDSA` or `RS256`: the algorithm of new signing keys.
        public var algorithm: String
        /// The JWKS cache lifetime, and how long a new key is published before it signs.
        public var publishSeconds: Int
        /// How long a registration token (server API) can be used.
        public var registrationTokenSeconds: Int
        public init(
            issuer: String? = nil, audiences: [String] = [], lifetimeSeconds: Int = 300, algorithm: String = "ES256",
            publishSeconds: Int = 300, registrationTokenSeconds: Int = 900
        ) {
            self.issuer = issuer
            self.audiences = audiences
            self.lifetimeSeconds = lifetimeSeconds
            self.algorithm = algorithm
            self.publishSeconds = publishSeconds
            self.registrationTokenSeconds = registrationTokenSeconds
        }
    }
}
