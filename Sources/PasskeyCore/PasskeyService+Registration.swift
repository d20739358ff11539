import Crypto
import Foundation
import Logging
import PasskeyStore
import Synchronization
import WebAuthn

/// Registration (§7.1): options, then the verified response stored as a passkey; a sign-up
/// makes the account in the same transaction.
extension PasskeyService {
    // MARK: Registration

    /// Creation options: sign-up of `username` when nobody is signed in, a new passkey for the
    /// signed-in account, or (with a registration token from the server API) a passkey for the
    /// account the token was issued for.
    public func registrationOptions(
        username: String?, displayName: String?, signedIn: SignedIn?, profile: Profile = .native,
        conditional: Bool = false, hints: [String]? = nil, registrationToken: String? = nil, client: Client = Client(),
        extensions: RegistrationExtensionRequest = RegistrationExtensionRequest(), email: String? = nil
    ) async throws
        -> PublicKeyCredentialCreationOptionsJSON
    {
        try await checkCeremonyCapacity()
        if signedIn == nil, let registrationToken {
            return try await enrolmentOptions(
                token: registrationToken, hints: hints, profile: profile, client: client, extensions: extensions)
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
                hints: hints ?? configuration.hints, challenge: challenge, conditional: conditional, profile: profile.ceremony,
                extensions: registrationExtensions(extensions))
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
        let pendingEmail = try signUpAddress(username: name, email: email)
        if try await store.account(username: name) != nil { throw PasskeyServiceError.usernameTaken }
        let user = PublicKeyCredentialUserEntity(id: profile.userHandle ?? RelyingParty.makeUserHandle(), name: name, displayName: display)
        let begin = relyingParty.beginRegistration(
            user: user, userVerification: configuration.registrationUserVerification, hints: hints ?? configuration.hints,
            challenge: challenge, profile: profile.ceremony, extensions: registrationExtensions(extensions))
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: challenge, ceremony: .registration, pendingUsername: name, pendingDisplayName: display,
                pendingUserHandle: user.id, pendingAccountID: profile.accountID, api: profile.api,
                userVerification: begin.state.userVerification.rawValue, state: Self.encoded(begin.state), createdAt: time,
                expiresAt: expiry, pendingEmail: pendingEmail))
        capacity.issued()
        return begin.options
    }

    /// Options for the account a registration token names (single use: the token is spent here).
    func enrolmentOptions(
        token: String, hints: [String]?, profile: Profile, client: Client, extensions: RegistrationExtensionRequest
    ) async throws
        -> PublicKeyCredentialCreationOptionsJSON
    {
        let text = token.hasPrefix("prt_") ? String(token.dropFirst(4)) : token
        guard let bytes = Base64URLBytes(encoded: text)?.bytes, bytes.count == 32,
            let accountID = try await store.takeRegistrationToken(hash: Array(SHA256.hash(data: bytes)), now: now()),
            let account = try await store.account(id: accountID), !account.disabled
        else { throw PasskeyServiceError.invalidRegistrationToken }
        return try await enrolmentCeremony(account: account, hints: hints, profile: profile, client: client, extensions: extensions)
    }

    /// A ceremony that adds a passkey to `account` for someone not signed in (a registration
    /// token, a recovery step): finishing it signs its person in.
    func enrolmentCeremony(
        account: Account, hints: [String]?, profile: Profile, client: Client, extensions: RegistrationExtensionRequest
    ) async throws -> PublicKeyCredentialCreationOptionsJSON {
        metrics.ceremonyStarted("registration", client: client.kind)
        let time = now()
        let challenge = profile.challenge ?? RelyingParty.makeChallenge()
        let user = PublicKeyCredentialUserEntity(id: account.userHandle, name: account.username, displayName: account.displayName)
        let exclude = try await store.passkeys(accountID: account.id).map {
            CredentialDescriptor(id: $0.credentialID, transports: $0.transports)
        }
        let begin = relyingParty.beginRegistration(
            user: user, excludeCredentials: exclude, userVerification: configuration.registrationUserVerification,
            hints: hints ?? configuration.hints, challenge: challenge, profile: profile.ceremony,
            extensions: registrationExtensions(extensions))
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

    func verifyRegistration(
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
        let state = try registrationState(record)
        // The PRF input the options carried becomes the passkey's.
        let prfSalt = state.extensions.prf?.eval?.first.bytes
        do {
            verified = try await Spans.measure("webauthn.verify_registration") { () async throws(WebAuthnError) in
                try await metadataState.relyingParty.finishRegistration(
                    response: credential, clientData: clientData, state: state, now: now())
            }
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
            let existing = try await store.passkeys(accountID: accountID)
            let taken = Set(existing.map(\.name))
            var passkey = makePasskey(verified, accountID: accountID, name: passkeyName, prfSalt: prfSalt, at: time)
            if passkeyName == nil { passkey.name = Self.distinctName(passkey.name, taken: taken) }
            do {
                try await store.addPasskey(passkey)
            } catch let error as StoreError where error.code == .conflict {
                throw PasskeyServiceError.credentialExists
            }
            // Counted for the adoption chart: a first passkey of a password account is an upgrade.
            let metric = AdoptionMetric.newPasskey(
                existing: replaces == nil ? existing.count : max(existing.count, 1), hasPassword: account.passwordHash != nil,
                conditional: record.conditional, sessionMethod: signedIn?.session.method)
            await audit(
                auditEvent(.passkeyAdded, accountID: accountID, credentialID: passkey.credentialID, client: client, detail: passkey.name)
                    .counted(metric))
            await notify(
                .passkeyAdded, account: account, client: client, subject: passkey.name,
                undo: UndoDetail(kind: .passkeyAdded, credentialID: Base64URLBytes(passkey.credentialID).base64URL))
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
            let recovery = record.api == Self.emailRecoveryAPI
            // "This wasn't me" closes recovery by mail: a recovery step opened before it ends too.
            if recovery, try await store.accountEmail(accountID: enrolled)?.recoveryClosed != false {
                throw PasskeyServiceError.invalidEmailLink
            }
            let registered = try await finishEnrolment(
                verified, accountID: enrolled, name: passkeyName, prfSalt: prfSalt, client: client,
                method: recovery ? "email_recovery" : "registration_token")
            if !recovery {
                await notify(
                    .passkeyAdded, account: registered.account, client: client, subject: registered.passkey.name,
                    undo: UndoDetail(kind: .passkeyAdded, credentialID: Base64URLBytes(registered.passkey.credentialID).base64URL))
            }
            return registered
        }
        guard let username = record.pendingUsername, let handle = record.pendingUserHandle else {
            throw PasskeyServiceError.unknownChallenge
        }
        let account = Account(
            id: record.pendingAccountID ?? .random(), username: username, displayName: record.pendingDisplayName ?? username,
            userHandle: handle, createdAt: time, lastSignInAt: time)
        let passkey = makePasskey(verified, accountID: account.id, name: passkeyName, prfSalt: prfSalt, at: time)
        let (token, session) = makeSession(for: account, client: client, method: "sign_up", credentialID: passkey.credentialID)
        // The console's bootstrap makes its first administrator: not a sign-up in the adoption figures.
        let metric: AdoptionMetric = profile.api == Self.consoleAPI ? .adminBootstrap : .signUpPasskey
        do {
            try await store.createAccount(
                account, passkey: passkey, session: session,
                audit: [
                    auditEvent(.signUp, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: passkey.name)
                        .counted(metric)
                ])
        } catch let error as StoreError where error.code == .conflict {
            // Someone took the username (or registered this credential) since the options.
            if try await store.account(username: username) != nil { throw PasskeyServiceError.usernameTaken }
            throw PasskeyServiceError.credentialExists
        }
        if let pendingEmail = record.pendingEmail { await startSignUpVerification(account: account, address: pendingEmail, client: client) }
        return Registered(account: account, passkey: passkey, token: token, session: session)
    }

    /// A passkey registered with a registration token: stored on its account, and its person
    /// signed in (a session made by that passkey).
    func finishEnrolment(
        _ verified: VerifiedRegistration, accountID: UUID, name: String?, prfSalt: [UInt8]?, client: Client, method: String
    ) async throws -> Registered {
        guard let account = try await store.account(id: accountID), !account.disabled else { throw PasskeyServiceError.unknownChallenge }
        let time = now()
        let existing = try await store.passkeys(accountID: accountID)
        let taken = Set(existing.map(\.name))
        var passkey = makePasskey(verified, accountID: accountID, name: name, prfSalt: prfSalt, at: time)
        if name == nil { passkey.name = Self.distinctName(passkey.name, taken: taken) }
        do {
            try await store.addPasskey(passkey)
        } catch let error as StoreError where error.code == .conflict {
            throw PasskeyServiceError.credentialExists
        }
        let (token, session) = makeSession(
            for: account, client: client, method: method == "email_recovery" ? method : "sign_up", credentialID: passkey.credentialID)
        try await store.recordSignIn(
            accountID: accountID, session: session,
            audit: [
                auditEvent(.passkeyAdded, accountID: accountID, credentialID: passkey.credentialID, client: client, detail: passkey.name)
                    .counted(
                        AdoptionMetric.newPasskey(
                            existing: existing.count, hasPassword: account.passwordHash != nil, conditional: false,
                            sessionMethod: method == "email_recovery" ? method : nil)),
                auditEvent(
                    method == "email_recovery" ? .recoverySignIn : .signIn, accountID: accountID, credentialID: passkey.credentialID,
                    client: client, detail: method
                ).counted(AdoptionMetric.signIn(method: method)),
            ], revokeOtherSessions: false)
        metrics.signedIn(method: method)
        return Registered(account: account, passkey: passkey, token: token, session: session)
    }

    func makePasskey(_ verified: VerifiedRegistration, accountID: UUID, name: String?, prfSalt: [UInt8]?, at time: Date) -> Passkey {
        Passkey(
            credentialID: verified.credentialID, accountID: accountID, publicKey: verified.publicKey.coseBytes,
            signCount: verified.signCount,
            aaguid: verified.aaguid.description, transports: Array(verified.transports.prefix(8).map { String($0.prefix(32)) }),
            backupEligible: verified.backupEligible, backedUp: verified.backedUp, userVerified: verified.userVerified,
            attestationFormat: verified.attestation.format, attestationTrusted: verified.attestation.trusted,
            name: name ?? providerName(verified.aaguid) ?? "Passkey", createdAt: time, extensions: Self.passkeyExtensions(verified),
            prfSalt: prfSalt)
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
}
