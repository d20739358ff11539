import Foundation
import HTTPTypes
import Hummingbird
import WebAuthn

/// The native JSON API (../docs/openapi.json): W3C Level 3 JSON for options and responses, so
/// browsers' `parseCreationOptionsFromJSON` / `toJSON()`, Android Credential Manager and iOS
/// apps use it as is.
struct NativeAPI: Sendable {
    let service: PasskeyService
    let sessions: SessionResolver

    init(service: PasskeyService) {
        self.service = service
        sessions = SessionResolver(service: service)
    }

    var limit: Int { service.configuration.maxBodySize }
    var sessionMaxAge: Int { Int(service.configuration.sessionLifetime.components.seconds) }

    func register(on router: Router<PasskeyRequestContext>) {
        let api = router.group("api/auth")
        api.post("register/options") { request, context in try await registerOptions(request, context) }
        api.post("register/verify") { request, context in try await registerVerify(request, context) }
        api.post("authenticate/options") { request, context in try await authenticateOptions(request, context) }
        api.get("authenticate/options") { request, context in try await authenticateOptions(request, context) }
        api.post("authenticate/verify") { request, context in try await authenticateVerify(request, context) }
        api.get("session") { request, _ in try await session(request) }
        api.delete("session") { request, context in try await signOut(request, context) }
        api.get("passkeys") { request, _ in try await listPasskeys(request) }
        api.patch("passkeys/:id") { request, context in try await renamePasskey(request, context) }
        api.delete("passkeys/:id") { request, context in try await deletePasskey(request, context) }
        api.post("password/sign-in") { request, context in try await passwordSignIn(request, context) }
        api.delete("password") { request, context in try await removePassword(request, context) }
        api.post("recovery-codes") { request, context in try await recoveryCodes(request, context) }
        api.post("recovery/sign-in") { request, context in try await recoverySignIn(request, context) }
        api.post("recovery/link") { request, context in try await recoveryLink(request, context) }
    }

    func passwordSignIn(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await HTTP.jsonBody(request, limit: limit)
        let result = try await service.passwordSignIn(username: try body.optionalString("username"), password: try body.optionalString("password"),
                                                      client: service.client(request, context))
        return try signedIn(result, method: "password")
    }

    func removePassword(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try await sessions.required(request)
        try await service.removePassword(signedIn, client: service.client(request, context))
        return HTTP.noContent()
    }

    func recoveryCodes(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try await sessions.required(request)
        return try HTTP.json(RecoveryCodesJSON(codes: try await service.newRecoveryCodes(signedIn, client: service.client(request, context))))
    }

    func recoverySignIn(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await HTTP.jsonBody(request, limit: limit)
        let result = try await service.recoverySignIn(username: try body.optionalString("username"), code: try body.optionalString("code"),
                                                      client: service.client(request, context))
        return try signedIn(result, method: "recovery_code")
    }

    func recoveryLink(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await HTTP.jsonBody(request, limit: limit)
        let result = try await service.recoveryLinkSignIn(token: try body.optionalString("token"), client: service.client(request, context))
        return try signedIn(result, method: "recovery_link")
    }

    private func signedIn(_ result: PasskeyService.OtherSignIn, method: String) throws -> Response {
        var headers = HTTPFields()
        headers[.setCookie] = HTTP.sessionCookie(service.configuration, token: result.token, maxAge: sessionMaxAge)
        return try HTTP.json(OtherSignInJSON(user: UserJSON(result.account), token: result.token, expiresAt: result.session.expiresAt,
                                             method: method, canCreatePasskey: result.canUpgrade, recovery: result.recovery), headers: headers)
    }

    func registerOptions(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await HTTP.jsonBody(request, limit: limit)
        let signedIn = try await sessions.optional(request)
        let options = try await service.registrationOptions(username: try body.optionalString("username"),
                                                            displayName: try body.optionalString("displayName"), signedIn: signedIn,
                                                            conditional: try Self.conditionalMediation(body),
                                                            client: service.client(request, context))
        return try HTTP.json(options)
    }

    func registerVerify(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await HTTP.jsonBody(request, limit: limit)
        let signedIn = try await sessions.optional(request)
        let credential = try RegistrationResponseJSON(json: Self.credential(in: body))
        var replaces: [UInt8]?
        if let id = try body.optionalString("replaces") {
            guard let bytes = Base64URLBytes(encoded: id)?.bytes, !bytes.isEmpty else { throw APIError.passkeyNotFound }
            replaces = bytes
        }
        let result = try await service.finishRegistration(credential, name: try body.optionalString("name"), signedIn: signedIn,
                                                          client: service.client(request, context), replaces: replaces)
        var headers = HTTPFields()
        if let token = result.token {
            headers[.setCookie] = HTTP.sessionCookie(service.configuration, token: token, maxAge: sessionMaxAge)
        }
        return try HTTP.json(RegisterVerifyJSON(user: UserJSON(result.account), passkey: PasskeyJSON(result.passkey), token: result.token),
                             headers: headers)
    }

    func authenticateOptions(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        var username = request.uri.queryParameters.get("username")
        if request.method == .post {
            let body = try await HTTP.jsonBody(request, limit: limit)
            username = try body.optionalString("username") ?? username
        }
        return try HTTP.json(try await service.authenticationOptions(username: username, client: service.client(request, context)))
    }

    func authenticateVerify(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await HTTP.jsonBody(request, limit: limit)
        let credential = try AuthenticationResponseJSON(json: Self.credential(in: body))
        let result = try await service.finishAuthentication(credential, client: service.client(request, context))
        var headers = HTTPFields()
        headers[.setCookie] = HTTP.sessionCookie(service.configuration, token: result.token, maxAge: sessionMaxAge)
        return try HTTP.json(SignInJSON(user: UserJSON(result.account), token: result.token, expiresAt: result.session.expiresAt), headers: headers)
    }

    func session(_ request: Request) async throws -> Response {
        let signedIn = try await sessions.required(request)
        return try HTTP.json(SessionJSON(user: UserJSON(signedIn.account), rpId: service.configuration.rpID, createdAt: signedIn.session.createdAt,
                                         expiresAt: signedIn.session.expiresAt, hasPassword: signedIn.account.passwordHash != nil,
                                         recoveryCodesLeft: try await service.recoveryCodesLeft(accountID: signedIn.account.id)))
    }

    func signOut(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try await sessions.required(request)
        try await service.signOut(signedIn, client: service.client(request, context))
        var headers = HTTPFields()
        headers[.setCookie] = HTTP.sessionCookie(service.configuration, token: nil, maxAge: 0)
        return HTTP.noContent(headers: headers)
    }

    func listPasskeys(_ request: Request) async throws -> Response {
        let signedIn = try await sessions.required(request)
        return try HTTP.json(PasskeyListJSON(passkeys: try await service.passkeys(of: signedIn).map(PasskeyJSON.init)))
    }

    func renamePasskey(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try await sessions.required(request)
        let body = try await HTTP.jsonBody(request, limit: limit)
        let passkey = try await service.renamePasskey(try Self.passkeyID(context), to: try body.string("name"), signedIn: signedIn,
                                                      client: service.client(request, context))
        return try HTTP.json(PasskeyJSON(passkey))
    }

    func deletePasskey(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let signedIn = try await sessions.required(request)
        try await service.deletePasskey(try Self.passkeyID(context), signedIn: signedIn, client: service.client(request, context))
        return HTTP.noContent()
    }

    /// `{credential: …, name?}` as documented; a bare response JSON (what Credential Manager
    /// returns) is accepted as well.
    static func credential(in body: JSONObject) throws -> JSONObject {
        if body.has("credential") { return try body.object("credential") }
        guard body.has("rawId") || body.has("response") else { throw APIError.badRequest("malformed_json", "credential is missing") }
        return body
    }

    /// `"mediation": "conditional"` asks for options meant for automatic passkey creation.
    static func conditionalMediation(_ body: JSONObject) throws -> Bool {
        switch try body.optionalString("mediation") {
        case nil, "optional", "required", "silent": return false
        case "conditional": return true
        case let other?: throw APIError.badRequest("invalid_mediation", "mediation \"\(other)\" is not conditional, optional, required or silent")
        }
    }

    static func passkeyID(_ context: PasskeyRequestContext) throws -> [UInt8] {
        guard let text = context.parameters.get("id"), let id = Base64URLBytes(encoded: text)?.bytes, !id.isEmpty else {
            throw APIError.passkeyNotFound
        }
        return id
    }
}
