import Crypto
import Foundation
import Logging
import PasskeyStore
import Synchronization
import WebAuthn

/// Sessions and the signed-in person's passkeys: list, rename, delete, sign out.
extension PasskeyService {
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
        // Read first for the adoption chart: was it the account's last passkey?
        let all = try await store.passkeys(accountID: signedIn.account.id)
        let existing = all.count
        let name = all.first { $0.credentialID == id }?.name
        switch try await store.deletePasskey(accountID: signedIn.account.id, credentialID: id, keepSession: signedIn.session.tokenHash) {
        case .deleted:
            await audit(
                auditEvent(.passkeyDeleted, accountID: signedIn.account.id, credentialID: id, client: client)
                    .counted(AdoptionMetric.removedPasskey(existing: existing, hasPassword: signedIn.account.passwordHash != nil)))
            await notify(
                .passkeyRemoved, account: signedIn.account, client: client, subject: name, undo: UndoDetail(kind: .passkeyRemoved))
        case .notFound: throw PasskeyServiceError.passkeyNotFound
        case .lastPasskey: throw PasskeyServiceError.lastPasskey
        }
    }
}
