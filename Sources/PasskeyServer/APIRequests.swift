import Hummingbird
import PasskeyCore
import WebAuthn

/// A request body of the API, read from the strict `JSONReader`'s object (fast, and exact about
/// types), so every handler gets a typed value and every body error has one shape
/// (400 `malformed_json` naming the field).
protocol APIRequestBody: Sendable {
    init(json: JSONObject) throws
}

extension Request {
    /// The body as `T`, within the configured size limit (413 past it). An empty body reads as `{}`.
    func decode<T: APIRequestBody>(_ type: T.Type, limit: Int) async throws -> T {
        let json = try await HTTP.jsonBody(self, limit: limit)
        do {
            return try T(json: json)
        } catch let error as WebAuthnError where error.code == .malformedJSON {
            throw PasskeyServiceError.invalid(.malformedJSON, error.reason)
        }
    }
}

/// `hints` of an options request (§5.8.7), validated: known values, each at most once.
private func requestedHints(in json: JSONObject) throws -> [String]? {
    guard let hints = try json.optionalStringArray("hints") else { return nil }
    guard hints.allSatisfy(ServerConfiguration.knownHints.contains), Set(hints).count == hints.count else {
        throw PasskeyServiceError.invalid(.invalidHints, "hints are security-key, client-device or hybrid, each at most once")
    }
    return hints
}

/// The `extensions` member of an options request: an object whose members are all among
/// `known` (anything else is 400 `invalid_extension`: passkeyd asks only for what it handles).
private func requestedExtensions(in json: JSONObject, known: Set<String>) throws -> [String: JSONValue] {
    guard json.has("extensions") else { return [:] }
    let object: JSONObject?
    do {
        object = try json.optionalObject("extensions")
    } catch {
        throw PasskeyServiceError(.invalidExtension, "extensions must be an object")
    }
    let members = object?.members ?? [:]
    for key in members.keys where !known.contains(key) {
        throw PasskeyServiceError(
            .invalidExtension,
            "extensions may name \(known.sorted().joined(separator: ", ")); \(String(key.prefix(64)).debugDescription) is not one")
    }
    return members
}

/// `extensions.prf`: `true` or `false`.
private func requestedPRF(_ members: [String: JSONValue]) throws -> Bool {
    switch members["prf"] {
    case nil, .null?: return false
    case .bool(let flag)?: return flag
    default: throw PasskeyServiceError(.invalidExtension, "extensions.prf must be true or false")
    }
}

/// `POST /api/auth/register/options`.
struct RegisterOptionsBody: APIRequestBody {
    var username: String?
    var displayName: String?
    /// Overrides the configured hints for this ceremony.
    var hints: [String]?
    /// `"mediation": "conditional"`: options meant for automatic passkey creation.
    var conditional: Bool
    /// From the app's server (`POST /api/admin/users/{id}/registration-token`): enrol a passkey
    /// for that account without a session.
    var registrationToken: String?
    /// `extensions`: `{"prf": true, "largeBlob": "preferred" | "required"}`.
    var extensions: PasskeyService.RegistrationExtensionRequest
    /// Sign-up: the account's address (`email.signUp`; docs/email.md).
    var email: String?

    init(json: JSONObject) throws {
        let members = try requestedExtensions(in: json, known: ["prf", "largeBlob"])
        extensions = .init(prf: try requestedPRF(members))
        switch members["largeBlob"] {
        case nil, .null?: break
        case .string(let text)? where RegistrationExtensionInputs.LargeBlobSupport(rawValue: text) != nil:
            extensions.largeBlob = RegistrationExtensionInputs.LargeBlobSupport(rawValue: text)
        default: throw PasskeyServiceError(.invalidExtension, "extensions.largeBlob must be \"preferred\" or \"required\"")
        }
        registrationToken = try json.optionalString("registrationToken")
        email = try json.optionalString("email")
        username = try json.optionalString("username")
        displayName = try json.optionalString("displayName")
        hints = try requestedHints(in: json)
        switch try json.optionalString("mediation") {
        case nil, "optional", "required", "silent": conditional = false
        case "conditional": conditional = true
        case let other?:
            throw PasskeyServiceError.invalid(.invalidMediation, "mediation \"\(other)\" is not conditional, optional, required or silent")
        }
    }
}

/// `{credential: …}` as documented; a bare response JSON (what Credential Manager returns) is
/// accepted as well, and `{assertion: …}` for a sign-in (the web client of a widely copied guide
/// sends `{username, assertion}`; the username is not needed: the assertion names its passkey).
private func credentialObject(in json: JSONObject, assertion: Bool = false) throws -> JSONObject {
    if json.has("credential") { return try json.object("credential") }
    if assertion, json.has("assertion") { return try json.object("assertion") }
    guard json.has("rawId") || json.has("response") else { throw PasskeyServiceError.invalid(.malformedJSON, "credential is missing") }
    return json
}

/// `POST /api/auth/register/verify` (and the compatibility `POST /makeCredential`).
struct RegisterVerifyBody: APIRequestBody {
    var credential: RegistrationResponseJSON
    var name: String?
    /// One of the account's passkeys the new one replaces.
    var replaces: [UInt8]?
    /// Sent the guide's way (`{username, credential}`): a client that decodes with `atob`.
    var decodesWithAtob: Bool

    init(json: JSONObject) throws {
        credential = try RegistrationResponseJSON(json: credentialObject(in: json))
        decodesWithAtob = json.has("username")
        name = try json.optionalString("name")
        if let id = try json.optionalString("replaces") {
            guard let bytes = Base64URLBytes(encoded: id)?.bytes, !bytes.isEmpty else { throw PasskeyServiceError.passkeyNotFound }
            replaces = bytes
        }
    }
}

/// `POST /api/auth/authenticate/options`.
struct AuthenticateOptionsBody: APIRequestBody {
    var username: String?
    var hints: [String]?
    /// `extensions`: `{"prf": true, "largeBlob": {"read": true} | {"write": "<base64url>"}}`.
    var extensions = PasskeyService.SignInExtensionRequest()
    /// `credentialId`: offer only this passkey of the account (a large blob write names it).
    var credentialID: [UInt8]?
    /// `"mediation": "conditional"`: options for the browser's AutoFill (counted apart from a
    /// button's sign-ins in the adoption chart).
    var conditional = false

    init(json: JSONObject) throws {
        username = try json.optionalString("username")
        switch try json.optionalString("mediation") {
        case nil, "optional", "required", "silent": conditional = false
        case "conditional": conditional = true
        case let other?:
            throw PasskeyServiceError.invalid(.invalidMediation, "mediation \"\(other)\" is not conditional, optional, required or silent")
        }
        hints = try requestedHints(in: json)
        let members = try requestedExtensions(in: json, known: ["prf", "largeBlob"])
        extensions.prf = try requestedPRF(members)
        if let largeBlob = members["largeBlob"], largeBlob != .null {
            if case .object(let request) = largeBlob, request.count == 1 {
                if request["read"] == .bool(true) {
                    extensions.largeBlob = .read
                } else if case .string(let text)? = request["write"], let blob = Base64URLBytes(encoded: text) {
                    extensions.largeBlob = .write(blob)
                }
            }
            guard extensions.largeBlob != nil else {
                throw PasskeyServiceError(
                    .invalidExtension, "extensions.largeBlob must be {\"read\": true} or {\"write\": \"<base64url>\"}")
            }
        }
        if let text = try json.optionalString("credentialId") {
            guard let bytes = Base64URLBytes(encoded: text)?.bytes, (1...AuthenticatorData.maxCredentialIDLength).contains(bytes.count)
            else {
                throw PasskeyServiceError.invalid(.malformedJSON, "credentialId is not a base64url credential ID")
            }
            credentialID = bytes
        }
    }
}

/// `POST /api/auth/authenticate/verify` (and the compatibility `POST /authenticate`).
struct AuthenticateVerifyBody: APIRequestBody {
    var credential: AuthenticationResponseJSON
    /// Sent the guide's way (`{username, assertion}`): a client that decodes with `atob`.
    var decodesWithAtob: Bool
    init(json: JSONObject) throws {
        credential = try AuthenticationResponseJSON(json: credentialObject(in: json, assertion: true))
        decodesWithAtob = !json.has("credential") && json.has("assertion")
    }
}

/// `POST /api/auth/password/sign-in`.
struct PasswordSignInBody: APIRequestBody {
    var username: String?
    var password: String?
    init(json: JSONObject) throws {
        username = try json.optionalString("username")
        password = try json.optionalString("password")
    }
}

/// `POST /api/auth/password`.
struct ChangePasswordBody: APIRequestBody {
    var newPassword: String?
    init(json: JSONObject) throws { newPassword = try json.optionalString("newPassword") }
}

/// `POST /api/auth/recovery/sign-in`.
struct RecoverySignInBody: APIRequestBody {
    var username: String?
    var code: String?
    init(json: JSONObject) throws {
        username = try json.optionalString("username")
        code = try json.optionalString("code")
    }
}

/// `POST /api/auth/recovery/link`.
struct RecoveryLinkBody: APIRequestBody {
    var token: String?
    init(json: JSONObject) throws { token = try json.optionalString("token") }
}

/// `PATCH /api/auth/passkeys/{id}`.
struct RenamePasskeyBody: APIRequestBody {
    var name: String
    init(json: JSONObject) throws { name = try json.string("name") }
}
