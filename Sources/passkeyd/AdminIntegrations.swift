import ArgumentParser
import Foundation
import PasskeyCore
import PasskeyServer
import PasskeyStore
import WebAuthn

/// `passkeyd admin keys|api-keys|webhooks|registration-token`: what apps that trust passkeyd
/// need (docs/integration.md). The server API (`/api/admin`) runs the same `AdminService`.
extension Admin {
    struct Keys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Access-token signing keys: list them, or rotate to a new one.", subcommands: [List.self, Rotate.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every key not yet retired (never the private key).")
            @OptionGroup var options: ServerOptions
            func run() async throws {
                try await AdminContext.with(options) { context in
                    let now = Date()
                    for key in try await context.store.signingKeys(now: now) {
                        let state = key.activatesAt > now ? "published, signs from \(key.activatesAt)" : "active"
                        let retires = key.retiresAt.map { ", retires \($0)" } ?? ""
                        print("\(key.kid)  \(key.algorithm)  created \(key.createdAt)  \(state)\(retires)")
                    }
                }
            }
        }

        struct Rotate: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "Add a new signing key: published in the JWKS at once, signing after tokens.publishSeconds; the old keys verify until their last tokens expire."
            )
            @OptionGroup var options: ServerOptions
            @Flag(help: "Sign with the new key at once (a compromised key): verifiers with a cached JWKS refetch it on the new kid.")
            var now = false
            func run() async throws {
                try await AdminContext.with(options) { context in
                    let key = try await AccessTokens.rotate(
                        store: context.store, configuration: context.loaded.domain.tokens, now: Date(), immediately: now)
                    print("new key \(key.kid) (\(key.algorithm)), signing from \(key.activatesAt)")
                }
            }
        }
    }

    struct APIKeys: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "api-keys", abstract: "Keys for servers calling passkeyd (introspection, the server API).",
            subcommands: [Create.self, List.self, Revoke.self])

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Make a key and print it once (only its hash is stored).")
            @OptionGroup var options: ServerOptions
            @Argument(help: "A name for the key (which server uses it).") var name: String
            @Option(
                parsing: .upToNextOption,
                help: "Scopes: \(AdminService.scopes.joined(separator: ", ")) (comma- or space-separated).")
            var scopes: [String] = []
            func run() async throws {
                let requested = scopes.flatMap { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }
                    .filter { !$0.isEmpty }
                try await AdminContext.with(options) { context in
                    do {
                        let created = try await context.admin.createAPIKey(name: name, scopes: requested, by: context.operatorName)
                        print(created.key)
                        FileHandle.standardError.write(
                            Data(
                                "API key \(created.record.id.uuidString.lowercased()) \"\(created.record.name)\" (\(created.record.scopes.joined(separator: ", "))): shown once, keep it secret\n"
                                    .utf8))
                    } catch let refusal as PasskeyServiceError {
                        throw ValidationError(refusal.message)
                    }
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every key, live and revoked (never the key itself).")
            @OptionGroup var options: ServerOptions
            func run() async throws {
                try await AdminContext.with(options) { context in
                    for key in try await context.store.apiKeys() {
                        let state = key.revokedAt.map { "revoked \($0)" } ?? "live"
                        let used = key.lastUsedAt.map { "last used \($0)" } ?? "never used"
                        print("\(key.id.uuidString.lowercased())  \(key.name)  \(key.scopes.joined(separator: ","))  \(state), \(used)")
                    }
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Revoke a key: it stops working at once.")
            @OptionGroup var options: ServerOptions
            @Argument(help: "The key's id (as `list` prints it).") var id: String
            func run() async throws {
                guard let uuid = UUID(uuidString: id) else { throw ValidationError("\(id) is not an API key id") }
                try await AdminContext.with(options) { context in
                    do {
                        try await context.admin.revokeAPIKey(uuid, by: context.operatorName)
                    } catch let refusal as PasskeyServiceError {
                        throw ValidationError(refusal.message)
                    }
                    print("revoked API key \(id)")
                }
            }
        }
    }

    struct Webhooks: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Endpoints that receive passkeyd's events, signed (Standard Webhooks).",
            subcommands: [Add.self, List.self, Remove.self, Deliveries.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Add an endpoint; prints its signing secret once.")
            @OptionGroup var options: ServerOptions
            @Argument(help: "The endpoint's http(s) URL.") var url: String
            @Option(parsing: .upToNextOption, help: "Event kinds (sign_in, passkey_added, …); default all.") var events: [String] = []
            func run() async throws {
                let kinds = events.flatMap { $0.split(separator: ",").map(String.init) }
                try await AdminContext.with(options) { context in
                    do {
                        let added = try await context.admin.addWebhook(url: url, events: kinds)
                        print(added.secret)
                        FileHandle.standardError.write(
                            Data("endpoint \(added.endpoint.id.uuidString.lowercased()) → \(url): signing secret shown once\n".utf8))
                    } catch let refusal as PasskeyServiceError {
                        throw ValidationError(refusal.message)
                    } catch let error as PasskeyServiceError where error.code == .invalidWebhookURL {
                        throw ValidationError(error.message)
                    }
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every endpoint (never its secret).")
            @OptionGroup var options: ServerOptions
            func run() async throws {
                try await AdminContext.with(options) { context in
                    for endpoint in try await context.store.webhookEndpoints() {
                        print("\(endpoint.id.uuidString.lowercased())  \(endpoint.url)  \(endpoint.events.joined(separator: ","))")
                    }
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove an endpoint and its pending deliveries.")
            @OptionGroup var options: ServerOptions
            @Argument(help: "The endpoint's id.") var id: String
            func run() async throws {
                guard let uuid = UUID(uuidString: id) else { throw ValidationError("\(id) is not an endpoint id") }
                try await AdminContext.with(options) { context in
                    do {
                        try await context.admin.removeWebhook(uuid)
                    } catch let refusal as PasskeyServiceError {
                        throw ValidationError(refusal.message)
                    }
                    print("removed endpoint \(id)")
                }
            }
        }

        struct Deliveries: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "The newest deliveries: attempts, status, errors.")
            @OptionGroup var options: ServerOptions
            @Option(help: "Only this endpoint.") var endpoint: String?
            @Option(help: "At most this many.") var limit = 50
            func run() async throws {
                try await AdminContext.with(options) { context in
                    for delivery in try await context.store.webhookDeliveries(
                        endpointID: endpoint.flatMap { UUID(uuidString: $0) }, limit: limit)
                    {
                        let state =
                            delivery.deliveredAt.map { "delivered \($0)" }
                            ?? "pending (next try \(delivery.nextAttemptAt)\(delivery.lastError.map { ", last: \($0)" } ?? ""))"
                        print(
                            "evt_\(delivery.eventID)  \(delivery.endpointID.uuidString.lowercased())  attempts \(delivery.attempts)  \(state)"
                        )
                    }
                }
            }
        }
    }

    struct RegistrationToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "registration-token",
            abstract: "Print a single-use token that lets an account's person register a passkey without signing in.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Username or account ID.") var user: String
        func run() async throws {
            try await AdminContext.with(options) { context in
                let account = try await context.account(user)
                let issued = try await context.admin.registrationToken(
                    for: account, lifetime: Double(context.loaded.domain.tokens.registrationTokenSeconds), by: context.operatorName)
                print(issued.token)
                FileHandle.standardError.write(Data("registration token for \(account.username), valid until \(issued.expiresAt)\n".utf8))
            }
        }
    }

    struct Clients: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "OpenID Connect clients (apps that sign people in through passkeyd; docs/oidc.md).",
            subcommands: [Add.self, List.self, Remove.self])

        struct Add: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Register a client; prints its client_id (and secret, once).")
            @OptionGroup var options: ServerOptions
            @Argument(help: "The name people see on the consent screen.") var name: String
            @Option(name: .customLong("redirect-uri"), help: "A redirect URI (exact match; repeat for more).") var redirectURIs: [String] =
                []
            @Option(name: .customLong("post-logout-uri"), help: "Where RP-initiated logout may return (repeat for more).")
            var postLogoutURIs: [String] = []
            @Flag(name: .customLong("public"), help: "A public client (a browser or native app): no secret, PKCE required.") var isPublic =
                false
            @Flag(name: .customLong("first-party"), help: "Trusted: no consent screen.") var firstParty = false
            @Flag(name: .customLong("allow-sign-up"), help: "People may create an account from this client's sign-in page.")
            var allowSignUp = false
            @Option(name: .customLong("id-token-alg"), help: "RS256 (default, what OIDC requires every client to accept) or ES256.")
            var idTokenAlgorithm = "RS256"
            func run() async throws {
                try await AdminContext.with(options) { context in
                    do {
                        let added = try await context.admin.addClient(
                            name: name, redirectURIs: redirectURIs, postLogoutURIs: postLogoutURIs, isPublic: isPublic,
                            firstParty: firstParty,
                            allowSignUp: allowSignUp, idTokenAlgorithm: idTokenAlgorithm, by: context.operatorName)
                        print("client_id=\(added.client.id)")
                        if let secret = added.secret { print("client_secret=\(secret)") }
                        FileHandle.standardError.write(
                            Data(
                                "client \"\(added.client.name)\"\(added.secret == nil ? " (public: PKCE)" : ": the secret is shown once")\n"
                                    .utf8))
                    } catch let refusal as PasskeyServiceError {
                        throw ValidationError(refusal.message)
                    }
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every client (never a secret).")
            @OptionGroup var options: ServerOptions
            func run() async throws {
                try await AdminContext.with(options) { context in
                    for client in try await context.store.oauthClients() {
                        let kind = client.isPublic ? "public" : "confidential"
                        print(
                            "\(client.id)  \(client.name)  \(kind)\(client.firstParty ? ", first-party" : "")  \(client.redirectURIs.joined(separator: " "))"
                        )
                    }
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Remove a client: its codes, refresh tokens and consents go with it.")
            @OptionGroup var options: ServerOptions
            @Argument(help: "The client_id.") var id: String
            func run() async throws {
                try await AdminContext.with(options) { context in
                    do {
                        try await context.admin.removeClient(id, by: context.operatorName)
                    } catch let refusal as PasskeyServiceError {
                        throw ValidationError(refusal.message)
                    }
                    print("removed client \(id)")
                }
            }
        }
    }
}
