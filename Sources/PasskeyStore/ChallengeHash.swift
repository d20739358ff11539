import Crypto

/// Ceremonies are stored under SHA-256 of their challenge: the finishing request presents the
/// challenge (inside clientDataJSON), and the table never holds a lookup key equal to it.
enum ChallengeHash {
    static func of(_ challenge: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: challenge)) }
}
