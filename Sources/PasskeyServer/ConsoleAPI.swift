import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import PasskeyModels
import WebAuthn

/// `/admin/api/…`: the operator's console (docs/admin.md). Its own session cookie (HttpOnly,
/// SameSite=Strict, `__Host-` on https), never the account's session, a Bearer token or an
/// API key: without a console session every route, known or not, answers 403
/// `admin_required` alike. Every request is counted per address and per administrator; every
/// change needs the `admin` role, an allowed `Origin`, the session's `X-CSRF-Token` and a
/// passkey verification within the step-up window.
struct ConsoleAPI: Sendable {
    let service: PasskeyService
    let edge: EdgeConfiguration
    let console: ConsoleService
    /// The tenants' administration, for server operators: the default tenant's console only.
    let tenants: TenantAdmin?
    var limit: Int { edge.maxBodySize }

    init(service: PasskeyService, edge: EdgeConfiguration, tenants: TenantAdmin? = nil) {
        self.service = service
        self.edge = edge
        self.tenants = tenants
        console = ConsoleService(service: service)
    }

    var routes: RouteCollection<PasskeyRequestContext> {
        let origins = edge.allowedRequestOrigins(service.configuration)
        let api = RouteCollection(context: PasskeyRequestContext.self)

        // Signing in and the bootstrap: no session yet; counted per address, same-origin JSON.
        let open = api.group()
            .add(middleware: ConsoleOriginMiddleware(allowed: origins, always: true))
            .add(middleware: ClientRateLimitMiddleware(service: service))
            .add(middleware: JSONRequestMiddleware())
        open.post("session/options") { request, context in
            try HTTP.json(try await console.signInOptions(client: client(request, context)))
        }
        open.post("session/verify") { request, context in
            let body = try await request.decode(AuthenticateVerifyBody.self, limit: limit)
            return try signedIn(try await console.signIn(body.credential, client: client(request, context)))
        }
        open.post("bootstrap/options") { request, context in
            let body = try await request.decode(ConsoleBootstrapBody.self, limit: limit)
            return try HTTP.json(
                try await console.bootstrapOptions(
                    token: body.token, username: body.username, displayName: body.displayName, client: client(request, context)))
        }
        open.post("bootstrap/verify") { request, context in
            let body = try await request.decode(ConsoleBootstrapBody.self, limit: limit)
            guard let credential = body.credential else { throw PasskeyServiceError.invalid(.malformedJSON, "credential is missing") }
            return try signedIn(try await console.bootstrap(token: body.token, credential: credential, client: client(request, context)))
        }

        // Everything else: a console session first (403 admin_required), then its limits.
        let gated = api.group()
            .add(middleware: ConsoleSessionMiddleware(console: console, service: service, cookieName: edge.consoleCookieName))
            .add(middleware: JSONRequestMiddleware())
        gated.get("session") { _, context in
            let session = try session(context)
            return try HTTP.json(
                ConsoleSessionJSON(session, csrfToken: try await console.csrfToken(for: session.record), now: service.now()))
        }
        gated.delete("session") { request, context in
            try await console.signOut(try session(context), client: client(request, context))
            var headers = HTTPFields()
            headers[.setCookie] = cookie(token: nil)
            return Response(status: .noContent, headers: headers)
        }
        gated.post("step-up/options") { request, context in
            try HTTP.json(try await console.stepUpOptions(try session(context), client: client(request, context)))
        }
        gated.post("step-up/verify") { request, context in
            let body = try await request.decode(AuthenticateVerifyBody.self, limit: limit)
            let result = try await console.stepUp(try session(context), credential: body.credential, client: client(request, context))
            return try HTTP.json(StepUpJSON(stepUpUntil: result.stepUpUntil, csrfToken: result.csrfToken))
        }

        gated.get("overview") { _, _ in try HTTP.json(OverviewJSON(try await console.overview())) }
        gated.get("adoption") { request, _ in
            try HTTP.json(AdoptionJSON(days: try await console.adoption(days: days(request)).map(AdoptionDayJSON.init)))
        }
        gated.get("adoption.csv") { request, _ in
            let days = try days(request)
            return csv(try await console.adoptionCSV(days: days), name: "passkeyd-adoption-\(days)d.csv")
        }
        gated.get("accounts") { request, _ in try await searchAccounts(request) }
        gated.get("accounts/:id") { _, context in
            let detail = try await console.account(id: try accountID(context))
            return try HTTP.json(
                AccountDetailJSON(detail, metadata: service.fidoMetadata, verdict: { console.policyVerdict($0) }))
        }
        gated.get("audit") { request, _ in
            let query = try auditQuery(request, defaultLimit: 50, maximum: 200)
            let events = try await console.audit(query)
            let names = try await console.usernames(events)
            return try HTTP.json(
                AuditPageJSON(
                    events: events.map { AuditEventJSON($0, username: $0.accountID.flatMap { names[$0] }) },
                    next: events.count == query.limit ? events.last?.id.map(String.init) : nil))
        }
        gated.get("audit.csv") { request, _ in
            let events = try await console.audit(try auditQuery(request, defaultLimit: 10_000, maximum: 10_000))
            let names = try await console.usernames(events)
            return csv(auditCSV(events, names: names), name: "passkeyd-audit.csv")
        }
        gated.get("integrations") { _, _ in try HTTP.json(IntegrationsJSON(try await console.integrations())) }
        gated.get("policy") { _, _ in try HTTP.json(PolicyJSON(try await console.policy())) }
        gated.get("admins") { _, _ in try HTTP.json(AdminListJSON(admins: try await console.admins().map(AdminJSON.init))) }

        // Changes.
        let change = gated.group().add(middleware: ConsoleChangeMiddleware(console: console, allowed: origins))
        change.post("accounts/:id/disable") { _, context in
            try HTTP.json(["revokedSessions": try await console.disable(try accountID(context), by: try session(context))])
        }
        change.post("accounts/:id/enable") { _, context in
            try await console.enable(try accountID(context), by: try session(context))
            return HTTP.noContent()
        }
        change.post("accounts/:id/revoke-sessions") { _, context in
            try HTTP.json(["revoked": try await console.revokeSessions(try accountID(context), by: try session(context))])
        }
        change.delete("accounts/:id/passkeys/:credential") { _, context in
            guard let text = context.parameters.get("credential"), text.utf8.count <= 1400,
                let credential = Base64URLBytes(encoded: text)?.bytes, !credential.isEmpty
            else { throw PasskeyServiceError.passkeyNotFound }
            try await console.removePasskey(credential, of: try accountID(context), by: try session(context))
            return HTTP.noContent()
        }
        change.post("accounts/:id/recovery-link") { request, context in
            let body = try await request.decode(ReasonBody.self, limit: limit)
            let issued = try await console.recoveryLink(for: try accountID(context), reason: body.reason, by: try session(context))
            return try HTTP.json(RecoveryLinkIssuedJSON(link: issued.link, expiresAt: issued.expiresAt), status: .created)
        }
        change.delete("accounts/:id") { request, context in
            let body = try await request.decode(ConfirmBody.self, limit: limit)
            try await console.deleteAccount(try accountID(context), confirmation: body.confirm, by: try session(context))
            return HTTP.noContent()
        }
        change.post("admins") { request, context in
            let body = try await request.decode(GrantBody.self, limit: limit)
            let account = try await console.grantRole(body.role, to: body.account, by: try session(context))
            return try HTTP.json(["id": account.id.uuidString.lowercased(), "role": body.role.rawValue], status: .created)
        }
        change.delete("admins/:id") { _, context in
            try await console.revokeRole(of: try accountID(context), by: try session(context))
            return HTTP.noContent()
        }
        change.post("clients") { request, context in
            let body = try await request.decode(AddClientBody.self, limit: limit)
            let added = try await console.addClient(
                name: body.name, redirectURIs: body.redirectURIs, isPublic: body.isPublic, firstParty: body.firstParty,
                allowSignUp: body.allowSignUp, by: try session(context))
            return try HTTP.json(ClientCreatedJSON(client: ClientJSON(added.client), secret: added.secret), status: .created)
        }
        change.post("clients/:id/rotate-secret") { _, context in
            try HTTP.json(["secret": try await console.rotateClientSecret(context.parameters.get("id") ?? "", by: try session(context))])
        }
        change.delete("clients/:id") { _, context in
            try await console.removeClient(context.parameters.get("id") ?? "", by: try session(context))
            return HTTP.noContent()
        }
        change.post("api-keys") { request, context in
            let body = try await request.decode(CreateKeyBody.self, limit: limit)
            let created = try await console.createAPIKey(name: body.name, scopes: body.scopes, by: try session(context))
            return try HTTP.json(APIKeyCreatedJSON(key: created.key, apiKey: APIKeyItemJSON(created.record)), status: .created)
        }
        change.delete("api-keys/:id") { _, context in
            try await console.revokeAPIKey(try uuid(context, "id"), by: try session(context))
            return HTTP.noContent()
        }
        change.post("webhooks") { request, context in
            let body = try await request.decode(AddWebhookBody.self, limit: limit)
            let added = try await console.addWebhook(url: body.url, events: body.events ?? ["*"], by: try session(context))
            return try HTTP.json(
                WebhookCreatedJSON(webhook: ConsoleWebhookJSON(added.endpoint, deliveries: []), secret: added.secret), status: .created)
        }
        change.post("webhooks/:id/pause") { _, context in
            try await console.setWebhookPaused(try uuid(context, "id"), paused: true, by: try session(context))
            return HTTP.noContent()
        }
        change.post("webhooks/:id/resume") { _, context in
            try await console.setWebhookPaused(try uuid(context, "id"), paused: false, by: try session(context))
            return HTTP.noContent()
        }
        change.post("webhooks/:id/rotate-secret") { _, context in
            try HTTP.json(["secret": try await console.rotateWebhookSecret(try uuid(context, "id"), by: try session(context))])
        }
        change.delete("webhooks/:id") { _, context in
            try await console.removeWebhook(try uuid(context, "id"), by: try session(context))
            return HTTP.noContent()
        }
        change.post("webhooks/:id/deliveries/:event/retry") { _, context in
            let text = context.parameters.get("event") ?? ""
            guard let event = Int64(text.hasPrefix("evt_") ? String(text.dropFirst(4)) : text) else { throw APIError.notFound }
            try await console.retryWebhookDelivery(endpoint: try uuid(context, "id"), eventID: event, by: try session(context))
            return HTTP.noContent()
        }
        change.post("signing-keys/rotate") { _, context in
            let key = try await console.rotateSigningKey(by: try session(context))
            return try HTTP.json(SigningKeyJSON(key), status: .created)
        }

        if let tenants { addTenantRoutes(gated: gated, change: change, tenants) }

        // Any other path under /admin/api: the gate answered for it already (403 without a
        // session); with one, it names nothing. A path above asked with a method it does not
        // take, or a stem of one, would miss the wildcard (the router answers 404 itself,
        // before the gate: the route map would show); those go through the gate as well.
        for (path, listed) in Self.methods {
            let taken = tenants == nil && path.hasPrefix("tenants") ? [] : listed
            for method in Self.anyMethod where !taken.contains(method) {
                gated.on(RouterPath(path), method: method) { _, _ -> Response in throw APIError.notFound }
            }
        }
        for method in Self.anyMethod {
            gated.on("**", method: method) { _, _ -> Response in throw APIError.notFound }
        }
        return api
    }

    static let anyMethod: [HTTPRequest.Method] = [.get, .post, .put, .patch, .delete]

    /// Every path of ``routes`` (and the stems between them) with the methods it takes.
    static let methods: [String: Set<HTTPRequest.Method>] = [
        "session": [.get, .delete], "session/options": [.post], "session/verify": [.post], "bootstrap": [],
        "bootstrap/options": [.post], "bootstrap/verify": [.post], "step-up": [], "step-up/options": [.post],
        "step-up/verify": [.post], "overview": [.get], "adoption": [.get], "adoption.csv": [.get], "accounts": [.get],
        "accounts/:id": [.get, .delete], "accounts/:id/disable": [.post], "accounts/:id/enable": [.post],
        "accounts/:id/revoke-sessions": [.post], "accounts/:id/passkeys": [], "accounts/:id/passkeys/:credential": [.delete],
        "accounts/:id/recovery-link": [.post], "audit": [.get], "audit.csv": [.get], "integrations": [.get], "policy": [.get],
        "admins": [.get, .post], "admins/:id": [.delete], "clients": [.post], "clients/:id": [.delete],
        "clients/:id/rotate-secret": [.post], "api-keys": [.post], "api-keys/:id": [.delete], "webhooks": [.post],
        "webhooks/:id": [.delete], "webhooks/:id/pause": [.post], "webhooks/:id/resume": [.post],
        "webhooks/:id/rotate-secret": [.post], "webhooks/:id/deliveries": [], "webhooks/:id/deliveries/:event": [],
        "webhooks/:id/deliveries/:event/retry": [.post], "signing-keys": [], "signing-keys/rotate": [.post],
        "tenants": [.get, .post], "tenants/:name": [.patch, .delete],
    ]

    /// The server's tenants, for a server operator's console session (403
    /// `operator_required` for any other); changes go through the change gate first.
    func addTenantRoutes(gated: RouterGroup<PasskeyRequestContext>, change: RouterGroup<PasskeyRequestContext>, _ tenants: TenantAdmin) {
        @Sendable func serverOperator(_ context: PasskeyRequestContext) throws -> ConsoleService.Session {
            let session = try self.session(context)
            guard session.role == .serverOperator else { throw PasskeyServiceError.operatorRoleRequired }
            return session
        }
        gated.get("tenants") { _, context in
            _ = try serverOperator(context)
            return try HTTP.json(TenantListJSON(tenants: try await tenants.list().map(TenantJSON.init)))
        }
        change.post("tenants") { request, context in
            let session = try serverOperator(context)
            let body = try await request.decode(AddTenantBody.self, limit: limit)
            let record = try await tenants.add(name: body.name, hosts: body.hosts, settings: body.settings, by: session.actor)
            return try HTTP.json(TenantJSON(record, accounts: 0), status: .created)
        }
        change.patch("tenants/:name") { request, context in
            let session = try serverOperator(context)
            let body = try await request.decode(ChangeTenantBody.self, limit: limit)
            let record = try await tenants.change(
                name: context.parameters.get("name") ?? "", hosts: body.hosts, patch: body.settings, by: session.actor)
            return try HTTP.json(TenantJSON(record, accounts: nil))
        }
        // The tenant's name typed again (`confirm`), and `deleteData` to delete what it owns.
        change.delete("tenants/:name") { request, context in
            let session = try serverOperator(context)
            let body = try await request.decode(RemoveTenantBody.self, limit: limit)
            let name = context.parameters.get("name") ?? ""
            guard body.confirm == name else {
                throw PasskeyServiceError(.confirmationMismatch, "Type the tenant's name to remove it.")
            }
            try await tenants.remove(name: name, deleteData: body.deleteData, by: session.actor)
            return HTTP.noContent()
        }
    }

    // MARK: Helpers

    func client(_ request: Request, _ context: PasskeyRequestContext) -> PasskeyService.Client {
        context.client
    }

    func session(_ context: PasskeyRequestContext) throws -> ConsoleService.Session {
        guard let session = context.console else { throw PasskeyServiceError.adminRequired }
        return session
    }

    func cookie(token: String?) -> String {
        let maxAge = token == nil ? 0 : Int(service.configuration.console.sessionLifetime.components.seconds)
        var cookie = "\(edge.consoleCookieName)=\(token ?? ""); Path=/; Max-Age=\(maxAge); HttpOnly; SameSite=Strict"
        if edge.cookieSecure { cookie += "; Secure" }
        return cookie
    }

    func signedIn(_ result: ConsoleService.SignedIn) throws -> Response {
        var headers = HTTPFields()
        headers[.setCookie] = cookie(token: result.token)
        return try HTTP.json(ConsoleSessionJSON(result.session, csrfToken: result.csrfToken, now: service.now()), headers: headers)
    }

    func days(_ request: Request) throws -> Int {
        guard let text = FormFields(request.uri.query ?? "")["days"] else { return 30 }
        guard let days = Int(text), ConsoleService.adoptionRanges.contains(days) else {
            throw PasskeyServiceError(.invalidQuery, "days must be 7, 30, 90 or 365.")
        }
        return days
    }

    func accountID(_ context: PasskeyRequestContext) throws -> UUID {
        guard let text = context.parameters.get("id"), let id = UUID(uuidString: text) else { throw PasskeyServiceError.accountNotFound }
        return id
    }

    func uuid(_ context: PasskeyRequestContext, _ name: String) throws -> UUID {
        guard let text = context.parameters.get(name), let id = UUID(uuidString: text) else {
            throw PasskeyServiceError(.notFound, "No such item.")
        }
        return id
    }

    func searchAccounts(_ request: Request) async throws -> Response {
        let query = FormFields(request.uri.query ?? "")
        let field =
            try query["by"].map { text in
                guard let field = AccountSearchField(rawValue: text) else {
                    throw PasskeyServiceError(.invalidQuery, "by is one of username, displayName, externalId, id, credentialId.")
                }
                return field
            } ?? .username
        var limit = 25
        if let text = query["limit"] {
            guard let value = Int(text), (1...100).contains(value) else {
                throw PasskeyServiceError(.invalidQuery, "limit must be 1 to 100.")
            }
            limit = value
        }
        let page = try await console.searchAccounts(
            field: field, prefix: query["q"] ?? "", after: query["after"].map { String($0) }, limit: limit)
        return try HTTP.json(
            AccountSearchJSON(accounts: page.accounts.map { AccountSummaryJSON($0.account, role: $0.role) }, next: page.next))
    }

    func auditQuery(_ request: Request, defaultLimit: Int, maximum: Int) throws -> AuditQuery {
        let query = FormFields(request.uri.query ?? "")
        func date(_ name: String) throws -> Date? {
            guard let text = query[name], !text.isEmpty else { return nil }
            if let date = ISO8601DateFormatter().date(from: String(text)) { return date }
            let day = ISO8601DateFormatter()
            day.formatOptions = [.withFullDate]
            guard let date = day.date(from: String(text)) else {
                throw PasskeyServiceError(.invalidQuery, "\(name) is an ISO 8601 date or time (2026-11-27 or 2026-11-27T10:00:00Z).")
            }
            // A day given as `to` covers that whole day.
            return name == "to" ? date.addingTimeInterval(86_400) : date
        }
        var limit = defaultLimit
        if let text = query["limit"] {
            guard let value = Int(text), (1...maximum).contains(value) else {
                throw PasskeyServiceError(.invalidQuery, "limit must be 1 to \(maximum).")
            }
            limit = value
        }
        var account: UUID?
        if let text = query["account"], !text.isEmpty {
            guard let id = UUID(uuidString: String(text)) else { throw PasskeyServiceError(.invalidQuery, "account is an account ID.") }
            account = id
        }
        var before: Int64?
        if let text = query["before"], !text.isEmpty {
            guard let id = Int64(text), id > 0 else { throw PasskeyServiceError(.invalidQuery, "before is an event number.") }
            before = id
        }
        let kind = query["kind"].map { String($0) }.flatMap { $0.isEmpty ? nil : $0 }
        let address = query["address"].map { String($0) }.flatMap { $0.isEmpty ? nil : $0 }
        return AuditQuery(
            accountID: account, kind: kind, addressPrefix: address, from: try date("from"), to: try date("to"), beforeID: before,
            limit: limit)
    }

    func auditCSV(_ events: [AuditEvent], names: [UUID: String]) -> String {
        var lines = ["id,time,kind,account_id,username,credential_id,ip_address,user_agent,detail"]
        let format = ISO8601DateFormatter()
        for event in events {
            let fields: [String] = [
                event.id.map(String.init) ?? "", format.string(from: event.time), event.kind,
                event.accountID?.uuidString.lowercased() ?? "", event.accountID.flatMap { names[$0] } ?? "",
                event.credentialID.map { Base64URLBytes($0).base64URL } ?? "", event.ipAddress ?? "", event.userAgent ?? "",
                event.detail ?? "",
            ]
            lines.append(fields.map(Self.csvField).joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// RFC 4180 quoting; a field a spreadsheet would run as a formula gets a leading quote
    /// mark (OWASP CSV injection).
    static func csvField(_ text: String) -> String {
        var value = text
        if let first = value.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { value = "'" + value }
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    func csv(_ text: String, name: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "text/csv; charset=utf-8"
        headers[.contentDisposition] = "attachment; filename=\"\(name)\""
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// The console session of the request (its cookie; nothing else is looked at), then the
/// per-address and per-administrator limits. No session: 403 `admin_required`, the same answer
/// for every route.
struct ConsoleSessionMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let console: ConsoleService
    let service: PasskeyService
    /// The console cookie's name.
    let cookieName: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let client = context.client
        let settings = service.configuration.console
        if let ip = client.ipAddress { try await limit("console-ip:\(ip)", settings.requestsPerWindow) }
        guard let token = request.cookies[cookieName]?.value, !token.isEmpty,
            let session = try await console.session(token: token)
        else { throw PasskeyServiceError.adminRequired }
        try await limit("console-admin:\(session.account.id.uuidString)", settings.requestsPerWindow)
        var context = context
        context.console = session
        return try await next(request, context)
    }

    func limit(_ key: String, _ count: Int) async throws {
        if case .limited(let retryAfter) = try await service.limiter.hit(key, limit: count, now: service.now()) {
            throw PasskeyServiceError.rateLimited(retryAfter: retryAfter)
        }
    }
}

/// A change: an allowed `Origin` (required, not only checked when present), then the role,
/// the CSRF token and the step-up (``ConsoleService/authorizeChange(_:csrfToken:)``).
struct ConsoleChangeMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let console: ConsoleService
    let allowed: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], allowed.contains(origin) else { throw APIError.csrf }
        guard let session = context.console else { throw PasskeyServiceError.adminRequired }
        try await console.authorizeChange(session, csrfToken: request.headers[.csrfToken])
        return try await next(request, context)
    }
}

/// The console's sign-in routes: a browser's request must come from an allowed origin
/// (`always`: even a same-site one must name it; no login CSRF).
struct ConsoleOriginMiddleware: RouterMiddleware {
    typealias Context = PasskeyRequestContext
    let allowed: Set<String>
    var always = false

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let origin = request.headers[.origin] {
            guard allowed.contains(origin) else { throw APIError.csrf }
        } else if always && request.headers[.secFetchSite] != nil {
            // A browser that sends Sec-Fetch-Site sends Origin on a POST too.
            throw APIError.csrf
        }
        return try await next(request, context)
    }
}

extension HTTPField.Name {
    static let csrfToken = Self("X-CSRF-Token")!
}
