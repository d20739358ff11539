import Foundation

// Password hashes upgraded at sign-in (issue 35: imported bcrypt, or scrypt below the configured
// cost, is replaced by the current scrypt once the password is known).
extension SQLStore {
    public func rehashPassword(accountID: UUID, from old: String, to new: String) async throws -> Bool {
        try await writer.run(
            "UPDATE accounts SET password_hash = \(new) WHERE tenant_id = \(tenant) AND id = \(accountID) AND password_hash = \(old) RETURNING 1"
        ) == 1
    }
}
