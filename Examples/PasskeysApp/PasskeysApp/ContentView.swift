import PasskeyClient
import SwiftUI

struct ContentView: View {
    @Environment(AccountModel.self) private var model

    var body: some View {
        NavigationStack {
            switch model.state {
            case .unknown: ProgressView()
            case .signedOut: SignInView()
            case .signedIn(let user): AccountView(user: user)
            }
        }
    }
}

/// Sign-up and sign-in; passkey AutoFill on the username field while this screen is shown.
struct SignInView: View {
    @Environment(AccountModel.self) private var model
    @State private var username = ""

    var body: some View {
        Form {
            Section {
                TextField("Username", text: $username)
                    .textContentType(.username)  // the keyboard offers this site's passkeys here
                    .textInputAutocapitalization(.never)
                    .autocorrectionDisabled()
            }
            Section {
                Button("Sign in with a passkey") { Task { await model.signIn(username: username) } }
                Button("Create an account") { Task { await model.signUp(username: username) } }
                    .disabled(username.isEmpty)
            }
            if let message = model.message {
                Text(message).foregroundStyle(.red)
            }
        }
        .navigationTitle("Sign in")
        .task { await model.offerAutoFill() }  // cancelled when the screen goes away
    }
}

/// The account's passkeys: add, rename (tap), delete (swipe), sign out.
struct AccountView: View {
    @Environment(AccountModel.self) private var model
    let user: PasskeyUser
    @State private var renaming: Passkey?
    @State private var newName = ""

    var body: some View {
        List {
            Section("Passkeys") {
                ForEach(model.passkeys) { passkey in
                    Button {
                        newName = passkey.name
                        renaming = passkey
                    } label: {
                        VStack(alignment: .leading) {
                            Text(passkey.name)
                            Text(passkey.provider ?? (passkey.backedUp ? "Synced passkey" : "On this device"))
                                .font(.caption).foregroundStyle(.secondary)
                        }
                    }
                }
                .onDelete { offsets in
                    let doomed = offsets.map { model.passkeys[$0] }
                    Task { for passkey in doomed { await model.delete(passkey) } }
                }
                Button("Add a passkey") { Task { await model.addPasskey() } }
            }
            if let message = model.message {
                Text(message).foregroundStyle(.red)
            }
            Button("Sign out", role: .destructive) { Task { await model.signOut() } }
        }
        .navigationTitle(user.displayName)
        .alert("Rename passkey", isPresented: Binding(get: { renaming != nil }, set: { if !$0 { renaming = nil } })) {
            TextField("Name", text: $newName)
            Button("Save") {
                if let passkey = renaming { Task { await model.rename(passkey, to: newName) } }
            }
            Button("Cancel", role: .cancel) {}
        }
    }
}
