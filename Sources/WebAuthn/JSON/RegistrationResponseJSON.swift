import Foundation

/// `RegistrationResponseJSON` (W3C WebAuthn Level 3 §5.1, `PublicKeyCredential.toJSON()` of a
/// created credential), as browsers, Android Credential Manager and iOS apps send it.
public struct RegistrationResponseJSON: Codable, Sendable {
    /// The credential ID as base64url text; the ceremony checks that it encodes ``rawId``.
    public var id: String
    /// The credential ID as bytes (base64url in JSON).
    public var rawId: Base64URLBytes
    /// The credential type (§5.8.2); the ceremony accepts only `public-key`.
    public var type: String
    /// The authenticator's attestation response.
    public var response: AuthenticatorAttestationResponseJSON
    /// `platform` or `cross-platform`, as the client reported it (§5.4.5); `nil` when not reported. Not verified.
    public var authenticatorAttachment: String?
    /// Client extension outputs (§5.7.2), such as `credProps`; `nil` when absent. Reported by the client, not
    /// signed.
    public var clientExtensionResults: [String: JSONValue]?

    /// Makes a response from its members (tests, the software authenticator); ``decode(_:)`` reads one from JSON.
    public init(
        id: String, rawId: Base64URLBytes, type: String = "public-key", response: AuthenticatorAttestationResponseJSON,
        authenticatorAttachment: String? = nil, clientExtensionResults: [String: JSONValue]? = [:]
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
    }

    /// Decodes the JSON bytes of a registration response; `malformed_json` on any shape error, except a
    /// `clientExtensionResults` that is not an object: `malformed_extension_results`.
    public static func decode(_ json: [UInt8]) throws(WebAuthnError) -> Self {
        try Self(json: JSONObject(bytes: json))
    }

    /// Reads a registration response from a parsed JSON object (unknown members are ignored:
    /// browsers add members over time; known members must have their specified types).
    public init(json: JSONObject) throws(WebAuthnError) {
        let response = try json.object("response")
        self.init(
            id: try json.string("id"), rawId: try json.bytes("rawId"), type: try json.string("type"),
            response: AuthenticatorAttestationResponseJSON(
                clientDataJSON: try response.bytes("clientDataJSON"), attestationObject: try response.bytes("attestationObject"),
                authenticatorData: try response.optionalBytes("authenticatorData"),
                transports: try response.optionalStringArray("transports"),
                publicKey: try response.optionalBytes("publicKey"), publicKeyAlgorithm: try response.optionalInt("publicKeyAlgorithm")),
            authenticatorAttachment: try json.optionalString("authenticatorAttachment"),
            clientExtensionResults: try json.clientExtensionResults())
    }
}

/// `AuthenticatorAttestationResponseJSON` (Level 3 §5.1): the JSON form of an `AuthenticatorAttestationResponse` (§5.2.1).
public struct AuthenticatorAttestationResponseJSON: Codable, Sendable {
    /// The UTF-8 JSON of ``CollectedClientData`` (§5.8.1), byte for byte as signed.
    public var clientDataJSON: Base64URLBytes
    /// The CBOR attestation object (§6.5.4): format, attestation statement and authenticator data.
    public var attestationObject: Base64URLBytes
    /// A copy of the authenticator data (§5.2.1.1); `nil` when absent. Not used by verification, which reads
    /// the copy inside ``attestationObject``.
    public var authenticatorData: Base64URLBytes?
    /// The transports the authenticator supports (§5.8.4), for later `allowCredentials`; `nil` when absent.
    public var transports: [String]?
    /// The credential public key as DER SubjectPublicKeyInfo (§5.2.1.1); `nil` when absent or when the client
    /// does not know the algorithm. Not used by verification.
    public var publicKey: Base64URLBytes?
    /// The credential's COSE algorithm identifier (§5.2.1.1), such as -7; `nil` when absent. Not used by
    /// verification.
    public var publicKeyAlgorithm: Int?

    /// Makes a response from its members; the optional convenience members default to `nil`.
    public init(
        clientDataJSON: Base64URLBytes, attestationObject: Base64URLBytes, authenticatorData: Base64URLBytes? = nil,
        transports: [String]? = nil, publicKey: Base64URLBytes? = nil, publicKeyAlgorithm: Int? = nil
    ) {
        self.clientDataJSON = clientDataJSON
        self.attestationObject = attestationObject
        self.authenticatorData = authenticatorData
        self.transports = transports
        self.publicKey = publicKey
        self.publicKeyAlgorithm = publicKeyAlgorithm
    }
}

/// `AuthenticationResponseJSON` (Level 3 §5.1, `toJSON()` of an assertion).
public struct AuthenticationResponseJSON: Codable, Sendable {
    /// The credential ID as base64url text; the ceremony checks that it encodes ``rawId``.
    public var id: String
    /// The credential ID as bytes (base64url in JSON); it selects the stored credential.
    public var rawId: Base64URLBytes
    /// The credential type (§5.8.2); the ceremony accepts only `public-key`.
    public var type: String
    /// The authenticator's assertion response.
    public var response: AuthenticatorAssertionResponseJSON
    /// `platform` or `cross-platform`, as the client reported it (§5.4.5); `nil` when not reported. Not verified.
    public var authenticatorAttachment: String?
    /// Client extension outputs (§5.7.2); `nil` when absent. Reported by the client, not signed.
    public var clientExtensionResults: [String: JSONValue]?

    /// Makes a response from its members (tests, the software authenticator); ``decode(_:)`` reads one from JSON.
    public init(
        id: String, rawId: Base64URLBytes, type: String = "public-key", response: AuthenticatorAssertionResponseJSON,
        authenticatorAttachment: String? = nil, clientExtensionResults: [String: JSONValue]? = [:]
    ) {
        self.id = id
        self.rawId = rawId
        self.type = type
        self.response = response
        self.authenticatorAttachment = authenticatorAttachment
        self.clientExtensionResults = clientExtensionResults
    }

    /// Decodes the JSON bytes of an authentication response; `malformed_json` on any shape error, except a
    /// `clientExtensionResults` that is not an object: `malformed_extension_results`.
    public static func decode(_ json: [UInt8]) throws(WebAuthnError) -> Self {
        try Self(json: JSONObject(bytes: json))
    }

    /// Reads an authentication response from a parsed JSON object.
    public init(json: JSONObject) throws(WebAuthnError) {
        let response = try json.object("response")
        self.init(
            id: try json.string("id"), rawId: try json.bytes("rawId"), type: try json.string("type"),
            response: AuthenticatorAssertionResponseJSON(
                clientDataJSON: try response.bytes("clientDataJSON"), authenticatorData: try response.bytes("authenticatorData"),
                signature: try response.bytes("signature"), userHandle: try response.optionalBytes("userHandle")),
            authenticatorAttachment: try json.optionalString("authenticatorAttachment"),
            clientExtensionResults: try json.clientExtensionResults())
    }
}

/// `AuthenticatorAssertionResponseJSON` (Level 3 §5.1): the JSON form of an `AuthenticatorAssertionResponse` (§5.2.2).
public struct AuthenticatorAssertionResponseJSON: Codable, Sendable {
    /// The UTF-8 JSON of ``CollectedClientData`` (§5.8.1), byte for byte as signed.
    public var clientDataJSON: Base64URLBytes
    /// The authenticator data (§6.1), byte for byte as signed.
    public var authenticatorData: Base64URLBytes
    /// The assertion signature over `authenticatorData || SHA-256(clientDataJSON)`, in the §6.5.5 format:
    /// DER for ECDSA, 64 raw bytes for Ed25519, the modulus length for RSA.
    public var signature: Base64URLBytes
    /// The user handle (`user.id` at registration); `nil` or empty when the authenticator returned none, as it
    /// may for a non-discoverable credential.
    public var userHandle: Base64URLBytes?

    /// Makes a response from its members; ``userHandle`` defaults to `nil`.
    public init(
        clientDataJSON: Base64URLBytes, authenticatorData: Base64URLBytes, signature: Base64URLBytes, userHandle: Base64URLBytes? = nil
    ) {
        self.clientDataJSON = clientDataJSON
        self.authenticatorData = authenticatorData
        self.signature = signature
        self.userHandle = userHandle
    }
}

/// JSON decoding at the edge, with its errors mapped onto `malformed_json`.
public enum JSONEdge {
    /// Decodes `type` from JSON bytes. Unknown keys are ignored (browsers add fields over time);
    /// every known key must have its specified JSON type.
    public static func decode<T: Decodable>(_ type: T.Type, from json: [UInt8]) throws(WebAuthnError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(json))
        } catch let error as DecodingError {
            throw WebAuthnError(.malformedJSON, describe(error))
        } catch {
            throw WebAuthnError(.malformedJSON, "the body is not valid JSON")
        }
    }

    /// A short, path-naming description of a decoding error (safe for clients: no input echoed).
    public static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            let p = codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return p.isEmpty ? "the body" : p
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(path(context.codingPath)) has the wrong JSON type"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the body is not valid JSON" }
            return "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "invalid JSON"
        }
    }
}

extension JSONObject {
    /// `clientExtensionResults` (§5.1, `AuthenticationExtensionsClientOutputsJSON`): its members, or `nil` when it
    /// is missing or `null`. Any other type is `malformed_extension_results`, the code of every other shape error
    /// in the extension outputs (``ClientExtensionOutputs``), not `malformed_json`.
    fileprivate func clientExtensionResults() throws(WebAuthnError) -> [String: JSONValue]? {
        switch node("clientExtensionResults") {
        case nil, .null?: return nil
        case .object?: return try object("clientExtensionResults").members
        default: throw WebAuthnError(.malformedExtensionResults, "clientExtensionResults is not a JSON object")
        }
    }
}
