import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyModels
import WebAuthn

// MARK: The server API

/// `/api/admin/…`: what an app's server does for the people it already has (docs/integration.md).
/// Each route needs an API key with its scope; the verbs are `AdminService`'s, the ones
/// `passkeyd admin` runs.
struct ServerAPI: Sendable {
    let service: PasskeyService
    let edge: EdgeConfiguration
    /// The tenants' administration: the default tenant's routes only (a tenant's routes have no
    /// `/api/admin/tenants`, and its keys cannot hold the `tenants` scope).
    var tenants: TenantAdmin? = nil
    var admin: AdminService { service.admin }
    var limit: Int { edge.maxBodySize }

    var routes: RouteCollection<PasskeyRequestContext> {
        let api = RouteCollection(context: PasskeyRequestContext.self)
        let read = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "users:read"))
        let write = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "users:write"))
            .add(middleware: JSONRequestMiddleware())
        let hooks = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "webhooks"))
            .add(middleware: JSONRequestMiddleware())
        let clients = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "clients"))
            .add(middleware: JSONRequestMiddleware())

        clients.get("clients") { _, _ in
            try HTTP.json(ClientListJSON(clients: try await admin.clients().map { ClientJSON($0) }))
        }
        clients.post("clients") { request, context in
            let body = try await request.decode(AddClientBody.self, limit: limit)
            let added = try await admin.addClient(
                name: body.name, redirectURIs: body.redirectURIs, postLogoutURIs: body.postLogoutURIs, isPublic: body.isPublic,
                firstParty: body.firstParty, allowSignUp: body.allowSignUp, idTokenAlgorithm: body.idTokenAlgorithm, by: caller(context)
            )
            return try HTTP.json(ClientJSON(added.client, secret: added.secret), status: .created)
        }
        clients.delete("clients/:id") { _, context in
            try await admin.removeClient(context.parameters.get("id") ?? "", by: caller(context))
            return HTTP.noContent()
        }

        read.get("users") { request, _ in try await findUser(request) }
        read.get("users/:id") { _, context in try HTTP.json(AdminUserJSON(try await account(context))) }
        read.get("users/:id/passkeys") { _, context in
            let account = try await account(context)
            return try HTTP.json(
                PasskeyListJSON(
                    passkeys: try await admin.passkeys(of: account).map {
                        PasskeyJSON($0, metadata: service.fidoMetadata)
                    }))
        }
        read.get("users/:id/sessions") { _, context in
            let account = try await account(context)
            let sessions = try await admin.sessions(of: account)
            return try HTTP.json(SessionListJSON(sessions: sessions.map { SessionListJSON.Item($0, current: false) }))
        }

        write.post("users") { request, context in try await createUser(request, context) }
        write.patch("users/:id/passkeys/:passkey") { request, context in
            let account = try await writable(context)
            let body = try await request.decode(RenamePasskeyBody.self, limit: limit)
            let passkey = try await admin.renamePasskey(try passkeyID(context), of: account, to: body.name, by: caller(context))
            return try HTTP.json(PasskeyJSON(passkey, metadata: service.fidoMetadata))
        }
        write.delete("users/:id/passkeys/:passkey") { _, context in
            let account = try await writable(context)
            _ = try await admin.revokePasskey(try passkeyID(context), of: account, by: caller(context))
            return HTTP.noContent()
        }
        write.delete("users/:id/sessions") { _, context in
            let account = try await writable(context)
            return try HTTP.json(["revoked": try await admin.revokeSessions(of: account, by: caller(context))])
        }
        write.delete("users/:id/sessions/:session") { _, context in
            let account = try await writable(context)
            guard let text = context.parameters.get("session"), let hash = Base64URLBytes(encoded: text)?.bytes, hash.count == 32 else {
                throw PasskeyServiceError.sessionNotFound
            }
            try await admin.revokeSession(hash, of: account, by: caller(context))
            return HTTP.noContent()
        }
        write.post("users/:id/disable") { _, context in
            let account = try await writable(context)
            return try HTTP.json(["revokedSessions": try await admin.disable(account, by: caller(context))])
        }
        write.post("users/:id/enable") { _, context in
            try await admin.enable(try await writable(context), by: caller(context))
            return HTTP.noContent()
        }
        write.post("users/:id/registration-token") { _, context in
            let account = try await writable(context)
            let issued = try await admin.registrationToken(
                for: account, lifetime: Double(service.configuration.tokens.registrationTokenSeconds), by: caller(context))
            return try HTTP.json(RegistrationTokenJSON(registrationToken: issued.token, expiresAt: issued.expiresAt), status: .created)
        }
        // Opens recovery by mail again after "this wasn't me" closed it (docs/email.md).
        write.post("users/:id/email-recovery") { _, context in
            let account = try await writable(context)
            try await service.openEmailRecovery(accountID: account.id, client: context.client, by: caller(context))
            return HTTP.noContent()
        }
        write.post("users/:id/recovery-link") { _, context in
            let account = try await writable(context)
            let lifetime: TimeInterval = 24 * 3600
            let token = try await service.issueRecoveryLink(for: account, lifetime: lifetime, issuer: caller(context))
            let base = service.configuration.webOrigins.first ?? service.configuration.issuer
            return try HTTP.json(
                RecoveryLinkJSON(url: "\(base)/#recover=\(token)", token: token, expiresAt: service.now().addingTimeInterval(lifetime)),
                status: .created)
        }

        if let tenants { addTenantRoutes(to: api, tenants) }

        hooks.get("webhooks") { _, _ in
            try HTTP.json(WebhookListJSON(endpoints: try await admin.webhookEndpoints().map { WebhookJSON($0) }))
        }
        hooks.post("webhooks") { request, _ in
            let body = try await request.decode(AddWebhookBody.self, limit: limit)
            let added = try await admin.addWebhook(url: body.url, events: body.events ?? ["*"])
            return try HTTP.json(WebhookJSON(added.endpoint, secret: added.secret), status: .created)
        }
        hooks.delete("webhooks/:id") { _, context in
            guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else { throw APIError.notFound }
            try await admin.removeWebhook(id)
            return HTTP.noContent()
        }
        hooks.get("webhooks/deliveries") { _, _ in
            try HTTP.json(
                WebhookDeliveryListJSON(
                    deliveries: try await admin.webhookDeliveries(limit: 100).map(WebhookDeliveryJSON.init)))
        }
        return api
    }

    /// `/api/admin/tenants`: the server's tenants, for a key with the `tenants` scope.
    func addTenantRoutes(to api: RouteCollection<PasskeyRequestContext>, _ tenants: TenantAdmin) {
        let group = api.group().add(middleware: APIKeyMiddleware(service: service, scope: "tenants"))
            .add(middleware: JSONRequestMiddleware())
        group.get("tenants") { _, _ in try HTTP.json(TenantListJSON(tenants: try await tenants.list().map(TenantJSON.init))) }
        group.get("tenants/:name") { _, context in
            try HTTP.json(TenantJSON(try await tenants.show(context.parameters.get("name") ?? "")))
        }
        group.post("tenants") { request, context in
            let body = try await request.decode(AddTenantBody.self, limit: limit)
            let record = try await tenants.add(name: body.name, hosts: body.hosts, settings: body.settings, by: caller(context))
            return try HTTP.json(TenantJSON(record, accounts: 0), status: .created)
        }
        group.patch("tenants/:name") { request, context in
            let body = try await request.decode(ChangeTenantBody.self, limit: limit)
            let record = try await tenants.change(
                name: context.parameters.get("name") ?? "", hosts: body.hosts, patch: body.settings, by: caller(context))
            return try HTTP.json(TenantJSON(record, accounts: nil))
        }
        // `?deleteData=true` deletes everything the tenant owns with it; without it a tenant
        // with accounts is kept (409 tenant_has_accounts).
        group.delete("tenants/:name") { request, context in
            let flag = request.uri.queryParameters.get("deleteData")
            guard flag == nil || flag == "true" || flag == "false" else {
                throw PasskeyServiceError(.invalidValue, "deleteData is true or false")
            }
            try await tenants.remove(name: context.parameters.get("name") ?? "", deleteData: flag == "true", by: caller(context))
            return HTTP.noContent()
        }
    }

    func caller(_ context: PasskeyRequestContext) -> String {
        guard let key = context.apiKey?.key else { return "server API" }
        return "api key \(key.name) (\(key.id.uuidString.lowercased()))"
    }

    func account(_ context: PasskeyRequestContext) async throws -> Account {
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text),
            let account = try await admin.account(id: id)
        else { throw PasskeyServiceError.accountNotFound }
        return account
    }

    /// The account a write acts on. A server operator's account (console role `operator`) is
    /// changed only with a key that also holds `tenants`: a recovery link, a registration token
    /// or a disable from a `users:write` key would otherwise hand its holder the operator's
    /// power over every tenant, or lock the operators out.
    func writable(_ context: PasskeyRequestContext) async throws -> Account {
        let account = try await account(context)
        if context.apiKey?.key.scopes.contains("tenants") != true,
            try await service.store.adminRole(accountID: account.id) == .serverOperator
        {
            throw PasskeyServiceError.insufficientScope("tenants")
        }
        return account
    }

    func passkeyID(_ context: PasskeyRequestContext) throws -> [UInt8] {
        guard let text = context.parameters.get("passkey"), let id = Base64URLBytes(encoded: text)?.bytes, !id.isEmpty else {
            throw PasskeyServiceError.passkeyNotFound
        }
        return id
    }

    func findUser(_ request: Request) async throws -> Response {
        let query = request.uri.queryParameters
        let found: Account?
        if let externalID = query.get("externalId") {
            found = try await admin.account(externalID: String(externalID))
        } else if let username = query.get("username") {
            found = try await admin.account(username: String(username))
        } else {
            throw PasskeyServiceError.invalid(.malformedJSON, "give externalId or username")
        }
        guard let found else { throw PasskeyServiceError.accountNotFound }
        return try HTTP.json(AdminUserJSON(found))
    }

    func createUser(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let body = try await request.decode(CreateUserBody.self, limit: limit)
        let result = try await admin.findOrCreate(
            username: body.username, displayName: body.displayName, externalID: body.externalId, by: caller(context))
        // An account that already holds the externalId is a conflict on a unique field; only a
        // key that may read accounts is shown it (a users:write-only key learns nothing more).
        guard result.created || context.apiKey?.key.scopes.contains("users:read") == true else {
            throw APIError(.conflict, "conflict", "An account holds this externalId; reading it needs an API key with users:read.")
        }
        return try HTTP.json(AdminUserJSON(result.account), status: result.created ? .created : .ok)
    }
}
