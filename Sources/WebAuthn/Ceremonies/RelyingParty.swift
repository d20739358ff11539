import Crypto
import Foundation

/// A WebAuthn relying party: builds ceremony options and verifies responses, following
/// WebAuthn Level 3 §7.1 (registration) and §7.2 (authentication) step by step.
///
/// It keeps no state: a `begin…` call returns the ceremony's state (``RegistrationState``,
/// ``AuthenticationState``: `Codable`, opaque to the caller), which the caller keeps with its own
/// bookkeeping (account, expiry) and hands back to the matching `finish…` call.
///
/// ```swift
/// let rp = try RelyingParty(.init(rpID: "example.com", rpName: "Example",
///                                 origins: ["https://example.com"]))
/// // Registration
/// let begin = rp.beginRegistration(user: .init(id: userHandle, name: "ada", displayName: "Ada"))
/// keep(begin.state)                                             // send begin.options as JSON
/// let passkey = try await rp.finishRegistration(response: responseJSON, state: kept)
/// // Authentication
/// let request = rp.beginAuthentication()
/// keep(request.state)
/// let verdict = try rp.finishAuthentication(response: assertionJSON, state: kept, credential: storedCredential)
/// ```
public struct RelyingParty: Sendable {
    /// The configuration this relying party was built with, as validated by ``init(_:)``.
    public let configuration: Configuration
    private let rpIDHash: [UInt8]
    private let origins: Set<String>

    /// Validates `configuration` (`invalid_configuration` on a bad value).
    public init(_ configuration: Configuration) throws(WebAuthnError) {
        try Self.validate(configuration)
        self.configuration = configuration
        self.rpIDHash = sha256(Array(configuration.rpID.utf8))
        self.origins = Set(configuration.origins)
    }

    /// 32 random bytes from the system's secure generator (§13.4.3: at least 16), drawn until
    /// their base64url text has no `-` or `_` (``alphabetNeutralRandomBytes(_:)``): ~254 bits of
    /// entropy.
    public static func makeChallenge() -> [UInt8] { alphabetNeutralRandomBytes(32) }

    /// A new random user handle (64 bytes, never derived from the username: §14.6.1), drawn like
    /// ``makeChallenge()``: ~508 bits of entropy.
    public static func makeUserHandle() -> [UInt8] { alphabetNeutralRandomBytes(64) }

    /// `count` random bytes whose unpadded base64url text is also their standard base64 text: no
    /// 6-bit group is 62 or 63 (`-`/`_` in base64url, `+`/`/` in base64).
    ///
    /// Widely copied web clients decode the options' `challenge` and `user.id` with `window.atob`,
    /// which throws on `-` and `_`. Rejection sampling keeps the value uniform over the strings
    /// that avoid them: for 32 bytes, 42 full groups each lose 2 of 64 values, so the entropy is
    /// 42 · log₂ 62 + 4 ≈ 254.1 bits (of 256), and a value takes (64/62)^42 ≈ 3.8 draws on average
    /// (64 bytes: ≈ 508.1 bits, ≈ 15 draws; each draw is one call to the generator).
    ///
    /// The same distribution comes from drawing each 6-bit group on its own, uniformly from the
    /// 62 allowed values (a random byte's low 6 bits, redrawn when 62 or 63), plus the 2 or 4
    /// leftover bits of the last partial group (any value: zero-filled, it stays below 62). That
    /// takes one call to the generator instead of ~3.8 (or ~15) calls of a whole value each.
    public static func alphabetNeutralRandomBytes(_ count: Int) -> [UInt8] {
        let groups = count * 8 / 6
        let leftover = count * 8 % 6
        // 64/62 draws per group on average; a spare margin makes a refill rare.
        var pool = randomBytes(groups + groups / 8 + 8)
        var next = 0
        func draw() -> UInt32 {
            while true {
                if next == pool.count {
                    pool = randomBytes(16)
                    next = 0
                }
                let value = UInt32(pool[next] & 0x3F)
                next += 1
                if value < 62 { return value }
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        var accumulator: UInt32 = 0
        var bits = 0
        for _ in 0..<groups {
            accumulator = (accumulator << 6) | draw()
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        if leftover > 0 {
            // The last byte's low `leftover` bits: any value. Draws read only a byte's low 6
            // bits, so the top 2 bits of two pool bytes are still unused and uniform.
            let tail = (UInt32(pool[0] >> 6) << 2 | UInt32(pool[1] >> 6)) & ((1 << UInt32(leftover)) - 1)
            accumulator = (accumulator << UInt32(leftover)) | tail
            bytes.append(UInt8(truncatingIfNeeded: accumulator))
        }
        return bytes
    }

    /// `count` bytes from the operating system's secure generator, in one system call
    /// (`SystemRandom`).
    public static func randomBytes(_ count: Int) -> [UInt8] { SystemRandom.bytes(count) }

    var timeoutMilliseconds: Int {
        let (seconds, attoseconds) = configuration.timeout.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    // MARK: - Shared client data checks

    /// §7.1 steps 5–11 / §7.2 steps 9–14 (and 21): parse clientDataJSON and check type,
    /// challenge, origin and cross-origin context. Returns the parsed data and its hash.
    func verifyClientData(
        _ clientData: CollectedClientData, type expectedType: String, challenge expectedChallenge: [UInt8],
        challengeEquivalents: [[UInt8]] = []
    ) throws(WebAuthnError) -> (CollectedClientData, [UInt8]) {
        // §7.1 step 5 / §7.2 step 9: Let JSONtext be the result of running UTF-8 decode on
        // clientDataJSON. §7.1 step 6 / §7.2 step 10: Let C be the result of parsing JSONtext.
        // (Done once, by CollectedClientData(bytes:), possibly by the caller.)
        let bytes = clientData.bytes
        // §7.1 step 7 / §7.2 step 11: Verify that the value of C.type is webauthn.create /
        // webauthn.get.
        guard clientData.type == expectedType else {
            throw WebAuthnError(.typeMismatch, "clientData.type is \"\(clientData.type)\", expected \"\(expectedType)\"")
        }
        // §7.1 step 8 / §7.2 step 12: Verify that the value of C.challenge equals the base64url
        // encoding of the challenge option. (Compared as bytes, in constant time.)
        var challengeMatches = constantTimeEquals(clientData.challenge, expectedChallenge)
        for equivalent in challengeEquivalents where constantTimeEquals(clientData.challenge, equivalent) {
            challengeMatches = true
        }
        guard challengeMatches else {
            throw WebAuthnError(.challengeMismatch, "clientData.challenge is not the challenge of this ceremony")
        }
        // §7.1 step 9 / §7.2 step 13: Verify that the value of C.origin is an origin expected by
        // the Relying Party.
        guard origins.contains(clientData.origin) else {
            throw WebAuthnError(.originNotAllowed, "clientData.origin \"\(clientData.origin)\" is not an allowed origin")
        }
        // §7.1 step 10 / §7.2 step 14: If C.crossOrigin is present and set to true, verify that
        // the Relying Party expects this credential to be used within an iframe that is not
        // same-origin with its ancestors.
        // Allowed top origins do not imply cross-origin use: it must be allowed explicitly, and
        // when top origins are listed, a cross-origin ceremony must name one of them (go-webauthn's
        // semantics; Level 2 clients that send no topOrigin are accepted only when none is listed).
        if clientData.crossOrigin == true {
            guard configuration.allowCrossOrigin else {
                throw WebAuthnError(
                    .crossOriginNotAllowed, "the ceremony ran in a cross-origin iframe, which this relying party does not allow")
            }
            if !configuration.allowedTopOrigins.isEmpty && clientData.topOrigin == nil {
                throw WebAuthnError(.topOriginNotAllowed, "a cross-origin ceremony must name its top-level origin (clientData.topOrigin)")
            }
        }
        // If C.topOrigin is present: verify that the Relying Party expects this credential to be
        // used within an iframe, and that C.topOrigin matches the origin of a page that the
        // Relying Party expects to be sub-framed within.
        if let topOrigin = clientData.topOrigin {
            guard configuration.allowCrossOrigin, configuration.allowedTopOrigins.contains(topOrigin) else {
                throw WebAuthnError(.topOriginNotAllowed, "clientData.topOrigin \"\(topOrigin)\" is not an allowed top-level origin")
            }
        }
        // Level 2 §7.1 step 7 / §7.2 step 11: if C.tokenBinding is present, its status must be
        // one of the TokenBindingStatus values ("present", "supported"). Token binding itself is
        // not used by any current browser, so a "present" id is not matched against TLS.
        if let status = clientData.tokenBindingStatus, status != "present" && status != "supported" {
            throw WebAuthnError(.malformedClientData, "clientData.tokenBinding.status \"\(status)\" is not a valid status")
        }
        // §7.1 step 11 / §7.2 step 21: Let hash be the result of computing a hash over
        // response.clientDataJSON using SHA-256.
        return (clientData, sha256(bytes))
    }

    /// §7.1 steps 13–16 / §7.2 steps 15–18: RP ID hash, user presence, user verification and
    /// backup flags.
    func verifyAuthenticatorFlags(
        _ authData: AuthenticatorData, userVerification: UserVerificationRequirement,
        conditionalCreate: Bool = false
    ) throws(WebAuthnError) {
        // §7.1 step 13 / §7.2 step 15: Verify that the rpIdHash in authData is the SHA-256 hash
        // of the RP ID expected by the Relying Party.
        guard constantTimeEquals(authData.rpIDHash, rpIDHash) else {
            throw WebAuthnError(.rpIDHashMismatch, "authenticatorData.rpIdHash is not SHA-256(\"\(configuration.rpID)\")")
        }
        // §7.1 step 14: If options.mediation is not set to conditional, verify that the UP bit of
        // the flags in authData is set. / §7.2 step 16: Verify that the UP bit is set.
        if configuration.requireUserPresence && !conditionalCreate && !authData.userPresent {
            throw WebAuthnError(.userNotPresent, "the authenticator did not report user presence (UP)")
        }
        // §7.1 step 15 / §7.2 step 17: If user verification is required for this ceremony,
        // verify that the UV bit of the flags in authData is set.
        if userVerification == .required && !authData.userVerified {
            throw WebAuthnError(.userNotVerified, "user verification is required but the authenticator did not perform it (UV)")
        }
        // §7.1 step 16 / §7.2 step 18: If the BE bit of the flags in authData is not set, verify
        // that the BS bit is not set. (Enforced while parsing AuthenticatorData.)
    }
}
