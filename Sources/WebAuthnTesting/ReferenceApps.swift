import WebAuthn

/// What the reference iOS and Android apps (the article series' Vapor passkey server clients)
/// send and read, for tests of the compatibility routes.
public enum ReferenceApps {
    /// The creation options the apps build from `GET /signup`'s answer: they hand the
    /// authenticator the UTF-8 bytes of the challenge and user ID *strings*. Also the `userId`.
    public static func creationOptions(fromSignup signup: JSONValue) -> (PublicKeyCredentialCreationOptionsJSON, userId: String)? {
        guard let options = signup["challenge"], case .string(let challenge)? = options["challenge"],
            case .string(let userID)? = options["user"]?["id"], case .string(let accountID)? = signup["userId"],
            case .string(let rpID)? = options["rp"]?["id"], case .string(let name)? = options["user"]?["name"]
        else { return nil }
        let json = PublicKeyCredentialCreationOptionsJSON(
            rp: .init(id: rpID, name: "x"), user: .init(id: Array(userID.utf8), name: name, displayName: name),
            challenge: Base64URLBytes(Array(challenge.utf8)), pubKeyCredParams: [.init(alg: .es256)], timeout: nil, excludeCredentials: [],
            authenticatorSelection: nil, hints: [], attestation: "none", extensions: nil)
        return (json, accountID)
    }

    /// The request options the apps build from `GET /authenticate`'s answer.
    public static func requestOptions(from options: JSONValue) -> PublicKeyCredentialRequestOptionsJSON? {
        guard case .string(let challenge)? = options["challenge"], case .string(let rpID)? = options["rpId"] else { return nil }
        return PublicKeyCredentialRequestOptionsJSON(
            challenge: Base64URLBytes(Array(challenge.utf8)), timeout: nil, rpId: rpID, allowCredentials: [], userVerification: "required")
    }

    /// The iOS app's registration body: standard base64 with padding for binary fields, `id` in
    /// base64url, and an extra top-level key named after the userId.
    public static func iOSBody(_ registration: RegistrationResponseJSON, userId: String) -> [UInt8] {
        Array(
            """
            {"id":"\(registration.rawId.base64URL)","rawId":"\(registration.rawId.base64)","type":"public-key",
             "response":{"clientDataJSON":"\(registration.response.clientDataJSON.base64)","attestationObject":"\(registration.response.attestationObject.base64)"},
             "\(userId)":"\(userId)"}
            """.utf8)
    }

    /// The iOS app's assertion body.
    public static func iOSBody(_ assertion: AuthenticationResponseJSON) -> [UInt8] {
        Array(
            """
            {"id":"\(assertion.rawId.base64URL)","rawId":"\(assertion.rawId.base64)","type":"public-key",
             "response":{"clientDataJSON":"\(assertion.response.clientDataJSON.base64)","authenticatorData":"\(assertion.response.authenticatorData.base64)",
             "signature":"\(assertion.response.signature.base64)","userHandle":"\(assertion.response.userHandle?.base64 ?? "")"}}
            """.utf8)
    }

    /// The Android app's rewrite of the attestation object: ED cleared, AT set, after signing.
    public static func rewriteFlags(_ registration: inout RegistrationResponseJSON) throws {
        let object = try CBORReader.decode(registration.response.attestationObject.bytes)
        guard case .map(let entries) = object else { return }
        let rewritten = entries.map { entry -> CBORMapEntry in
            guard entry.key == .text("authData"), case .bytes(var authData) = entry.value else { return entry }
            authData[32] = (authData[32] & ~0x80) | 0x40
            return CBORMapEntry(entry.key, .bytes(authData))
        }
        registration.response.attestationObject = Base64URLBytes(CBORWriter.encode(.map(rewritten)))
    }
}

extension JSONValue {
    /// The string, when this is one.
    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }
    /// The boolean, when this is one.
    public var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
    /// The number, when this is one.
    public var number: Double? {
        if case .number(let n) = self { return n }
        return nil
    }
    /// The elements, when this is an array.
    public var array: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }
}
