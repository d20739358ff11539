import Crypto

/// The key a ceremony is stored and found under: SHA-256 of its challenge. The finishing request
/// presents the challenge (inside clientDataJSON) and the store looks the row up by this hash.
/// The row keeps the raw challenge too (column `challenge`, ``ChallengeRecord/challenge``): the
/// ceremony's verification compares clientDataJSON's challenge with it, and a sign-in takes the
/// row again by it. Rows are single use and expire with their ceremony.
enum ChallengeHash {
    static func of(_ challenge: [UInt8]) -> [UInt8] { Array(SHA256.hash(data: challenge)) }
}
