import ArgumentParser
import AsyncHTTPClient
import Foundation
import NIOCore

/// `passkeyd healthcheck`: asks the server this configuration runs for `/readyz` and exits 0 when
/// it answers 200, 1 otherwise. The image's HEALTHCHECK (a distroless image has no shell or curl).
struct Healthcheck: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Exit 0 when the local server answers /readyz with 200 (a container's health check), 1 otherwise.")

    @OptionGroup var options: ServerOptions

    @Option(help: "The URL to ask (default: /readyz on the listen address of the settings, loopback for a wildcard address).")
    var url: String?

    func run() async throws {
        try options.refuseTenant("healthcheck")
        let target: String
        if let url {
            target = url
        } else {
            let settings = try options.load()
            target = Self.readinessURL(host: settings.host, port: settings.port)
        }
        guard let parsed = URL(string: target), parsed.scheme == "http" || parsed.scheme == "https", parsed.host != nil else {
            throw ValidationError("--url \(target) is not an http(s) URL")
        }
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: .seconds(2), read: .seconds(5)))
        configuration.proxy = nil
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let status: Int
        do {
            let response = try await client.execute(HTTPClientRequest(url: target), timeout: .seconds(6))
            status = Int(response.status.code)
            _ = try? await response.body.collect(upTo: 4096)
            try? await client.shutdown()
        } catch {
            try? await client.shutdown()
            print("unhealthy: \(target): \(error)")
            throw ExitCode(1)
        }
        guard status == 200 else {
            print("unhealthy: \(target) answered \(status)")
            throw ExitCode(1)
        }
        print("healthy: \(target)")
    }

    /// `/readyz` on the address the server listens on; a wildcard address is asked on loopback.
    static func readinessURL(host: String, port: Int) -> String {
        let asked: String
        switch host {
        case "", "0.0.0.0": asked = "127.0.0.1"
        case "::": asked = "[::1]"
        default: asked = host.contains(":") ? "[\(host)]" : host
        }
        return "http://\(asked):\(port)/readyz"
    }
}
