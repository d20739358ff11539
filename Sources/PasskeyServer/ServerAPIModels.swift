import Foundation
import PasskeyCore
import PasskeyModels
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
