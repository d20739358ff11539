import Foundation
import PasskeyCore
import PasskeyModels
import PasskeyStore
import WebAuthn

/// Request and response bodies of the server API (`/api/admin/…`).
struct AdminUserJSON: Encodable {
    let id: String
    let username: String
    let displayName: String
    let externalId: String?
    let createdAt: Date
    let disabled: Bool
    let lastSignInAt: Date?
    let hasPassword: Bool
    init(_ account: Account) {
        id = account.id.uuidString.lowercased()
        username = account.username
        displayName = account.displayName
        externalId = account.externalID
        createdAt = account.createdAt
        disabled = account.disabled
        lastSignInAt = account.lastSignInAt
        hasPassword = account.passwordHash != nil
    }
}

struct RegistrationTokenJSON: Encodable {
    let registrationToken: String
    let expiresAt: Date
}

struct RecoveryLinkJSON: Encodable {
    let url: String
    let token: String
    let expiresAt: Date
}

struct WebhookJSON: Encodable {
    let id: String
    let url: String
    let events: [String]
    let createdAt: Date
    let disabled: Bool
    /// Only in the answer that added it.
    let secret: String?
    init(_ endpoint: WebhookEndpoint, secret: String? = nil) {
        id = endpoint.id.uuidString.lowercased()
        url = endpoint.url
        events = endpoint.events
        createdAt = endpoint.createdAt
        disabled = endpoint.disabled
        self.secret = secret
    }
}

struct WebhookListJSON: Encodable { let endpoints: [WebhookJSON] }

struct WebhookDeliveryJSON: Encodable {
    let eventId: String
    let endpointId: String
    let attempts: Int
    let deliveredAt: Date?
    let nextAttemptAt: Date
    let lastStatus: Int?
    let lastError: String?
    init(_ delivery: WebhookDelivery) {
        eventId = "evt_\(delivery.eventID)"
        endpointId = delivery.endpointID.uuidString.lowercased()
        attempts = delivery.attempts
        deliveredAt = delivery.deliveredAt
        nextAttemptAt = delivery.nextAttemptAt
        lastStatus = delivery.lastStatus
        lastError = delivery.lastError
    }
}

struct WebhookDeliveryListJSON: Encodable { let deliveries: [WebhookDeliveryJSON] }

/// `POST /api/admin/users`.
struct CreateUserBody: APIRequestBody {
    var username: String
    var displayName: String?
    var externalId: String?
    init(json: JSONObject) throws {
        username = try json.string("username")
        displayName = try json.optionalString("displayName")
        externalId = try json.optionalString("externalId")
    }
}

/// `POST /api/admin/webhooks`.
struct AddWebhookBody: APIRequestBody {
    var url: String
    var events: [String]?
    init(json: JSONObject) throws {
        url = try json.string("url")
        events = try json.optionalStringArray("events")
    }
}

struct ClientJSON: Encodable {
    let clientId: String
    let name: String
    let redirectUris: [String]
    let postLogoutRedirectUris: [String]
    let isPublic: Bool
    let firstParty: Bool
    let allowSignUp: Bool
    let idTokenAlgorithm: String
    let createdAt: Date
    /// Only in the answer that registered a confidential client.
    let clientSecret: String?
    init(_ client: OAuthClient, secret: String? = nil) {
        clientId = client.id
        name = client.name
        redirectUris = client.redirectURIs
        postLogoutRedirectUris = client.postLogoutURIs
        isPublic = client.isPublic
        firstParty = client.firstParty
        allowSignUp = client.allowSignUp
        idTokenAlgorithm = client.idTokenAlgorithm
        createdAt = client.createdAt
        clientSecret = secret
    }
}

struct ClientListJSON: Encodable { let clients: [ClientJSON] }

/// `POST /api/admin/clients`.
struct AddClientBody: APIRequestBody {
    var name: String
    var redirectURIs: [String]
    var postLogoutURIs: [String]
    var isPublic: Bool
    var firstParty: Bool
    var allowSignUp: Bool
    var idTokenAlgorithm: String
    init(json: JSONObject) throws {
        name = try json.string("name")
        redirectURIs = try json.optionalStringArray("redirectUris") ?? []
        postLogoutURIs = try json.optionalStringArray("postLogoutRedirectUris") ?? []
        isPublic = try json.optionalBool("isPublic") ?? false
        firstParty = try json.optionalBool("firstParty") ?? false
        allowSignUp = try json.optionalBool("allowSignUp") ?? false
        idTokenAlgorithm = try json.optionalString("idTokenAlgorithm") ?? "RS256"
    }
}

// MARK: Tenants (issue 44)

/// A tenant as the server API and the console show it.
struct TenantJSON: Encodable {
    let name: String
    let hosts: [String]
    let settings: [String: JSONValue]
    let accounts: Int?
    /// Its own database's URL, password hidden; absent: the server's.
    let database: String?
    let createdAt: Date
    let updatedAt: Date

    init(_ summary: TenantAdmin.Summary) {
        self.init(summary.record, accounts: summary.accounts)
    }

    init(_ record: TenantRecord, accounts: Int?) {
        name = record.id
        hosts = record.hosts
        let stored: [String: JSONValue] =
            if case .object(let object)? = try? JSONReader.parse(Array(record.settings.utf8)) { object } else { [:] }
        settings = TenantAdmin.redacted(stored)
        self.accounts = accounts
        database = record.database.map { PostgresStore.redacted($0) }
        createdAt = record.createdAt
        updatedAt = record.updatedAt
    }
}

struct TenantListJSON: Encodable { let tenants: [TenantJSON] }

/// `POST /api/admin/tenants` (and the console's): a name, its hosts (none: the hosts of its
/// origins) and its settings, an object of the server's setting names.
struct AddTenantBody: APIRequestBody {
    var name: String
    var hosts: [String]
    var settings: Data
    init(json: JSONObject) throws {
        try Self.refuseDatabase(json)
        name = try json.string("name")
        hosts = try json.optionalStringArray("hosts") ?? []
        settings = try Self.settings(json) ?? Data("{}".utf8)
    }

    /// A database of a tenant's own names a file or a server this process opens: only
    /// `passkeyd tenant add --database`, run on the server, chooses one.
    static func refuseDatabase(_ json: JSONObject) throws {
        guard json.has("database") else { return }
        throw PasskeyServiceError(
            .invalidTenant, "A tenant's own database is chosen when it is added with passkeyd tenant add --database, on the server.")
    }

    /// The `settings` member as JSON (an object, or refused as `malformed_json`).
    static func settings(_ json: JSONObject) throws -> Data? {
        guard let object = try json.optionalObject("settings") else { return nil }
        do {
            return try JSONEncoder().encode(object.members)
        } catch {
            // A number JSON cannot write back (1e400 read as infinity).
            throw PasskeyServiceError.invalid(.malformedJSON, "settings holds a value JSON cannot carry (a number out of range?)")
        }
    }
}

/// `PATCH /api/admin/tenants/{name}`: hosts replaced when given; settings a JSON merge patch
/// (RFC 7396: `null` removes a setting).
struct ChangeTenantBody: APIRequestBody {
    var hosts: [String]?
    var settings: Data?
    init(json: JSONObject) throws {
        try AddTenantBody.refuseDatabase(json)
        hosts = try json.optionalStringArray("hosts")
        settings = try AddTenantBody.settings(json)
    }
}
