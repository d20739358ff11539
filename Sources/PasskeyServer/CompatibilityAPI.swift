import Foundation
import HTTPTypes
import Hummingbird
import PasskeyCore
import WebAuthn

/// Routes for apps written against the reference Vapor passkey server (the article series'
/// iOS SwiftUI app and Android Credential Manager app), so they work against passkeyd unchanged:
///
/// | route | answer |
/// | --- | --- |
/// | `GET /signup?username=U` | `{"challenge": {attestation, challenge, pubKeyCredParams, rp, timeout, user}, "userId": "<uuid>"}`; 409 when taken |
/// | `POST /makeCredential?userId=<uuid>` | `{}` |
/// | `GET /authenticate?username=U` | `{challenge, timeout, rpId, allowCredentials, userVerification}`; an unknown user gets decoy options, as on the native API |
/// | `POST /authenticate?username=U` | `{"verified": true, "token": …}` (the apps ignore extra fields) |
///
/// Their quirks are accepted here and only here:
/// - The apps sign the UTF-8 bytes of the challenge *string* (`challenge.data(using: .utf8)`),
///   and use the UTF-8 bytes of the `user.id` string as the user handle. So these routes hand
///   out base64url strings of random bytes and store the strings' UTF-8 bytes as the challenge
///   and user handle; the ceremony is still single use, expiring and bound to this API.
/// - The Android app rewrites the attestation object's flags (clears ED, keeps AT), so its
///   registration authenticator data may carry extensions with ED clear. Tolerated for
///   registration on these routes; assertions stay strict.
/// - Binary fields in standard base64 with padding, `id` in base64url, and an extra top-level key
///   named after the userId: the JSON reader takes both base64 alphabets and ignores unknown keys.
/// Everything else (origin, RP ID, UV, signatures, real sign counters) is checked as on the
/// native API.
struct CompatibilityAPI: Sendable {
    static let api = PasskeyService.Profile.compatibilityAPI
    let service: PasskeyService
    let edge: EdgeConfiguration

    /// The routes (added at `/`).
    var routes: RouteCollection<PasskeyRequestContext> {
        let allowedOrigins = edge.allowedRequestOrigins(service.configuration)
        let collection = RouteCollection(context: PasskeyRequestContext.self)
        // No cross-site browser request reaches them (a page's `<img src="/signup?…">` would
        // spend its visitors' rate limit and write ceremonies), checked before anything counts.
        let routes = collection.group()
            .add(middleware: CrossSiteRequestMiddleware(allowed: allowedOrigins))
            .add(middleware: ClientRateLimitMiddleware(service: service))
            .add(middleware: JSONRequestMiddleware())
        routes.get("signup") { request, _ in try await signup(request) }
        routes.get("authenticate") { request, _ in try await authenticateOptions(request) }
        let verify = routes.group().add(middleware: JSONRequestMiddleware(bodyRequired: true))
        verify.post("makeCredential") { request, context in try await makeCredential(request, context) }
        verify.post("authenticate") { request, context in try await authenticate(request, context) }
        return collection
    }

    /// This API's ceremonies: its own name (the native API cannot finish them), the challenge and
    /// user handle as the UTF-8 bytes of strings, and the Android
    /// app's rewritten registration flags tolerated (kept in the ceremony's state at its start).
    static func profile(challenge: [UInt8]? = nil, userHandle: [UInt8]? = nil, accountID: UUID? = nil) -> PasskeyService.Profile {
        PasskeyService.Profile(
            api: api, challenge: challenge, userHandle: userHandle, accountID: accountID,
            ceremony: CeremonyProfile(unsafeToleratesRewrittenFlags: true))
    }

    /// A base64url string of 32 random bytes: what the reference server sent as a challenge.
    static func randomString() -> String { Base64URLBytes(RelyingParty.makeChallenge()).base64URL }

    struct CreationOptions: Encodable {
        struct User: Encodable {
            let id: String
            let name: String
            let displayName: String
        }
        let attestation: String
        let challenge: String
        let pubKeyCredParams: [PublicKeyCredentialParameters]
        let rp: PublicKeyCredentialRpEntity
        let timeout: Int?
        let user: User
    }

    struct SignupResponse: Encodable {
        let challenge: CreationOptions
        let userId: String
    }

    func signup(_ request: Request) async throws -> Response {
        let username = request.uri.queryParameters.get("username")
        let challenge = Self.randomString()
        let userID = Self.randomString()
        let accountID = UUID.random()
        let options = try await service.registrationOptions(
            username: username, displayName: username, signedIn: nil,
            profile: Self.profile(challenge: Array(challenge.utf8), userHandle: Array(userID.utf8), accountID: accountID))
        let body = SignupResponse(
            challenge: CreationOptions(
                attestation: options.attestation, challenge: challenge, pubKeyCredParams: options.pubKeyCredParams,
                rp: options.rp, timeout: options.timeout,
                user: .init(id: userID, name: options.user.name, displayName: options.user.displayName)),
            userId: accountID.uuidString)
        return try HTTP.json(body)
    }

    func makeCredential(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        guard let text = request.uri.queryParameters.get("userId"), let accountID = UUID(uuidString: String(text)) else {
            throw PasskeyServiceError.invalid(.invalidUserID, "userId must be the UUID /signup returned.")
        }
        let credential = try await request.decode(RegisterVerifyBody.self, limit: edge.maxBodySize).credential
        _ = try await service.finishRegistration(
            credential, name: nil, signedIn: nil, client: context.client,
            profile: Self.profile(accountID: accountID))
        return try HTTP.json([String: String]())
    }

    struct RequestOptions: Encodable {
        let challenge: String
        let timeout: Int?
        let rpId: String
        let allowCredentials: [PublicKeyCredentialDescriptorJSON]
        let userVerification: String
    }

    func authenticateOptions(_ request: Request) async throws -> Response {
        let username: String? = request.uri.queryParameters.get("username").map { String($0) }
        guard let username, !username.isEmpty else { throw PasskeyServiceError.invalid(.invalidUsername, "username is required.") }
        let challenge = Self.randomString()
        let options = try await service.authenticationOptions(
            username: username, profile: Self.profile(challenge: Array(challenge.utf8)))
        return try HTTP.json(
            RequestOptions(
                challenge: challenge, timeout: options.timeout, rpId: options.rpId,
                allowCredentials: options.allowCredentials, userVerification: options.userVerification))
    }

    struct SignedIn: Encodable {
        let verified = true
        let token: String
        let expiresAt: Date
    }

    func authenticate(_ request: Request, _ context: PasskeyRequestContext) async throws -> Response {
        let credential = try await request.decode(AuthenticateVerifyBody.self, limit: edge.maxBodySize).credential
        // The ceremony is bound to the account `GET /authenticate?username=` named; the name in
        // this URL is informational (the reference apps repeat it).
        let result = try await service.finishAuthentication(
            credential, client: context.client, profile: Self.profile())
        return try HTTP.json(SignedIn(token: result.token, expiresAt: result.session.expiresAt))
    }
}
