/// `CollectedClientData` (WebAuthn Level 3 §5.8.1): the JSON the client built and the
/// authenticator signed (through its hash).
///
/// ```
/// { "type": "webauthn.create" | "webauthn.get", "challenge": base64url, "origin": string,
///   "crossOrigin"?: bool, "topOrigin"?: string, "tokenBinding"?: {status, id?}, ... }
/// ```
/// Members the specification may add later are ignored (§5.8.1: "extensible").
public struct CollectedClientData: Sendable {
    /// `webauthn.create` for a registration, `webauthn.get` for an authentication; checked by the ceremony.
    public let type: String
    /// The challenge as bytes (decoded from base64url).
    public let challenge: [UInt8]
    /// The fully qualified origin of the caller: `https://example.com`, or `android:apk-key-hash:…` for an Android
    /// app. Checked by the ceremony against the configured origins.
    public let origin: String
    /// `true` when the ceremony ran in an iframe not same-origin with its ancestors; `nil` when the member is
    /// absent (same as `false`).
    public let crossOrigin: Bool?
    /// The origin of the top-level page, sent only from a cross-origin iframe; `nil` when absent.
    public let topOrigin: String?
    /// `tokenBinding.status` when present (Level 2; Level 3 keeps the member).
    public let tokenBindingStatus: String?
    /// The exact bytes (hashed for the signature).
    public let bytes: [UInt8]

    /// Parses clientDataJSON; `malformed_client_data` when it is not the JSON object above.
    public init(bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= 64 * 1024 else {
            throw WebAuthnError(.malformedClientData, "clientDataJSON is larger than 64 KiB")
        }
        do throws(WebAuthnError) {
            let json = try JSONObject(node: JSONReader.parseNode(bytes), path: "clientData")
            let challengeText = try json.string("challenge")
            // §5.8.1: challenge is "the base64url encoding of the challenge provided by the Relying
            // Party". Only that spelling is accepted (no padding, no standard alphabet), so one
            // challenge has exactly one form that can answer it.
            guard let challenge = Base64.decode(challengeText, flavor: .urlUnpadded) else {
                throw WebAuthnError(.malformedClientData, "clientData.challenge is not unpadded base64url")
            }
            self.type = try json.string("type")
            self.challenge = challenge
            self.origin = try json.string("origin")
            self.crossOrigin = try json.optionalBool("crossOrigin")
            self.topOrigin = try json.optionalString("topOrigin")
            // Level 2 §5.8.1 `tokenBinding` is an object with a `status`. Older Edge and Firefox
            // builds sent a bare string here; it carries nothing to check (token binding is used
            // by no current browser), so a string is tolerated as absent, as py_webauthn does.
            if case .string? = json.node("tokenBinding") {
                self.tokenBindingStatus = nil
            } else {
                self.tokenBindingStatus = try json.optionalObject("tokenBinding")?.string("status")
            }
            self.bytes = bytes
        } catch {
            throw WebAuthnError(.malformedClientData, "clientDataJSON: \(error.reason)")
        }
    }
}
