import Foundation
import PasskeyMail
import PasskeyStore
import WebAuthn

/// "Lost your passkey?" by mail, security notices and "this wasn't me" (issue 43).
///
/// Recovery asks for a username or an address and always answers the same, after the same
/// work: the lookup and the mail happen after the answer. The mail's link or code opens a
/// recovery step that can do one thing: create a passkey (never set a password). Every security
/// change sends a notice to the verified address whose link, for `email.undoSeconds`, undoes it.
extension PasskeyService {
    /// The `api` of a recovery ceremony: only the recovery route finishes it.
    public static let emailRecoveryAPI = "email_recovery"

    // MARK: Recovery

    /// Asks for a recovery mail for `identifier` (a username or an address). The same answer,
    /// after the same work, whether or not an account exists: the lookup and the mail happen
    /// after the answer (``DetachedWork``).
    public func requestEmailRecovery(identifier: String?, client: Client) async throws {
        try requireMail()
        let text = (identifier ?? "").trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty, text.utf8.count <= 320, !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw PasskeyServiceError.invalid(.invalidUsername, "Give your username or email address.")
        }
        let address = try? MailAddress(text)
        try await limitMail(to: address, key: address == nil ? "user:" + Account.key(for: text) : nil, client: client)
        metrics.emailRecovery("requested")
        let service = self
        await mailRequests.run {
            // After the answer is on its way: the lookup and the mail of a known address must
            // not slow the answer (measured: scripts/bench_email.py, docs/PERFORMANCE.md).
            try? await Task.sleep(for: .milliseconds(Int.random(in: 20...60)))
            do {
                try await service.sendRecoveryMail(identifier: text, address: address, client: client)
            } catch {
                service.logger.error("recovery mail not queued", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The lookup and mail behind ``requestEmailRecovery(identifier:client:)``.
    func sendRecoveryMail(identifier: String, address: MailAddress?, client: Client) async throws {
        let account = try await account(identifiedBy: identifier, address: address)
        if let account, !account.disabled, let email = try await store.accountEmail(accountID: account.id), email.verified,
            !email.recoveryClosed, let text = email.address, let to = try? MailAddress(text)
        {
            // The hourly limit per mailbox, whichever identifier asked (a username and an
            // address of one account are one mailbox): past it, nothing is sent.
            if try await mailboxIsFull(to) { return }
            try await sendTokenMail(
                .recovery, purpose: .recover, account: account, to: to,
                language: email.language ?? MailTemplates.language(client.language), detail: nil,
                audit: [auditEvent(.emailRecoveryRequested, accountID: account.id, client: client)])
            return
        }
        // An account whose address is not verified (one made with someone's address, or in
        // `username` mode): its address gets a fresh verification mail, whose link lets its
        // owner claim the account (issue 43 item 4); nothing goes to the requester.
        var unverified: [Account] = []
        if let address, account == nil {
            unverified = try await store.accounts(unverifiedEmailKey: address.key, limit: 3)
        } else if let account, !account.disabled, let email = try await store.accountEmail(accountID: account.id), !email.verified,
            email.address != nil
        {
            unverified = [account]
        }
        for candidate in unverified where !candidate.disabled {
            guard let email = try await store.accountEmail(accountID: candidate.id), !email.verified, let text = email.address,
                let to = try? MailAddress(text)
            else { continue }
            if try await mailboxIsFull(to) { return }
            try await sendTokenMail(
                .verifyAddress, purpose: .verify, account: candidate, to: to,
                language: email.language ?? MailTemplates.language(client.language), detail: to.description,
                audit: [auditEvent(.emailVerificationSent, accountID: candidate.id, client: client, detail: to.description)])
        }
        if !unverified.isEmpty { return }
        // An address nobody verified: a "someone tried" mail when the operator wants it.
        if let address, account == nil, configuration.email.notifyUnknownAddresses {
            try await queue(
                .someoneTried, to: address, accountID: nil, language: MailTemplates.language(client.language),
                values: MailValues(rpName: configuration.rpName, username: ""), token: nil, audit: [])
        }
    }

    /// The recovery step: creation options for the account the link's token (or the code, with
    /// the username or address it was asked for) names. The token is spent here; the options
    /// can be tried again until the ceremony expires.
    public func emailRecoveryOptions(token: String?, identifier: String?, code: String?, hints: [String]? = nil, client: Client)
        async throws -> (PublicKeyCredentialCreationOptionsJSON, Account)
    {
        try requireMail()
        try await checkCeremonyCapacity()
        let taken: EmailToken
        if let token {
            taken = try await requireLinkToken(token, purpose: .recover, client: client)
        } else {
            let text = (identifier ?? "").trimmingCharacters(in: .whitespaces)
            // Counted per identifier as given, whatever it names: a count per account would
            // tell a username's address from the 429 of the other.
            let attemptKey = "email:" + Account.key(for: text)
            guard let account = try await account(identifiedBy: text, address: try? MailAddress(text)) else {
                // The same refusal as a wrong code, after the same work (the attempt counted,
                // its UPDATE run on an account that does not exist, its audit line written).
                _ = try await reserveSecretAttempt(accountKey: attemptKey, client: client)
                guard Self.emailCodeDigits(code) != nil else { throw PasskeyServiceError.invalidEmailCode(triesLeft: nil) }
                if configuration.rateLimits.enabled {
                    _ = try await codeLimiter.hit("codes:" + attemptKey, limit: Self.emailCodeAttemptsPerDay, now: now())
                }
                _ = try await store.attemptEmailCode(
                    accountID: UUID.random(), purpose: .recover, codeHash: RelyingParty.randomBytes(32), now: now())
                await audit(.recoveryFailed, client: client, detail: "invalid_email_code")
                throw PasskeyServiceError.invalidEmailCode(triesLeft: nil)
            }
            // Nobody is signed in: the refusal never says how many tries are left (that would
            // tell a live recovery, and so an account, exists).
            taken = try await takeCode(
                code, account: account, purpose: .recover, client: client, revealTries: false, attemptKey: attemptKey)
        }
        guard let account = try await store.account(id: taken.accountID), !account.disabled,
            let email = try await store.accountEmail(accountID: account.id), email.verified, !email.recoveryClosed,
            email.address?.lowercased() == taken.address
        else {
            // Closed since, disabled, or the address changed since the mail: the step is gone.
            throw PasskeyServiceError.invalidEmailLink
        }
        metrics.emailRecovery("opened")
        let options = try await enrolmentCeremony(
            account: account, hints: hints, profile: Profile(api: Self.emailRecoveryAPI), client: client,
            extensions: RegistrationExtensionRequest())
        return (options, account)
    }

    /// Finishes the recovery step: the new passkey is stored and its person signed in; the
    /// address gets a "recovery used" notice whose undo removes that passkey.
    public func finishEmailRecovery(_ credential: RegistrationResponseJSON, name: String?, client: Client) async throws -> Registered {
        let registered = try await finishRegistration(
            credential, name: name, signedIn: nil, client: client, profile: Profile(api: Self.emailRecoveryAPI))
        metrics.emailRecovery("completed")
        await notify(
            .recoveryUsed, account: registered.account, client: client, subject: registered.passkey.name,
            undo: UndoDetail(kind: .recoveryUsed, credentialID: Base64URLBytes(registered.passkey.credentialID).base64URL))
        return registered
    }

    /// Removes every passkey of the account but the one the session stands on, and ends every
    /// other session: the step after a recovery (or a claim of an address).
    public func removeOtherPasskeys(_ signedIn: SignedIn, client: Client) async throws -> (passkeys: Int, sessions: Int) {
        try requireRecentSignIn(signedIn)
        guard let keep = signedIn.session.credentialID else { throw PasskeyServiceError.noPasskey }
        var removed: [String] = []
        for passkey in try await store.passkeys(accountID: signedIn.account.id) where passkey.credentialID != keep {
            if try await removePasskey(passkey.credentialID, of: signedIn.account, client: client, detail: "others") {
                removed.append(passkey.name)
            }
        }
        if !removed.isEmpty {
            await notify(
                .passkeyRemoved, account: signedIn.account, client: client, subject: removed.joined(separator: ", "),
                undo: UndoDetail(kind: .passkeyRemoved))
        }
        let sessions = try await store.revokeSessions(accountID: signedIn.account.id, except: signedIn.session.tokenHash)
        return (removed.count, sessions)
    }

    // MARK: Notices and "this wasn't me"

    /// What an undo link undoes (kept as the token's detail).
    struct UndoDetail: Codable, Sendable {
        enum Kind: String, Codable { case passkeyAdded, passkeyRemoved, recoveryUsed, addressChanged, passwordOff }
        var kind: Kind
        /// The passkey the change added (base64url): removed by the undo.
        var credentialID: String?
        /// The address before the change: put back by the undo.
        var previousAddress: String?
        var previousVerifiedAt: Date?
    }

    /// Counts one mail to `to` against its hourly limit (`email.mailsPerAddressPerHour`); true
    /// (and counted in the metrics) when the mailbox has had its share and nothing may be sent.
    private func mailboxIsFull(_ to: MailAddress) async throws -> Bool {
        guard configuration.rateLimits.enabled,
            case .limited = try await mailLimiter.hit("sent:\(to.key)", limit: configuration.email.mailsPerAddressPerHour, now: now())
        else { return false }
        metrics.rateLimited(scope: "mail_mailbox")
        return true
    }

    /// Queues a notice of `kind` to the account's verified address (or `to`), with a "this
    /// wasn't me" link. Never fails its request: a notice that cannot be queued is logged.
    func notify(
        _ kind: MailKind, account: Account, client: Client, subject: String?, undo: UndoDetail, to override: String? = nil,
        language: String? = nil
    ) async {
        guard mailEnabled else { return }
        do {
            let email = try await store.accountEmail(accountID: account.id) ?? AccountEmail()
            guard let text = override ?? (email.verified ? email.address : nil), let address = try? MailAddress(text) else { return }
            let secret = try await serverSecret()
            let tokenBytes = RelyingParty.randomBytes(32)
            let time = now()
            let detail = String(decoding: try JSONEncoder().encode(undo), as: UTF8.self)
            let token = EmailToken(
                accountID: account.id, purpose: .undo, address: address.key, linkHash: Self.emailLinkHash(tokenBytes, secret: secret),
                detail: detail, createdAt: time, expiresAt: time.addingTimeInterval(TimeInterval(configuration.email.undoSeconds)))
            let values = MailValues(
                rpName: configuration.rpName, username: account.username, link: link("undo", token: Base64URLBytes(tokenBytes).base64URL),
                when: time, device: client.userAgent, ipAddress: client.ipAddress, subject: subject,
                undoHours: configuration.email.undoSeconds / 3600)
            try await queue(
                kind, to: address, accountID: account.id, language: language ?? email.language ?? MailTemplates.language(client.language),
                values: values, token: token, audit: [])
        } catch {
            logger.error("notice not queued", metadata: ["kind": "\(kind.rawValue)", "error": "\(error)"])
        }
    }

    /// What "this wasn't me" did.
    public struct Undone: Sendable {
        public let account: Account
        public let removedPasskey: Bool
        public let restoredAddress: String?
        public let sessionsEnded: Int
    }

    /// "This wasn't me": removes the passkey the change added (or puts the old address back),
    /// ends every session of the account and closes recovery by mail until a recovery code
    /// sign-in or an administrator opens it again. The link works once.
    public func undo(token: String?, client: Client) async throws -> Undone {
        try requireMail()
        guard let token, let taken = try await takeLinkToken(token, purpose: .undo),
            let account = try await store.account(id: taken.accountID),
            let detail = try? JSONDecoder().decode(UndoDetail.self, from: Data((taken.detail ?? "").utf8))
        else {
            await audit(.recoveryFailed, client: client, detail: "invalid_undo_link")
            throw PasskeyServiceError.invalidEmailLink
        }
        // Counted first: removing the passkey ends the sessions it made.
        let live = try await store.sessions(accountID: account.id, now: now()).count
        var removed = false
        if let text = detail.credentialID, let id = Base64URLBytes(encoded: text)?.bytes,
            try await store.passkey(credentialID: id)?.accountID == account.id
        {
            removed = try await removePasskey(id, of: account, client: client, detail: "undo")
        }
        var restored: String?
        if detail.kind == .addressChanged, let previous = detail.previousAddress, let address = try? MailAddress(previous) {
            do {
                // Unverified: the old address's holder may be the one who lost it (it was removed
                // for that), so it comes back proving nothing until its owner verifies it again
                // from the account page; a change waiting for verification ends.
                try await store.restoreEmail(accountID: account.id, address: address.description, key: address.key, verifiedAt: nil)
                try await store.endEmailTokens(accountID: account.id, purpose: .verify, now: now())
                restored = address.description
            } catch let error as StoreError where error.code == .conflict {
                // Another account verified it since: it stays theirs.
                logger.notice("undo: the old address is another account's now", metadata: ["account": "\(account.id)"])
            }
        }
        try await store.revokeSessions(accountID: account.id)
        try await store.setEmailRecoveryClosed(accountID: account.id, closed: true)
        try await store.endEmailTokens(accountID: account.id, purpose: .recover, now: now())
        await audit(.emailUndo, accountID: account.id, client: client, detail: detail.kind.rawValue)
        await audit(.emailRecoveryClosed, accountID: account.id, client: client, detail: "undo")
        metrics.emailRecovery("undone")
        return Undone(account: account, removedPasskey: removed, restoredAddress: restored, sessionsEnded: live)
    }

    /// Removes one of `account`'s passkeys (and the sessions it made), its audit line counted in
    /// the adoption figures like any removal (the last passkey of an account moves its totals).
    func removePasskey(_ credentialID: [UInt8], of account: Account, client: Client, detail: String) async throws -> Bool {
        let existing = try await store.passkeys(accountID: account.id).count
        return try await store.revokePasskey(
            credentialID: credentialID,
            audit: [
                auditEvent(.passkeyDeleted, accountID: account.id, credentialID: credentialID, client: client, detail: detail)
                    .counted(AdoptionMetric.removedPasskey(existing: existing, hasPassword: account.passwordHash != nil))
            ])
    }

    /// Opens recovery by mail again (a recovery code sign-in, or an administrator).
    public func openEmailRecovery(accountID: UUID, client: Client, by actor: String) async throws {
        guard let email = try await store.accountEmail(accountID: accountID), email.recoveryClosed else { return }
        try await store.setEmailRecoveryClosed(accountID: accountID, closed: false)
        await audit(.emailRecoveryOpened, accountID: accountID, client: client, detail: actor)
    }
}
