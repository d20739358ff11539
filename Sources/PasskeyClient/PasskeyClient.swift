import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// passkeyd's client for apps: sign-up, sign-in (sheet or AutoFill), passkey management,
/// password and recovery sign-ins, over passkeyd's native JSON API.
///
/// ```swift
/// let passkeys = PasskeyClient(server: URL(string: "https://login.example.com")!,
///                              authenticator: ApplePasskeyAuthenticator())
/// let signedIn = try await passkeys.signIn()
/// ```
///
/// The session token is kept by a ``SessionStore`` (the Keychain on Apple platforms) and sent as
/// `Authorization: Bearer`; no cookies are used. Every failure is a ``PasskeyClientError``.
public actor PasskeyClient {
    public let server: URL
    public let authenticator: any PasskeyAuthenticator
    public let sessions: any SessionStore
    let http: URLSession
    /// The stored session, once read (`.some(nil)`: read, and there is none).
    private var current: StoredSession??

    /// - Parameters:
    ///   - server: passkeyd's base URL (`https://login.example.com`); a path prefix is kept.
    ///   - authenticator: the platform authenticator (`ApplePasskeyAuthenticator` on Apple platforms).
    ///   - sessions: where the session is kept; the Keychain on Apple platforms, else
    ///     ``FileSessionStore/defaultPath()``.
    ///   - urlSession: for tests and proxies; the default keeps no cookies and no cache.
    public init(
        server: URL, authenticator: any PasskeyAuthenticator, sessions: (any SessionStore)? = nil, urlSession: URLSession? = nil
    ) {
        self.server = server
        self.authenticator = authenticator
        self.sessions = sessions ?? Self.defaultSessionStore()
        self.http = urlSession ?? Self.makeURLSession()
    }

    static func defaultSessionStore() -> any SessionStore {
        #if (os(iOS) || os(macOS) || os(visionOS) || os(tvOS) || os(watchOS)) && canImport(Security)
            return KeychainSessionStore()
        #else
            return FileSessionStore(path: FileSessionStore.defaultPath())
        #endif
    }

    static func makeURLSession() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 30
        return URLSession(configuration: configuration)
    }

    // MARK: Signing up and in

    /// Creates an account with a new passkey and signs in (WebAuthn registration).
    ///
    /// With `prf`, the server asks the passkey for PRF (with the salt it keeps for it), and
    /// ``SignInResult/prf`` holds the app's key, or says why there is none. A passkey that
    /// reports PRF support without an output gets one more sign-in (a second sheet) for its key:
    /// that sign-in's session is the one kept and described by the result. If it fails, the
    /// account still exists and stays signed in: ``PRFResult/notEvaluated(_:)`` carries the error.
    public func signUp(username: String, displayName: String? = nil, prf: PRFRequest? = nil) async throws -> SignInResult {
        let body = OptionsBody(username: username, displayName: displayName, prf: prf)
        let previous = try await stored()?.sessionToken
        let (request, _) = try await registrationRequest(body: body, auth: .none)
        let registration = try await register(request)
        let answer: SignInAnswer = try await call(
            "POST", "register/verify", body: VerifyBody(credential: RegistrationJSON(registration)), auth: .none)
        var result = try await keep(answer, method: .signUp)
        result.passkeyID = Base64URL.encode(registration.credentialID)
        // The new account's session replaces the one this app had: end that one on the server.
        if let previous { _ = try? await send("DELETE", "session", body: [String: String]?.none, auth: .token(previous)) }
        if let prf {
            let (outcome, followUp) = await prfAfterCreation(registration, for: prf, username: answer.user.username)
            result.prf = outcome
            if let followUp {
                // That sign-in made a new session and the server ended the sign-up's (a sign-in
                // retires the session it replaces): describe the live one, the one kept.
                result.sessionExpiresAt = followUp.sessionExpiresAt
                result.accessToken = followUp.accessToken
            }
        }
        return result
    }

    /// Signs in with a passkey in a sheet. With a `username`, only that account's passkeys are
    /// offered; without one, any passkey of the site (discoverable credentials).
    public func signIn(username: String? = nil) async throws -> SignInResult {
        try await passkeySignIn(username: username, presentation: .modal, prf: nil)
    }

    /// Signs in with one of the account's passkeys and derives the app's key from its PRF output
    /// (``SignInResult/prf``): the same passkey and salt give the same key at every sign-in.
    /// PRF needs the username (the server names each passkey's salt, `evalByCredential`).
    public func signIn(username: String, prf: PRFRequest) async throws -> SignInResult {
        try await passkeySignIn(username: username, presentation: .modal, prf: prf)
    }

    /// Passkey AutoFill: waits until the person picks a passkey from the keyboard's suggestions
    /// of a username field (`textContentType(.username)`), then signs in. Cancel the calling task
    /// to stop waiting (SwiftUI's `.task` does so when the view goes away).
    public func signInWithAutoFill() async throws -> SignInResult {
        try await passkeySignIn(username: nil, presentation: .autoFill, prf: nil)
    }

    /// Signs in with a password (accounts that have one). ``SignInResult/canCreatePasskey`` says
    /// the account has no passkey yet: offer ``upgradeToPasskey(removingPassword:)``.
    public func signIn(username: String, password: String) async throws -> SignInResult {
        let answer: SignInAnswer = try await call(
            "POST", "password/sign-in", body: ["username": username, "password": password], auth: .replacing)
        return try await keep(answer, method: .password)
    }

    /// Signs in with one of the account's recovery codes. Every other session ends; register a
    /// new passkey next (``addPasskey(name:)``).
    public func signIn(username: String, recoveryCode: String) async throws -> SignInResult {
        let answer: SignInAnswer = try await call(
            "POST", "recovery/sign-in", body: ["username": username, "code": recoveryCode], auth: .replacing)
        return try await keep(answer, method: .recoveryCode)
    }

    /// Signs in with the token of a recovery link the operator sent (the `token` of the link).
    public func signIn(recoveryLinkToken token: String) async throws -> SignInResult {
        let answer: SignInAnswer = try await call("POST", "recovery/link", body: ["token": token], auth: .replacing)
        return try await keep(answer, method: .recoveryLink)
    }

    /// Forgets the session here, then ends it on the server. Offline, it is still forgotten here
    /// (and the call throws ``PasskeyClientError/network(_:)``: the server's session lives until it
    /// expires). Not signed in: nothing to do.
    public func signOut() async throws {
        guard let token = try await stored()?.sessionToken else { return }
        try await remember(nil)
        do {
            _ = try await send("DELETE", "session", body: [String: String]?.none, auth: .token(token))
        } catch PasskeyClientError.notSignedIn {}
    }

    // MARK: The signed-in account

    /// The current session, or `nil` when not signed in (or it ended on the server).
    public func session() async throws -> SessionInfo? {
        guard try await stored() != nil else { return nil }
        do {
            return try await call("GET", "session")
        } catch PasskeyClientError.notSignedIn {
            return nil
        }
    }

    /// Adds a passkey to the signed-in account (after a password or recovery sign-in, or a second
    /// device's provider). The server may ask to confirm with an existing passkey first; the
    /// client does that itself.
    public func addPasskey(name: String? = nil) async throws -> Passkey {
        try await addPasskey(name: name, prfRequest: nil).passkey
    }

    /// Adds a passkey with PRF to the signed-in account: its key comes from its own salt, so it
    /// differs from the other passkeys' keys (wrap the app's data key once per passkey). A passkey
    /// that reports PRF support without an output gets one sign-in for its key, whose session
    /// replaces the current one; if that sign-in fails, the passkey is still added and
    /// ``AddedPasskey/prf`` is ``PRFResult/notEvaluated(_:)``.
    public func addPasskey(name: String? = nil, prf: PRFRequest) async throws -> AddedPasskey {
        try await addPasskey(name: name, prfRequest: prf)
    }

    private func addPasskey(name: String?, prfRequest prf: PRFRequest?) async throws -> AddedPasskey {
        try await reauthenticatingIfAsked {
            let (request, _) = try await self.registrationRequest(body: OptionsBody(prf: prf), auth: .session)
            let registration = try await self.register(request)
            let answer: SignInAnswer = try await self.call(
                "POST", "register/verify", body: VerifyBody(credential: RegistrationJSON(registration), name: name))
            guard let passkey = answer.passkey else { throw PasskeyClientError.invalidResponse("register/verify: no passkey") }
            guard let prf else { return AddedPasskey(passkey: passkey, prf: .unsupported) }
            return AddedPasskey(
                passkey: passkey, prf: await self.prfAfterCreation(registration, for: prf, username: answer.user.username).prf)
        }
    }

    /// After a password sign-in: a passkey for the account, then, if asked, no more password.
    public func upgradeToPasskey(removingPassword: Bool = false) async throws -> Passkey {
        let passkey = try await addPasskey()
        if removingPassword { try await removePassword() }
        return passkey
    }

    /// The account's passkeys.
    public func passkeys() async throws -> [Passkey] {
        let list: PasskeyList = try await call("GET", "passkeys")
        return list.passkeys
    }

    /// Renames one of the account's passkeys (names are for people: "Work laptop").
    @discardableResult
    public func rename(passkey id: Passkey.ID, to name: String) async throws -> Passkey {
        try await call("PATCH", "passkeys/\(try Self.pathSegment(id))", body: ["name": name])
    }

    /// Deletes one of the account's passkeys. The server refuses to delete the last way in
    /// (`last_passkey`); the sessions that passkey made end with it.
    public func delete(passkey id: Passkey.ID) async throws {
        let segment = try Self.pathSegment(id)
        try await reauthenticatingIfAsked { try await self.callWithoutAnswer("DELETE", "passkeys/\(segment)") }
    }

    /// Gives one of the account's passkeys a new PRF salt: the next PRF sign-in with it yields a
    /// different key (re-wrap what the old key protected first, while it is still at hand).
    @discardableResult
    public func rotatePRFSalt(passkey id: Passkey.ID) async throws -> Passkey {
        let segment = try Self.pathSegment(id)
        return try await reauthenticatingIfAsked { try await self.call("POST", "passkeys/\(segment)/prf-salt") }
    }

    /// Ten new recovery codes (the old ones stop working). Show them once; never store them.
    public func newRecoveryCodes() async throws -> [String] {
        try await reauthenticatingIfAsked {
            let codes: RecoveryCodes = try await self.call("POST", "recovery-codes")
            return codes.codes
        }
    }

    /// Sets or changes the account's password.
    public func setPassword(_ password: String) async throws {
        try await reauthenticatingIfAsked { try await self.callWithoutAnswer("POST", "password", body: ["newPassword": password]) }
    }

    /// Removes the account's password (it keeps its passkeys).
    public func removePassword() async throws {
        try await reauthenticatingIfAsked { try await self.callWithoutAnswer("DELETE", "password") }
    }

    /// The account's live sessions, this one included (``DeviceSession/current``).
    public func deviceSessions() async throws -> [DeviceSession] {
        let list: SessionList = try await call("GET", "sessions")
        return list.sessions
    }

    /// Ends one of the account's other sessions.
    public func revoke(session id: DeviceSession.ID) async throws {
        try await callWithoutAnswer("DELETE", "sessions/\(try Self.pathSegment(id))")
    }

    /// An access token for the app's own backend (`Authorization: Bearer`), fresh for at least
    /// `validFor` more: the one from the sign-in while it lasts, then a new one from the server.
    public func accessToken(validFor margin: Duration = .seconds(30)) async throws -> AccessToken {
        guard var kept = try await stored() else { throw PasskeyClientError.notSignedIn }
        let seconds = Double(margin.components.seconds)
        if let token = kept.accessToken, let expiry = kept.accessTokenExpiresAt, expiry.timeIntervalSinceNow > seconds {
            return AccessToken(token: token, expiresAt: expiry)
        }
        let answer: TokenAnswer = try await call("POST", "token")
        kept.accessToken = answer.accessToken
        kept.accessTokenExpiresAt = answer.accessTokenExpiresAt
        try await remember(kept)
        return AccessToken(token: answer.accessToken, expiresAt: answer.accessTokenExpiresAt)
    }

    // MARK: Ceremonies

    private func passkeySignIn(
        username: String?, presentation: AssertionRequest.Presentation, prf: PRFRequest?, credentialID: Data? = nil
    ) async throws -> SignInResult {
        let body = OptionsBody(username: username, prf: prf, credentialID: credentialID)
        let (data, options): (Data, RequestOptionsJSON) = try await callRaw("POST", "authenticate/options", body: body, auth: .none)
        let request = AssertionRequest(
            relyingPartyID: options.rpId, challenge: try Self.bytes(options.challenge, "challenge"),
            allowCredentials: try (options.allowCredentials ?? []).map {
                CredentialDescriptor(id: try Self.bytes($0.id, "allowCredentials"), transports: $0.transports ?? [])
            },
            userVerification: options.userVerification ?? "preferred", timeout: Duration(milliseconds: options.timeout),
            presentation: presentation, prf: try options.extensions?.prfAssertion(), json: data)
        let assertion: AssertionResult
        do {
            assertion = try await authenticator.authenticate(request)
        } catch {
            throw Self.clientError(error)
        }
        let credential = AssertionJSON(assertion)
        do {
            let answer: SignInAnswer = try await call(
                "POST", "authenticate/verify", body: VerifyBody(credential: credential), auth: .replacing)
            var result = try await keep(answer, method: .passkey)
            result.passkeyID = Base64URL.encode(assertion.credentialID)
            result.prf = prf.map { Self.prfResult(assertion.prf, for: $0) }
            return result
        } catch PasskeyClientError.passkeyRemoved {
            await authenticator.credentialRemoved(id: assertion.credentialID, relyingPartyID: options.rpId)
            throw PasskeyClientError.passkeyRemoved
        }
    }

    private func registrationRequest(body: some Encodable & Sendable, auth: Auth) async throws -> (RegistrationRequest, Data) {
        let (data, options): (Data, CreationOptionsJSON) = try await callRaw("POST", "register/options", body: body, auth: auth)
        let request = RegistrationRequest(
            relyingPartyID: options.rp.id, relyingPartyName: options.rp.name ?? options.rp.id,
            challenge: try Self.bytes(options.challenge, "challenge"), userID: try Self.bytes(options.user.id, "user.id"),
            userName: options.user.name, userDisplayName: options.user.displayName ?? options.user.name,
            algorithms: (options.pubKeyCredParams ?? []).map(\.alg),
            excludeCredentials: try (options.excludeCredentials ?? []).map {
                CredentialDescriptor(id: try Self.bytes($0.id, "excludeCredentials"), transports: $0.transports ?? [])
            },
            userVerification: options.authenticatorSelection?.userVerification ?? "preferred",
            attestation: options.attestation ?? "none", residentKey: options.authenticatorSelection?.residentKey ?? "required",
            timeout: Duration(milliseconds: options.timeout), prf: try options.extensions?.prfRegistration(), json: data)
        return (request, data)
    }

    private func register(_ request: RegistrationRequest) async throws -> RegistrationResult {
        do {
            return try await authenticator.register(request)
        } catch {
            throw Self.clientError(error)
        }
    }

    /// The app's key from the PRF outputs of a ceremony that asked for PRF.
    static func prfResult(_ outputs: PRFOutputs?, for request: PRFRequest) -> PRFResult {
        guard let first = outputs?.first else { return .unsupported }
        // WebAuthn L3 §10.1.4: a PRF output is 32 bytes (`passkeyd.js` answers `invalid-output` too).
        guard first.count == 32 else { return .invalidOutput }
        return .key(request.deriveKey(fromPRFOutput: first))
    }

    /// What PRF gave a registration. A passkey that reports `prf.enabled` without an output (its
    /// platform evaluates PRF only when signing in) gets one sign-in with that passkey alone, as
    /// `passkeyd.js` does, so the app has its key either way; `signedIn` is that sign-in, whose
    /// session is now the kept one. The account or passkey exists already, so a failed sign-in
    /// is not thrown: it is ``PRFResult/notEvaluated(_:)``, and the earlier session stays.
    private func prfAfterCreation(_ registration: RegistrationResult, for request: PRFRequest, username: String) async
        -> (prf: PRFResult, signedIn: SignInResult?)
    {
        if registration.prf?.first != nil || registration.prf?.enabled != true {
            return (Self.prfResult(registration.prf, for: request), nil)
        }
        do {
            let signedIn = try await passkeySignIn(
                username: username, presentation: .modal, prf: request, credentialID: registration.credentialID)
            return (signedIn.prf ?? .unsupported, signedIn)
        } catch {
            return (.notEvaluated(Self.clientError(error)), nil)
        }
    }

    /// Runs `body`; when the server asks for a fresh sign-in first (`reauthentication_required`),
    /// signs in again with a passkey of the same account and runs it once more.
    private func reauthenticatingIfAsked<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch PasskeyClientError.refused(let code, _, _, _) where code == "reauthentication_required" {
            let username = try await session()?.user.username
            guard let username else { throw PasskeyClientError.notSignedIn }
            _ = try await signIn(username: username)
            return try await body()
        }
    }

    /// Keeps the new session (it replaces any earlier one) and describes the sign-in.
    private func keep(_ answer: SignInAnswer, method: SignInMethod) async throws -> SignInResult {
        if let token = answer.token {
            try await remember(
                StoredSession(
                    sessionToken: token, expiresAt: answer.expiresAt, username: answer.user.username, accessToken: answer.accessToken,
                    accessTokenExpiresAt: answer.accessTokenExpiresAt))
        }
        var access: AccessToken?
        if let token = answer.accessToken, let expiry = answer.accessTokenExpiresAt {
            access = AccessToken(token: token, expiresAt: expiry)
        }
        return SignInResult(
            user: answer.user, method: answer.method ?? method, passkey: answer.passkey, canCreatePasskey: answer.canCreatePasskey ?? false,
            recovery: answer.recovery ?? false, sessionExpiresAt: answer.expiresAt, accessToken: access)
    }

    func stored() async throws -> StoredSession? {
        if let current { return current }
        let loaded = try await sessions.load(server: server.absoluteString)
        current = .some(loaded)
        return loaded
    }

    func remember(_ session: StoredSession?) async throws {
        current = .some(session)
        try await sessions.save(session, server: server.absoluteString)
    }
}
