import Crypto
import Foundation

/// AES-256-GCM with a PRF-derived key, in the format `passkeyd.js` reads and writes:
/// `nonce (12 random bytes) || ciphertext || tag (16 bytes)`, base64url (no padding) as text.
/// Additional data, when given, is authenticated and not stored: pass the same to open.
///
/// ```swift
/// let text = try PasskeyEncryption.sealText(Data("my note".utf8), using: key)
/// let note = try PasskeyEncryption.open(text: text, using: key)
/// ```
public enum PasskeyEncryption {
    /// The smallest sealed box: a nonce and a tag around an empty message.
    static let overhead = 12 + 16

    /// Encrypts `plaintext` under `key` with a fresh random nonce.
    public static func seal(_ plaintext: Data, using key: SymmetricKey, authenticating additionalData: Data? = nil) throws -> Data {
        let box: AES.GCM.SealedBox
        do {
            if let additionalData {
                box = try AES.GCM.seal(plaintext, using: key, authenticating: additionalData)
            } else {
                box = try AES.GCM.seal(plaintext, using: key)
            }
        } catch {
            throw PasskeyClientError.invalidArgument("AES-GCM needs a 128, 192 or 256-bit key")
        }
        // A 12-byte nonce makes `combined` exactly nonce || ciphertext || tag.
        guard let combined = box.combined else { throw PasskeyClientError.invalidArgument("AES-GCM gave no combined form") }
        return combined
    }

    /// Decrypts what ``seal(_:using:authenticating:)`` made; ``PasskeyClientError/decryptionFailed``
    /// for another key, other additional data, or altered or truncated bytes.
    public static func open(_ sealed: Data, using key: SymmetricKey, authenticating additionalData: Data? = nil) throws -> Data {
        guard sealed.count >= overhead else { throw PasskeyClientError.decryptionFailed }
        do {
            let box = try AES.GCM.SealedBox(combined: sealed)
            if let additionalData { return try AES.GCM.open(box, using: key, authenticating: additionalData) }
            return try AES.GCM.open(box, using: key)
        } catch {
            throw PasskeyClientError.decryptionFailed
        }
    }

    /// ``seal(_:using:authenticating:)`` as base64url text.
    public static func sealText(_ plaintext: Data, using key: SymmetricKey, authenticating additionalData: Data? = nil) throws -> String {
        Base64URL.encode(try seal(plaintext, using: key, authenticating: additionalData))
    }

    /// ``open(_:using:authenticating:)`` of base64url text.
    public static func open(text: String, using key: SymmetricKey, authenticating additionalData: Data? = nil) throws -> Data {
        guard let sealed = Base64URL.decode(text) else { throw PasskeyClientError.decryptionFailed }
        return try open(sealed, using: key, authenticating: additionalData)
    }
}
