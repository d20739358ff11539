import AuthenticationServices
import PasskeyClient
import SwiftUI

/// The app of the reference articles, done with the package: one relying party for the web and
/// the app, passkeys created and used through AuthenticationServices, sessions in the Keychain.
@main
struct PasskeysApp: App {
    @State private var model = AccountModel(
        client: PasskeyClient(
            server: URL(string: "https://login.example.com")!,
            authenticator: ApplePasskeyAuthenticator { Self.keyWindow() }))

    var body: some Scene {
        WindowGroup {
            ContentView()
                .environment(model)
                .task { await model.restore() }
        }
    }

    /// The window the passkey sheet appears over.
    @MainActor
    static func keyWindow() -> ASPresentationAnchor {
        let windows = UIApplication.shared.connectedScenes.compactMap { $0 as? UIWindowScene }.flatMap(\.windows)
        return windows.first(where: \.isKeyWindow) ?? windows.first ?? ASPresentationAnchor()
    }
}
