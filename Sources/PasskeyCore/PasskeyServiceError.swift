import WebAuthn

/// The one error type of ``PasskeyService``: a stable code, a short message for people, and where
/// it was thrown; equality on the code (the shape of `WebAuthnError`). It knows nothing of HTTP:
/// `APIError.swift` is the one place that turns codes into statuses.
public struct PasskeyServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable, machine-readable code (snake_case), documented in the API document.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
    }

    /// What failed: a rule of the service, or a WebAuthn ceremony check (`signIn`: an assertion,
    /// else a registration).
    public enum Origin: Sendable, Equatable {
        case service
        case ceremony(signIn: Bool)
    }

    public let code: Code
    public let message: String
    public let origin: Origin
    /// Seconds to wait before trying again (rate limits, busy).
    public let retryAfter: Int?
    public let file: String
    public let line: Int

    public init(_ code: Code, _ message: String, retryAfter: Int? = nil, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.origin = .service
        self.retryAfter = retryAfter
        self.file = file
        self.line = line
    }

    /// A ceremony the `WebAuthn` library refused: its code, and a message for people (the
    /// developer-facing reason goes to the log, never to the client).
    public init(_ error: WebAuthnError, signIn: Bool, message: String? = nil, file: String = #fileID, line: Int = #line) {
        code = Code(rawValue: error.code.rawValue)
        self.message = message ?? Self.message(for: error)
        origin = .ceremony(signIn: signIn)
        retryAfter = nil
        self.file = file
        self.line = line
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public static func == (lhs: Self, rhs: Code) -> Bool { lhs.code == rhs }

    public var description: String { "\(code.rawValue): \(message) (\(file):\(line))" }

    /// Short, human text per code; malformed input keeps the library's reason (it names the
    /// field and never carries foreign errors).
    private static func message(for error: WebAuthnError) -> String {
        switch error.code {
        case .challengeMismatch: "The response does not answer this challenge."
        case .originNotAllowed: "The response comes from an origin this server does not accept."
        case .rpIDHashMismatch: "The passkey was made for another site."
        case .userNotVerified: "The authenticator did not verify the user (PIN or biometrics)."
        case .userNotPresent: "The authenticator did not confirm user presence."
        case .signatureInvalid: "The passkey's signature does not verify."
        case .counterRegression: "This passkey's counter went backwards; it may have been cloned."
        case .unsupportedAlgorithm: "The passkey uses an algorithm this server does not accept."
        case .attestationUntrusted: "The authenticator's attestation is not trusted by this server."
        case .attestationInvalid: "The authenticator's attestation statement does not verify."
        case .authenticatorNotAllowed: "This kind of authenticator is not accepted here."
        case .invalidConfiguration: "Something went wrong on the server."
        default: error.reason
        }
    }
}

extension PasskeyServiceError.Code {
    public static let notSignedIn = Self(rawValue: "not_signed_in")
    public static let reauthenticationRequired = Self(rawValue: "reauthentication_required")
    public static let challengeUnknown = Self(rawValue: "challenge_unknown")
    public static let challengeExpired = Self(rawValue: "challenge_expired")
    public static let ceremonyMismatch = Self(rawValue: "ceremony_mismatch")
    public static let accountMismatch = Self(rawValue: "account_mismatch")
    public static let credentialNotFound = Self(rawValue: "credential_not_found")
    public static let credentialNotAllowed = Self(rawValue: "credential_not_allowed")
    public static let credentialAlreadyRegistered = Self(rawValue: "credential_already_registered")
    public static let usernameTaken = Self(rawValue: "username_taken")
    public static let lastPasskey = Self(rawValue: "last_passkey")
    public static let passkeyNotFound = Self(rawValue: "passkey_not_found")
    public static let sessionNotFound = Self(rawValue: "session_not_found")
    public static let accountDisabled = Self(rawValue: "account_disabled")
    public static let counterConflict = Self(rawValue: "counter_conflict")
    public static let rateLimited = Self(rawValue: "rate_limited")
    public static let busy = Self(rawValue: "busy")
    public static let invalidUsername = Self(rawValue: "invalid_username")
    public static let invalidDisplayName = Self(rawValue: "invalid_display_name")
    public static let invalidName = Self(rawValue: "invalid_name")
    public static let invalidMediation = Self(rawValue: "invalid_mediation")
    public static let invalidCredentials = Self(rawValue: "invalid_credentials")
    public static let invalidPassword = Self(rawValue: "invalid_password")
    public static let noPassword = Self(rawValue: "no_password")
    public static let noPasskey = Self(rawValue: "no_passkey")
    public static let invalidRecoveryCode = Self(rawValue: "invalid_recovery_code")
    public static let invalidRecoveryLink = Self(rawValue: "invalid_recovery_link")
    public static let invalidUserID = Self(rawValue: "invalid_user_id")
    public static let malformedJSON = Self(rawValue: "malformed_json")
    public static let invalidHints = Self(rawValue: "invalid_hints")
    public static let invalidExternalID = Self(rawValue: "invalid_external_id")
    public static let invalidRegistrationToken = Self(rawValue: "invalid_registration_token")
    public static let invalidAPIKey = Self(rawValue: "invalid_api_key")
    public static let insufficientScope = Self(rawValue: "insufficient_scope")
    public static let accountNotFound = Self(rawValue: "account_not_found")
    public static let invalidAuthorizationRequest = Self(rawValue: "invalid_authorization_request")
    public static let consentRequired = Self(rawValue: "consent_required")
    public static let signUpNotAllowed = Self(rawValue: "sign_up_not_allowed")
    public static let alreadySignedIn = Self(rawValue: "already_signed_in")
    /// A webhook URL that breaks the address rule (``OutboundURLPolicy``): 400, the message
    /// names the rule.
    public static let invalidWebhookURL = Self(rawValue: "invalid_webhook_url")
    /// Server API and admin: a field whose value the verb does not accept (scopes, webhook
    /// events, redirect URIs, an ID token algorithm); the message names it.
    public static let invalidValue = Self(rawValue: "invalid_value")
    /// Server API and admin: no such webhook endpoint, OAuth client or API key (404, as for a
    /// path that names nothing).
    public static let notFound = Self(rawValue: "not_found")
    /// An options request's `extensions` names an extension passkeyd does not ask for, has the
    /// wrong type, or cannot be used as asked (PRF without a username, a large blob write
    /// without its passkey).
    public static let invalidExtension = Self(rawValue: "invalid_extension")
    /// A `largeBlob.write` over the configured `extensions.largeBlobMaxBytes`.
    public static let largeBlobTooLarge = Self(rawValue: "large_blob_too_large")

    /// Mail (issue 43): mail is not set up here; an address that is not one; sign-up needs one;
    /// a link or code that is unknown, expired, used, another account's or another purpose's;
    /// an address another account has verified.
    public static let emailNotEnabled = Self(rawValue: "email_not_enabled")
    public static let invalidEmail = Self(rawValue: "invalid_email")
    public static let emailRequired = Self(rawValue: "email_required")
    public static let invalidEmailLink = Self(rawValue: "invalid_email_link")
    public static let invalidEmailCode = Self(rawValue: "invalid_email_code")
    public static let emailTaken = Self(rawValue: "email_taken")

    /// The operator's console (`/admin/api`): no console session (every route answers this
    /// alike, whatever else the request carries), a viewer asking for a change, a change
    /// without the session's CSRF token, a bootstrap token that is not live, a typed
    /// confirmation or a reason missing, a search out of bounds, the last administrator.
    public static let adminRequired = Self(rawValue: "admin_required")
    public static let adminRoleRequired = Self(rawValue: "admin_role_required")
    public static let csrfTokenInvalid = Self(rawValue: "csrf_token_invalid")
    public static let bootstrapInvalid = Self(rawValue: "bootstrap_invalid")
    public static let confirmationMismatch = Self(rawValue: "confirmation_mismatch")
    public static let reasonRequired = Self(rawValue: "reason_required")
    public static let invalidQuery = Self(rawValue: "invalid_query")
    public static let lastAdmin = Self(rawValue: "last_admin")

    /// Tenants (issue 44): the server API's `/api/admin/tenants` and the console's operator
    /// pages. A console session that is not a server operator's asking for them, no tenant by
    /// that name, a tenant's name, hosts or settings refused, a removal refused while the tenant
    /// has accounts.
    public static let operatorRoleRequired = Self(rawValue: "operator_role_required")
    public static let tenantNotFound = Self(rawValue: "tenant_not_found")
    public static let invalidTenant = Self(rawValue: "invalid_tenant")
    public static let tenantHasAccounts = Self(rawValue: "tenant_has_accounts")

    /// Every code the service throws (ceremony codes come from `WebAuthnError.Code`).
    public static let all: [Self] = [
        .notSignedIn, .reauthenticationRequired, .challengeUnknown, .challengeExpired, .ceremonyMismatch, .accountMismatch,
        .credentialNotFound, .credentialNotAllowed, .credentialAlreadyRegistered, .usernameTaken, .lastPasskey, .passkeyNotFound,
        .sessionNotFound, .accountDisabled, .counterConflict, .rateLimited, .busy, .invalidUsername,
        .invalidDisplayName, .invalidName, .invalidMediation, .invalidCredentials, .invalidPassword, .noPassword, .noPasskey,
        .invalidRecoveryCode, .invalidRecoveryLink, .invalidUserID, .malformedJSON, .invalidHints,
        .invalidExternalID, .invalidRegistrationToken, .invalidAPIKey, .insufficientScope, .accountNotFound, .invalidAuthorizationRequest,
        .consentRequired, .signUpNotAllowed, .alreadySignedIn, .invalidWebhookURL, .invalidValue, .notFound, .invalidExtension,
        .largeBlobTooLarge, .adminRequired, .adminRoleRequired, .csrfTokenInvalid, .bootstrapInvalid, .confirmationMismatch,
        .reasonRequired, .invalidQuery, .lastAdmin, .emailNotEnabled, .invalidEmail, .emailRequired, .invalidEmailLink,
        .invalidEmailCode, .emailTaken, .operatorRoleRequired, .tenantNotFound, .invalidTenant, .tenantHasAccounts,
    ]
}

extension PasskeyServiceError {
    package static let notSignedIn = Self(.notSignedIn, "Sign in first.")
    package static let reauthenticationRequired = Self(
        .reauthenticationRequired,
        "Sign in again with your passkey to do this (your last sign-in was too long ago).")
    package static let unknownChallenge = Self(
        .challengeUnknown, "This sign-in or sign-up attempt is unknown or was already used. Start again.")
    package static let expiredChallenge = Self(.challengeExpired, "This attempt took too long and expired. Start again.")
    package static let ceremonyMismatch = Self(.ceremonyMismatch, "This challenge belongs to another kind of ceremony.")
    package static let accountMismatch = Self(.accountMismatch, "This challenge was issued for another account.")
    package static let credentialNotFound = Self(.credentialNotFound, "This passkey is not registered here (it may have been deleted).")
    package static let credentialNotAllowed = Self(.credentialNotAllowed, "This passkey cannot be used for this account.")
    package static let credentialExists = Self(.credentialAlreadyRegistered, "This passkey is already registered.")
    package static let usernameTaken = Self(.usernameTaken, "That username is taken.")
    package static let alreadySignedIn = Self(
        .alreadySignedIn, "You are signed in to another account. Sign out first to create a new one.")
    package static let lastPasskey = Self(.lastPasskey, "This is the account's only passkey; add another before deleting it.")
    package static let passkeyNotFound = Self(.passkeyNotFound, "No such passkey on this account.")
    package static let sessionNotFound = Self(.sessionNotFound, "No such session on this account.")
    package static let accountDisabled = Self(.accountDisabled, "This account is disabled.")
    package static let counterRace = Self(.counterConflict, "This passkey was used twice at once; try again.")
    package static let busy = Self(.busy, "The server is busy checking passwords; try again shortly.", retryAfter: 2)
    package static let invalidPassword = Self(.invalidCredentials, "Wrong username or password.")
    package static let invalidRecoveryCode = Self(.invalidRecoveryCode, "That recovery code is wrong or was already used.")
    package static let invalidRecoveryLink = Self(.invalidRecoveryLink, "This recovery link is unknown, expired or already used.")
    package static let noPassword = Self(.noPassword, "This account has no password.")
    package static let invalidRegistrationToken = Self(
        .invalidRegistrationToken, "This registration token is unknown, expired or already used; ask the app for a new one.")
    package static let invalidAPIKey = Self(.invalidAPIKey, "Send a live API key as Authorization: Bearer pkd_…")
    package static let accountNotFound = Self(.accountNotFound, "No such account.")
    package static let adminRequired = Self(.adminRequired, "Sign in to the console with an administrator's passkey.")
    package static let adminRoleRequired = Self(.adminRoleRequired, "Viewers cannot change anything; ask an administrator.")
    package static let csrfTokenInvalid = Self(
        .csrfTokenInvalid, "This change lacks the console's current X-CSRF-Token; reload the console.")
    package static let bootstrapInvalid = Self(.bootstrapInvalid, "This bootstrap link is unknown, expired or already used.")
    package static let operatorRoleRequired = Self(
        .operatorRoleRequired, "Only a server operator manages tenants; ask one (passkeyd admin grant NAME --role operator).")
    package static let lastAdmin = Self(.lastAdmin, "This is the last administrator; grant the role to someone else first.")
    package static func insufficientScope(_ scope: String) -> Self { Self(.insufficientScope, "This API key lacks the \(scope) scope.") }
    package static let noPasskey = Self(.noPasskey, "Add a passkey before turning the password off.")
    package static let emailNotEnabled = Self(.emailNotEnabled, "This server does not send mail.")
    package static let emailRequired = Self(.emailRequired, "Give an email address to sign up.")
    package static let invalidEmailLink = Self(.invalidEmailLink, "This link is unknown, expired or already used. Ask for a new mail.")
    package static let emailTaken = Self(.emailTaken, "Another account has verified this address.")
    package static func invalidEmail(_ reason: String) -> Self { Self(.invalidEmail, "That is not an email address: \(reason).") }
    package static func invalidEmailCode(triesLeft: Int?) -> Self {
        guard let triesLeft, triesLeft > 0 else {
            return Self(.invalidEmailCode, "That code is wrong, expired or already used. Ask for a new mail.")
        }
        return Self(.invalidEmailCode, "That code is wrong; \(triesLeft) tries left.")
    }

    package static func rateLimited(retryAfter: Int) -> Self {
        Self(.rateLimited, "Too many attempts; try again in \(retryAfter) seconds.", retryAfter: retryAfter)
    }

    package static func invalid(_ code: Code, _ message: String) -> Self { Self(code, message) }
}
