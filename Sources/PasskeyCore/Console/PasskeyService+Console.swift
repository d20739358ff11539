import Foundation
import PasskeyStore
import WebAuthn

/// The console's passkey ceremonies: the same §7.2 verification as a sign-in, with user
/// verification always required, its own `api` (a console challenge cannot finish an account
/// sign-in, nor the reverse), and no account session.
extension PasskeyService {
    /// The `api` of the console's ceremonies.
    package static let consoleAPI = "console"

    /// Request options for the console: discoverable (any passkey) to sign in, or the
    /// administrator's own passkeys to step up.
    package func consoleAssertionOptions(accountID: UUID?, client: Client) async throws -> PublicKeyCredentialRequestOptionsJSON {
        try await checkCeremonyCapacity()
        let time = now()
        var allow: [CredentialDescriptor] = []
        if let accountID {
            allow = try await store.passkeys(accountID: accountID).map {
                CredentialDescriptor(id: $0.credentialID, transports: $0.transports)
            }
        }
        let begin = relyingParty.beginAuthentication(
            allowCredentials: allow, userVerification: .required, hints: configuration.hints, challenge: RelyingParty.makeChallenge())
        try await store.saveChallenge(
            ChallengeRecord(
                challenge: begin.challenge, ceremony: .authentication, accountID: accountID, api: Self.consoleAPI,
                userVerification: UserVerificationRequirement.required.rawValue, state: Self.encoded(begin.state), createdAt: time,
                expiresAt: time.addingTimeInterval(lifetime(configuration.challengeLifetime))))
        capacity.issued()
        return begin.options
    }

    /// Verifies a console assertion (§7.2, UV required) and records it: the challenge taken,
    /// the counter moved, `audit` written (each line gets the account and passkey), in one
    /// transaction. Returns the passkey and its account. A step-up (`accountID` set) accepts
    /// only that account's passkeys.
    package func verifyConsoleAssertion(
        _ credential: AuthenticationResponseJSON, client: Client, audit lines: [AuditEvent]
    ) async throws -> (Passkey, Account) {
        let clientData = try parseClientData(credential.response.clientDataJSON.bytes, signIn: true)
        guard !clientData.challenge.isEmpty, clientData.challenge.count <= 1024 else { throw PasskeyServiceError.unknownChallenge }
        // Taken first: whatever happens next, this challenge answers once.
        guard let record = try await store.takeChallenge(clientData.challenge) else { throw PasskeyServiceError.unknownChallenge }
        try check(record, ceremony: .authentication, api: Self.consoleAPI)
        guard let (passkey, account) = try await store.passkeyAndAccount(credentialID: credential.rawId.bytes) else {
            throw PasskeyServiceError.credentialNotFound
        }
        if let accountID = record.accountID, accountID != account.id { throw PasskeyServiceError.credentialNotAllowed }
        guard !account.disabled else { throw PasskeyServiceError.accountDisabled }
        let verified: VerifiedAuthentication
        let state = try authenticationState(record)
        do {
            verified = try relyingParty.finishAuthentication(
                response: credential, clientData: clientData, state: state,
                credential: StoredCredential(
                    id: passkey.credentialID, publicKey: try CredentialPublicKey(cose: passkey.publicKey), signCount: passkey.signCount,
                    userHandle: account.userHandle, backupEligible: passkey.backupEligible))
        } catch {
            logger.info("console sign-in rejected", metadata: ["code": "\(error.code)", "reason": "\(error.reason)"])
            await audit(
                .signInFailed, accountID: account.id, credentialID: passkey.credentialID, client: client, detail: "console:\(error.code)")
            throw PasskeyServiceError(error, signIn: true)
        }
        let events = lines.map { line in
            var event = line
            event.accountID = account.id
            event.credentialID = passkey.credentialID
            return event
        }
        // The challenge was taken above; this records the counter and the lines (no session).
        switch try await store.recordAssertion(
            challenge: nil, credentialID: passkey.credentialID, previousSignCount: passkey.signCount, signCount: verified.newSignCount,
            backedUp: verified.backedUp, counterAnomaly: verified.counterLooksCloned, at: now(), audit: events)
        {
        case .signedIn: return (passkey, account)
        case .challengeTaken: throw PasskeyServiceError.unknownChallenge
        case .counterRaced: throw PasskeyServiceError.counterRace
        case .credentialGone: throw PasskeyServiceError.credentialNotFound
        }
    }
}
