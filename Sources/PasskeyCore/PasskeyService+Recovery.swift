import Crypto
import Foundation
import PasskeyStore
import Synchronization
import WebAuthn

/// The ways back in when passkeys are lost: recovery codes and admin-issued recovery links
/// (passwords: PasskeyService+Passwords.swift). Every path is rate limited like passkey
/// sign-in (per IP in the middleware, per username here) and audited.
extension PasskeyService {
    /// A sign-in that is not a passkey assertion.
    public struct OtherSignIn: Sendable {
        public let account: Account
        public let token: String
        public let session: SessionRecord
        /// The account has no passkey yet: offer to create one (the UI may do it by itself).
        public let canUpgrade: Bool
        /// Signed in through recovery: every other session was revoked; register a new passkey.
        public let recovery: Bool
        /// The session's access token, when the sign-in's ``SignInCompletion`` asked for one.
        public let accessToken: AccessTokens.Minted?
    }

    // MARK: Recovery codes

    /// Ten new single-use codes (the old ones stop working), shown once: only their HMAC is kept.
    public func newRecoveryCodes(_ signedIn: SignedIn, client: Client) async throws -> [String] {
        try requireRecentSignIn(signedIn)
        let codes = (0..<10).map { _ in Self.makeRecoveryCode() }
        let secret = try await serverSecret()
        try await store.replaceRecoveryCodes(
            accountID: signedIn.account.id, hashes: codes.map { Self.codeHash($0, secret: secret) }, at: now())
        await audit(.recoveryCodesCreated, accountID: signedIn.account.id, client: client, detail: "10")
        return codes
    }

    public func recoveryCodesLeft(accountID: UUID) async throws -> Int {
        try await store.recoveryCodesLeft(accountID: accountID)
    }

    /// Signs in with a recovery code: single use; every other session of the account ends.
    public func recoverySignIn(
        username: String?, code: String?, client: Client, completion: SignInCompletion = .sessionOnly
    ) async throws -> OtherSignIn {
        let name = try Self.validUsername(username)
        guard let code, code.utf8.count <= 64 else { throw PasskeyServiceError.invalidRecoveryCode }
        let key = Account.key(for: name)
        let attempt = try await reserveSecretAttempt(accountKey: key, client: client)
        let secret = try await serverSecret()
        let hash = Self.codeHash(code, secret: secret)
        let account = try await store.account(username: name)
        // A disabled account's codes are not spent: it cannot sign in either way.
        guard let account, !account.disabled,
            try await store.useRecoveryCode(accountID: account.id, hash: hash, at: now())
        else {
            await audit(
                .recoveryFailed, accountID: account?.id, client: client,
                detail: account?.disabled == true ? "account_disabled" : "invalid_recovery_code")
            throw PasskeyServiceError.invalidRecoveryCode
        }
        await settleSecretAttempt(attempt, succeeded: true)
        // A recovery code opens recovery by mail again (closed by "this wasn't me").
        try await openEmailRecovery(accountID: account.id, client: client, by: "recovery_code")
        let result = try await signIn(
            account, method: "recovery_code", client: client, canUpgrade: true, recovery: true, completion: completion)
        await notify(.recoveryUsed, account: account, client: client, subject: nil, undo: UndoDetail(kind: .recoveryUsed))
        return result
    }

    // MARK: Recovery links

    /// A one-time link token for `account` (the admin verb prints the link); only its SHA-256 is kept.
    public func issueRecoveryLink(for account: Account, lifetime: TimeInterval, issuer: String) async throws -> String {
        let token = RelyingParty.randomBytes(32)
        let time = now()
        try await store.saveRecoveryToken(
            hash: Array(SHA256.hash(data: token)), accountID: account.id, createdAt: time,
            expiresAt: time.addingTimeInterval(lifetime))
        try await store.appendAudit(
            AuditEvent(
                time: time, kind: .adminRecoveryLink, accountID: account.id, userAgent: issuer,
                detail: "expires in \(Int(lifetime))s"))
        return Base64URLBytes(token).base64URL
    }

    public func recoveryLinkSignIn(
        token: String?, client: Client, completion: SignInCompletion = .sessionOnly
    ) async throws -> OtherSignIn {
        guard let token, let bytes = Base64URLBytes(encoded: token)?.bytes, bytes.count == 32,
            let accountID = try await store.takeRecoveryToken(hash: Array(SHA256.hash(data: bytes)), now: now()),
            let account = try await store.account(id: accountID)
        else {
            await audit(.recoveryFailed, client: client, detail: "invalid_recovery_link")
            throw PasskeyServiceError.invalidRecoveryLink
        }
        guard !account.disabled else { throw PasskeyServiceError.accountDisabled }
        return try await signIn(account, method: "recovery_link", client: client, canUpgrade: true, recovery: true, completion: completion)
    }

    // MARK: Helpers

    func signIn(
        _ account: Account, method: String, client: Client, canUpgrade: Bool, recovery: Bool, completion: SignInCompletion
    ) async throws -> OtherSignIn {
        let (token, session) = makeSession(for: account, client: client, method: method)
        try await store.recordSignIn(
            accountID: account.id, session: session,
            audit: [
                auditEvent(recovery ? .recoverySignIn : .signIn, accountID: account.id, client: client, detail: method)
                    .counted(AdoptionMetric.signIn(method: method))
            ],
            revokeOtherSessions: recovery)
        metrics.signedIn(method: method)
        return OtherSignIn(
            account: account, token: token, session: session, canUpgrade: canUpgrade, recovery: recovery,
            accessToken: try await complete(completion, account: account, session: session))
    }

    /// 32 characters without i, l, o and 1, which read alike.
    package static let codeAlphabet = Array("abcdefghjkmnpqrstuvwxyz023456789".utf8)

    /// `xxxx-xxxx-xxxx`: 60 random bits in an unambiguous base32 alphabet.
    package static func makeRecoveryCode() -> String {
        let bytes = RelyingParty.randomBytes(8)
        var value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        var characters: [UInt8] = []
        for index in 0..<12 {
            if index > 0 && index % 4 == 0 { characters.append(0x2D) }
            characters.append(codeAlphabet[Int(value % UInt64(codeAlphabet.count))])
            value /= UInt64(codeAlphabet.count)
        }
        return String(decoding: characters, as: UTF8.self)
    }

    /// HMAC-SHA-256 under the server secret of the code without dashes, spaces or case.
    package static func codeHash(_ code: String, secret: [UInt8]) -> [UInt8] {
        let normalized = code.lowercased().unicodeScalars.filter { $0 != "-" && $0 != " " }.map(String.init).joined()
        return Array(HMAC<SHA256>.authenticationCode(for: Array(("recovery-code:" + normalized).utf8), using: SymmetricKey(data: secret)))
    }
}

/// At most `width` jobs at once on the global dispatch queues, at most `maxWaiting` waiting; a
/// job past that is refused (nil) rather than queued without bound.
package final class BoundedWorkPool: Sendable {
    private struct State {
        var running = 0
        var waiting: [CheckedContinuation<Bool, Never>] = []
    }

    private let state = Mutex(State())
    package let width: Int
    package let maxWaiting: Int

    package init(width: Int, maxWaiting: Int) {
        self.width = max(1, width)
        self.maxWaiting = max(0, maxWaiting)
    }

    package func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T? {
        let admitted = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            state.withLock { state in
                if state.running < width {
                    state.running += 1
                    continuation.resume(returning: true)
                } else if state.waiting.count < maxWaiting {
                    state.waiting.append(continuation)
                } else {
                    continuation.resume(returning: false)
                }
            }
        }
        guard admitted else { return nil }
        defer { release() }
        return await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async { continuation.resume(returning: work()) }
        }
    }

    private func release() {
        state.withLock { state in
            if state.waiting.isEmpty {
                state.running -= 1
            } else {
                state.waiting.removeFirst().resume(returning: true)
            }
        }
    }
}
