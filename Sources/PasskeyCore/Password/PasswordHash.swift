import Crypto
import Foundation
import WebAuthn
import _CryptoExtras

/// A stored password hash, read from its text:
/// - `$scrypt$ln=17,r=8,p=1$<salt>$<hash>` (PHC string format, standard base64 without padding):
///   every hash passkeyd makes, with scrypt from swift-crypto (BoringSSL's `EVP_PBE_scrypt`);
/// - `$2a$` / `$2b$` / `$2y$` bcrypt: hashes imported from another user table (`passkeyd
///   import`, cost ≤ 14) or made by passkeyd before scrypt (cost ≤ 16); they verify, and a
///   successful sign-in replaces them with scrypt.
///
/// The parameters are read from each stored hash, so raising the configured cost changes new
/// hashes and rehashes old ones at their next sign-in (``needsRehash(for:)``) without breaking
/// any. Absurd parameters (a stored or imported hash that would take gigabytes or minutes to
/// check) are refused when read: such a hash does not parse, and the account's password fails.
package enum PasswordHash: Sendable {
    case scrypt(Scrypt)
    case bcrypt(Bcrypt)

    /// A new hash could not be made (the key derivation failed): nothing is stored, and the
    /// request that asked for it fails (500 `internal_error`; the reason goes to the log).
    package struct HashingFailure: Error, Sendable, CustomStringConvertible {
        package let description: String
        init(_ description: String) { self.description = description }
    }

    package init?(_ text: String) {
        if text.hasPrefix("$scrypt$") {
            guard let hash = Scrypt(text) else { return nil }
            self = .scrypt(hash)
        } else if let hash = Bcrypt(text), hash.cost <= Bcrypt.maxStoredCost {
            self = .bcrypt(hash)
        } else {
            return nil
        }
    }

    /// Whether `password` is the one the hash was made from (compared in constant time).
    package func verify(_ password: String) -> Bool {
        switch self {
        case .scrypt(let hash): hash.verify(password)
        case .bcrypt(let hash): hash.verify(password)
        }
    }

    /// A bcrypt hash, or a scrypt hash weaker than `parameters`: replace it after a successful
    /// check (the password is known then, and only then).
    package func needsRehash(for parameters: Scrypt.Parameters) -> Bool {
        switch self {
        case .bcrypt: true
        case .scrypt(let hash):
            hash.parameters.logN < parameters.logN || hash.parameters.r < parameters.r || hash.parameters.p < parameters.p
        }
    }

    /// scrypt (RFC 7914) in the PHC string format.
    package struct Scrypt: Sendable, Hashable {
        package struct Parameters: Sendable, Hashable {
            /// log2 of N, the CPU and memory cost.
            package var logN: Int
            /// The block size.
            package var r: Int
            /// The parallelism (run one after the other here).
            package var p: Int

            package init(logN: Int, r: Int = 8, p: Int = 1) {
                self.logN = logN
                self.r = r
                self.p = p
            }

            /// OWASP's Password Storage Cheat Sheet: N = 2^17, r = 8, p = 1 (128 MiB).
            package static let recommended = Parameters(logN: 17)

            /// Memory one check needs: 128 · r · N bytes.
            package var memory: Int { 128 * r << logN }

            /// What a stored hash may ask for: at most 1 GiB per check and 8 times the work of
            /// the recommended parameters (r · p · N ≤ 2^23), so a planted or imported hash
            /// cannot make a sign-in take the machine.
            package var isSane: Bool {
                (1...24).contains(logN) && (1...32).contains(r) && (1...16).contains(p) && memory <= 1 << 30
                    && (r * p) << logN <= 1 << 23
            }
        }

        package let parameters: Parameters
        package let salt: [UInt8]
        package let digest: [UInt8]

        /// A new hash of `password` with a random 16-byte salt and a 32-byte digest. Throws when
        /// the parameters are out of bounds or scrypt fails (BoringSSL refuses some parameter
        /// sets, such as N ≥ 2^(16·r), and fails when it cannot allocate): a hash that was never
        /// computed is never stored, since it would never verify.
        package init(hashing password: String, parameters: Parameters) throws(HashingFailure) {
            guard parameters.isSane else { throw HashingFailure("scrypt parameters out of bounds: \(parameters)") }
            let salt = RelyingParty.randomBytes(16)
            guard let digest = Self.derive(Array(password.utf8), salt: salt, parameters: parameters, count: 32) else {
                throw HashingFailure("scrypt failed for \(parameters)")
            }
            self.init(parameters: parameters, salt: salt, digest: digest)
        }

        /// A hash with these parts (the decoy: a random digest no password derives).
        package init(parameters: Parameters, salt: [UInt8], digest: [UInt8]) {
            self.parameters = parameters
            self.salt = salt
            self.digest = digest
        }

        /// Parses `$scrypt$ln=…,r=…,p=…$salt$hash`.
        package init?(_ text: String) {
            let fields = text.split(separator: "$", omittingEmptySubsequences: false)
            guard fields.count == 5, fields[0].isEmpty, fields[1] == "scrypt" else { return nil }
            var values: [Substring: Int] = [:]
            for pair in fields[2].split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[1].count <= 3, let value = Int(parts[1]), values[parts[0]] == nil else { return nil }
                values[parts[0]] = value
            }
            guard values.count == 3, let logN = values["ln"], let r = values["r"], let p = values["p"] else { return nil }
            let parameters = Parameters(logN: logN, r: r, p: p)
            guard parameters.isSane, let salt = Self.decode(fields[3]), let digest = Self.decode(fields[4]),
                (8...64).contains(salt.count), (16...64).contains(digest.count)
            else { return nil }
            self.parameters = parameters
            self.salt = salt
            self.digest = digest
        }

        /// The PHC string.
        package var text: String {
            "$scrypt$ln=\(parameters.logN),r=\(parameters.r),p=\(parameters.p)$" + Self.encode(salt) + "$" + Self.encode(digest)
        }

        package func verify(_ password: String) -> Bool {
            guard let candidate = Self.derive(Array(password.utf8), salt: salt, parameters: parameters, count: digest.count) else {
                return false
            }
            // Constant time: every byte is compared, whatever the first difference.
            var difference: UInt8 = 0
            for (a, b) in zip(candidate, digest) { difference |= a ^ b }
            return difference == 0 && candidate.count == digest.count
        }

        static func derive(_ password: [UInt8], salt: [UInt8], parameters: Parameters, count: Int) -> [UInt8]? {
            guard
                let key = try? KDF.Scrypt.deriveKey(
                    from: password, salt: salt, outputByteCount: count, rounds: 1 << parameters.logN, blockSize: parameters.r,
                    parallelism: parameters.p, maxMemory: parameters.memory + 128 * parameters.r * parameters.p + (1 << 20))
            else { return nil }
            return key.withUnsafeBytes { Array($0) }
        }

        /// Standard base64 without padding, as the PHC format writes it.
        static func encode(_ bytes: [UInt8]) -> String {
            var text = Data(bytes).base64EncodedString()
            while text.hasSuffix("=") { text.removeLast() }
            return text
        }

        static func decode(_ text: Substring) -> [UInt8]? {
            guard !text.isEmpty, text.count <= 128, !text.contains("=") else { return nil }
            let padded = String(text) + String(repeating: "=", count: (4 - text.count % 4) % 4)
            return Data(base64Encoded: padded).map { Array($0) }
        }
    }
}
