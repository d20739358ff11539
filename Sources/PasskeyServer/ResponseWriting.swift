import Foundation
import PasskeyCore
import WebAuthn

/// The native API's hot responses, written by ``JSONWriter`` (no Codable on the sign-in path).
extension PublicKeyCredentialRequestOptionsJSON: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.member("allowCredentials") { $0.descriptors(allowCredentials) }
            members.string("challenge", challenge.base64URL)
            if let extensions { members.member("extensions") { $0.value(.object(extensions)) } }
            members.strings("hints", hints)
            members.string("rpId", rpId)
            if let timeout { members.member("timeout") { $0.integer(timeout) } }
            members.string("userVerification", userVerification)
        }
    }
}

extension UserJSON: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.string("displayName", displayName)
            members.optionalString("externalId", externalId)
            members.string("id", id)
            members.string("userHandle", userHandle)
            members.string("username", username)
        }
    }
}

extension SignInJSON: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.string("accessToken", accessToken)
            members.date("accessTokenExpiresAt", accessTokenExpiresAt)
            members.date("expiresAt", expiresAt)
            if let prfEnabled { members.bool("prfEnabled", prfEnabled) }
            members.string("token", token)
            members.member("user") { user.write(to: &$0) }
            members.bool("verified", verified)
        }
    }
}

extension PublicKeyCredentialCreationOptionsJSON: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.string("attestation", attestation)
            if let authenticatorSelection {
                members.member("authenticatorSelection") { writer in
                    writer.object { fields in
                        fields.optionalString("authenticatorAttachment", authenticatorSelection.authenticatorAttachment)
                        if let required = authenticatorSelection.requireResidentKey { fields.bool("requireResidentKey", required) }
                        fields.optionalString("residentKey", authenticatorSelection.residentKey)
                        fields.optionalString("userVerification", authenticatorSelection.userVerification)
                    }
                }
            }
            members.string("challenge", challenge.base64URL)
            members.member("excludeCredentials") { $0.descriptors(excludeCredentials) }
            if let extensions { members.member("extensions") { $0.value(.object(extensions)) } }
            members.strings("hints", hints)
            members.member("pubKeyCredParams") { writer in
                writer.array(pubKeyCredParams) { writer, parameters in
                    writer.object { fields in
                        fields.member("alg") { $0.integer(parameters.alg.rawValue) }
                        fields.string("type", parameters.type)
                    }
                }
            }
            members.member("rp") { writer in
                writer.object { fields in
                    fields.string("id", rp.id)
                    fields.string("name", rp.name)
                }
            }
            if let timeout { members.member("timeout") { $0.integer(timeout) } }
            members.member("user") { writer in
                writer.object { fields in
                    fields.string("displayName", user.displayName)
                    fields.string("id", user.id.base64URL)
                    fields.string("name", user.name)
                }
            }
        }
    }
}

extension PasskeyJSON: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.string("aaguid", aaguid)
            members.string("attestationFormat", attestationFormat)
            members.bool("backedUp", backedUp)
            members.bool("backupEligible", backupEligible)
            if let credProtect { members.member("credProtect") { $0.integer(credProtect) } }
            members.date("createdAt", createdAt)
            members.bool("deviceBound", deviceBound)
            if let discoverable { members.bool("discoverable", discoverable) }
            members.string("id", id)
            if let largeBlob { members.bool("largeBlob", largeBlob) }
            if let lastUsedAt { members.date("lastUsedAt", lastUsedAt) }
            if let minPinLength { members.member("minPinLength") { $0.integer(minPinLength) } }
            members.string("name", name)
            if let prf { members.bool("prf", prf) }
            members.optionalString("provider", provider)
            members.optionalString("providerIcon", providerIcon)
            members.strings("transports", transports)
            members.bool("userVerified", userVerified)
        }
    }
}

extension RegisterVerifyJSON: JSONWritable {
    package func write(to json: inout JSONWriter) {
        json.object { members in
            members.optionalString("accessToken", accessToken)
            if let accessTokenExpiresAt { members.date("accessTokenExpiresAt", accessTokenExpiresAt) }
            members.member("passkey") { passkey.write(to: &$0) }
            members.optionalString("token", token)
            members.member("user") { user.write(to: &$0) }
            members.bool("verified", verified)
        }
    }
}
