import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import WebAuthn

/// The native JSON API (../docs/openapi.json): W3C Level 3 JSON for options and responses, so
/// browsers' `parseCreationOptionsFromJSON` / `toJSON()`, Android Credential Manager and iOS
/// apps use it as is.
struct NativeAPI: Sendable {
    let service: PasskeyService
    let edge: EdgeConfiguration
    let sessions: SessionResolver

    init(service: PasskeyService, edge: EdgeConfiguration) {
        self.service = service
        self.edge = edge
        sessions = SessionResolver(service: service, edge: edge)
    }

    var limit: Int { edge.maxBodySize }
    var sessionMaxAge: Int { Int(service.configuration.sessionLifetime.components.seconds) }

    /// The routes (added at `/api/auth`), by what guards them. Limits, content-type and session
    /// checks are attached to route groups, so every request that reaches a handler passed them.
    var routes: RouteCollection<PasskeyRequestContext> {
        let allowedOrigins = edge.allowedRequestOrigins(service.configuration)
        let api = RouteCollection(context: PasskeyRequestContext.self)

        // Ceremonies: no cross-site browser requests (checked before anything is counted),
        // per-address limit, JSON bodies only. Signed in, registration adds a passkey.
        let ceremonies = api.group()
            .add(middleware: CrossSiteRequestMiddleware(allowed: allowedOrigins))
            .add(middleware: ClientRateLimitMiddleware(service: service))
            .add(middleware: JSONRequestMiddleware())
        ceremonies.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .optional))
            .post("register/options") { request, context in try await registerOptions(request, context) }
        let signInOptions = ceremonies.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .lenient))
        signInOptions.post("authenticate/options") { request, context in try await authenticateOptions(request, context) }
        signInOptions.get("authenticate/options") { request, context in try await authenticateOptions(request, context) }
        // Counted with the ceremonies: asking costs the same budget as asking sign-up.
        ceremonies.get("passkeys/check") { request, context in try await checkPasskeys(request, context) }

        // The routes that issue a session: no cross-site browser request may reach them (no
        // login CSRF), and a JSON body is required.
        let signIns = api.group()
            .add(middleware: CrossSiteRequestMiddleware(allowed: allowedOrigins))
            .add(middleware: ClientRateLimitMiddleware(service: service))
            .add(middleware: JSONRequestMiddleware(bodyRequired: true))
        signIns.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .optional))
            .post("register/verify") { request, context in try await registerVerify(request, context) }
        let otherSignIns = signIns.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .lenient))
        otherSignIns.post("authenticate/verify") { request, context in try await authenticateVerify(request, context) }
        otherSignIns.post("password/sign-in") { request, context in try await passwordSignIn(request, context) }
        otherSignIns.post("recovery/sign-in") { request, context in try await recoverySignIn(request, context) }
        otherSignIns.post("recovery/link") { request, context in try await recoveryLink(request, context) }

        // The signed-in account.
        let account = api.group()
            .add(middleware: JSONRequestMiddleware())
            .add(middleware: SessionMiddleware(sessions: sessions, mode: .required))
        account.get("session") { _, context in try await session(context) }
        account.post("token") { _, context in try await accessToken(context) }
        account.delete("session") { request, context in try await signOut(request, context) }
        account.get("sessions") { _, context in try await listSessions(context) }
        account.post("sessions/revoke-others") { request, context in try await revokeOtherSessions(request, context) }
        account.delete("sessions/:id") { request, context in try await revokeSession(request, context) }
        account.get("passkeys") { _, context in try await listPasskeys(context) }
        account.patch("passkeys/:id") { request, context in try await renamePasskey(request, context) }
        account.delete("passkeys/:id") { request, context in try await deletePasskey(request, context) }
        account.post("passkeys/:id/prf-salt") { request, context in try await rotatePRFSalt(request, context) }
        // A password change costs a scrypt hash: counted per address like the sign-ins.
        account.group().add(middleware: ClientRateLimitMiddleware(service: service))
            .post("password") { request, context in try await changePassword(request, context) }
        account.delete("password") { request, context in try await removePassword(request, context) }
        account.post("recovery-codes") { request, context in try await recoveryCodes(request, context) }
        return api
    }

    /// The signed-in session of a route behind a required ``SessionMiddleware``.
    static func signedIn(_ context: PasskeyRequestContext) throws -> PasskeyService.SignedIn {
        guard let signedIn = context.signedIn else { throw PasskeyServiceError.notSignedIn }
        return signedIn
    }

    /// The access token the sign-in minted (every sign-in here asks for one: `mint` is never
    /// needed, and keeps the answer whole if it were).
    func minted(_ minted: AccessTokens.Minted?, orMint mint: () async throws -> AccessTokens.Minted) async throws -> AccessTokens.Minted {
        if let minted { return minted }
        return try await mint()
    }

    /// Every sign-in here answers with an access token, and one made from a browser that was
    /// already signed in replaces that session (the token it held stops working).
    func completion(_ context: PasskeyRequestContext) -> PasskeyService.SignInCompletion {
        PasskeyService.SignInCompletion(replacing: context.signedIn, accessToken: true)
    }

    func passwordSignIn(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(PasswordSignInBody.self, limit: limit)
        let result = try await service.passwordSignIn(
            username: body.username, password: body.password, client: context.client, completion: completion(context))
        return try await signedIn(result, method: "password")
    }

    func removePassword(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        try await service.removePassword(
            try Self.signedIn(context), client: context.client)
        return HTTP.noContent()
    }

    func changePassword(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(ChangePasswordBody.self, limit: limit)
        try await service.changePassword(
            try Self.signedIn(context), newPassword: body.newPassword,
            client: context.client)
        return HTTP.noContent()
    }

    func recoveryCodes(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        return try HTTP.json(
            RecoveryCodesJSON(
                codes: try await service.newRecoveryCodes(
                    signedIn, client: context.client)))
    }

    func recoverySignIn(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(RecoverySignInBody.self, limit: limit)
        let result = try await service.recoverySignIn(
            username: body.username, code: body.code, client: context.client, completion: completion(context))
        return try await signedIn(result, method: "recovery_code")
    }

    func recoveryLink(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(RecoveryLinkBody.self, limit: limit)
        let result = try await service.recoveryLinkSignIn(
            token: body.token, client: context.client, completion: completion(context))
        return try await signedIn(result, method: "recovery_link")
    }

    private func signedIn(_ result: PasskeyService.OtherSignIn, method: String) async throws -> Response {
        var headers = HTTPFields()
        headers[.setCookie] = HTTP.sessionCookie(edge, token: result.token, maxAge: sessionMaxAge)
        let access = try await minted(result.accessToken) {
            try await service.tokens.mint(account: result.account, session: result.session)
        }
        return try HTTP.json(
            OtherSignInJSON(
                user: UserJSON(result.account), token: result.token, expiresAt: result.session.expiresAt,
                method: method, canCreatePasskey: result.canUpgrade, recovery: result.recovery, accessToken: access.token,
                accessTokenExpiresAt: access.expiresAt), headers: headers)
    }

    /// `POST /api/auth/token`: a fresh access token for the live session the request carries.
    func accessToken(_ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        return try HTTP.json(AccessTokenJSON(try await service.tokens.mint(account: signedIn.account, session: signedIn.session)))
    }

    func registerOptions(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(RegisterOptionsBody.self, limit: limit)
        let options = try await service.registrationOptions(
            username: body.username, displayName: body.displayName, signedIn: context.signedIn, conditional: body.conditional,
            hints: body.hints, registrationToken: body.registrationToken,
            client: context.client, extensions: body.extensions, email: body.email)
        // A browser whose client showed it decodes with `window.atob` (see ``AtobForm``) gets the
        // options' binary members in standard base64: its passkeys' IDs, in excludeCredentials,
        // hold `-` and `_` in base64url about half the time, which `atob` refuses.
        if request.cookies[AtobForm.cookieName]?.value == "1" {
            return try AtobForm.json(options, members: AtobForm.creationMembers)
        }
        return try HTTP.json(options)
    }

    func registerVerify(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(RegisterVerifyBody.self, limit: limit)
        let result = try await service.finishRegistration(
            body.credential, name: body.name, signedIn: context.signedIn,
            client: context.client, replaces: body.replaces)
        var headers = HTTPFields()
        AtobForm.mark(&headers, request, decodesWithAtob: body.decodesWithAtob, edge, maxAge: sessionMaxAge)
        var access: AccessTokens.Minted?
        if let token = result.token, let session = result.session {
            headers.append(
                HTTPField(name: .setCookie, value: HTTP.sessionCookie(edge, token: token, maxAge: sessionMaxAge)))
            access = try await service.tokens.mint(account: result.account, session: session)
        }
        return try HTTP.json(
            RegisterVerifyJSON(
                user: UserJSON(result.account), passkey: PasskeyJSON(result.passkey, metadata: service.fidoMetadata), token: result.token,
                accessToken: access?.token,
                accessTokenExpiresAt: access?.expiresAt),
            headers: headers)
    }

    func authenticateOptions(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        var username = request.uri.queryParameters.get("username")
        var hints: [String]?
        var extensions = PasskeyService.SignInExtensionRequest()
        var credentialID: [UInt8]?
        var conditional = request.uri.queryParameters.get("mediation") == "conditional"
        if request.method == .post {
            let body = try await request.decode(AuthenticateOptionsBody.self, limit: limit)
            username = body.username ?? username
            hints = body.hints
            extensions = body.extensions
            credentialID = body.credentialID
            conditional = body.conditional
        }
        let options = try await service.authenticationOptions(
            username: username, hints: hints, client: context.client,
            extensions: extensions, credentialID: credentialID, conditional: conditional)
        // The GET form is what clients that decode with `window.atob` call (the widely copied
        // guide's `PasskeyWebManager`); Level 3 clients POST. The challenge is alphabet-neutral
        // already; credential IDs are the authenticator's choice, so this form writes them in
        // standard base64, which `atob` decodes (docs/library.md, "Tolerances").
        if request.method == .get { return try HTTP.json(AtobRequestOptionsJSON(options: options)) }
        return try HTTP.json(options)
    }

    /// `GET /api/auth/passkeys/check?username=`: `{hasPasskeys}`. No more than sign-up tells
    /// (whether the name is taken), and counted against the same per-address budget.
    func checkPasskeys(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let has = try await service.hasPasskeys(username: request.uri.queryParameters.get("username") ?? "")
        return try HTTP.json(["hasPasskeys": has])
    }

    func authenticateVerify(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(AuthenticateVerifyBody.self, limit: limit)
        let result = try await service.finishAuthentication(
            body.credential, client: context.client, completion: completion(context))
        var headers = HTTPFields()
        AtobForm.mark(&headers, request, decodesWithAtob: body.decodesWithAtob, edge, maxAge: sessionMaxAge)
        headers.append(
            HTTPField(name: .setCookie, value: HTTP.sessionCookie(edge, token: result.token, maxAge: sessionMaxAge)))
        let access = try await minted(result.accessToken) {
            try await service.tokens.mint(account: result.account, session: result.session)
        }
        return try HTTP.json(
            SignInJSON(
                user: UserJSON(result.account), token: result.token, expiresAt: result.session.expiresAt, accessToken: access.token,
                accessTokenExpiresAt: access.expiresAt, prfEnabled: result.passkey.extensions.prfEnabled), headers: headers)
    }

    func session(_ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        return try HTTP.json(
            SessionJSON(
                user: UserJSON(signedIn.account), rpId: service.configuration.rpID, createdAt: signedIn.session.createdAt,
                expiresAt: signedIn.session.expiresAt, hasPassword: signedIn.account.passwordHash != nil,
                recoveryCodesLeft: try await service.recoveryCodesLeft(accountID: signedIn.account.id)))
    }

    func signOut(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        try await service.signOut(signedIn, client: context.client)
        var headers = HTTPFields()
        headers[.setCookie] = HTTP.sessionCookie(edge, token: nil, maxAge: 0)
        AtobForm.mark(&headers, request, decodesWithAtob: false, edge, maxAge: 0)
        return HTTP.noContent(headers: headers)
    }

    func listSessions(_ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        let sessions = try await service.sessions(of: signedIn).map {
            SessionListJSON.Item($0, current: $0.tokenHash == signedIn.session.tokenHash)
        }
        return try HTTP.json(SessionListJSON(sessions: sessions))
    }

    func revokeOtherSessions(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let count = try await service.revokeOtherSessions(
            try Self.signedIn(context), client: context.client)
        return try HTTP.json(["revoked": count])
    }

    func revokeSession(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        guard let text = context.parameters.get("id"), let id = Base64URLBytes(encoded: text)?.bytes, id.count == 32 else {
            throw PasskeyServiceError.sessionNotFound
        }
        try await service.revokeSession(
            id: id, signedIn: signedIn, client: context.client)
        var headers = HTTPFields()
        if id == signedIn.session.tokenHash {
            headers[.setCookie] = HTTP.sessionCookie(edge, token: nil, maxAge: 0)
        }
        return HTTP.noContent(headers: headers)
    }

    func listPasskeys(_ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        return try HTTP.json(
            PasskeyListJSON(
                passkeys: try await service.passkeys(of: signedIn).map { PasskeyJSON($0, metadata: service.fidoMetadata) },
                rpId: service.configuration.rpID, userHandle: Base64URLBytes(signedIn.account.userHandle).base64URL))
    }

    func renamePasskey(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        let body = try await request.decode(RenamePasskeyBody.self, limit: limit)
        let passkey = try await service.renamePasskey(
            try Self.passkeyID(context), to: body.name, signedIn: signedIn,
            client: context.client)
        return try HTTP.json(PasskeyJSON(passkey, metadata: service.fidoMetadata))
    }

    /// `POST /api/auth/passkeys/{id}/prf-salt`: a new PRF input for one of the account's passkeys.
    func rotatePRFSalt(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        let passkey = try await service.rotatePRFSalt(
            credentialID: try Self.passkeyID(context), signedIn: signedIn,
            client: context.client)
        return try HTTP.json(PasskeyJSON(passkey, metadata: service.fidoMetadata))
    }

    func deletePasskey(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try Self.signedIn(context)
        try await service.deletePasskey(
            try Self.passkeyID(context), signedIn: signedIn,
            client: context.client)
        return HTTP.noContent()
    }

    static func passkeyID(_ context: PasskeyRequestContext) throws -> [UInt8] {
        guard let text = context.parameters.get("id"), let id = Base64URLBytes(encoded: text)?.bytes, !id.isEmpty else {
            throw PasskeyServiceError.passkeyNotFound
        }
        return id
    }
}
