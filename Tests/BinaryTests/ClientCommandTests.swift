import Foundation
import Testing

/// `passkeyd admin clients add` registers through the rule the server API and the console use
/// (issue 42): a redirect URI or post-logout URI a browser would read as another host, or one with
/// user info or a fragment, stops the command and names the URI; nothing is registered.
@Suite("passkeyd admin clients add: redirect URIs")
struct ClientCommandTests {
    @Test func clientsAddRefusesRedirectURIsABrowserReadsAsAnotherHost() throws {
        let workspace = try ConsoleCLITests.Workspace()
        defer { workspace.remove() }
        let migrated = try PasskeyCLITests.run(
            AdminCommandTests.passkeyd, ["migrate", "--database", workspace.database], environment: ["PASSKEYD_CONFIG": ""])
        #expect(migrated.status == 0, "\(migrated.stderr)")
        for uri in [
            "https:a", "https://", "https:///cb", "https:/cb", "https://?x=1", "https://:443/cb", "https://user@app.example.com/cb",
            "https://app.example.com/cb#x", "https://*.example.com/cb", "http://app.example.com/cb", "com.example.app:",
        ] {
            let refused = try workspace.admin(["clients", "add", "App", "--redirect-uri", uri])
            #expect(refused.status != 0 && refused.stderr.contains("\"\(uri)\" is not a usable redirect URI"), "\(uri): \(refused.stderr)")
            let postLogout = try workspace.admin([
                "clients", "add", "App", "--redirect-uri", "https://app.example.com/cb", "--post-logout-uri", uri,
            ])
            #expect(postLogout.status != 0 && postLogout.stderr.contains("is not a usable redirect URI"), "\(uri): \(postLogout.stderr)")
        }
        #expect(try workspace.admin(["clients", "list"]).stdout.isEmpty)
        let accepted = ["https://app.example.com/cb", "http://127.0.0.1:53682/", "http://[::1]/cb", "com.example.app:/callback"]
        for uri in accepted {
            let added = try workspace.admin(["clients", "add", "App", "--public", "--redirect-uri", uri, "--post-logout-uri", uri])
            #expect(added.status == 0 && added.stdout.hasPrefix("client_id=pkc_"), "\(uri): \(added.stderr)")
        }
        let listed = try workspace.admin(["clients", "list"]).stdout.split(separator: "\n")
        #expect(listed.count == accepted.count, "\(listed)")
    }
}
