import Foundation
import PasskeyStore
import WebAuthn

extension PasskeyService {
    /// How an API's ceremonies differ from the native API's: one value instead of a parameter per
    /// quirk. Only the compatibility routes use anything but ``native``.
    public struct Profile: Sendable {
        /// The API that began a ceremony; the other cannot finish it.
        public var api: String
        /// The challenge to issue (the compatibility API issues the UTF-8 bytes of a base64url
        /// string, which is what its apps sign); nil: 32 random bytes.
        public var challenge: [UInt8]?
        /// The user handle of a sign-up (likewise); nil: 64 random bytes.
        public var userHandle: [UInt8]?
        /// Sign-up: the ID the account will get; finishing: the ID the request names (`userId`),
        /// which must be the ceremony's.
        public var accountID: UUID?
        /// What the `WebAuthn` library loosens for these clients (kept in the ceremony's state).
        public var ceremony: CeremonyProfile

        public init(
            api: String, challenge: [UInt8]? = nil, userHandle: [UInt8]? = nil, accountID: UUID? = nil,
            ceremony: CeremonyProfile = .standard
        ) {
            self.api = api
            self.challenge = challenge
            self.userHandle = userHandle
            self.accountID = accountID
            self.ceremony = ceremony
        }

        /// The native API: W3C JSON, random challenges and user handles, nothing loosened.
        public static let native = Profile(api: "native")
    }

    static let stateEncoder = JSONEncoder()
    static let stateDecoder = JSONDecoder()

    /// The library's state of a registration: the one kept with the ceremony, or (for a ceremony
    /// begun before migration 6) the same built from its columns.
    func registrationState(_ record: ChallengeRecord) -> RegistrationState {
        if let bytes = record.state, let state = try? Self.stateDecoder.decode(RegistrationState.self, from: Data(bytes)) { return state }
        return RegistrationState(
            challenge: record.challenge, userVerification: UserVerificationRequirement(rawValue: record.userVerification) ?? .required,
            conditional: record.conditional, userHandle: record.pendingUserHandle ?? [],
            profile: CeremonyProfile(unsafeToleratesRewrittenFlags: record.api == CompatibilityAPI.api))
    }

    /// The library's state of an authentication (see ``registrationState(_:)``).
    func authenticationState(_ record: ChallengeRecord, offered passkey: [UInt8]) -> AuthenticationState {
        if let bytes = record.state, let state = try? Self.stateDecoder.decode(AuthenticationState.self, from: Data(bytes)) { return state }
        return AuthenticationState(
            challenge: record.challenge, userVerification: UserVerificationRequirement(rawValue: record.userVerification) ?? .required,
            allowCredentials: record.accountID == nil ? [] : [passkey])
    }

    static func encoded(_ state: some Encodable) throws -> [UInt8] {
        Array(try stateEncoder.encode(state))
    }
}
