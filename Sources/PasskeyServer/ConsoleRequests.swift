import Foundation
import PasskeyCore
import PasskeyModels
import WebAuthn

// The console API's request bodies (docs/admin.md); its answers are in ConsoleModels.swift.

/// `POST /admin/api/bootstrap/options|verify`.
struct ConsoleBootstrapBody: APIRequestBody {
    var token: String
    var username: String?
    var displayName: String?
    var credential: RegistrationResponseJSON?
    init(json: JSONObject) throws {
        token = try json.optionalString("token") ?? ""
        username = try json.optionalString("username")
        displayName = try json.optionalString("displayName")
        if json.has("credential") { credential = try RegistrationResponseJSON(json: try json.object("credential")) }
    }
}

/// `{reason}`: why a recovery link is issued.
struct ReasonBody: APIRequestBody {
    var reason: String?
    init(json: JSONObject) throws { reason = try json.optionalString("reason") }
}

/// `{confirm}`: the account's username, typed.
struct ConfirmBody: APIRequestBody {
    var confirm: String?
    init(json: JSONObject) throws { confirm = try json.optionalString("confirm") }
}

/// `{confirm, deleteData}`: a tenant's removal, its name typed again.
struct RemoveTenantBody: APIRequestBody {
    var confirm: String?
    var deleteData: Bool
    init(json: JSONObject) throws {
        confirm = try json.optionalString("confirm")
        deleteData = try json.optionalBool("deleteData") ?? false
    }
}

/// `{account, role}`: grant a console role to an account (username or ID).
struct GrantBody: APIRequestBody {
    var account: String
    var role: AdminRole
    init(json: JSONObject) throws {
        account = try json.optionalString("account") ?? ""
        guard let role = AdminRole(rawValue: try json.optionalString("role") ?? "") else {
            throw PasskeyServiceError(.invalidValue, "role is admin or viewer.")
        }
        self.role = role
    }
}

/// `{name, scopes}`: a new API key.
struct CreateKeyBody: APIRequestBody {
    var name: String
    var scopes: [String]
    init(json: JSONObject) throws {
        name = try json.optionalString("name") ?? ""
        scopes = try json.optionalStringArray("scopes") ?? []
    }
}
