import Foundation
import PasskeyStore
import WebAuthn

/// What an operator does to accounts: look one up, disable or re-enable it, revoke a passkey or
/// every session. Each change and its `admin_*` audit line are one store transaction: either both
/// happen or neither. `passkeyd admin` uses it (and any server API for operators must too).
public struct AdminService: Sendable {
    public let store: any PasskeyStore
    let now: @Sendable () -> Date

    public init(store: any PasskeyStore, now: @escaping @Sendable () -> Date = { Date() }) {
        self.store = store
        self.now = now
    }

    /// Why an admin verb could not be done.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// An account by username (its comparison key) or by ID.
    public func account(_ user: String) async throws -> Account {
        if let id = UUID(uuidString: user), let account = try await store.account(id: id) { return account }
        if let account = try await store.account(username: user) { return account }
        throw Refusal(description: "no account \"\(user)\" (give a username or an account ID)")
    }

    private func event(
        _ kind: AuditEvent.Kind, _ account: Account, by operatorName: String, credentialID: [UInt8]? = nil, detail: String? = nil
    )
        -> AuditEvent
    {
        AuditEvent(time: now(), kind: kind, accountID: account.id, credentialID: credentialID, userAgent: operatorName, detail: detail)
    }

    /// Disables an account: it cannot sign in, and every session of it ends. Returns how many.
    public func disable(_ account: Account, by operatorName: String) async throws -> Int {
        guard
            let revoked = try await store.setDisabled(
                accountID: account.id, disabled: true, audit: [event(.adminAccountDisabled, account, by: operatorName)])
        else { throw Refusal(description: "no account \(account.id)") }
        return revoked
    }

    /// Lets a disabled account sign in again (its old sessions stay ended).
    public func enable(_ account: Account, by operatorName: String) async throws {
        guard
            try await store.setDisabled(
                accountID: account.id, disabled: false, audit: [event(.adminAccountEnabled, account, by: operatorName)])
                != nil
        else { throw Refusal(description: "no account \(account.id)") }
    }

    /// Removes one of the account's passkeys, even its last (then only a recovery link lets the
    /// person back in), and the sessions it made.
    public func revokePasskey(_ credentialID: [UInt8], of account: Account, by operatorName: String) async throws -> Passkey {
        guard let passkey = try await store.passkey(credentialID: credentialID), passkey.accountID == account.id else {
            throw Refusal(description: "\(account.username) has no passkey \(Base64URLBytes(credentialID).base64URL)")
        }
        let audit = [event(.adminPasskeyRevoked, account, by: operatorName, credentialID: credentialID, detail: passkey.name)]
        guard try await store.revokePasskey(credentialID: credentialID, audit: audit) else {
            throw Refusal(description: "the passkey was removed meanwhile")
        }
        return passkey
    }

    /// Signs the account out everywhere; returns how many sessions ended.
    public func revokeSessions(of account: Account, by operatorName: String) async throws -> Int {
        try await store.revokeSessions(accountID: account.id, except: nil, audit: [event(.adminSessionsRevoked, account, by: operatorName)])
    }
}
