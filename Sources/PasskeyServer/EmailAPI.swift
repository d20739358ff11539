import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyMail
import PasskeyModels
import WebAuthn

/// The mail routes (at `/api/auth`; docs/email.md): the account's address, its verification,
/// recovery by mail, "this wasn't me", and removing the other passkeys after a recovery.
struct EmailAPI: Sendable {
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

    var routes: RouteCollection<PasskeyRequestContext> {
        let allowedOrigins = edge.allowedRequestOrigins(service.configuration)
        let api = RouteCollection(context: PasskeyRequestContext.self)
        // Everything that sends a mail, takes a token or signs in: no cross-site browser
        // request, counted per client address, a JSON body.
        let guarded = api.group()
            .add(middleware: CrossSiteRequestMiddleware(allowed: allowedOrigins))
            .add(middleware: ClientRateLimitMiddleware(service: service))
            .add(middleware: JSONRequestMiddleware(bodyRequired: true))
        let optional = guarded.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .lenient))
        optional.post("email/verify") { request, context in try await verify(request, context) }
        optional.post("email/undo") { request, context in try await undo(request, context) }
        optional.post("recovery/email") { request, context in try await requestRecovery(request, context) }
        optional.post("recovery/email/options") { request, context in try await recoveryOptions(request, context) }
        optional.post("recovery/email/verify") { request, context in try await recoveryVerify(request, context) }
        let signedIn = guarded.group().add(middleware: SessionMiddleware(sessions: sessions, mode: .required))
        signedIn.put("email") { request, context in try await setEmail(request, context) }
        signedIn.post("passkeys/remove-others") { _, context in try await removeOthers(context) }

        // What the sign-up form and the account page offer (public, like the well-known files).
        api.get("email/policy") { _, _ in
            try HTTP.json(
                EmailPolicyJSON(
                    mailEnabled: service.mailEnabled, signUp: service.mailEnabled ? service.configuration.email.signUp.rawValue : "off",
                    undoHours: service.configuration.email.undoSeconds / 3600))
        }

        let account = api.group()
            .add(middleware: JSONRequestMiddleware())
            .add(middleware: SessionMiddleware(sessions: sessions, mode: .required))
        account.get("email") { _, context in try await status(context) }
        account.delete("email") { _, context in try await removeEmail(context) }
        return api
    }

    func status(_ context: PasskeyRequestContext) async throws -> Response {
        try HTTP.json(EmailJSON(try await service.emailStatus(try NativeAPI.signedIn(context)), service: service))
    }

    func setEmail(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(EmailBody.self, limit: limit)
        guard let address = body.address, !address.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw PasskeyServiceError.invalidEmail("it is empty (DELETE /api/auth/email removes the address)")
        }
        let state = try await service.setEmail(try NativeAPI.signedIn(context), address: address, client: context.client)
        // A verified address stays until the new one is verified: the new one is pending.
        let asked = try? MailAddress(address)
        let pending = state.verified && state.address?.lowercased() != asked?.key ? asked?.description : nil
        return try HTTP.json(EmailJSON(state, service: service, pending: pending), status: .accepted)
    }

    func removeEmail(_ context: PasskeyRequestContext) async throws -> Response {
        try HTTP.json(
            EmailJSON(try await service.setEmail(try NativeAPI.signedIn(context), address: nil, client: context.client), service: service))
    }

    func verify(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(EmailTokenBody.self, limit: limit)
        guard body.token != nil || body.code != nil else { throw PasskeyServiceError.invalidEmailLink }
        let result = try await service.verifyEmail(token: body.token, code: body.code, signedIn: context.signedIn, client: context.client)
        return try HTTP.json(
            EmailVerificationJSON(
                address: result.address, username: result.account.username,
                passkeysBefore: result.passkeysBefore.map { PasskeyJSON($0, metadata: service.fidoMetadata) },
                sessionsBefore: result.sessionsBefore, removed: result.removed, recoveryToken: result.recoveryToken))
    }

    func requestRecovery(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(EmailTokenBody.self, limit: limit)
        try await service.requestEmailRecovery(identifier: body.identifier, client: context.client)
        // The same answer whether or not an account exists.
        return try HTTP.json(["sent": true], status: .accepted)
    }

    func recoveryOptions(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(EmailTokenBody.self, limit: limit)
        guard body.token != nil || body.code != nil else { throw PasskeyServiceError.invalidEmailLink }
        let (options, _) = try await service.emailRecoveryOptions(
            token: body.token, identifier: body.identifier, code: body.code, client: context.client)
        return try HTTP.json(options)
    }

    func recoveryVerify(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(RegisterVerifyBody.self, limit: limit)
        let result = try await service.finishEmailRecovery(body.credential, name: body.name, client: context.client)
        var headers = HTTPFields()
        var access: AccessTokens.Minted?
        if let token = result.token, let session = result.session {
            headers[.setCookie] = HTTP.sessionCookie(edge, token: token, maxAge: sessionMaxAge)
            access = try await service.tokens.mint(account: result.account, session: session)
        }
        let others = try await service.store.passkeys(accountID: result.account.id).count - 1
        return try HTTP.json(
            RecoveryVerifyJSON(
                user: UserJSON(result.account), passkey: PasskeyJSON(result.passkey, metadata: service.fidoMetadata), token: result.token,
                accessToken: access?.token, accessTokenExpiresAt: access?.expiresAt, otherPasskeys: max(0, others)),
            headers: headers)
    }

    func undo(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(EmailTokenBody.self, limit: limit)
        let undone = try await service.undo(token: body.token, client: context.client)
        var headers = HTTPFields()
        // Every session of the account ended: this browser's too, when it was one of them.
        if context.signedIn?.account.id == undone.account.id {
            headers[.setCookie] = HTTP.sessionCookie(edge, token: nil, maxAge: 0)
        }
        return try HTTP.json(
            UndoJSON(
                username: undone.account.username, passkeyRemoved: undone.removedPasskey, addressRestored: undone.restoredAddress,
                sessionsEnded: undone.sessionsEnded), headers: headers)
    }

    func removeOthers(_ context: PasskeyRequestContext) async throws -> Response {
        let (passkeys, sessions) = try await service.removeOtherPasskeys(try NativeAPI.signedIn(context), client: context.client)
        return try HTTP.json(["passkeysRemoved": passkeys, "sessionsEnded": sessions])
    }
}

/// `PUT /api/auth/email`.
struct EmailBody: APIRequestBody {
    var address: String?
    init(json: JSONObject) throws { address = try json.optionalString("address") }
}

/// The mail routes' bodies: a link's `token`, or a `code` (with the `identifier`, a username or
/// address, when nobody is signed in).
struct EmailTokenBody: APIRequestBody {
    var token: String?
    var code: String?
    var identifier: String?
    init(json: JSONObject) throws {
        token = try json.optionalString("token")
        code = try json.optionalString("code")
        identifier = try json.optionalString("identifier")
    }
}

struct EmailJSON: Encodable, Sendable {
    let address: String?
    let verified: Bool
    let verifiedAt: Date?
    let recoveryOpen: Bool
    /// A new address waiting for its verification (the answer to a change).
    let pendingAddress: String?
    let mailEnabled: Bool

    init(_ email: AccountEmail, service: PasskeyService, pending: String? = nil) {
        address = email.address
        verified = email.verified
        verifiedAt = email.verifiedAt
        recoveryOpen = !email.recoveryClosed
        pendingAddress = pending
        mailEnabled = service.mailEnabled
    }
}

struct EmailPolicyJSON: Encodable, Sendable {
    let mailEnabled: Bool
    /// `off`, `optional`, `required` or `username` (the username is the address).
    let signUp: String
    let undoHours: Int
}

struct EmailVerificationJSON: Encodable, Sendable {
    let verified = true
    let address: String
    let username: String
    let passkeysBefore: [PasskeyJSON]
    let sessionsBefore: Int
    let removed: Bool
    let recoveryToken: String?
}

struct RecoveryVerifyJSON: Encodable, Sendable {
    let verified = true
    let recovery = true
    let user: UserJSON
    let passkey: PasskeyJSON
    let token: String?
    let accessToken: String?
    let accessTokenExpiresAt: Date?
    /// The account's other passkeys: offer to remove them (`POST /api/auth/passkeys/remove-others`).
    let otherPasskeys: Int
}

struct UndoJSON: Encodable, Sendable {
    let undone = true
    let username: String
    let passkeyRemoved: Bool
    let addressRestored: String?
    let sessionsEnded: Int
}
