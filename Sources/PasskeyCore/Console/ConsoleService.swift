import Crypto
import Foundation
import PasskeyStore
import WebAuthn

/// The operator's console (`/admin`): who may enter and how. An administrator is an ordinary
/// account with a role (`admin` changes, `viewer` only sees), signed in with a passkey and user
/// verification only (no password, no recovery code) into a console session of its own: a
/// short idle timeout, an absolute lifetime, a CSRF token, and a step-up window every change
/// must fall in. What the console shows and changes is in the other `ConsoleService` files;
/// every change goes through ``AdminService`` as the CLI's and the server API's do.
public struct ConsoleService: Sendable {
    public let service: PasskeyService
    var store: any PasskeyStore { service.store }
    var settings: ServerConfiguration.Console { service.configuration.console }
    package var admin: AdminService { service.admin }

    public init(service: PasskeyService) { self.service = service }

    /// A live console session, with its administrator.
    public struct Session: Sendable {
        public let record: AdminSessionRecord
        public let account: Account
        public let role: AdminRole
        /// When the last passkey verification stops covering changes.
        public var stepUpUntil: Date

        /// Who did it, for audit lines: the administrator's id and name.
        public var actor: String { "console \(account.username) (\(account.id.uuidString.lowercased()))" }
    }

    /// A console sign-in: the session, its token (the cookie's value) and CSRF token, each shown once.
    public struct SignedIn: Sendable {
        public let session: Session
        public let token: String
        public let csrfToken: String
    }

    // MARK: Signing in

    /// Options for a console sign-in: any passkey (discoverable), user verification required.
    public func signInOptions(client: PasskeyService.Client) async throws -> PublicKeyCredentialRequestOptionsJSON {
        try await service.consoleAssertionOptions(accountID: nil, client: client)
    }

    /// Verifies a console sign-in. A valid passkey of an account without a role is refused
    /// like no session at all (`admin_required`), and audited.
    public func signIn(_ credential: AuthenticationResponseJSON, client: PasskeyService.Client) async throws -> SignedIn {
        let line = service.auditEvent(.adminConsoleSignIn, client: client)
        let (_, account) = try await service.verifyConsoleAssertion(credential, client: client, audit: [line])
        guard let role = try await store.adminRole(accountID: account.id) else {
            await service.audit(.adminConsoleRefused, accountID: account.id, client: client, detail: "no role")
            throw PasskeyServiceError.adminRequired
        }
        return try await open(account: account, role: role, client: client)
    }

    /// Opens a console session for `account` (just verified with a passkey).
    func open(account: Account, role: AdminRole, client: PasskeyService.Client) async throws -> SignedIn {
        let time = service.now()
        let token = RelyingParty.randomBytes(32)
        let seed = RelyingParty.randomBytes(32)
        let expires = time.addingTimeInterval(seconds(settings.sessionLifetime))
        let record = AdminSessionRecord(
            tokenHash: Self.hash(token), accountID: account.id, createdAt: time, expiresAt: expires,
            idleExpiresAt: min(expires, time.addingTimeInterval(seconds(settings.idleTimeout))), verifiedAt: time,
            csrfHash: seed, ipAddress: client.ipAddress, userAgent: client.userAgent.map { String($0.prefix(256)) })
        try await store.createAdminSession(record)
        let session = Session(record: record, account: account, role: role, stepUpUntil: stepUpUntil(record.verifiedAt))
        return SignedIn(session: session, token: Base64URLBytes(token).base64URL, csrfToken: try await csrfToken(for: record))
    }

    /// The live console session of a cookie's value (nil: none, expired, idle too long, the
    /// account disabled or its role gone). Each use moves the idle deadline.
    public func session(token: String) async throws -> Session? {
        guard token.utf8.count <= 64, let bytes = Base64URLBytes(encoded: token)?.bytes, bytes.count == 32 else { return nil }
        let time = service.now()
        guard
            let (record, account, role) = try await store.adminSession(
                tokenHash: Self.hash(bytes), now: time, idleUntil: time.addingTimeInterval(seconds(settings.idleTimeout)))
        else { return nil }
        return Session(record: record, account: account, role: role, stepUpUntil: stepUpUntil(record.verifiedAt))
    }

    public func signOut(_ session: Session, client: PasskeyService.Client) async throws {
        try await store.revokeAdminSession(tokenHash: session.record.tokenHash)
        await service.audit(.adminConsoleSignOut, accountID: session.account.id, client: client, detail: session.actor)
    }

    /// What a change needs: the `admin` (or `operator`) role, the session's CSRF token (compared in constant
    /// time), and a passkey verification within the step-up window.
    public func authorizeChange(_ session: Session, csrfToken: String?) async throws {
        guard session.role.changes else { throw PasskeyServiceError.adminRoleRequired }
        let expected = try await self.csrfToken(for: session.record)
        guard let csrfToken, csrfToken.utf8.count <= 64, ConstantTime.equals(Array(csrfToken.utf8), Array(expected.utf8)) else {
            throw PasskeyServiceError.csrfTokenInvalid
        }
        guard service.now() < session.stepUpUntil else { throw PasskeyServiceError.reauthenticationRequired }
    }

    /// The session's CSRF token: HMAC-SHA-256 under the server secret of the session (its token
    /// hash) and its seed, which each step-up replaces. Derived, not stored: the console reads
    /// it again after a reload (`GET /admin/api/session`), and only the cookie's holder can ask.
    public func csrfToken(for record: AdminSessionRecord) async throws -> String {
        let key = SymmetricKey(data: try await service.serverSecret())
        let mac = HMAC<SHA256>.authenticationCode(
            for: Array("passkeyd-console-csrf".utf8) + record.tokenHash + record.csrfHash, using: key)
        return Base64URLBytes(Array(mac)).base64URL
    }

    // MARK: Step-up

    /// Options listing the administrator's own passkeys, user verification required.
    public func stepUpOptions(_ session: Session, client: PasskeyService.Client) async throws -> PublicKeyCredentialRequestOptionsJSON {
        try await service.consoleAssertionOptions(accountID: session.account.id, client: client)
    }

    /// Verifies the step-up; the session's changes are covered for the step-up window, under a
    /// new CSRF token (returned once).
    public func stepUp(_ session: Session, credential: AuthenticationResponseJSON, client: PasskeyService.Client) async throws
        -> (stepUpUntil: Date, csrfToken: String)
    {
        let line = service.auditEvent(.adminConsoleStepUp, client: client, detail: session.actor)
        let (_, account) = try await service.verifyConsoleAssertion(credential, client: client, audit: [line])
        // The ceremony named this account's passkeys; a passkey of another account cannot pass.
        guard account.id == session.account.id else { throw PasskeyServiceError.credentialNotAllowed }
        let time = service.now()
        var record = session.record
        record.csrfHash = RelyingParty.randomBytes(32)
        record.verifiedAt = time
        guard try await store.verifyAdminSession(tokenHash: record.tokenHash, at: time, csrfHash: record.csrfHash) else {
            throw PasskeyServiceError.adminRequired
        }
        return (stepUpUntil(time), try await csrfToken(for: record))
    }

    // MARK: Bootstrap

    /// A one-time link's token for the first administrator, or nil when an administrator exists.
    /// Stored hashed; it expires after ``ServerConfiguration/Console/bootstrapLifetime``. Audited
    /// (`admin_bootstrap_issued`: who asked, `issuer`, and the expiry; never the token) in the
    /// token's transaction.
    public func issueBootstrapToken(by issuer: String) async throws -> (token: String, expiresAt: Date)? {
        guard try await store.adminCount() == 0 else { return nil }
        let token = RelyingParty.randomBytes(32)
        let time = service.now()
        let expires = time.addingTimeInterval(seconds(settings.bootstrapLifetime))
        let line = AuditEvent(
            time: time, kind: .adminBootstrapIssued, userAgent: issuer, detail: "expires in \(Int(seconds(settings.bootstrapLifetime)))s")
        try await store.saveAdminBootstrapToken(hash: Self.hash(token), createdAt: time, expiresAt: expires, audit: [line])
        return ("pkb_" + Base64URLBytes(token).base64URL, expires)
    }

    /// The link an operator opens: the first web origin's console with the token in the
    /// fragment (never sent to a server, never in a log line).
    public func bootstrapLink(_ token: String) -> String {
        (service.configuration.webOrigins.first ?? "http://localhost:8080") + "/admin/#bootstrap=" + token
    }

    /// Creation options for the first administrator's new account, while the token is live.
    public func bootstrapOptions(token: String, username: String?, displayName: String?, client: PasskeyService.Client) async throws
        -> PublicKeyCredentialCreationOptionsJSON
    {
        guard let hash = Self.bootstrapHash(token), try await store.adminBootstrapTokenIsLive(hash: hash, now: service.now()) else {
            throw PasskeyServiceError.bootstrapInvalid
        }
        return try await service.registrationOptions(
            username: username, displayName: displayName, signedIn: nil, profile: PasskeyService.Profile(api: PasskeyService.consoleAPI),
            client: client)
    }

    /// Creates the account with its passkey (user verified), makes it `admin` and uses the
    /// token (single use: of two people racing with one link, one becomes administrator), then
    /// opens its console session. The account keeps no account session.
    public func bootstrap(token: String, credential: RegistrationResponseJSON, client: PasskeyService.Client) async throws -> SignedIn {
        guard let hash = Self.bootstrapHash(token), try await store.adminBootstrapTokenIsLive(hash: hash, now: service.now()) else {
            throw PasskeyServiceError.bootstrapInvalid
        }
        let registered = try await service.finishRegistration(
            credential, name: nil, signedIn: nil, client: client, profile: PasskeyService.Profile(api: PasskeyService.consoleAPI))
        if let session = registered.session { try await store.revokeSession(tokenHash: session.tokenHash) }
        let account = registered.account
        guard registered.passkey.userVerified else {
            try await discard(account)
            throw PasskeyServiceError(
                WebAuthnError(.userNotVerified, "the console's first passkey did not verify its user (UV)"), signIn: false)
        }
        let line = service.auditEvent(.adminBootstrapUsed, accountID: account.id, client: client, detail: "admin")
        guard try await store.redeemAdminBootstrapToken(hash: hash, accountID: account.id, now: service.now(), audit: [line]) else {
            // Another redemption won (or the token expired meanwhile): the account made for it goes.
            try await discard(account)
            throw PasskeyServiceError.bootstrapInvalid
        }
        return try await open(account: account, role: .admin, client: client)
    }

    /// Deletes an account the bootstrap made but could not make administrator; its sign-up line
    /// counted it in the adoption totals, the deletion line counts it out.
    func discard(_ account: Account) async throws {
        let line = AuditEvent(
            time: service.now(), kind: .accountDeleted, accountID: account.id, userAgent: "console bootstrap", detail: account.username
        ).counted(.accountDeletedPasskey)
        _ = try await store.deleteAccount(accountID: account.id, audit: [line])
    }

    static func bootstrapHash(_ token: String) -> [UInt8]? {
        guard token.hasPrefix("pkb_"), token.utf8.count <= 64, let bytes = Base64URLBytes(encoded: String(token.dropFirst(4)))?.bytes,
            bytes.count == 32
        else { return nil }
        return hash(bytes)
    }

    // MARK: Helpers

    static func hash(_ bytes: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: bytes)) }

    func seconds(_ duration: Duration) -> TimeInterval { TimeInterval(duration.components.seconds) }

    func stepUpUntil(_ verifiedAt: Date) -> Date { verifiedAt.addingTimeInterval(seconds(settings.stepUpWindow)) }
}
