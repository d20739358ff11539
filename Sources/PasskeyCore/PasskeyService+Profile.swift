import Foundation
import PasskeyStore
import WebAuthn

extension PasskeyService {
    /// How an API's ceremonies differ from the native API's: one value instead of a parameter per
    /// quirk. Only the compatibility routes use anything but ``native``.
    public struct Profile: Sendable {
        /// The `api` of the compatibility API's ceremonies (docs/api.md).
        public static let compatibilityAPI = "compat"
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

    /// The library's state of a registration, as kept with the ceremony. A ceremony whose state
    /// is missing or does not read can never be finished: it answers as an unknown challenge.
    package func registrationState(_ record: ChallengeRecord) throws(PasskeyServiceError) -> RegistrationState {
        guard let bytes = record.state, let state = CeremonyStateCoding.registration(bytes) else {
            throw PasskeyServiceError.unknownChallenge
        }
        return state
    }

    /// The library's state of an authentication (see ``registrationState(_:)``).
    package func authenticationState(_ record: ChallengeRecord) throws(PasskeyServiceError) -> AuthenticationState {
        guard let bytes = record.state, let state = CeremonyStateCoding.authentication(bytes) else {
            throw PasskeyServiceError.unknownChallenge
        }
        return state
    }

    package static func encoded(_ state: some JSONWritable) -> [UInt8] {
        var json = JSONWriter(capacity: 256)
        state.write(to: &json)
        return json.bytes
    }
}

/// A ceremony's state as kept with its challenge: the JSON `Codable` makes of it (so a state
/// written by one version reads in another), written by ``JSONWriter`` and read by the library's
/// strict `JSONObject` instead of Foundation's coders, which cost ~5% of a sign-in. A test holds
/// the reader to `JSONDecoder`'s result on what `JSONEncoder` and ``JSONWriter`` write.
package enum CeremonyStateCoding {
    package static func authentication(_ bytes: [UInt8]) -> AuthenticationState? {
        if let json = try? JSONObject(bytes: bytes), let challenge = try? json.bytes("challenge"),
            let requirement = try? json.string("userVerification"),
            let userVerification = UserVerificationRequirement(rawValue: requirement),
            let allowed = try? json.optionalStringArray("allowCredentials"), let credentials = identifiers(allowed),
            let hints = try? json.optionalStringArray("hints"), let profile = profile(json)
        {
            return AuthenticationState(
                challenge: challenge.bytes, userVerification: userVerification, allowCredentials: credentials, hints: hints,
                profile: profile)
        }
        return nil
    }

    package static func registration(_ bytes: [UInt8]) -> RegistrationState? {
        if let json = try? JSONObject(bytes: bytes), let challenge = try? json.bytes("challenge"),
            let requirement = try? json.string("userVerification"),
            let userVerification = UserVerificationRequirement(rawValue: requirement),
            let conditional = try? json.optionalBool("conditional"), let userHandle = try? json.bytes("userHandle"),
            let excluded = try? json.optionalStringArray("excludeCredentials"), let credentials = identifiers(excluded),
            let hints = try? json.optionalStringArray("hints"), let profile = profile(json), let extensions = extensions(json)
        {
            return RegistrationState(
                challenge: challenge.bytes, userVerification: userVerification, conditional: conditional, userHandle: userHandle.bytes,
                excludeCredentials: credentials, hints: hints, profile: profile, extensions: extensions)
        }
        return nil
    }

    /// The `extensions` member of a registration state (absent: credProps only); nil when it
    /// does not read.
    private static func extensions(_ json: JSONObject) -> RegistrationExtensionInputs? {
        guard json.has("extensions") else { return RegistrationExtensionInputs() }
        do {
            let object = try json.object("extensions")
            var inputs = RegistrationExtensionInputs(
                credProps: try object.optionalBool("credProps") ?? true, minPinLength: try object.optionalBool("minPinLength") ?? false)
            if let text = try object.optionalString("largeBlob") {
                guard let support = RegistrationExtensionInputs.LargeBlobSupport(rawValue: text) else { return nil }
                inputs.largeBlob = support
            }
            if let prf = try object.optionalObject("prf") {
                inputs.prf = .init(
                    eval: try prf.optionalObject("eval").map { eval throws(WebAuthnError) in
                        PRFValues(first: try eval.bytes("first").bytes, second: try eval.optionalBytes("second")?.bytes)
                    })
            }
            if let protection = try object.optionalObject("credentialProtection") {
                guard let policy = CredentialProtectionPolicy(rawValue: try protection.string("policy")),
                    let scope = RegistrationExtensionInputs.CredentialProtection.Scope(rawValue: try protection.string("requireFor"))
                else { return nil }
                inputs.credentialProtection = .init(
                    policy: policy, enforce: try protection.optionalBool("enforce") ?? false, requireFor: scope)
            }
            return inputs
        } catch {
            return nil
        }
    }

    /// Credential IDs as base64url text, decoded; nil if one is not.
    private static func identifiers(_ texts: [String]) -> [[UInt8]]? {
        var identifiers: [[UInt8]] = []
        identifiers.reserveCapacity(texts.count)
        for text in texts {
            guard let bytes = Base64URLBytes(encoded: text)?.bytes else { return nil }
            identifiers.append(bytes)
        }
        return identifiers
    }

    private static func profile(_ json: JSONObject) -> CeremonyProfile? {
        guard let profile = try? json.optionalObject("profile"),
            let rewritten = try? profile.optionalBool("unsafeToleratesRewrittenFlags")
        else { return nil }
        return CeremonyProfile(unsafeToleratesRewrittenFlags: rewritten)
    }
}

extension CeremonyProfile: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { $0.bool("unsafeToleratesRewrittenFlags", unsafeToleratesRewrittenFlags) }
    }
}

extension RegistrationExtensionInputs: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.bool("credProps", credProps)
            if let credentialProtection {
                members.member("credentialProtection") {
                    $0.object { protection in
                        protection.bool("enforce", credentialProtection.enforce)
                        protection.string("policy", credentialProtection.policy.rawValue)
                        protection.string("requireFor", credentialProtection.requireFor.rawValue)
                    }
                }
            }
            if let largeBlob { members.string("largeBlob", largeBlob.rawValue) }
            members.bool("minPinLength", minPinLength)
            if let prf {
                members.member("prf") {
                    $0.object { request in
                        if let eval = prf.eval {
                            request.member("eval") {
                                $0.object { values in
                                    values.string("first", eval.first.base64URL)
                                    if let second = eval.second { values.string("second", second.base64URL) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

extension AuthenticationState: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.strings("allowCredentials", allowCredentials.map(\.base64URL))
            members.string("challenge", challenge.base64URL)
            members.strings("hints", hints)
            members.member("profile") { profile.write(to: &$0) }
            members.string("userVerification", userVerification.rawValue)
        }
    }
}

extension RegistrationState: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.string("challenge", challenge.base64URL)
            members.bool("conditional", conditional)
            members.strings("excludeCredentials", excludeCredentials.map(\.base64URL))
            // Absent when only credProps was asked: the state of a plain sign-up stays as it was.
            if extensions != RegistrationExtensionInputs() { members.member("extensions") { extensions.write(to: &$0) } }
            members.strings("hints", hints)
            members.member("profile") { profile.write(to: &$0) }
            members.string("userHandle", userHandle.base64URL)
            members.string("userVerification", userVerification.rawValue)
        }
    }
}
