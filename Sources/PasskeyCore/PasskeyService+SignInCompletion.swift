import Foundation
import PasskeyStore

extension PasskeyService {
    /// What a sign-in does besides starting its session, for the answers that need it (the
    /// native API's): the session the client held before ends, and the new session's access
    /// token is minted.
    public struct SignInCompletion: Sendable {
        /// The session the client was signed in with when it signed in again: revoked once the
        /// new one starts (no session fixation, no forgotten sessions).
        public var replacing: SignedIn?
        /// Mint an access token (JWT) for the new session.
        public var accessToken: Bool

        public init(replacing: SignedIn? = nil, accessToken: Bool = false) {
            self.replacing = replacing
            self.accessToken = accessToken
        }

        /// The session only (the compatibility routes, the console).
        public static let sessionOnly = SignInCompletion()
    }

    /// Ends the replaced session and mints the access token `completion` asks for.
    func complete(_ completion: SignInCompletion, account: Account, session: SessionRecord) async throws -> AccessTokens.Minted? {
        if let previous = completion.replacing { try await store.revokeSession(tokenHash: previous.session.tokenHash) }
        return completion.accessToken ? try await tokens.mint(account: account, session: session) : nil
    }
}
