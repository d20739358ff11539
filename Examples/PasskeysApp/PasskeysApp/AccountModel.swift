import Foundation
import Observation
import PasskeyClient

/// The app's state: who is signed in, their passkeys, and the last message for the person.
/// Every call goes through `PasskeyClient`; the views only read this and call its methods.
@MainActor
@Observable
final class AccountModel {
    enum State: Equatable {
        case unknown
        case signedOut
        case signedIn(PasskeyUser)
    }

    private(set) var state = State.unknown
    private(set) var passkeys: [Passkey] = []
    /// A sentence for the person (already in their language), or nil.
    var message: String?
    let client: PasskeyClient

    init(client: PasskeyClient) { self.client = client }

    /// At launch: the session kept in the Keychain, if the server still knows it.
    func restore() async {
        let user = try? await client.session()?.user
        state = user.map(State.signedIn) ?? .signedOut
        if user != nil { await reload() }
    }

    func signUp(username: String) async {
        await attempt { try await self.client.signUp(username: username).user }
    }

    /// The "Sign in" button: the passkey sheet (this account's passkeys when a name is typed).
    func signIn(username: String) async {
        await attempt { try await self.client.signIn(username: username.isEmpty ? nil : username).user }
    }

    /// Passkey AutoFill on the username field, for as long as the sign-in screen is shown. After
    /// a refused passkey it offers the others again at once; after a network or server problem
    /// it waits (the server's Retry-After when it gave one) instead of asking again and again.
    func offerAutoFill() async {
        while state == .signedOut && !Task.isCancelled {
            do {
                let user = try await client.signInWithAutoFill().user
                state = .signedIn(user)
                await reload()
                return
            } catch PasskeyClientError.cancelled {
                return  // the screen went away, or the modal sheet took over
            } catch let error as PasskeyClientError {
                message = error.message
                switch error {
                case .passkeyRemoved: continue
                case .unsupported, .authenticatorFailed: return
                case .refused(_, _, _, let retryAfter?): try? await Task.sleep(for: .seconds(max(1, retryAfter)))
                default: try? await Task.sleep(for: .seconds(5))
                }
            } catch {
                return
            }
        }
    }

    func addPasskey() async {
        await perform { _ = try await self.client.addPasskey() }
    }

    func rename(_ passkey: Passkey, to name: String) async {
        await perform { try await self.client.rename(passkey: passkey.id, to: name) }
    }

    func delete(_ passkey: Passkey) async {
        await perform { try await self.client.delete(passkey: passkey.id) }
    }

    func signOut() async {
        try? await client.signOut()
        passkeys = []
        state = .signedOut
    }

    private func attempt(_ signIn: @escaping @Sendable () async throws -> PasskeyUser) async {
        do {
            state = .signedIn(try await signIn())
            message = nil
            await reload()
        } catch {
            show(error)
        }
    }

    private func perform(_ change: @escaping @Sendable () async throws -> Void) async {
        do {
            try await change()
            message = nil
        } catch {
            show(error)
        }
        await reload()
    }

    private func reload() async {
        do {
            passkeys = try await client.passkeys()
        } catch PasskeyClientError.notSignedIn {
            state = .signedOut
        } catch {
            show(error)
        }
    }

    private func show(_ error: any Error) {
        switch error {
        case PasskeyClientError.cancelled: message = nil  // the person closed the sheet: nothing to say
        case let error as PasskeyClientError: message = error.message
        default: message = error.localizedDescription
        }
    }
}
