import Crypto
import Foundation
import PasskeyMail
import PasskeyStore
import Synchronization
import WebAuthn

/// An account's address (issue 43, docs/email.md): set, verified by a link or a 6-digit code,
/// changed (the new one verified, the old one told), removed. An address counts only once
/// verified: no recovery goes to an unverified one, and it keeps no other account from it.
extension PasskeyService {
    /// Mail is set up (an SMTP server and a sender).
    public var mailEnabled: Bool { configuration.email.enabled }

    func requireMail() throws {
        guard mailEnabled else { throw PasskeyServiceError.emailNotEnabled }
    }

    /// An address from a request: trimmed, checked (``MailAddress``), or `invalid_email`.
    package static func emailAddress(_ text: String?) throws -> MailAddress {
        guard let text, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw PasskeyServiceError.invalidEmail("it is empty")
        }
        do {
            return try MailAddress(text)
        } catch {
            throw PasskeyServiceError.invalidEmail(error.reason)
        }
    }

    // MARK: The address

    /// The signed-in account's address and what it allows.
    public func emailStatus(_ signedIn: SignedIn) async throws -> AccountEmail {
        try await store.accountEmail(accountID: signedIn.account.id) ?? AccountEmail()
    }

    /// Sets (or with nil removes) the account's address. A new address is verified by a mail to
    /// it; until then a verified address stays in place. Needs a recent sign-in.
    public func setEmail(_ signedIn: SignedIn, address text: String?, client: Client) async throws -> AccountEmail {
        try requireMail()
        try requireRecentSignIn(signedIn)
        let account = signedIn.account
        let current = try await store.accountEmail(accountID: account.id) ?? AccountEmail()
        let language = MailTemplates.language(client.language)
        guard let text else {
            // Removed: a verified address is told.
            if current.verified, let old = current.address {
                try await store.restoreEmail(accountID: account.id, address: nil, key: nil, verifiedAt: nil)
                // A change waiting for its verification ends with it.
                try await store.endEmailTokens(accountID: account.id, purpose: .verify, now: now())
                await audit(.emailRemoved, accountID: account.id, client: client)
                await notify(
                    .addressChanged, account: account, client: client, subject: nil,
                    undo: UndoDetail(kind: .addressChanged, previousAddress: old, previousVerifiedAt: current.verifiedAt), to: old,
                    language: current.language)
            } else {
                _ = try await store.setUnverifiedEmail(accountID: account.id, address: nil, key: nil, language: nil)
            }
            return try await emailStatus(signedIn)
        }
        let address = try Self.emailAddress(text)
        if current.verified, current.address.map({ $0.lowercased() }) == address.key { return current }
        try await limitMail(to: address, client: client)
        if !current.verified {
            _ = try await store.setUnverifiedEmail(
                accountID: account.id, address: address.description, key: address.key, language: language)
        }
        try await sendTokenMail(
            .verifyAddress, purpose: .verify, account: account, to: address, language: language, detail: address.description,
            audit: [auditEvent(.emailVerificationSent, accountID: account.id, client: client, detail: address.description)])
        return try await emailStatus(signedIn)
    }

    /// What verifying an address found.
    public struct EmailVerification: Sendable {
        public let account: Account
        public let address: String
        /// Passkeys made before this first verification (they may be someone else's).
        public let passkeysBefore: [Passkey]
        /// Live sessions made before it.
        public let sessionsBefore: Int
        /// They were removed at once (`email.beforeVerification: remove`).
        public let removed: Bool
        /// The verifier was not signed in to the account: a recovery step (one new passkey)
        /// they may take, as the address's owner (nil when recovery by mail is closed).
        public let recoveryToken: String?
    }

    /// Verifies an address with the link's token, or the code (the code only for the signed-in
    /// account it was sent for).
    public func verifyEmail(token: String?, code: String?, signedIn: SignedIn?, client: Client) async throws -> EmailVerification {
        try requireMail()
        let taken: EmailToken
        if let token {
            taken = try await requireLinkToken(token, purpose: .verify, client: client)
        } else {
            guard let signedIn else { throw PasskeyServiceError.notSignedIn }
            taken = try await takeCode(code, account: signedIn.account, purpose: .verify, client: client)
        }
        guard let account = try await store.account(id: taken.accountID), !account.disabled else {
            throw PasskeyServiceError.invalidEmailLink
        }
        let address = try Self.emailAddress(taken.detail ?? taken.address)
        let previous = try await store.accountEmail(accountID: account.id) ?? AccountEmail()
        let time = now()
        do {
            try await store.verifyEmail(
                accountID: account.id, address: address.description, key: address.key, at: time,
                audit: [auditEvent(.emailVerified, accountID: account.id, client: client, detail: address.description)])
        } catch let error as StoreError where error.code == .conflict {
            throw PasskeyServiceError.emailTaken
        }
        if previous.verified, let old = previous.address, old.lowercased() != address.key {
            await notify(
                .addressChanged, account: account, client: client, subject: address.description,
                undo: UndoDetail(kind: .addressChanged, previousAddress: old, previousVerifiedAt: previous.verifiedAt), to: old,
                language: previous.language)
        }
        var before: [Passkey] = []
        var sessions = 0
        var removed = false
        var recoveryToken: String?
        let byOther = signedIn?.account.id != account.id
        if !previous.verified {
            // Issue 43 item 4: the first proof of this address. Whatever was made before it may
            // be the work of someone who created the account with another person's address.
            before = try await store.passkeys(accountID: account.id).filter { $0.createdAt <= time }
            sessions = try await store.sessions(accountID: account.id, now: time).count
            if byOther && configuration.email.beforeVerification == .remove {
                for passkey in before {
                    _ = try await removePasskey(passkey.credentialID, of: account, client: client, detail: "before_verification")
                }
                try await store.revokeSessions(accountID: account.id)
                removed = true
            }
            if byOther && !previous.recoveryClosed {
                recoveryToken = try await issueRecoveryTicket(account: account, address: address)
            }
        }
        return EmailVerification(
            account: account, address: address.description, passkeysBefore: removed ? [] : before, sessionsBefore: removed ? 0 : sessions,
            removed: removed, recoveryToken: recoveryToken)
    }

    /// The address a sign-up carries, by `email.signUp`: none, an optional or required one,
    /// or the username itself. Without mail set up, sign-up takes none.
    func signUpAddress(username: String, email: String?) throws -> String? {
        let given = email.map { $0.trimmingCharacters(in: .whitespaces) }.flatMap { $0.isEmpty ? nil : $0 }
        guard mailEnabled else {
            if given != nil { throw PasskeyServiceError.emailNotEnabled }
            return nil
        }
        switch configuration.email.signUp {
        case .off:
            if given != nil { throw PasskeyServiceError.invalidEmail("this server takes no address at sign-up") }
            return nil
        case .optional: return try given.map { try Self.emailAddress($0).description }
        case .required:
            guard let given else { throw PasskeyServiceError.emailRequired }
            return try Self.emailAddress(given).description
        case .username:
            let address: MailAddress
            do {
                address = try MailAddress(username)
            } catch {
                throw PasskeyServiceError.invalid(.invalidUsername, "Sign up with your email address as the username (\(error.reason)).")
            }
            if let given, (try? MailAddress(given))?.key != address.key {
                throw PasskeyServiceError.invalidEmail("the username is the address here")
            }
            return address.description
        }
    }

    /// A new account's address: stored unverified, and a verification mail sent. A failure is
    /// logged, never undoes the sign-up (the address can be given again on the account page).
    func startSignUpVerification(account: Account, address text: String, client: Client) async {
        do {
            let address = try MailAddress(text)
            let language = MailTemplates.language(client.language)
            // Stored first: past the hourly mail limit the address stays, unverified, and its mail
            // can be asked for again from the account page.
            _ = try await store.setUnverifiedEmail(
                accountID: account.id, address: address.description, key: address.key, language: language)
            try await limitMail(to: address, client: client)
            try await sendTokenMail(
                .verifyAddress, purpose: .verify, account: account, to: address, language: language, detail: address.description,
                audit: [auditEvent(.emailVerificationSent, accountID: account.id, client: client, detail: address.description)])
        } catch {
            logger.error("sign-up address not stored", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Tokens

    /// The link token's HMAC under the server secret.
    package static func emailLinkHash(_ token: [UInt8], secret: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: Array("email-link:".utf8) + token, using: SymmetricKey(data: secret)))
    }

    /// A code's HMAC, bound to its account and purpose: the same six digits sent to two
    /// accounts (or for two purposes) never match each other's row.
    package static func emailCodeHash(_ code: String, accountID: UUID, purpose: EmailToken.Purpose, secret: [UInt8]) -> [UInt8] {
        let message = "email-code:\(purpose.rawValue):\(accountID.uuidString.lowercased()):\(code)"
        return Array(HMAC<SHA256>.authenticationCode(for: Array(message.utf8), using: SymmetricKey(data: secret)))
    }

    /// Six digits, uniform (rejection sampling over the system random source).
    package static func makeEmailCode() -> String {
        while true {
            let bytes = RelyingParty.randomBytes(4)
            let value = bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            // 4,294,000,000 is the largest multiple of 1,000,000 below 2^32.
            if value < 4_294_000_000 { return String(format: "%06d", value % 1_000_000) }
        }
    }

    /// The web page a mail's link opens, with the token in the fragment (never sent to a server,
    /// so in no access log or Referer).
    func link(_ action: String, token: String) -> String {
        let origin = configuration.webOrigins.first { $0.hasPrefix("https://") || $0.hasPrefix("http://") } ?? "http://localhost:8080"
        return "\(origin)/#\(action)=\(token)"
    }

    /// A live token by its link, taken (single use); nil when unknown, expired, used or of
    /// another purpose.
    func takeLinkToken(_ token: String, purpose: EmailToken.Purpose) async throws -> EmailToken? {
        guard token.utf8.count <= 64, let bytes = Base64URLBytes(encoded: token)?.bytes, bytes.count == 32 else { return nil }
        return try await store.takeEmailToken(
            linkHash: Self.emailLinkHash(bytes, secret: try await serverSecret()), purpose: purpose, now: now())
    }

    /// ``takeLinkToken(_:purpose:)``, or `invalid_email_link` (audited) when there is none.
    func requireLinkToken(_ token: String, purpose: EmailToken.Purpose, client: Client) async throws -> EmailToken {
        guard let found = try await takeLinkToken(token, purpose: purpose) else {
            await audit(.recoveryFailed, client: client, detail: "invalid_email_link")
            throw PasskeyServiceError.invalidEmailLink
        }
        return found
    }

    /// The account a recovery request names: by an address among *verified* addresses, else by
    /// username (nil for an empty or over-long identifier).
    func account(identifiedBy text: String, address: MailAddress?) async throws -> Account? {
        if let address { return try await store.account(verifiedEmailKey: address.key) }
        guard !text.isEmpty, text.utf8.count <= 320 else { return nil }
        return try await store.account(username: text)
    }

    /// A code in the mail's form: six ASCII digits (spaces and dashes dropped); nil otherwise.
    static func emailCodeDigits(_ code: String?) -> String? {
        let digits = (code ?? "").filter { !$0.isWhitespace && $0 != "-" }
        return digits.count == 6 && digits.allSatisfy({ $0.isASCII && $0.isNumber }) ? digits : nil
    }

    /// Code attempts one account may make in a day, across all its tokens: past it only links
    /// work (5 tries a token and 5 mails an hour would otherwise allow 600 guesses a day).
    static let emailCodeAttemptsPerDay = 20

    /// A code attempt on the account's token of `purpose`: counted per `attemptKey` (the
    /// identifier as given) and address like recovery codes, at most five per token and
    /// ``emailCodeAttemptsPerDay`` a day per account.
    /// `revealTries`: the refusal says how many tries are left (to the signed-in account only).
    func takeCode(
        _ code: String?, account: Account, purpose: EmailToken.Purpose, client: Client, revealTries: Bool = true, attemptKey: String? = nil
    ) async throws -> EmailToken {
        let attempt = try await reserveSecretAttempt(
            accountKey: attemptKey ?? "email:" + Account.key(for: account.username), client: client)
        guard let digits = Self.emailCodeDigits(code) else { throw PasskeyServiceError.invalidEmailCode(triesLeft: nil) }
        if configuration.rateLimits.enabled,
            case .limited = try await codeLimiter.hit("codes:\(account.id)", limit: Self.emailCodeAttemptsPerDay, now: now())
        {
            metrics.rateLimited(scope: "email_code_day")
            await audit(.recoveryFailed, accountID: account.id, client: client, detail: "invalid_email_code")
            throw PasskeyServiceError.invalidEmailCode(triesLeft: nil)
        }
        let hash = Self.emailCodeHash(digits, accountID: account.id, purpose: purpose, secret: try await serverSecret())
        switch try await store.attemptEmailCode(accountID: account.id, purpose: purpose, codeHash: hash, now: now()) {
        case .taken(let token):
            await settleSecretAttempt(attempt, succeeded: true)
            return token
        case .wrong(let left):
            await audit(.recoveryFailed, accountID: account.id, client: client, detail: "invalid_email_code")
            throw PasskeyServiceError.invalidEmailCode(triesLeft: revealTries ? left : nil)
        case .none:
            await audit(.recoveryFailed, accountID: account.id, client: client, detail: "invalid_email_code")
            throw PasskeyServiceError.invalidEmailCode(triesLeft: nil)
        }
    }

    /// A mail with a new link and code for `purpose`, queued with its token in one transaction
    /// (the account's older token of that purpose ends).
    func sendTokenMail(
        _ kind: MailKind, purpose: EmailToken.Purpose, account: Account, to address: MailAddress, language: String, detail: String?,
        audit: [AuditEvent]
    ) async throws {
        let secret = try await serverSecret()
        let tokenBytes = RelyingParty.randomBytes(32)
        let code = Self.makeEmailCode()
        let time = now()
        let lifetime = ServerConfiguration.Email.tokenLifetime
        let token = EmailToken(
            accountID: account.id, purpose: purpose, address: address.key, linkHash: Self.emailLinkHash(tokenBytes, secret: secret),
            codeHash: Self.emailCodeHash(code, accountID: account.id, purpose: purpose, secret: secret), detail: detail, createdAt: time,
            expiresAt: time.addingTimeInterval(lifetime))
        let values = MailValues(
            rpName: configuration.rpName, username: account.username,
            link: link(purpose == .verify ? "verify-email" : "email-recover", token: Base64URLBytes(tokenBytes).base64URL), code: code,
            minutes: Int(lifetime / 60), undoHours: configuration.email.undoSeconds / 3600)
        try await queue(kind, to: address, accountID: account.id, language: language, values: values, token: token, audit: audit)
    }

    /// A recovery step handed to the person who just proved the address (not mailed): a link
    /// token of purpose `recover`, without a code.
    func issueRecoveryTicket(account: Account, address: MailAddress) async throws -> String {
        let tokenBytes = RelyingParty.randomBytes(32)
        let time = now()
        let token = EmailToken(
            accountID: account.id, purpose: .recover, address: address.key,
            linkHash: Self.emailLinkHash(tokenBytes, secret: try await serverSecret()), createdAt: time,
            expiresAt: time.addingTimeInterval(ServerConfiguration.Email.tokenLifetime))
        try await store.saveEmailToken(token)
        return Base64URLBytes(tokenBytes).base64URL
    }

    /// Renders `kind` and queues it; the request never waits for SMTP (``MailDispatcher`` sends).
    func queue(
        _ kind: MailKind, to address: MailAddress, accountID: UUID?, language: String, values: MailValues, token: EmailToken?,
        audit: [AuditEvent]
    ) async throws {
        guard let from = configuration.email.from else { throw PasskeyServiceError.emailNotEnabled }
        let rendered = MailTemplates.render(kind, language: language, values: values)
        let message = MailMessage(
            fromName: configuration.email.fromName, from: from, to: address, subject: rendered.subject, text: rendered.text,
            html: rendered.html, language: language)
        let time = now()
        // Sealed: a queued mail holds its link and code until it is sent, and the outbox must not
        // be a second place they can be read from (only their HMACs are kept elsewhere).
        let bytes = try OutboxSeal.seal(
            message.rendered(messageID: UUID.random().uuidString.lowercased(), date: time), secret: try await serverSecret())
        try await store.queueMail(
            QueuedMail(
                accountID: accountID, kind: kind.rawValue, recipient: address.description, sender: from.description, message: bytes,
                createdAt: time, nextAttemptAt: time),
            token: token, audit: audit)
        metrics.mailQueued(kind: kind.rawValue)
    }

    /// Mails asked for: per address and per client address in hour-long windows (429 past them).
    func limitMail(to address: MailAddress?, key: String? = nil, client: Client) async throws {
        guard configuration.rateLimits.enabled else { return }
        let perAddress = configuration.email.mailsPerAddressPerHour
        if let target = address?.key ?? key,
            case .limited(let retryAfter) = try await mailLimiter.hit("mail:\(target)", limit: perAddress, now: now())
        {
            metrics.rateLimited(scope: "mail_address")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
        if let ip = client.ipAddress,
            case .limited(let retryAfter) = try await mailLimiter.hit("mailip:\(ip)", limit: perAddress * 6, now: now())
        {
            metrics.rateLimited(scope: "mail_client")
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }
}

/// Work started after a request's answer (a recovery request's lookup and mail), at most
/// `limit` at once: past it the work runs before the answer instead of piling up.
package final class DetachedWork: Sendable {
    private let running = Mutex(0)
    package let limit: Int

    package init(limit: Int) { self.limit = limit }

    package func run(_ work: @escaping @Sendable () async -> Void) async {
        let admitted = running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
        guard admitted else {
            await work()
            return
        }
        Task {
            await work()
            self.running.withLock { $0 -= 1 }
        }
    }

    /// Work started and not yet ended.
    package var inFlight: Int { running.withLock { $0 } }
}

/// The outbox's messages at rest: AES-256-GCM under a key derived (HKDF-SHA256) from the server
/// secret, so a copy of `mail_outbox` alone reads no link or code.
package enum OutboxSeal {
    static func key(_ secret: [UInt8]) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: secret), info: Array("passkeyd mail outbox v1".utf8), outputByteCount: 32)
    }

    package static func seal(_ message: [UInt8], secret: [UInt8]) throws -> [UInt8] {
        guard let combined = try AES.GCM.seal(message, using: key(secret)).combined else { throw CryptoKitError.incorrectParameterSize }
        return Array(combined)
    }

    package static func open(_ sealed: [UInt8], secret: [UInt8]) throws -> [UInt8] {
        Array(try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key(secret)))
    }
}
