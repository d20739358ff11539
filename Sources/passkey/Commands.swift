import ArgumentParser
import Foundation
import WebAuthn
import WebAuthnTesting

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create an account with a new passkey (or add one to the signed-in account with --add).")

    @OptionGroup var options: ClientOptions
    @Option(help: "The account's username.") var username: String?
    @Option(name: .customLong("display-name"), help: "Display name (default: the username).") var displayName: String?
    @Option(name: .customLong("key-type"), help: "es256, ed25519 or rs256.") var keyType: String = "es256"
    @Flag(help: "Add a passkey to the account this store is signed in to, instead of signing up.") var add = false

    func run() async throws {
        let api = API(server: try options.serverURL(), origin: try options.claimedOrigin())
        guard let type = SoftwareCredential.KeyType(rawValue: keyType) else {
            throw ValidationError("--key-type must be es256, ed25519 or rs256")
        }
        if !add && (username ?? "").isEmpty { throw ValidationError("--username is required to sign up (or use --add)") }
        let keychain = options.keychain()
        var contents = try keychain.load()
        let token = add ? contents.sessions[options.server] : nil
        if add && token == nil { throw Failure("not signed in to \(options.server); run `passkey sign-in` first") }

        var body: [String: String] = [:]
        if !add {
            body["username"] = username
            body["displayName"] = displayName ?? username
        }
        let optionsAnswer = try await api.call(
            .POST, "/api/auth/register/options", json: Array(try JSONEncoder().encode(body)), token: token)
        let creation = try API.decode(PublicKeyCredentialCreationOptionsJSON.self, optionsAnswer, what: "creation options")
        var authenticator = SoftwareAuthenticator()
        authenticator.keyType = type
        authenticator.aaguid = AAGUID("0a55c0de-7e57-4ab1-8c1f-000000000001") ?? authenticator.aaguid
        authenticator.transports = ["internal"]
        var (registration, credential) = try authenticator.register(options: creation, origin: api.origin)
        registration.clientExtensionResults = Postable.results(registration.clientExtensionResults)
        let verify = try await api.call(
            .POST, "/api/auth/register/verify", json: Array(try JSONEncoder().encode(Wrapped(credential: registration))), token: token)

        contents.passkeys.append(.init(server: options.server, credential: credential, createdAt: Date()))
        if let newToken = verify.json["token"]?.text { contents.sessions[options.server] = newToken }
        try keychain.save(contents)
        let user = verify.json["user"]?["username"]?.text ?? credential.userName
        print(
            "Registered a \(type.algorithm) passkey for \(user) on \(options.server) (credential \(Base64URLBytes(credential.id).base64URL))."
        )
        if !add { print("Signed in as \(user); the session is saved in \(keychain.path).") }
    }
}

struct SignIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sign-in", abstract: "Sign in with a stored passkey (discoverable, or username-first with --username).")

    @OptionGroup var options: ClientOptions
    @Option(help: "Sign in to this account (its passkeys are listed in allowCredentials).") var username: String?

    func run() async throws {
        let api = API(server: try options.serverURL(), origin: try options.claimedOrigin())
        let keychain = options.keychain()
        var contents = try keychain.load()
        let body = username.map { ["username": $0] } ?? [:]
        let optionsAnswer = try await api.call(.POST, "/api/auth/authenticate/options", json: Array(try JSONEncoder().encode(body)))
        let request = try API.decode(PublicKeyCredentialRequestOptionsJSON.self, optionsAnswer, what: "request options")
        let allowed = Set(request.allowCredentials.map(\.id.bytes))
        // Like a provider: passkeys for this RP ID, in allowCredentials when the server named some.
        guard
            let index = contents.passkeys.lastIndex(where: { entry in
                entry.credential.rpID == request.rpId && (allowed.isEmpty || allowed.contains(entry.credential.id))
                    && (username == nil || allowed.isEmpty == false || entry.credential.userName == username)
            })
        else {
            throw Failure(
                "no passkey for \(request.rpId)\(username.map { " and \($0)" } ?? "") in \(keychain.path); run `passkey register` first")
        }
        var credential = contents.passkeys[index].credential
        var assertion = try SoftwareAuthenticator().authenticate(options: request, origin: api.origin, credential: &credential)
        assertion.clientExtensionResults = Postable.results(assertion.clientExtensionResults)
        let verify = try await api.call(
            .POST, "/api/auth/authenticate/verify", json: Array(try JSONEncoder().encode(Wrapped(credential: assertion))))
        contents.passkeys[index].credential = credential
        if let token = verify.json["token"]?.text { contents.sessions[options.server] = token }
        try keychain.save(contents)
        print(
            "Signed in as \(verify.json["user"]?["username"]?.text ?? credential.userName) on \(options.server) (signature counter \(credential.signCount))."
        )
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List the stored passkeys, and the server's view of the signed-in account.")

    @OptionGroup var options: ClientOptions

    func run() async throws {
        let keychain = options.keychain()
        let contents = try keychain.load()
        if contents.passkeys.isEmpty { print("No passkeys in \(keychain.path).") }
        for entry in contents.passkeys {
            print(
                "\(entry.credential.userName)  \(entry.credential.rpID)  \(entry.credential.keyType.algorithm)  counter \(entry.credential.signCount)  \(entry.server)  \(Base64URLBytes(entry.credential.id).base64URL)"
            )
        }
        guard let token = contents.sessions[options.server] else { return }
        let api = API(server: try options.serverURL(), origin: try options.claimedOrigin())
        let answer = try await api.call(.GET, "/api/auth/passkeys", token: token)
        guard case .array(let passkeys)? = answer.json["passkeys"] else { return }
        print("On \(options.server), the signed-in account has \(passkeys.count) passkey(s):")
        for passkey in passkeys {
            print(
                "  \(passkey["name"]?.text ?? "?")  created \(passkey["createdAt"]?.text ?? "?")  last used \(passkey["lastUsedAt"]?.text ?? "never")  \(passkey["id"]?.text ?? "")"
            )
        }
    }
}
