import Foundation

/// Every failure of ``PasskeyClient``: one type to switch on, with a stable ``code`` (the
/// server's own code when it refused) and a human ``message`` in the person's language.
public enum PasskeyClientError: Error, Sendable, Equatable {
    /// The person dismissed the passkey sheet.
    case cancelled
    /// No passkey for this site (or this account) on this device.
    case noPasskeyOnDevice
    /// The device already holds a passkey of this account (`excludeCredentials`).
    case passkeyAlreadyOnDevice
    /// The server no longer knows the passkey the person chose (it was deleted).
    case passkeyRemoved
    /// This needs a signed-in session, and there is none (or it ended).
    case notSignedIn
    /// The server could not be reached (offline, timeout, TLS).
    case network(String)
    /// The server refused: its stable `code` (`username_taken`, `rate_limited`, …), its message,
    /// the HTTP status and, for rate limits, the seconds to wait.
    case refused(code: String, message: String, status: Int, retryAfter: Int?)
    /// The platform cannot do this (AutoFill on macOS, an OS without passkeys).
    case unsupported(String)
    /// The answer was not passkeyd's (a proxy's error page, a wrong URL).
    case invalidResponse(String)
    /// The platform authenticator failed (on Apple platforms often a missing Associated Domains
    /// entry). The text is for logs; ``message`` stays a sentence for people.
    case authenticatorFailed(String)
    /// The app passed a value the client cannot use (a PRF context of 0 or over 256 bytes).
    case invalidArgument(String)
    /// ``PasskeyEncryption`` could not open the data: another key (another passkey, a rotated PRF
    /// salt, another context), other additional data, or altered bytes.
    case decryptionFailed

    /// The stable code: the server's code for ``refused(code:message:status:retryAfter:)``, else
    /// the client's (`cancelled`, `no_passkey_on_device`, `passkey_removed`, `network`, …). The web
    /// client (`passkeyd.js`) uses the same codes.
    public var code: String {
        switch self {
        case .cancelled: "cancelled"
        case .noPasskeyOnDevice: "no_passkey_on_device"
        case .passkeyAlreadyOnDevice: "credential_already_registered"
        case .passkeyRemoved: "passkey_removed"
        case .notSignedIn: "not_signed_in"
        case .network: "network"
        case .refused(let code, _, _, _): code
        case .unsupported: "unsupported"
        case .invalidResponse: "invalid_response"
        case .authenticatorFailed: "authenticator_failed"
        case .invalidArgument: "invalid_argument"
        case .decryptionFailed: "decryption_failed"
        }
    }

    /// A sentence for the person, in the first of `languages` the catalogues have (English
    /// otherwise). A server code without a translation keeps the server's own message.
    public func message(languages: [String] = Locale.preferredLanguages) -> String {
        let catalogue = Messages.catalogue(for: languages)
        if let text = catalogue["error." + code] { return text }
        if case .refused(_, let message, _, _) = self, !message.isEmpty { return message }
        return catalogue["error.unknown"] ?? "Something went wrong."
    }

    /// ``message(languages:)`` in the device's languages.
    public var message: String { message() }
}

extension PasskeyClientError: LocalizedError {
    public var errorDescription: String? { message }
}

/// The message catalogues (`Resources/messages.<language>.json`, keys `error.<code>`), the same
/// keys and sentences as the web client's `Public/i18n/<language>.json`.
public enum Messages {
    /// The languages with a catalogue.
    public static let languages = ["en", "fr"]

    static let catalogues: [String: [String: String]] = [
        "en": decode(PackageResources.messages_en_json), "fr": decode(PackageResources.messages_fr_json),
    ]

    private static func decode(_ bytes: [UInt8]) -> [String: String] {
        (try? JSONDecoder().decode([String: String].self, from: Data(bytes))) ?? [:]
    }

    /// The catalogue of the first of `languages` ("fr-CA", "fr", "de-DE") there is one for, with
    /// English under it for any missing sentence.
    public static func catalogue(for languages: [String]) -> [String: String] {
        let english = catalogues["en"] ?? [:]
        return english.merging(catalogues[language(for: languages)] ?? [:]) { $1 }
    }

    /// The language ``catalogue(for:)`` picks.
    public static func language(for languages: [String]) -> String {
        for language in languages {
            let primary = language.lowercased().split(whereSeparator: { $0 == "-" || $0 == "_" }).first.map(String.init) ?? ""
            if catalogues[primary] != nil { return primary }
        }
        return "en"
    }
}
