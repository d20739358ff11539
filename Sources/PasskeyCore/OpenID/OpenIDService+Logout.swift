import Foundation
import PasskeyStore

extension OpenIDService {
    /// The parameters of an RP-initiated logout request.
    public struct LogoutRequest: Sendable {
        public var idTokenHint: String?
        public var clientID: String?
        public var postLogoutRedirectURI: String?
        public var state: String?

        public init(idTokenHint: String?, clientID: String?, postLogoutRedirectURI: String?, state: String?) {
            self.idTokenHint = idTokenHint
            self.clientID = clientID
            self.postLogoutRedirectURI = postLogoutRedirectURI
            self.state = state
        }
    }

    /// What `GET /oauth2/logout` answers.
    public enum LogoutOutcome: Sendable, Equatable {
        /// A request that cannot be honoured (a hint that is not passkeyd's ID token, a client
        /// that is not its audience, an unregistered address): an error page, no sign-out.
        case refused(OpenIDPage)
        /// Someone is signed in but the request does not prove it comes from their app: the
        /// page asks them to sign out themselves, and nothing changes.
        case confirm(OpenIDPage)
        /// The browser's session (if any) is over: clear its cookie, and go to `redirect` (the
        /// registered address, with `state`) or show the "Signed out" page.
        case signedOut(redirect: String?)
    }

    /// `GET /oauth2/logout` (RP-Initiated Logout 1.0): ends the browser's passkeyd session and
    /// returns to a `post_logout_redirect_uri` registered for the client. Only an `id_token_hint`
    /// that is an ID token passkeyd issued to the signed-in person ends the session: anything
    /// else (a link on another site, an image) asks the person instead (§2: the OP should
    /// confirm), so nobody can be signed out from elsewhere.
    public func logout(_ request: LogoutRequest, signedIn: PasskeyService.SignedIn?) async throws -> LogoutOutcome {
        var hinted: (audience: String, subject: String)?
        if let hint = request.idTokenHint {
            // §2: "When an id_token_hint parameter is present, the OP MUST validate that it was
            // the issuer of the ID Token." An access token, or a token of another issuer, is not one.
            guard let own = try await service.tokens.idTokenHint(hint) else {
                return .refused(
                    OpenIDPage("Invalid sign-out request", "The application sent a sign-out hint that is not an ID token from here."))
            }
            hinted = own
        }
        // §2: "When both client_id and id_token_hint are present, the OP MUST verify that the
        // Client Identifier matches the one used when issuing the ID Token."
        if let given = request.clientID, let hinted, given != hinted.audience {
            return .refused(
                OpenIDPage("Invalid sign-out request", "The application named in the sign-out request did not receive its hint."))
        }
        let clientID = request.clientID ?? hinted?.audience
        var redirect: String?
        if let target = request.postLogoutRedirectURI {
            guard let clientID, let client = try await store.oauthClient(id: clientID), client.postLogoutURIs.contains(target) else {
                return .refused(
                    OpenIDPage("Invalid sign-out address", "The application asked to return to an address it did not register."))
            }
            redirect = Self.location(target, ["state": request.state])
        }
        if let signedIn {
            guard hinted?.subject == signedIn.account.id.uuidString.lowercased() else {
                return .confirm(
                    OpenIDPage(
                        "Sign out?",
                        "An application asked to sign you out of passkeyd. To sign out, use the Sign out button on your account page."))
            }
            try await store.revokeSession(tokenHash: signedIn.session.tokenHash)
            await service.audit(.sessionRevoked, accountID: signedIn.account.id, client: PasskeyService.Client(), detail: "oidc_logout")
        }
        return .signedOut(redirect: redirect)
    }
}
