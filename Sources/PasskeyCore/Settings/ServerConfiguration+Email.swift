import Configuration
import Foundation
import PasskeyMail

extension ServerConfiguration {
    /// Mail (docs/email.md): addresses on accounts, recovery by mail, security notices. Off until
    /// an SMTP server is named (`PASSKEYD_SMTP_URL`) with a sender (`PASSKEYD_EMAIL_FROM`).
    public struct Email: Sendable {
        /// What sign-up asks for.
        public enum SignUp: String, Sendable, CaseIterable {
            /// No address at sign-up (one may be added on the account page).
            case off
            /// An address may be given.
            case optional
            /// An address must be given.
            case required
            /// The username is the address.
            case username
        }

        /// What verifying an address does to the passkeys and sessions made before it (they may
        /// be someone else's: an account created with another person's address).
        public enum BeforeVerification: String, Sendable, CaseIterable {
            /// They are listed, with one step that removes them all.
            case list
            /// They are removed at once.
            case remove
        }

        /// Where mail goes; nil: no mail (and no address features).
        public var smtp: SMTPServer?
        public var fromName: String
        public var from: MailAddress?
        public var signUp: SignUp
        public var beforeVerification: BeforeVerification
        /// How long "this wasn't me" works after a notice.
        public var undoSeconds: Int
        /// A recovery request for an address no account has verified sends that address a
        /// "someone tried" mail.
        public var notifyUnknownAddresses: Bool
        /// Mails one address may be sent in an hour by requests (verification, recovery).
        public var mailsPerAddressPerHour: Int
        /// How long a link or code in a verification or recovery mail works (codes: 5 tries).
        public static let tokenLifetime: TimeInterval = 600

        public init(
            smtp: SMTPServer? = nil, fromName: String = "passkeyd", from: MailAddress? = nil, signUp: SignUp = .optional,
            beforeVerification: BeforeVerification = .list, undoSeconds: Int = 72 * 3600, notifyUnknownAddresses: Bool = false,
            mailsPerAddressPerHour: Int = 5
        ) {
            self.smtp = smtp
            self.fromName = fromName
            self.from = from
            self.signUp = signUp
            self.beforeVerification = beforeVerification
            self.undoSeconds = undoSeconds
            self.notifyUnknownAddresses = notifyUnknownAddresses
            self.mailsPerAddressPerHour = mailsPerAddressPerHour
        }

        /// Mail can be sent: addresses, recovery by mail and notices are on.
        public var enabled: Bool { smtp != nil && from != nil }

        /// Reads `email.*`, `PASSKEYD_SMTP_URL` (secret), `PASSKEYD_EMAIL_FROM`, `PASSKEYD_SMTP_CA_FILE`,
        /// `PASSKEYD_SMTP_ALLOW_PLAINTEXT` and the rest; `readFile` reads the CA file.
        public init(reader: ConfigReader, readFile: (String) -> Data?) throws(ConfigurationError) {
            let defaults = Self()
            let allowPlaintext = try reader.flag("email.smtpAllowPlaintext", env: "PASSKEYD_SMTP_ALLOW_PLAINTEXT") ?? false
            var trusted: [UInt8]?
            if let path = try reader.text("email.smtpCAFile", env: "PASSKEYD_SMTP_CA_FILE") {
                guard let data = readFile(path), String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
                    throw ConfigurationError(setting: "email.smtpCAFile", problem: "\(path) cannot be read as PEM certificates")
                }
                trusted = Array(data)
            }
            var smtp: SMTPServer?
            if let url = try reader.text("email.smtpURL", env: "PASSKEYD_SMTP_URL", secret: true), !url.isEmpty {
                do {
                    smtp = try SMTPServer(url: url, allowPlaintext: allowPlaintext, trustedCertificatesPEM: trusted)
                } catch {
                    // The URL itself is never quoted: it holds the password.
                    throw ConfigurationError(setting: "email.smtpURL", problem: error.reason)
                }
            }
            var fromName = defaults.fromName
            var from: MailAddress?
            if let text = try reader.text("email.from", env: "PASSKEYD_EMAIL_FROM") {
                (fromName, from) = try Self.sender(text, defaultName: defaults.fromName)
            }
            if smtp != nil && from == nil {
                throw ConfigurationError(
                    setting: "email.from", problem: "PASSKEYD_SMTP_URL is set: say who mails come from (\"Example <no-reply@example.com>\")"
                )
            }
            self.init(
                smtp: smtp, fromName: fromName, from: from,
                signUp: try reader.choice("email.signUp", env: "PASSKEYD_EMAIL_SIGNUP", as: SignUp.self) ?? defaults.signUp,
                beforeVerification: try reader.choice(
                    "email.beforeVerification", env: "PASSKEYD_EMAIL_BEFORE_VERIFICATION", as: BeforeVerification.self)
                    ?? defaults.beforeVerification,
                undoSeconds: try reader.number("email.undoSeconds", env: "PASSKEYD_EMAIL_UNDO_SECONDS", in: 3600...2_592_000)
                    ?? defaults.undoSeconds,
                notifyUnknownAddresses: try reader.flag("email.notifyUnknownAddresses", env: "PASSKEYD_EMAIL_NOTIFY_UNKNOWN")
                    ?? defaults.notifyUnknownAddresses,
                mailsPerAddressPerHour: try reader.number(
                    "email.mailsPerAddressPerHour", env: "PASSKEYD_EMAIL_PER_ADDRESS_PER_HOUR", in: 1...1000)
                    ?? defaults.mailsPerAddressPerHour)
        }

        /// `Name <address>` or a bare address (the name then stays "passkeyd").
        static func sender(_ text: String, defaultName: String) throws(ConfigurationError) -> (String, MailAddress) {
            var name = defaultName
            var address = text
            if let open = text.lastIndex(of: "<"), text.hasSuffix(">") {
                name = text[..<open].trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                address = String(text[text.index(after: open)..<text.index(before: text.endIndex)])
            }
            guard !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw ConfigurationError(setting: "email.from", problem: "the name holds a control character")
            }
            do {
                return (name.isEmpty ? defaultName : name, try MailAddress(address))
            } catch {
                throw ConfigurationError(setting: "email.from", problem: "\(address) is not an address: \(error.reason)")
            }
        }
    }
}
