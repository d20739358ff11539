import Foundation
import PasskeyStore
import Synchronization
import WebAuthn

/// Passwords during the move to passkeys. New hashes are scrypt (``PasswordHash``, PHC string
/// format, the parameters stored with each hash); bcrypt hashes brought by `passkeyd import`
/// verify, and the first successful sign-in with one replaces it with scrypt (as it does a
/// scrypt hash below the configured cost).
extension PasskeyService {
    /// Checks a password against the account's hash. Unknown usernames, accounts without a
    /// password and unreadable hashes take the same time (a decoy hash at the configured cost is
    /// checked).
    public func passwordSignIn(
        username: String?, password: String?, client: Client, completion: SignInCompletion = .sessionOnly
    ) async throws -> OtherSignIn {
        let name = try Self.validUsername(username)
        guard let password, !password.isEmpty, password.utf8.count <= 1024 else {
            throw PasskeyServiceError.invalid(.invalidPassword, "Enter a password (at most 1024 bytes).")
        }
        let key = Account.key(for: name)
        let attempt = try await reserveSecretAttempt(accountKey: key, client: client)
        let account = try await store.account(username: name)
        let stored = account?.passwordHash.flatMap(PasswordHash.init)
        let hash = stored ?? decoyPasswordHash()
        let matches = try await hashing { hash.verify(password) }
        // A disabled account answers a wrong password exactly as an unknown username does.
        guard let account, let text = account.passwordHash, stored != nil, matches else {
            await audit(.signInFailed, accountID: account?.id, client: client, detail: "invalid_credentials")
            throw PasskeyServiceError.invalidPassword
        }
        await settleSecretAttempt(attempt, succeeded: true)
        guard !account.disabled else {
            await audit(.signInFailed, accountID: account.id, client: client, detail: "account_disabled")
            throw PasskeyServiceError.accountDisabled
        }
        if hash.needsRehash(for: configuration.passwordScrypt) { await rehash(account, from: text, password: password) }
        let hasPasskey = !(try await store.passkeys(accountID: account.id).isEmpty)
        return try await signIn(
            account, method: "password", client: client, canUpgrade: !hasPasskey, recovery: false, completion: completion)
    }

    /// Replaces an imported bcrypt hash (or a scrypt hash below the configured cost) with a
    /// scrypt hash at the configured cost. The sign-in goes on whatever happens here: a busy
    /// pool or a store error leaves the old hash, tried again at the next sign-in.
    private func rehash(_ account: Account, from old: String, password: String) async {
        let parameters = configuration.passwordScrypt
        do {
            let new = try await hashing { try PasswordHash.Scrypt(hashing: password, parameters: parameters).text }
            if try await store.rehashPassword(accountID: account.id, from: old, to: new) {
                metrics.passwordRehashed()
            }
        } catch {
            logger.warning("password not rehashed", metadata: ["account": "\(account.id)", "error": "\(error)"])
        }
    }

    /// Turns the password off; only once the account has a passkey. Leaving a single way in
    /// needs a recent sign-in.
    public func removePassword(_ signedIn: SignedIn, client: Client) async throws {
        guard signedIn.account.passwordHash != nil else { throw PasskeyServiceError.noPassword }
        if try await waysIn(signedIn.account) == 2 { try requireRecentSignIn(signedIn) }
        guard try await store.removePassword(accountID: signedIn.account.id) else {
            throw PasskeyServiceError.noPasskey
        }
        await audit(auditEvent(.passwordRemoved, accountID: signedIn.account.id, client: client).counted(.passwordOff))
        await notify(.passwordOff, account: signedIn.account, client: client, subject: nil, undo: UndoDetail(kind: .passwordOff))
    }

    /// Changes the password of an account that has one: needs a recent sign-in and the new
    /// password (8 to 1024 bytes, not the username); every other session of the account ends.
    public func changePassword(_ signedIn: SignedIn, newPassword: String?, client: Client) async throws {
        guard signedIn.account.passwordHash != nil else { throw PasskeyServiceError.noPassword }
        try requireRecentSignIn(signedIn)
        guard let newPassword, newPassword.count >= 8, newPassword.utf8.count <= 1024 else {
            throw PasskeyServiceError.invalid(.invalidPassword, "Choose a password of at least 8 characters (at most 1024 bytes).")
        }
        guard Account.key(for: newPassword) != Account.key(for: signedIn.account.username) else {
            throw PasskeyServiceError.invalid(.invalidPassword, "The password cannot be the username.")
        }
        let parameters = configuration.passwordScrypt
        let hash = try await hashing { try PasswordHash.Scrypt(hashing: newPassword, parameters: parameters).text }
        guard try await store.changePassword(accountID: signedIn.account.id, hash: hash, keepSession: signedIn.session.tokenHash) else {
            throw PasskeyServiceError.noPassword
        }
        await audit(.passwordChanged, accountID: signedIn.account.id, client: client)
    }

    /// scrypt (and bcrypt) runs for tens to hundreds of milliseconds: on the bounded pool, off the request
    /// threads, so a password flood cannot starve the ceremonies (503 `busy` past its queue).
    /// What `work` throws (a hash that could not be made) reaches the caller.
    package func hashing<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard let result = await passwordWork.run({ Result { try work() } }) else { throw PasskeyServiceError.busy }
        return try result.get()
    }

    private func decoyPasswordHash() -> PasswordHash {
        .scrypt(DecoyHash.shared.hash(configuration.passwordScrypt))
    }
}

/// One decoy scrypt hash per parameter set: a random salt and digest at those parameters.
/// Checking a password against it costs what a real check costs (the derivation is the work),
/// and no password matches it; it needs no derivation to make.
package final class DecoyHash: Sendable {
    package static let shared = DecoyHash()
    private let hashes = Mutex<[PasswordHash.Scrypt.Parameters: PasswordHash.Scrypt]>([:])

    package func hash(_ parameters: PasswordHash.Scrypt.Parameters) -> PasswordHash.Scrypt {
        hashes.withLock { hashes in
            if let hash = hashes[parameters] { return hash }
            let made = PasswordHash.Scrypt(parameters: parameters, salt: RelyingParty.randomBytes(16), digest: RelyingParty.randomBytes(32))
            hashes[parameters] = made
            return made
        }
    }
}
