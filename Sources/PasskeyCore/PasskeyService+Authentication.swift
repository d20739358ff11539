import Crypto
import Foundation
import Logging
import PasskeyStore
import Synchronization
import WebAuthn

/// Authentication (§7.2): options (with or without a username, AutoFill included), then the
/// verified assertion: counter, flags and a new session in one transaction.
extension PasskeyService {
    // MARK: Authentication

    /// Request options. With a username: that account's passkeys in allowCredentials; for an
    /// unknown username, a stable made-up list that looks the same (no account enumeration).
    /// Without: empty allowCredentials (discoverable sign-in, AutoFill).
    ///
    /// With `credentialID` (and a username), the ceremony offers that one passkey of the
    /// account; one that is not the account's gets the same decoy answer as an unknown username.
    public func authenticationOptions(
        username: String?, profile: Profile = .native, hints: [String]? = nil, client: Client = Client(),
        extensions: SignInExtensionRequest = SignInExtensionRequest(), credentialID: [UInt8]? = nil, conditional: Bool = false
    ) async throws
        -> PublicKeyCredentialRequestOptionsJSON
    {
        try checkSignInExtensions(extensions, username: username, credentialID: credentialID)
        try await checkCeremonyCapacity()
        metrics.ceremonyStarted("authentication", client: client.kind)
        let time = now()
        var allow: [CredentialDescriptor] = []
        var accountID: UUID?
        var unknown = false
        var offered: [Passkey] = []
        var decoy: (credentialID: [UInt8], username: String)?
        if let username, !username.trimmingCharacters(in: .whitespaces).isEmpty {
            let name = try Self.validUsername(username)
            let account = try await store.account(username: name)
            var passkeys: [Passkey] = []
            if let account { passkeys = try await store.passkeys(accountID: account.id) }
            if let credentialID { passkeys = passkeys.filter { $0.credentialID == credentialID } }
            if let account, !account.disabled, !passkeys.isEmpty {
                accountID = account.id
                offered = passkeys
                allow = passkeys.map { CredentialDescriptor(id: $0.credentialID, transports: $0.transports) }
            } else if let credentialID {
                // The one passkey asked for is not this account's (or there is no account): the
                // same answer either way, with the ID the client named.
                unknown = true
                allow = [CredentialDescriptor(id: credentialID, transports: ["hybrid", "internal"])]
                decoy = (credentialID, name)
            } else {
                // Unknown, disabled and password-only accounts answer alike: one stable decoy
                // credential, so the options reveal nothing sign-up does not (on every API: the
                // reference apps' server answered 400 here, an oracle for which accounts have
                // passkeys that its apps do not need).
                unknown = true
                let decoyID = try await decoyCredentialID(for: name)
                allow = [CredentialDescriptor(id: decoyID, transports: ["hybrid", "internal"])]
                decoy = (decoyID, name)
            }
        }
        let begin = relyingParty.beginAuthentication(
            allowCredentials: allow, userVerification: configuration.authenticationUserVerification, hints: hints ?? configuration.hints,
            challenge: profile.challenge ?? RelyingParty.makeChallenge(),
            profile: profile.ceremony, extensions: try await signInExtensions(extensions, passkeys: offered, decoy: decoy))
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: begin.challenge, ceremony: .authentication, accountID: accountID, unknownUser: unknown, api: profile.api,
                userVerification: begin.state.userVerification.rawValue, conditional: conditional, state: Self.encoded(begin.state),
                createdAt: time,
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
        /// The session's access token, when the sign-in's ``SignInCompletion`` asked for one.
        public internal(set) var accessToken: AccessTokens.Minted?
    }

    /// Verifies an assertion, updates the passkey's counter, backup state and last use, and
    /// starts a session; then ends the session it replaces and mints its access token, as
    /// `completion` asks.
    public func finishAuthentication(
        _ credential: AuthenticationResponseJSON, client: Client, profile: Profile = .native,
        completion: SignInCompletion = .sessionOnly
    ) async throws -> SignInResult {
        let clientData = try parseClientData(credential.response.clientDataJSON.bytes, signIn: true)
        let result = try await measured("authentication", origin: clientData.origin, client: client) {
            try await verifyAuthentication(credential, clientData: clientData, client: client, api: profile.api)
        }
        metrics.signedIn(method: "passkey")
        var completed = result
        completed.accessToken = try await complete(completion, account: result.account, session: result.session)
        return completed
    }

    /// Runs a ceremony's verify step, counting its outcome (by error code) and latency per client kind.
    func measured<T>(_ ceremony: String, origin: String?, client: Client, _ body: () async throws -> T) async throws -> T {
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

    func verifyAuthentication(
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

    func verifyAuthentication(
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
        let state: AuthenticationState
        do { state = try authenticationState(record) } catch { try await refuse(error) }
        do {
            let key = try CredentialPublicKey(cose: passkey.publicKey)
            // §7.2 step 5 checks the allowCredentials really offered (kept in the state).
            verified = try Spans.measure("webauthn.verify_authentication") { () throws(WebAuthnError) in
                try relyingParty.finishAuthentication(
                    response: credential, clientData: clientData,
                    state: state,
                    credential: StoredCredential(
                        id: passkey.credentialID, publicKey: key, signCount: passkey.signCount,
                        userHandle: account.userHandle, backupEligible: passkey.backupEligible))
            }
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
        events.append(
            auditEvent(.signIn, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "passkey")
                .counted(record.conditional ? .signInAutofill : .signInPasskey))
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
        case .credentialGone:
            // The account was deleted while this answer was checked: as if it never existed.
            throw PasskeyServiceError.credentialNotFound
        }
        var used = passkey
        used.signCount = verified.newSignCount
        used.backedUp = verified.backedUp
        used.lastUsedAt = time
        return SignInResult(account: account, passkey: used, token: token, session: session)
    }
}
