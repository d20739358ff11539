import Crypto
import WebAuthn

/// WebAuthn extensions (Level 3 §9, §10) as a browser and a CTAP2.1 authenticator process them
/// together: the inputs come from the options' `extensions` (Level 3 JSON encodings, bytes as
/// base64url), the authenticator outputs go into the authenticator data's extension map
/// (canonical CTAP2 CBOR, ED flag set) and the client outputs into `clientExtensionResults`.
///
/// | Extension | Registration | Authentication |
/// |---|---|---|
/// | `credProps` | `{"rk": true}` (every credential is discoverable) | — |
/// | `prf` | `hmac-secret: true`; `{"enabled", "results"?}` | `hmac-secret: <32/64 bytes>`; `{"results"}` |
/// | `credentialProtectionPolicy` | `credProtect: 1/2/3` | level 2/3 enforced |
/// | `minPinLength` | `minPinLength: <uint>` | — |
/// | `largeBlob` | `{"supported"}` | `{"blob"}` / `{"written"}` |
extension SoftwareAuthenticator {
    /// Why the client refused the ceremony, named like the `DOMException` a browser throws
    /// (`NotAllowedError`, `NotSupportedError`, `SyntaxError`, `TypeError`).
    public struct ClientError: Error, Sendable, Equatable {
        /// The `DOMException` name.
        public let name: String
        /// What was wrong, for test output.
        public let reason: String
        /// An error named `name`; equality compares names only, so tests can expect a name.
        public init(_ name: String, _ reason: String) {
            self.name = name
            self.reason = reason
        }
        public static func == (a: Self, b: Self) -> Bool { a.name == b.name }
    }

    /// What one ceremony's extension inputs produced.
    struct ExtensionOutputs {
        /// The authenticator extension outputs, written as a canonical CBOR map when any.
        var authenticatorData: [CBORMapEntry] = []
        var client: [String: JSONValue] = [:]
        var credProtect: UInt8?

        /// The extension map's bytes (CTAP2 §6 canonical: keys by encoded length, then bytewise),
        /// `nil` when there is no output, so no ED flag and no map: the shape without extensions.
        var authenticatorDataBytes: [UInt8]? {
            guard !authenticatorData.isEmpty else { return nil }
            let sorted = authenticatorData.map { (key: CBORWriter.encode($0.key), entry: $0) }.sorted { a, b in
                a.key.count != b.key.count ? a.key.count < b.key.count : a.key.lexicographicallyPrecedes(b.key)
            }
            return CBORWriter.encode(.map(sorted.map(\.entry)))
        }
    }

    /// The credProtect levels by their WebAuthn policy names (Level 3 §10.2.1; CTAP2 §12.1).
    static let credentialProtectionLevels: [String: UInt8] = [
        "userVerificationOptional": 1, "userVerificationOptionalWithCredentialIDList": 2, "userVerificationRequired": 3,
    ]

    /// The credential's CredRandom when this authenticator supports PRF: derived from the seed and
    /// the credential ID when seeded (deterministic fixtures), else 32 random bytes.
    func makePRFSecret(credentialID: [UInt8]) -> [UInt8]? {
        guard supportsPRF else { return nil }
        if let seed { return Array(SHA256.hash(data: seed + Array("prf-secret".utf8) + credentialID)) }
        return SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    /// Registration (`navigator.credentials.create`) extension processing for `credential`.
    func registrationExtensions(_ inputs: [String: JSONValue]?, credential: SoftwareCredential) throws -> ExtensionOutputs {
        var outputs = ExtensionOutputs()
        // credProps (§10.1.3) is a client output about the credential made; this authenticator
        // makes discoverable credentials only. Reported whether or not it was asked, as before
        // extensions were implemented.
        if supportsCredProps { outputs.client["credProps"] = .object(["rk": .bool(true)]) }
        guard let inputs else { return outputs }

        if let prf = inputs["prf"] {
            // §10.1.4 registration: evalByCredential is an error; eval is evaluated when the
            // authenticator can at creation (CTAP2.2 hmac-secret-mc).
            guard case .object(let members) = prf else { throw ClientError("TypeError", "prf is not an object") }
            if members["evalByCredential"] != nil {
                throw ClientError("NotSupportedError", "prf.evalByCredential is not allowed when creating a credential")
            }
            let values = try Self.prfValues(members["eval"], "prf.eval")
            if supportsPRF, credential.prfSecret != nil {
                outputs.authenticatorData.append(CBORMapEntry(.text("hmac-secret"), .bool(true)))
                var result: [String: JSONValue] = ["enabled": .bool(true)]
                if let values, evaluatesPRFAtCreation { result["results"] = Self.prfResults(values, credential: credential) }
                outputs.client["prf"] = .object(result)
            } else {
                outputs.client["prf"] = .object(["enabled": .bool(false)])
            }
        }

        if case .string(let policy)? = inputs["credentialProtectionPolicy"], let level = Self.credentialProtectionLevels[policy] {
            // §10.2.1: with enforcement, a client whose authenticator cannot apply a policy above
            // userVerificationOptional makes no credential.
            if supportsCredProtect {
                outputs.authenticatorData.append(CBORMapEntry(.text("credProtect"), .unsigned(UInt64(level))))
                outputs.credProtect = level
            } else if inputs["enforceCredentialProtectionPolicy"] == .bool(true) && level > 1 {
                throw ClientError("NotAllowedError", "the authenticator cannot apply credentialProtectionPolicy \(policy)")
            }
        }

        // §10.2.3 (CTAP2 §12.4): the authenticator's current minimum PIN length.
        if inputs["minPinLength"] == .bool(true), let minPinLength {
            outputs.authenticatorData.append(CBORMapEntry(.text("minPinLength"), .unsigned(UInt64(minPinLength))))
        }

        if let largeBlob = inputs["largeBlob"] {
            // §10.1.5 registration: `support` only; read and write belong to authentication.
            guard case .object(let members) = largeBlob else { throw ClientError("TypeError", "largeBlob is not an object") }
            if members["read"] != nil || members["write"] != nil {
                throw ClientError("NotSupportedError", "largeBlob read or write when creating a credential")
            }
            outputs.client["largeBlob"] = .object(["supported": .bool(supportsLargeBlob)])
        }
        return outputs
    }

    /// Authentication (`navigator.credentials.get`) extension processing for `credential`,
    /// which a largeBlob write changes.
    func authenticationExtensions(
        _ inputs: [String: JSONValue]?, allowCredentials: [PublicKeyCredentialDescriptorJSON], credential: inout SoftwareCredential
    ) throws -> ExtensionOutputs {
        var outputs = ExtensionOutputs()
        guard let inputs else { return outputs }

        if let prf = inputs["prf"] {
            guard case .object(let members) = prf else { throw ClientError("TypeError", "prf is not an object") }
            var values = try Self.prfValues(members["eval"], "prf.eval")
            if let byCredential = members["evalByCredential"] {
                guard case .object(let entries) = byCredential else {
                    throw ClientError("TypeError", "prf.evalByCredential is not an object")
                }
                // §10.1.4 authentication: evalByCredential names credentials of allowCredentials.
                if !entries.isEmpty && allowCredentials.isEmpty {
                    throw ClientError("NotSupportedError", "prf.evalByCredential with an empty allowCredentials")
                }
                let allowed = Set(allowCredentials.map(\.id.bytes))
                for (key, value) in entries {
                    guard let id = Base64URLBytes(encoded: key)?.bytes, !id.isEmpty, allowed.contains(id) else {
                        throw ClientError("SyntaxError", "prf.evalByCredential names a credential not in allowCredentials")
                    }
                    // The entry for the credential used wins over `eval`.
                    if id == credential.id { values = try Self.prfValues(value, "prf.evalByCredential") }
                }
            }
            if supportsPRF, let values, let first = credential.hmacSecretTransportOutput(values.first) {
                let second = values.second.flatMap { credential.hmacSecretTransportOutput($0) } ?? []
                outputs.authenticatorData.append(CBORMapEntry(.text("hmac-secret"), .bytes(first + second)))
                outputs.client["prf"] = .object(["results": Self.prfResults(values, credential: credential)])
            }
        }

        if let largeBlob = inputs["largeBlob"] {
            guard case .object(let members) = largeBlob else { throw ClientError("TypeError", "largeBlob is not an object") }
            let write = members["write"]
            if members["support"] != nil || (members["read"] == .bool(true) && write != nil) {
                throw ClientError("NotSupportedError", "largeBlob takes either read or write when signing in")
            }
            if let write {
                guard case .string(let text) = write, let blob = Base64URLBytes(encoded: text) else {
                    throw ClientError("TypeError", "largeBlob.write is not base64url")
                }
                if supportsLargeBlob { credential.largeBlob = blob.bytes }
                outputs.client["largeBlob"] = .object(["written": .bool(supportsLargeBlob)])
            } else if members["read"] == .bool(true) {
                var result: [String: JSONValue] = [:]
                if supportsLargeBlob, let blob = credential.largeBlob { result["blob"] = .string(Base64URLBytes(blob).base64URL) }
                outputs.client["largeBlob"] = .object(result)
            }
        }
        return outputs
    }

    /// CTAP2 §12.1: a credential made with credProtect 3 answers only with user verification; with
    /// 2, a discoverable request (no allow list) needs user verification too.
    func checkCredentialProtection(_ credential: SoftwareCredential, allowCredentials: [PublicKeyCredentialDescriptorJSON]) throws {
        switch credential.credProtect ?? 1 {
        case 3 where !userVerified:
            throw ClientError("NotAllowedError", "credProtect 3: the credential needs user verification")
        case 2 where !userVerified && allowCredentials.isEmpty:
            throw ClientError("NotAllowedError", "credProtect 2: a discoverable request needs user verification")
        default: break
        }
    }

    /// `AuthenticationExtensionsPRFValues` (§10.1.4) in its JSON encoding: `first` and an optional
    /// `second`, base64url. `nil` for an absent input.
    static func prfValues(_ value: JSONValue?, _ name: String) throws -> (first: [UInt8], second: [UInt8]?)? {
        guard let value else { return nil }
        guard case .object(let members) = value, case .string(let first)? = members["first"],
            let firstBytes = Base64URLBytes(encoded: first)
        else { throw ClientError("TypeError", "\(name).first is not base64url") }
        guard let second = members["second"] else { return (firstBytes.bytes, nil) }
        guard case .string(let text) = second, let secondBytes = Base64URLBytes(encoded: text) else {
            throw ClientError("TypeError", "\(name).second is not base64url")
        }
        return (firstBytes.bytes, secondBytes.bytes)
    }

    static func prfResults(_ values: (first: [UInt8], second: [UInt8]?), credential: SoftwareCredential) -> JSONValue {
        var results: [String: JSONValue] = [:]
        if let first = credential.prfOutput(values.first) { results["first"] = .string(Base64URLBytes(first).base64URL) }
        if let input = values.second, let second = credential.prfOutput(input) {
            results["second"] = .string(Base64URLBytes(second).base64URL)
        }
        return .object(results)
    }
}
