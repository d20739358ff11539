import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The HTTP side of ``PasskeyClient``: request bodies, one call per route, answers and errors.
extension PasskeyClient {
    struct VerifyBody<Credential: Encodable & Sendable>: Encodable, Sendable {
        var credential: Credential
        var name: String?
    }

    /// The body of `register/options` and `authenticate/options`; absent members are not sent.
    struct OptionsBody: Encodable, Sendable {
        struct Extensions: Encodable, Sendable { var prf: Bool }
        var username: String?
        var displayName: String?
        var extensions: Extensions?
        /// Sign-in only: the one passkey of `username` the ceremony allows.
        var credentialId: String?
        init(username: String? = nil, displayName: String? = nil, prf: PRFRequest?, credentialID: Data? = nil) {
            self.username = username
            self.displayName = displayName
            extensions = prf.map { _ in Extensions(prf: true) }
            credentialId = credentialID.map(Base64URL.encode)
        }
    }

    func call<T: Decodable>(
        _ method: String, _ path: String, body: (some Encodable & Sendable)? = [String: String]?.none, auth: Auth = .session
    )
        async throws -> T
    {
        try await callRaw(method, path, body: body, auth: auth).1
    }

    func callWithoutAnswer(_ method: String, _ path: String, body: (some Encodable & Sendable)? = [String: String]?.none)
        async throws
    {
        _ = try await send(method, path, body: body, auth: .session)
    }

    func callRaw<T: Decodable>(_ method: String, _ path: String, body: (some Encodable & Sendable)?, auth: Auth) async throws
        -> (
            Data, T
        )
    {
        let data = try await send(method, path, body: body, auth: auth)
        do {
            return (data, try JSONDecoder.passkeyd.decode(T.self, from: data))
        } catch {
            throw PasskeyClientError.invalidResponse("\(path): \(error)")
        }
    }

    /// Which session token a request carries.
    enum Auth {
        /// None: sign-up and the options of a sign-in.
        case none
        /// The stored one; without one the call fails with ``PasskeyClientError/notSignedIn``.
        case session
        /// The stored one if any: a sign-in then ends the session it replaces on the server.
        case replacing
        /// This one.
        case token(String)
    }

    /// One request to `/api/auth/<path>`; a 2xx answer's body, or the error it means.
    func send(_ method: String, _ path: String, body: (some Encodable & Sendable)?, auth: Auth) async throws -> Data {
        var request = URLRequest(url: server.appendingPathComponent("api/auth/" + path))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let agent = Self.userAgent { request.setValue(agent, forHTTPHeaderField: "User-Agent") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try JSONEncoder().encode(body)
        }
        var sent: String?
        switch auth {
        case .none: break
        case .session:
            guard let token = try await stored()?.sessionToken else { throw PasskeyClientError.notSignedIn }
            sent = token
        case .replacing: sent = try await stored()?.sessionToken
        case .token(let token): sent = token
        }
        if let sent { request.setValue("Bearer \(sent)", forHTTPHeaderField: "Authorization") }
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await http.data(for: request)
        } catch is CancellationError {
            throw PasskeyClientError.cancelled
        } catch let error as URLError where error.code == .cancelled {
            throw PasskeyClientError.cancelled
        } catch {
            throw PasskeyClientError.network(error.localizedDescription)
        }
        guard let http = response as? HTTPURLResponse else { throw PasskeyClientError.invalidResponse("not HTTP") }
        if (200..<300).contains(http.statusCode) { return data }
        guard let answer = try? JSONDecoder().decode(ErrorAnswer.self, from: data) else {
            throw PasskeyClientError.invalidResponse("\(path) answered HTTP \(http.statusCode); is \(server.absoluteString) passkeyd?")
        }
        switch answer.error.code {
        case "not_signed_in":
            // The session ended on the server (signed out elsewhere, expired, passkey deleted).
            // Forgotten only if it is still the one kept: a sign-in may have replaced it while
            // this request was on its way.
            if let sent, try await stored()?.sessionToken == sent { try await remember(nil) }
            throw PasskeyClientError.notSignedIn
        case "credential_not_found":
            throw PasskeyClientError.passkeyRemoved
        default:
            let retry = http.value(forHTTPHeaderField: "Retry-After").flatMap { Int($0) }
            throw PasskeyClientError.refused(
                code: answer.error.code, message: answer.error.message ?? "", status: http.statusCode, retryAfter: retry)
        }
    }

    /// Apple platforms keep URLSession's own (`App/1 CFNetwork/… Darwin/…`: passkeyd lists the
    /// session as "iOS app"); elsewhere the library names itself.
    static let userAgent: String? = {
        #if canImport(Darwin)
            nil
        #else
            "passkeyd-swift/1"
        #endif
    }()

    static func pathSegment(_ id: String) throws -> String {
        // IDs are base64url; anything else could walk the path.
        guard !id.isEmpty,
            id.utf8.allSatisfy({
                $0 == 0x2D || $0 == 0x5F || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            })
        else { throw PasskeyClientError.refused(code: "passkey_not_found", message: "", status: 404, retryAfter: nil) }
        return id
    }

    static func bytes(_ text: String, _ field: String) throws -> Data {
        guard let data = Base64URL.decode(text) else { throw PasskeyClientError.invalidResponse("\(field) is not base64url") }
        return data
    }

    static func clientError(_ error: any Error) -> PasskeyClientError {
        switch error {
        case let error as PasskeyClientError: error
        case let error as PasskeyAuthenticatorError:
            switch error {
            case .cancelled: .cancelled
            case .noCredentials: .noPasskeyOnDevice
            case .excludedCredentialExists: .passkeyAlreadyOnDevice
            case .unsupported(let why): .unsupported(why)
            case .failed(let why): .authenticatorFailed(why)
            }
        case is CancellationError: .cancelled
        default: .authenticatorFailed("\(error)")
        }
    }
}
