import Crypto
import Foundation
import Logging
import PasskeyStore
import Synchronization
import WebAuthn

/// The passkey ceremonies and account rules, between HTTP and the store: what the routes call.
/// It decides; the routes only translate JSON and HTTP.
public struct PasskeyService: Sendable {
    public let configuration: ServerConfiguration
    public let relyingParty: RelyingParty
    public let store: any PasskeyStore
    public let metrics: ServerMetrics
    package let limiter: RateLimiter
    /// Pending OpenID authorization requests stored per address, in windows as long as such a
    /// request lives (``openIDRequestLifetime``).
    package let pendingAuthorizations: RateLimiter
    package let capacity: CeremonyCapacity
    package let passwordWork: BoundedWorkPool
    package let secret: CachedSecret
    package let now: @Sendable () -> Date
    package let logger: Logger
    /// Signing keys and access tokens.
    public let tokens: AccessTokens
    /// The FIDO metadata in force, and the relying party registrations are verified with.
    package let metadataState: MetadataState

    /// - Parameter sharedLimits: keep rate-limit counts in the store (several instances on one
    ///   PostgreSQL) rather than in this process.
    public init(
        configuration: ServerConfiguration, store: any PasskeyStore, logger: Logger = Logger(label: "passkeyd"),
        sharedLimits: Bool = false, now: @escaping @Sendable () -> Date = { Date() }
    ) throws(ConfigurationError) {
        self.configuration = configuration
        self.relyingParty = try configuration.relyingParty()
        self.store = store
        self.logger = logger
        self.now = now
        metrics = ServerMetrics()
        limiter = RateLimiter(
            window: .seconds(configuration.rateLimits.windowSeconds), store: sharedLimits ? store : nil,
            maxKeys: configuration.rateLimits.maxKeys)
        pendingAuthorizations = RateLimiter(
            window: .seconds(Int64(Self.openIDRequestLifetime)), store: sharedLimits ? store : nil,
            maxKeys: configuration.rateLimits.maxKeys)
        capacity = CeremonyCapacity()
        passwordWork = BoundedWorkPool(width: configuration.passwordHashConcurrency, maxWaiting: 64)
        secret = CachedSecret()
        tokens = AccessTokens(store: store, configuration: configuration.tokens, issuer: configuration.issuer, now: now)
        metadataState = MetadataState(relyingParty: relyingParty)
    }

    /// How long an OpenID authorization request waits for its consent (10 minutes).
    public static let openIDRequestLifetime: TimeInterval = 600

    /// Who sent a request, for the audit log, rate limits and metrics.
    public struct Client: Sendable {
        public var ipAddress: String?
        public var userAgent: String?
        public init(ipAddress: String? = nil, userAgent: String? = nil) {
            self.ipAddress = ipAddress
            self.userAgent = userAgent
        }
        package var kind: ServerMetrics.ClientKind { .classify(origin: nil, userAgent: userAgent) }
    }

    // MARK: Abuse limits

    /// The per-IP limit of the ceremony endpoints: every request counts; 429 past the limit.
    public func limitClient(_ client: Client) async throws {
        let limits = configuration.rateLimits
        guard limits.enabled, let ip = client.ipAddress else { return }
        if case .limited(let retryAfter) = try await limiter.hit("ip:\(ip)", limit: limits.perIP, now: now()) {
            metrics.rateLimited(scope: "ip")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }

    /// Before a password or recovery-code check on the account `key` (its username comparison
    /// key, known or not): 429 when this address has failed too often on it; past the
    /// account-wide ceiling, a delay instead of a refusal, so the person can still get in.
    ///
    /// Every attempt is counted before the check, atomically, and handed back
    /// (``settleSecretAttempt(_:succeeded:)``) when it succeeds: so many attempts sent at once
    /// cannot all pass the limit before any failure is counted, and a person's own successful
    /// sign-ins never count against them.
    package func reserveSecretAttempt(accountKey key: String, client: Client) async throws -> SecretAttempt? {
        let limits = configuration.rateLimits
        guard limits.enabled else { return nil }
        let attempt = SecretAttempt(pair: "fail:\(key)|\(client.ipAddress ?? "-")", account: "fail:\(key)", time: now())
        if case .limited(let retryAfter) = try await limiter.hit(attempt.pair, limit: limits.perAccount, now: attempt.time) {
            metrics.rateLimited(scope: "account_address")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
        if case .limited = try await limiter.hit(attempt.account, limit: limits.perAccountTotal, now: attempt.time),
            limits.slowdownSeconds > 0
        {
            metrics.rateLimited(scope: "account_slowdown")
            try await Task.sleep(for: .seconds(limits.slowdownSeconds))
        }
        return attempt
    }

    /// A password or recovery-code attempt counted by ``reserveSecretAttempt(accountKey:client:)``.
    package struct SecretAttempt: Sendable {
        package let pair: String
        package let account: String
        package let time: Date
    }

    /// A successful attempt is handed back; a failed one stays counted.
    package func settleSecretAttempt(_ attempt: SecretAttempt?, succeeded: Bool) async {
        guard let attempt, succeeded else { return }
        do {
            try await limiter.refund(attempt.pair, now: attempt.time)
            try await limiter.refund(attempt.account, now: attempt.time)
        } catch {
            logger.warning("attempt count not handed back", metadata: ["error": "\(error)"])
        }
    }

    /// A request's signed-in account.
    public struct SignedIn: Sendable {
        public let account: Account
        public let session: SessionRecord
    }

    // MARK: Registration

    /// Creation options: sign-up of `username` when nobody is signed in, a new passkey for the
    /// signed-in account, or (with a registration token from the server API) a passkey for the
    /// account the token was issued for.
    public func registrationOptions(
        username: String?, displayName: String?, signedIn: SignedIn?, profile: Profile = .native,
        conditional: Bool = false, hints: [String]? = nil, registrationToken: String? = nil, client: Client = Client()
    ) async throws
        -> PublicKeyCredentialCreationOptionsJSON
    {
        try await checkCeremonyCapacity()
        if signedIn == nil, let registrationToken {
            return try await enrolmentOptions(token: registrationToken, hints: hints, profile: profile, client: client)
        }
        // Conditional create upgrades a signed-in (password) account; it never signs anyone up.
        if conditional && signedIn == nil { throw PasskeyServiceError.notSignedIn }
        if let signedIn { try requireRecentSignIn(signedIn) }
        metrics.ceremonyStarted("registration", client: client.kind)
        let time = now()
        let expiry = time.addingTimeInterval(lifetime(configuration.challengeLifetime))
        let challenge = profile.challenge ?? RelyingParty.makeChallenge()
        if let signedIn {
            let account = signedIn.account
            // Signed in, these options add a passkey to this account. A sign-up for another name
            // (a form left open, the Back button) must not turn into a passkey on this account.
            if let username, !username.trimmingCharacters(in: .whitespaces).isEmpty,
                Account.key(for: username) != Account.key(for: account.username)
            {
                throw PasskeyServiceError.alreadySignedIn
            }
            let user = PublicKeyCredentialUserEntity(id: account.userHandle, name: account.username, displayName: account.displayName)
            let exclude = try await store.passkeys(accountID: account.id).map {
                CredentialDescriptor(id: $0.credentialID, transports: $0.transports)
            }
            // Conditional create: the authenticator sets neither UP nor UV (WebAuthn L3 §5.1.3), so
            // this ceremony asks for UV only as "preferred" and §7.1 step 14 skips the UP check.
            let begin = relyingParty.beginRegistration(
                user: user, excludeCredentials: exclude,
                userVerification: conditional ? .preferred : configuration.registrationUserVerification,
                hints: hints ?? configuration.hints, challenge: challenge, conditional: conditional, profile: profile.ceremony)
            try await store.saveChallenge(
                ChallengeRecord(
                    challenge: challenge, ceremony: .registration, accountID: account.id, api: profile.api,
                    userVerification: begin.state.userVerification.rawValue, conditional: conditional,
                    state: Self.encoded(begin.state), createdAt: time, expiresAt: expiry))
            capacity.issued()
            return begin.options
        }
        let name = try Self.validUsername(username)
        let display = try Self.validDisplayName(displayName, default: name)
        if try await store.account(username: name) != nil { throw PasskeyServiceError.usernameTaken }
        let user = PublicKeyCredentialUserEntity(id: profile.userHandle ?? RelyingParty.makeUserHandle(), name: name, displayName: display)
        let begin = relyingParty.beginRegistration(
            user: user, userVerification: configuration.registrationUserVerification, hints: hints ?? configuration.hints,
            challenge: challenge, profile: profile.ceremony)
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: challenge, ceremony: .registration, pendingUsername: name, pendingDisplayName: display,
                pendingUserHandle: user.id, pendingAccountID: profile.accountID, api: profile.api,
                userVerification: begin.state.userVerification.rawValue, state: Self.encoded(begin.state), createdAt: time,
                expiresAt: expiry))
        capacity.issued()
        return begin.options
    }

    /// Options for the account a registration token names (single use: the token is spent here).
    private func enrolmentOptions(token: String, hints: [String]?, profile: Profile, client: Client) async throws
        -> PublicKeyCredentialCreationOptionsJSON
    {
        let text = token.hasPrefix("prt_") ? String(token.dropFirst(4)) : token
        guard let bytes = Base64URLBytes(encoded: text)?.bytes, bytes.count == 32,
            let accountID = try await store.takeRegistrationToken(hash: Array(SHA256.hash(data: bytes)), now: now()),
            let account = try await store.account(id: accountID), !account.disabled
        else { throw PasskeyServiceError.invalidRegistrationToken }
        metrics.ceremonyStarted("registration", client: client.kind)
        let time = now()
        let challenge = profile.challenge ?? RelyingParty.makeChallenge()
        let user = PublicKeyCredentialUserEntity(id: account.userHandle, name: account.username, displayName: account.displayName)
        let exclude = try await store.passkeys(accountID: account.id).map {
            CredentialDescriptor(id: $0.credentialID, transports: $0.transports)
        }
        let begin = relyingParty.beginRegistration(
            user: user, excludeCredentials: exclude, userVerification: configuration.registrationUserVerification,
            hints: hints ?? configuration.hints, challenge: challenge, profile: profile.ceremony)
        // No `accountID` (nobody is signed in) and no pending username: the ceremony enrols
        // `pendingAccountID`, and finishing it signs its person in.
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: challenge, ceremony: .registration, pendingUserHandle: account.userHandle, pendingAccountID: account.id,
                api: profile.api, userVerification: begin.state.userVerification.rawValue, state: Self.encoded(begin.state),
                createdAt: time, expiresAt: time.addingTimeInterval(lifetime(configuration.challengeLifetime))))
        capacity.issued()
        return begin.options
    }

    public struct Registered: Sendable {
        public let account: Account
        public let passkey: Passkey
        /// A new session token when this was a sign-up.
        public let token: String?
        public let session: SessionRecord?
    }

    /// Verifies a registration response and stores the passkey (and, for a sign-up, the
    /// account and a session), atomically.
    /// - Parameter replaces: for a signed-in account, one of its passkeys the new one replaces
    ///   ("change or reset"): removed once the new one is stored.
    public func finishRegistration(
        _ credential: RegistrationResponseJSON, name: String?, signedIn: SignedIn?, client: Client,
        profile: Profile = .native, replaces: [UInt8]? = nil
    ) async throws -> Registered {
        // clientDataJSON is parsed once: for the metrics, to find the ceremony, and to verify.
        let clientData = try parseClientData(credential.response.clientDataJSON.bytes, signIn: false)
        return try await measured("registration", origin: clientData.origin, client: client) {
            try await verifyRegistration(
                credential, clientData: clientData, name: name, signedIn: signedIn, client: client, profile: profile, replaces: replaces)
        }
    }

    private func verifyRegistration(
        _ credential: RegistrationResponseJSON, clientData: CollectedClientData, name: String?, signedIn: SignedIn?, client: Client,
        profile: Profile, replaces: [UInt8]?
    ) async throws -> Registered {
        let record = try await takeChallenge(clientData, ceremony: .registration, api: profile.api)
        // The compatibility API names the account being created (`userId`); it must be this ceremony's.
        if let expected = profile.accountID, record.pendingAccountID != expected { throw PasskeyServiceError.accountMismatch }
        let passkeyName = try name.map { try Self.validPasskeyName($0) }
        // A challenge issued to a signed-in account can only be finished by that account.
        if let accountID = record.accountID, signedIn?.account.id != accountID { throw PasskeyServiceError.accountMismatch }
        if let replaces {
            guard let accountID = record.accountID, try await store.passkey(credentialID: replaces)?.accountID == accountID else {
                throw PasskeyServiceError.passkeyNotFound
            }
        }
        let verified: VerifiedRegistration
        do {
            verified = try await metadataState.relyingParty.finishRegistration(
                response: credential, clientData: clientData,
                state: registrationState(record), now: now())
        } catch {
            logger.info("registration rejected", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            await audit(.registrationFailed, accountID: record.accountID, client: client, detail: error.code.rawValue)
            throw PasskeyServiceError(error, signIn: false, message: Self.refusalMessage(error, configuration: configuration))
        }
        // §7.1 step 26 (the credential ID is not yet registered for any user) is the store's: a
        // passkey is written by an INSERT that the credential ID's uniqueness refuses, and every
        // write below answers that refusal with `credential_exists`. Asking first would cost a
        // read per sign-up and still leave a window before the write.

        let time = now()
        if let accountID = record.accountID {
            guard let account = try await store.account(id: accountID) else { throw PasskeyServiceError.unknownChallenge }
            let taken = Set(try await store.passkeys(accountID: accountID).map(\.name))
            var passkey = makePasskey(verified, accountID: accountID, name: passkeyName, at: time)
            if passkeyName == nil { passkey.name = Self.distinctName(passkey.name, taken: taken) }
            do {
                try await store.addPasskey(passkey)
            } catch let error as StoreError where error.code == .conflict {
                throw PasskeyServiceError.credentialExists
            }
            await audit(.passkeyAdded, accountID: accountID, credentialID: passkey.credentialID, client: client, detail: passkey.name)
            if let replaces, replaces != passkey.credentialID,
                let old = try await store.passkey(credentialID: replaces), old.accountID == accountID
            {
                // The old passkey's sessions end with it, except the one replacing it: that one
                // now stands on the new passkey.
                if let signedIn, signedIn.session.credentialID == replaces {
                    try await store.rebindSession(tokenHash: signedIn.session.tokenHash, credentialID: passkey.credentialID)
                }
                guard try await store.revokePasskey(credentialID: replaces) else {
                    return Registered(account: account, passkey: passkey, token: nil, session: nil)
                }
                await audit(.passkeyReplaced, accountID: accountID, credentialID: replaces, client: client, detail: old.name)
            }
            return Registered(account: account, passkey: passkey, token: nil, session: nil)
        }

        if record.pendingUsername == nil, let enrolled = record.pendingAccountID {
            return try await finishEnrolment(verified, accountID: enrolled, name: passkeyName, client: client)
        }
        guard let username = record.pendingUsername, let handle = record.pendingUserHandle else {
            throw PasskeyServiceError.unknownChallenge
        }
        let account = Account(
            id: record.pendingAccountID ?? .random(), username: username, displayName: record.pendingDisplayName ?? username,
            userHandle: handle, createdAt: time, lastSignInAt: time)
        let passkey = makePasskey(verified, accountID: account.id, name: passkeyName, at: time)
        let (token, session) = makeSession(for: account, client: client, method: "sign_up", credentialID: passkey.credentialID)
        do {
            try await store.createAccount(
                account, passkey: passkey, session: session,
                audit: [
                    auditEvent(.signUp, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: passkey.name)
                ])
        } catch let error as StoreError where error.code == .conflict {
            // Someone took the username (or registered this credential) since the options.
            if try await store.account(username: username) != nil { throw PasskeyServiceError.usernameTaken }
            throw PasskeyServiceError.credentialExists
        }
        return Registered(account: account, passkey: passkey, token: token, session: session)
    }

    /// A passkey registered with a registration token: stored on its account, and its person
    /// signed in (a session made by that passkey).
    private func finishEnrolment(_ verified: VerifiedRegistration, accountID: UUID, name: String?, client: Client) async throws
        -> Registered
    {
        guard let account = try await store.account(id: accountID), !account.disabled else { throw PasskeyServiceError.unknownChallenge }
        let time = now()
        let taken = Set(try await store.passkeys(accountID: accountID).map(\.name))
        var passkey = makePasskey(verified, accountID: accountID, name: name, at: time)
        if name == nil { passkey.name = Self.distinctName(passkey.name, taken: taken) }
        do {
            try await store.addPasskey(passkey)
        } catch let error as StoreError where error.code == .conflict {
            throw PasskeyServiceError.credentialExists
        }
        let (token, session) = makeSession(for: account, client: client, method: "sign_up", credentialID: passkey.credentialID)
        try await store.recordSignIn(
            accountID: accountID, session: session,
            audit: [
                auditEvent(.passkeyAdded, accountID: accountID, credentialID: passkey.credentialID, client: client, detail: passkey.name),
                auditEvent(.signIn, accountID: accountID, credentialID: passkey.credentialID, client: client, detail: "registration_token"),
            ], revokeOtherSessions: false)
        metrics.signedIn(method: "registration_token")
        return Registered(account: account, passkey: passkey, token: token, session: session)
    }

    private func makePasskey(_ verified: VerifiedRegistration, accountID: UUID, name: String?, at time: Date) -> Passkey {
        Passkey(
            credentialID: verified.credentialID, accountID: accountID, publicKey: verified.publicKey.coseBytes,
            signCount: verified.signCount,
            aaguid: verified.aaguid.description, transports: Array(verified.transports.prefix(8).map { String($0.prefix(32)) }),
            backupEligible: verified.backupEligible, backedUp: verified.backedUp, userVerified: verified.userVerified,
            attestationFormat: verified.attestation.format, attestationTrusted: verified.attestation.trusted,
            name: name ?? providerName(verified.aaguid) ?? "Passkey", createdAt: time)
    }

    /// What a person is told when the authenticator policy refuses their passkey: the model and
    /// its reported status for a FIDO metadata refusal, else which authenticators are accepted.
    package static func refusalMessage(_ error: WebAuthnError, configuration: ServerConfiguration) -> String? {
        guard error.code == .authenticatorNotAllowed else { return nil }
        if error.reason.hasPrefix("FIDO metadata") { return "This authenticator cannot be used here: \(error.reason)." }
        return configuration.acceptedAuthenticatorsMessage
    }

    /// "Passkey", "Passkey 2", …: a default name the account's list can tell apart.
    package static func distinctName(_ base: String, taken: Set<String>) -> String {
        guard taken.contains(base) else { return base }
        var number = 2
        while taken.contains("\(base) \(number)") { number += 1 }
        return "\(base) \(number)"
    }

    // MARK: Authentication

    /// Request options. With a username: that account's passkeys in allowCredentials; for an
    /// unknown username, a stable made-up list that looks the same (no account enumeration).
    /// Without: empty allowCredentials (discoverable sign-in, AutoFill).
    public func authenticationOptions(
        username: String?, profile: Profile = .native, hints: [String]? = nil, client: Client = Client()
    ) async throws
        -> PublicKeyCredentialRequestOptionsJSON
    {
        try await checkCeremonyCapacity()
        metrics.ceremonyStarted("authentication", client: client.kind)
        let time = now()
        var allow: [CredentialDescriptor] = []
        var accountID: UUID?
        var unknown = false
        if let username, !username.trimmingCharacters(in: .whitespaces).isEmpty {
            let name = try Self.validUsername(username)
            let account = try await store.account(username: name)
            var passkeys: [Passkey] = []
            if let account { passkeys = try await store.passkeys(accountID: account.id) }
            if let account, !account.disabled, !passkeys.isEmpty {
                accountID = account.id
                allow = passkeys.map { CredentialDescriptor(id: $0.credentialID, transports: $0.transports) }
            } else {
                // Unknown, disabled and password-only accounts answer alike: one stable decoy
                // credential, so the options reveal nothing sign-up does not (on every API: the
                // reference apps' server answered 400 here, an oracle for which accounts have
                // passkeys that its apps do not need).
                unknown = true
                allow = [CredentialDescriptor(id: try await decoyCredentialID(for: name), transports: ["hybrid", "internal"])]
            }
        }
        let begin = relyingParty.beginAuthentication(
            allowCredentials: allow, userVerification: configuration.authenticationUserVerification, hints: hints ?? configuration.hints,
            challenge: profile.challenge ?? RelyingParty.makeChallenge(),
            profile: profile.ceremony)
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: begin.challenge, ceremony: .authentication, accountID: accountID, unknownUser: unknown, api: profile.api,
                userVerification: begin.state.userVerification.rawValue, state: Self.encoded(begin.state), createdAt: time,
                expiresAt: time.addingTimeInterval(lifetime(configuration.challengeLifetime))))
        capacity.issued()
        return begin.options
    }

    /// The `{hasPasskeys}` check some web clients make before offering a passkey: whether the
    /// name is taken. That is exactly what sign-up already tells (409 `username_taken`), so it
    /// answers `true` for password-only and disabled accounts too: telling them apart would
    /// reveal what the decoy in `authenticate/options` hides (which accounts have no passkey:
    /// the ones worth a password guess). Its route is counted per address like sign-up, and a
    /// known name costs the same one read as an unknown one.
    public func hasPasskeys(username: String) async throws -> Bool {
        let name = try Self.validUsername(username)
        return try await store.account(username: name) != nil
    }

    public struct SignInResult: Sendable {
        public let account: Account
        public let passkey: Passkey
        public let token: String
        public let session: SessionRecord
    }

    /// Verifies an assertion, updates the passkey's counter, backup state and last use, and
    /// starts a session.
    public func finishAuthentication(_ credential: AuthenticationResponseJSON, client: Client, profile: Profile = .native) async throws
        -> SignInResult
    {
        let clientData = try parseClientData(credential.response.clientDataJSON.bytes, signIn: true)
        let result = try await measured("authentication", origin: clientData.origin, client: client) {
            try await verifyAuthentication(credential, clientData: clientData, client: client, api: profile.api)
        }
        metrics.signedIn(method: "passkey")
        return result
    }

    /// Runs a ceremony's verify step, counting its outcome (by error code) and latency per client kind.
    private func measured<T>(_ ceremony: String, origin: String?, client: Client, _ body: () async throws -> T) async throws -> T {
        let start = ContinuousClock.now
        let kind = ServerMetrics.ClientKind.classify(origin: origin, userAgent: client.userAgent)
        do {
            let result = try await body()
            metrics.ceremonyFinished(ceremony, client: kind, code: nil, duration: ContinuousClock.now - start)
            return result
        } catch {
            let code =
                (error as? PasskeyServiceError)?.code.rawValue ?? (error as? WebAuthnError)?.code.rawValue ?? (error as? StoreError)?.code
                .rawValue ?? "internal_error"
            metrics.ceremonyFinished(ceremony, client: kind, code: code, duration: ContinuousClock.now - start)
            throw error
        }
    }

    private func verifyAuthentication(
        _ credential: AuthenticationResponseJSON, clientData: CollectedClientData, client: Client, api: String
    )
        async throws -> SignInResult
    {
        // The ceremony is read here and taken (deleted) in the transaction that completes the
        // sign-in: one write transaction per sign-in instead of two. It stays single use: every
        // failure below takes it before answering, and of two answers racing to complete, the
        // store lets one take it.
        guard !clientData.challenge.isEmpty, clientData.challenge.count <= 1024 else { throw PasskeyServiceError.unknownChallenge }
        // The ceremony and the passkey are read together (one round trip to PostgreSQL).
        let (found, passkeyAndAccount) = try await store.challengeAndPasskey(clientData.challenge, credentialID: credential.rawId.bytes)
        guard let record = found else { throw PasskeyServiceError.unknownChallenge }
        var taken = false
        do {
            return try await verifyAuthentication(
                credential, clientData: clientData, record: record, passkeyAndAccount: passkeyAndAccount, client: client, api: api
            ) {
                taken = true
            }
        } catch {
            if !taken {
                do { _ = try await store.takeChallenge(clientData.challenge) } catch let failure {
                    logger.warning("a failed sign-in's challenge could not be taken", metadata: ["error": "\(failure)"])
                }
            }
            throw error
        }
    }

    private func verifyAuthentication(
        _ credential: AuthenticationResponseJSON, clientData: CollectedClientData, record: ChallengeRecord,
        passkeyAndAccount: (Passkey, Account)?, client: Client, api: String, challengeTaken: () -> Void
    ) async throws -> SignInResult {
        // A refusal takes the challenge first. If it is already gone, another answer to it won
        // (or is winning) the race: this one is a replay and gets `challenge_unknown`, with no
        // audit line; above all no counter anomaly for the counter the winner just moved.
        func refuse(_ error: any Error, audit lines: () async -> Void = {}) async throws -> Never {
            challengeTaken()
            guard try await store.takeChallenge(record.challenge) != nil else { throw PasskeyServiceError.unknownChallenge }
            await lines()
            throw error
        }
        do { try check(record, ceremony: .authentication, api: api) } catch { try await refuse(error) }
        guard let (passkey, account) = passkeyAndAccount else {
            try await refuse(PasskeyServiceError.credentialNotFound) {
                await audit(.signInFailed, accountID: record.accountID, client: client, detail: "credential_not_found")
            }
        }
        if record.unknownUser || (record.accountID != nil && record.accountID != passkey.accountID) {
            try await refuse(PasskeyServiceError.credentialNotAllowed) {
                await audit(
                    .signInFailed, accountID: passkey.accountID, credentialID: passkey.credentialID, client: client,
                    detail: "credential_not_allowed")
            }
        }
        // No per-account limit here: an assertion cannot be guessed, and counting other people's
        // forged attempts would let them lock the account out (the per-address limit applies).
        guard !account.disabled else {
            try await refuse(PasskeyServiceError.accountDisabled) {
                await audit(
                    .signInFailed, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "account_disabled")
            }
        }
        let verified: VerifiedAuthentication
        do {
            let key = try CredentialPublicKey(cose: passkey.publicKey)
            // §7.2 step 5 checks the allowCredentials really offered (kept in the state).
            verified = try relyingParty.finishAuthentication(
                response: credential, clientData: clientData,
                state: authenticationState(record, offered: passkey.credentialID),
                credential: StoredCredential(
                    id: passkey.credentialID, publicKey: key, signCount: passkey.signCount,
                    userHandle: account.userHandle, backupEligible: passkey.backupEligible))
        } catch {
            try await refuse(PasskeyServiceError(error, signIn: true)) {
                logger.info("sign-in rejected", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
                if error.code == .counterRegression {
                    await audit(
                        .counterAnomaly, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "rejected")
                }
                await audit(
                    .signInFailed, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: error.code.rawValue)
            }
        }
        let time = now()
        let (token, session) = makeSession(for: account, client: client, method: "passkey", credentialID: passkey.credentialID)
        var events: [AuditEvent] = []
        if verified.counterLooksCloned {
            events.append(
                auditEvent(.counterAnomaly, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "flagged"))
        }
        events.append(auditEvent(.signIn, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "passkey"))
        // One transaction: counter compare-and-set (of two sign-ins racing with the same counter
        // value, one wins), last use, the session and the audit lines.
        let completion = try await store.completeSignIn(
            challenge: record.challenge, credentialID: passkey.credentialID, previousSignCount: passkey.signCount,
            signCount: verified.newSignCount, backedUp: verified.backedUp,
            counterAnomaly: verified.counterLooksCloned, at: time, session: session, audit: events)
        challengeTaken()
        switch completion {
        case .signedIn: break
        case .challengeTaken:
            metrics.singleUseRefused("challenge")
            throw PasskeyServiceError.unknownChallenge
        case .counterRaced:
            metrics.singleUseRefused("counter")
            await audit(
                .signInFailed, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "counter_conflict")
            throw PasskeyServiceError.counterRace
        }
        var used = passkey
        used.signCount = verified.newSignCount
        used.backedUp = verified.backedUp
        used.lastUsedAt = time
        return SignInResult(account: account, passkey: used, token: token, session: session)
    }

    // MARK: Sessions

    /// The account behind a session token, if the session is live.
    public func signedIn(token: String) async throws -> SignedIn? {
        guard let bytes = Base64URLBytes(encoded: token)?.bytes, bytes.count == 32 else { return nil }
        let time = now()
        guard let (session, account) = try await store.session(tokenHash: Array(SHA256.hash(data: bytes)), now: time) else { return nil }
        // "Last seen", kept to the minute: a write at most once a minute per session.
        if session.lastSeenAt.map({ time.timeIntervalSince($0) >= 60 }) ?? true {
            try await store.touchSession(tokenHash: session.tokenHash, at: time)
        }
        return SignedIn(account: account, session: session)
    }

    public func signOut(_ signedIn: SignedIn, client: Client) async throws {
        try await store.revokeSession(tokenHash: signedIn.session.tokenHash)
        await audit(.sessionRevoked, accountID: signedIn.account.id, client: client, detail: "sign_out")
    }

    /// A new session token (256 random bits, returned once) and its record (only its SHA-256),
    /// with how it was made.
    package func makeSession(for account: Account, client: Client, method: String, credentialID: [UInt8]? = nil) -> (String, SessionRecord)
    {
        let token = RelyingParty.randomBytes(32)
        let time = now()
        let session = SessionRecord(
            tokenHash: Array(SHA256.hash(data: token)), accountID: account.id, createdAt: time,
            expiresAt: time.addingTimeInterval(lifetime(configuration.sessionLifetime)),
            userAgent: client.userAgent.map { String($0.prefix(256)) }, ipAddress: client.ipAddress,
            method: method, credentialID: credentialID)
        return (Base64URLBytes(token).base64URL, session)
    }

    /// Sensitive actions need a sign-in within ``ServerConfiguration/reauthenticationWindow``:
    /// a stolen, older session cannot add a passkey or take a way in away.
    package func requireRecentSignIn(_ signedIn: SignedIn) throws {
        let age = now().timeIntervalSince(signedIn.session.createdAt)
        guard age <= lifetime(configuration.reauthenticationWindow) else { throw PasskeyServiceError.reauthenticationRequired }
    }

    /// The account's live sessions, newest first.
    public func sessions(of signedIn: SignedIn) async throws -> [SessionRecord] {
        try await store.sessions(accountID: signedIn.account.id, now: now())
    }

    /// "Sign out everywhere else": every session of the account but this one.
    public func revokeOtherSessions(_ signedIn: SignedIn, client: Client) async throws -> Int {
        let count = try await store.revokeSessions(accountID: signedIn.account.id, except: signedIn.session.tokenHash)
        await audit(.sessionRevoked, accountID: signedIn.account.id, client: client, detail: "others:\(count)")
        return count
    }

    /// Ends one of the account's sessions, named by its id (base64url of its token hash).
    public func revokeSession(id tokenHash: [UInt8], signedIn: SignedIn, client: Client) async throws {
        guard try await store.sessions(accountID: signedIn.account.id, now: now()).contains(where: { $0.tokenHash == tokenHash }) else {
            throw PasskeyServiceError.sessionNotFound
        }
        try await store.revokeSession(tokenHash: tokenHash)
        await audit(.sessionRevoked, accountID: signedIn.account.id, client: client, detail: "one")
    }

    /// How many ways in the account has: passkeys, plus one for a password.
    package func waysIn(_ account: Account) async throws -> Int {
        try await store.passkeys(accountID: account.id).count + (account.passwordHash == nil ? 0 : 1)
    }

    // MARK: Passkey management

    public func passkeys(of signedIn: SignedIn) async throws -> [Passkey] {
        try await store.passkeys(accountID: signedIn.account.id)
    }

    public func renamePasskey(_ id: [UInt8], to name: String, signedIn: SignedIn, client: Client) async throws -> Passkey {
        let newName = try Self.validPasskeyName(name)
        guard try await store.renamePasskey(accountID: signedIn.account.id, credentialID: id, name: newName),
            let passkey = try await store.passkey(credentialID: id)
        else { throw PasskeyServiceError.passkeyNotFound }
        await audit(.passkeyRenamed, accountID: signedIn.account.id, credentialID: id, client: client, detail: newName)
        return passkey
    }

    /// Deletes one of the account's passkeys (and the sessions it made). Leaving a single way in
    /// needs a recent sign-in.
    public func deletePasskey(_ id: [UInt8], signedIn: SignedIn, client: Client) async throws {
        if try await waysIn(signedIn.account) == 2 { try requireRecentSignIn(signedIn) }
        // Every session the passkey made ends, but the one deleting it (its person just proved
        // they are signed in; the sessions of someone who added a passkey of their own end).
        switch try await store.deletePasskey(accountID: signedIn.account.id, credentialID: id, keepSession: signedIn.session.tokenHash) {
        case .deleted: await audit(.passkeyDeleted, accountID: signedIn.account.id, credentialID: id, client: client)
        case .notFound: throw PasskeyServiceError.passkeyNotFound
        case .lastPasskey: throw PasskeyServiceError.lastPasskey
        }
    }

    // MARK: Helpers

    /// Finds and consumes the ceremony a response answers, from the challenge in its client
    /// data (untrusted until the full verification re-checks it against the stored one).
    private func takeChallenge(_ clientData: CollectedClientData, ceremony: ChallengeRecord.Ceremony, api: String) async throws
        -> ChallengeRecord
    {
        guard !clientData.challenge.isEmpty, clientData.challenge.count <= 1024,
            let record = try await store.takeChallenge(clientData.challenge)
        else { throw PasskeyServiceError.unknownChallenge }
        try check(record, ceremony: ceremony, api: api)
        return record
    }

    /// A ceremony record found by a response's challenge answers it only while it has not
    /// expired, and only on the ceremony and API that began it.
    private func check(_ record: ChallengeRecord, ceremony: ChallengeRecord.Ceremony, api: String) throws {
        guard record.expiresAt > now() else { throw PasskeyServiceError.expiredChallenge }
        guard record.ceremony == ceremony, record.api == api else { throw PasskeyServiceError.ceremonyMismatch }
    }

    /// clientDataJSON parsed once per verify request. A malformed one is refused here (before
    /// anything is looked up), with the library's code.
    private func parseClientData(_ bytes: [UInt8], signIn: Bool) throws -> CollectedClientData {
        do {
            return try CollectedClientData(bytes: bytes)
        } catch {
            throw PasskeyServiceError(error, signIn: signIn)
        }
    }

    /// Bounded challenge creation: a flood of options requests cannot fill the database. The
    /// open count is read from the store at most once a second (plus what this process issued
    /// since), not on every request.
    ///
    /// At the cap the ceremonies that expire first (a tenth of the cap) are deleted to make room,
    /// rather than refusing every new one: a refusal would be a switch anyone able to send
    /// `maxOpenChallenges` options requests within a challenge's lifetime could hold down for
    /// everyone. Deleting the oldest keeps storage bounded and makes a flood cost the people
    /// signing in only if it is fast enough to push out a ceremony while someone is still
    /// answering its prompt (a tenth of the cap within that time).
    private func checkCeremonyCapacity() async throws {
        let time = now()
        let open: Int
        if let estimate = capacity.estimate(now: time) {
            open = estimate
        } else {
            open = try await store.openChallengeCount(now: time)
            capacity.refreshed(open, now: time)
        }
        let cap = configuration.maxOpenChallenges
        guard open >= cap, capacity.startReclaiming() else { return }
        defer { capacity.finishedReclaiming() }
        let discarded = try await store.discardOldestChallenges(count: open - cap + max(1, cap / 10))
        let left = try await store.openChallengeCount(now: time)
        capacity.refreshed(left, now: time)
        metrics.ceremoniesDiscarded(discarded)
        logger.warning(
            "open ceremonies reached maxOpenChallenges; the oldest were deleted",
            metadata: ["discarded": "\(discarded)", "open": "\(left)", "maxOpenChallenges": "\(cap)"])
    }

    /// A credential ID that looks real and is the same every time for one unknown username.
    private func decoyCredentialID(for username: String) async throws -> [UInt8] {
        let secret = SymmetricKey(data: try await serverSecret())
        return Array(HMAC<SHA256>.authenticationCode(for: Array(("unknown-user:" + Account.key(for: username)).utf8), using: secret))
    }

    /// The store's server secret, read once.
    package func serverSecret() async throws -> [UInt8] {
        if let known = secret.value { return known }
        let value = try await store.serverSecret()
        secret.value = value
        return value
    }

    package func auditEvent(
        _ kind: AuditEvent.Kind, accountID: UUID? = nil, credentialID: [UInt8]? = nil, client: Client, detail: String? = nil
    )
        -> AuditEvent
    {
        AuditEvent(
            time: now(), kind: kind, accountID: accountID, credentialID: credentialID, ipAddress: client.ipAddress,
            userAgent: client.userAgent.map { String($0.prefix(256)) }, detail: detail)
    }

    package func audit(_ kind: AuditEvent.Kind, accountID: UUID? = nil, credentialID: [UInt8]? = nil, client: Client, detail: String? = nil)
        async
    {
        do {
            try await store.appendAudit(auditEvent(kind, accountID: accountID, credentialID: credentialID, client: client, detail: detail))
        } catch {
            logger.error("audit write failed", metadata: ["kind": "\(kind)", "error": "\(error)"])
        }
    }

    private func lifetime(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: Validation

    /// The display form of a valid username (``Username``: PRECIS UsernameCaseMapped rules),
    /// or 400 `invalid_username` saying why not.
    public static func validUsername(_ raw: String?) throws -> String {
        do {
            return try Username.validate(raw ?? "").display
        } catch {
            throw PasskeyServiceError.invalid(.invalidUsername, error.description)
        }
    }

    /// Most bytes of a display or passkey name: 64 characters, but a character can be a long
    /// cluster of combining marks (64 of them made a 20 KB name), so bytes are bounded too.
    public static let maxNameBytes = 256

    public static func validDisplayName(_ raw: String?, default fallback: String) throws -> String {
        let refused = PasskeyServiceError.invalid(
            .invalidDisplayName, "Display names have at most 64 characters (\(maxNameBytes) bytes) and no control characters.")
        guard (raw?.utf8.count ?? 0) <= 4 * maxNameBytes else { throw refused }
        let name = (raw ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if name.isEmpty { return fallback }
        guard isValidName(name) else { throw refused }
        return name
    }

    package static func validPasskeyName(_ raw: String) throws -> String {
        let refused = PasskeyServiceError.invalid(
            .invalidName, "Passkey names have 1 to 64 characters (at most \(maxNameBytes) bytes) and no control characters.")
        guard raw.utf8.count <= 4 * maxNameBytes else { throw refused }
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, isValidName(name) else { throw refused }
        return name
    }

    private static func isValidName(_ name: String) -> Bool {
        name.utf8.count <= maxNameBytes && name.count <= 64
            && !name.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) })
    }
}

/// The server secret once read from the store.
package final class CachedSecret: Sendable {
    private let stored = Mutex<[UInt8]?>(nil)
    package var value: [UInt8]? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// The open-ceremony count between store reads: refreshed once a second, plus the challenges this
/// process issued since.
package final class CeremonyCapacity: Sendable {
    private let state = Mutex<(count: Int, at: Date?, issued: Int)>((0, nil, 0))

    package func estimate(now: Date) -> Int? {
        state.withLock { state in
            guard let at = state.at, now.timeIntervalSince(at) < 1, now >= at else { return nil }
            return state.count + state.issued
        }
    }

    package func refreshed(_ count: Int, now: Date) { state.withLock { $0 = (count, now, 0) } }
    package func issued() { state.withLock { $0.issued += 1 } }

    /// One request at a time makes room; the others go on meanwhile (the cap is overshot by at
    /// most the requests in flight).
    package func startReclaiming() -> Bool {
        reclaiming.withLock { busy in
            if busy { return false }
            busy = true
            return true
        }
    }

    package func finishedReclaiming() { reclaiming.withLock { $0 = false } }
    private let reclaiming = Mutex(false)
}
