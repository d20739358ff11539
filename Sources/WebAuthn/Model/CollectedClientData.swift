import Foundation

/// `CollectedClientData` (WebAuthn Level 3 §5.8.1): the JSON the client built and the
/// authenticator signed (through its hash).
///
/// ```
/// { "type": "webauthn.create" | "webauthn.get", "challenge": base64url, "origin": string,
///   "crossOrigin"?: bool, "topOrigin"?: string, "tokenBinding"?: {status, id?}, ... }
/// ```
/// Members the specification may add later are ignored (§5.8.1: "extensible").
public struct CollectedClientData: Sendable {
    public let type: String
    /// The challenge as bytes (decoded from base64url).
    public let challenge: [UInt8]
    public let origin: String
    public let crossOrigin: Bool?
    public let topOrigin: String?
    /// `tokenBinding.status` when present (Level 2; Level 3 keeps the member).
    public let tokenBindingStatus: String?
    /// The exact bytes (hashed for the signature).
    public let bytes: [UInt8]

    private struct Wire: Decodable {
        var type: String
        var challenge: String
        var origin: String
        var crossOrigin: Bool?
        var topOrigin: String?
        var tokenBinding: TokenBinding?
        struct TokenBinding: Decodable { var status: String; var id: String? }
    }

    /// Parses clientDataJSON; `malformed_client_data` when it is not the JSON object above.
    public init(bytes: [UInt8]) throws(WebAuthnError) {
        guard bytes.count <= 64 * 1024 else {
            throw WebAuthnError(.malformedClientData, "clientDataJSON is larger than 64 KiB")
        }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(bytes))
        } catch let error as DecodingError {
            throw WebAuthnError(.malformedClientData, "clientDataJSON: \(JSONEdge.describe(error))")
        } catch {
            throw WebAuthnError(.malformedClientData, "clientDataJSON is not JSON")
        }
        guard let challenge = Base64.decode(wire.challenge, flavor: .any) else {
            throw WebAuthnError(.malformedClientData, "clientDataJSON.challenge is not base64url")
        }
        self.type = wire.type
        self.challenge = challenge
        self.origin = wire.origin
        self.crossOrigin = wire.crossOrigin
        self.topOrigin = wire.topOrigin
        self.tokenBindingStatus = wire.tokenBinding?.status
        self.bytes = bytes
    }
}
