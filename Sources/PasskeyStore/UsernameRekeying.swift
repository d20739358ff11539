import Foundation

/// Brings stored comparison keys to the current ``Username`` rules (migration 5).
enum UsernameRekeying {
    typealias Row = (id: UUID, username: String, key: String)

    static func plan(_ accounts: [Row]) -> (changes: [(id: UUID, key: String)], collisions: [UsernameCollision]) {
        // Keys are compared as the database does, byte for byte (Swift's String equality would
        // call an NFD key equal to its NFC form).
        var holder: [[UInt8]: Row] = [:]
        for account in accounts { holder[Array(account.key.utf8)] = account }
        var changes: [(id: UUID, key: String)] = []
        var collisions: [UsernameCollision] = []
        for account in accounts {
            let key = Username.key(account.username)
            let bytes = Array(key.utf8)
            guard bytes != Array(account.key.utf8) else { continue }
            if let other = holder[bytes], other.id != account.id {
                collisions.append(
                    UsernameCollision(
                        key: key, accountID: account.id, username: account.username,
                        otherAccountID: other.id, otherUsername: other.username))
                continue
            }
            holder[Array(account.key.utf8)] = nil
            holder[bytes] = (account.id, account.username, key)
            changes.append((account.id, key))
        }
        return (changes, collisions)
    }
}
