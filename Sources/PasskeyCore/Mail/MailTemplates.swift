import Foundation

/// The mails passkeyd sends, in English and French (the account's language; English when it has
/// none): each a subject and paragraphs, rendered once as plain text and once as HTML by
/// ``MailTemplates/render(_:language:values:)``, the one writer that escapes every value. No
/// remote image, script or style sheet: the HTML part is paragraphs, a link and a code.
public enum MailKind: String, Sendable, CaseIterable {
    /// A link and code that prove an address.
    case verifyAddress = "verify_address"
    /// A link and code that open a recovery step (one new passkey).
    case recovery
    /// A recovery was asked for with this address, which no account has verified.
    case someoneTried = "someone_tried"
    /// Security notices, each with "this wasn't me".
    case passkeyAdded = "notice_passkey_added"
    case passkeyRemoved = "notice_passkey_removed"
    case recoveryUsed = "notice_recovery_used"
    case addressChanged = "notice_address_changed"
    case passwordOff = "notice_password_off"

    /// A notice: it carries an undo link.
    public var isNotice: Bool { rawValue.hasPrefix("notice_") }
}

/// What a mail says, filled in per mail.
public struct MailValues: Sendable {
    public var rpName: String
    public var username: String
    public var link: String?
    public var code: String?
    public var minutes: Int
    /// The notice's event: when (UTC), from which browser and address.
    public var when: Date?
    public var device: String?
    public var ipAddress: String?
    /// The passkey a notice is about, or the new address.
    public var subject: String?
    public var undoHours: Int

    public init(
        rpName: String, username: String, link: String? = nil, code: String? = nil, minutes: Int = 10, when: Date? = nil,
        device: String? = nil, ipAddress: String? = nil, subject: String? = nil, undoHours: Int = 72
    ) {
        self.rpName = rpName
        self.username = username
        self.link = link
        self.code = code
        self.minutes = minutes
        self.when = when
        self.device = device
        self.ipAddress = ipAddress
        self.subject = subject
        self.undoHours = undoHours
    }
}

public enum MailTemplates {
    /// The languages mails are written in.
    public static let languages = ["en", "fr"]

    /// The language of `tag` (`fr-CA`, `fr;q=0.9,en`…) passkeyd writes: `fr` or `en`.
    public static func language(_ tag: String?) -> String {
        guard let tag else { return "en" }
        for part in tag.lowercased().split(separator: ",") {
            // `;q=…` dropped; a part that is only semicolons has no tag (and must not trap).
            guard let tag = part.split(separator: ";").first else { continue }
            let code = tag.trimmingCharacters(in: .whitespaces).prefix(2)
            if languages.contains(String(code)) { return String(code) }
        }
        return "en"
    }

    public struct Rendered: Sendable, Hashable {
        public let subject: String
        public let text: String
        public let html: String
    }

    /// One block of a mail: a paragraph, the link's button, or the code.
    enum Block {
        case paragraph(String)
        case link(label: String, url: String)
        case code(String)
    }

    public static func render(_ kind: MailKind, language: String, values: MailValues) -> Rendered {
        let french = language == "fr"
        let (subject, blocks) = french ? MailTemplates.french(kind, values) : MailTemplates.english(kind, values)
        var text: [String] = []
        var html = [
            "<!DOCTYPE html>",
            "<html lang=\"\(french ? "fr" : "en")\"><head><meta charset=\"utf-8\"><title>\(escape(subject))</title></head>",
            "<body style=\"font-family:sans-serif;line-height:1.5;max-width:36em\">",
        ]
        for block in blocks {
            switch block {
            case .paragraph(let line):
                text.append(line)
                html.append("<p>\(escape(line))</p>")
            case .link(let label, let url):
                text.append("\(label):\n\(url)")
                html.append("<p><a href=\"\(escape(url))\" style=\"font-weight:bold\">\(escape(label))</a></p>")
            case .code(let code):
                text.append(code)
                html.append("<p style=\"font-size:1.6em;letter-spacing:0.2em;font-family:monospace\">\(escape(code))</p>")
            }
        }
        html.append("</body></html>")
        return Rendered(subject: subject, text: text.joined(separator: "\n\n") + "\n", html: html.joined(separator: "\n") + "\n")
    }

    /// The one HTML escaper: text and attribute values alike.
    static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    static func stamp(_ values: MailValues) -> String {
        guard let when = values.when else { return "" }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate, .withTime, .withColonSeparatorInTime, .withSpaceBetweenDateAndTime]
        return formatter.string(from: when) + " UTC"
    }

    static func origin(_ values: MailValues) -> String {
        [values.device.map { String($0.prefix(120)) }, values.ipAddress].compactMap { $0 }.joined(separator: ", ")
    }

    static func english(_ kind: MailKind, _ v: MailValues) -> (String, [Block]) {
        // What the undo does, by what the notice is about.
        let undoes =
            switch kind {
            case .passkeyAdded: "It removes that passkey, signs you out everywhere"
            case .recoveryUsed where v.subject != nil: "It removes that passkey, signs you out everywhere"
            case .addressChanged: "It puts this address back (to be verified again), signs you out everywhere"
            default: "It signs you out everywhere"
            }
        let undo: [Block] = [
            .paragraph(
                "If this wasn't you, open this link within \(v.undoHours) hours. \(undoes) and closes recovery by email until you use a recovery code or an administrator opens it again."
            ),
            .link(label: "This wasn't me", url: v.link ?? ""),
        ]
        let context = "When: \(stamp(v)). From: \(origin(v).isEmpty ? "unknown" : origin(v))."
        switch kind {
        case .verifyAddress:
            return (
                "Confirm your email address for \(v.rpName)",
                [
                    .paragraph(
                        "This address was given for the account \(v.username) at \(v.rpName). To confirm it, open this link within \(v.minutes) minutes:"
                    ),
                    .link(label: "Confirm my address", url: v.link ?? ""),
                    .paragraph("Or enter this code:"), .code(v.code ?? ""),
                    .paragraph("If you did not ask for this, ignore this mail: the address will not be used."),
                ]
            )
        case .recovery:
            return (
                "Sign-in help for \(v.rpName)",
                [
                    .paragraph(
                        "Someone asked to get back into the account \(v.username) at \(v.rpName). Open this link within \(v.minutes) minutes to create a new passkey:"
                    ),
                    .link(label: "Create a new passkey", url: v.link ?? ""),
                    .paragraph("Or enter this code:"), .code(v.code ?? ""),
                    .paragraph(
                        "If this wasn't you, ignore this mail: nothing changes, and nobody can use it without access to your mailbox."),
                ]
            )
        case .someoneTried:
            return (
                "A sign-in help request at \(v.rpName)",
                [
                    .paragraph(
                        "Someone asked to get back into an account at \(v.rpName) with this address, but no account has verified it."),
                    .paragraph("If it was you, you may have signed up with another address or username. If not, ignore this mail."),
                ]
            )
        case .passkeyAdded:
            return (
                "A passkey was added to your \(v.rpName) account",
                [.paragraph("The passkey \"\(v.subject ?? "")\" was added to your account \(v.username). \(context)")] + undo
            )
        case .passkeyRemoved:
            return (
                "A passkey was removed from your \(v.rpName) account",
                [.paragraph("The passkey \"\(v.subject ?? "")\" was removed from your account \(v.username). \(context)")] + undo
            )
        case .recoveryUsed:
            guard let passkey = v.subject else {
                return (
                    "A recovery code was used on your \(v.rpName) account",
                    [.paragraph("A recovery code signed in to your account \(v.username). \(context)")] + undo
                )
            }
            return (
                "Your \(v.rpName) account was recovered by email",
                [.paragraph("Recovery by email created the passkey \"\(passkey)\" on your account \(v.username). \(context)")] + undo
            )
        case .addressChanged:
            return (
                "The email address of your \(v.rpName) account changed",
                [
                    .paragraph(
                        "The address of your account \(v.username) is now \(v.subject ?? "none"). This address no longer receives its mail. \(context)"
                    )
                ] + undo
            )
        case .passwordOff:
            return (
                "The password of your \(v.rpName) account was turned off",
                [.paragraph("Your account \(v.username) no longer signs in with a password. \(context)")] + undo
            )
        }
    }

    static func french(_ kind: MailKind, _ v: MailValues) -> (String, [Block]) {
        let undoes =
            switch kind {
            case .passkeyAdded: "Il retire cette clé d'accès, vous déconnecte partout"
            case .recoveryUsed where v.subject != nil: "Il retire cette clé d'accès, vous déconnecte partout"
            case .addressChanged: "Il rétablit cette adresse (à vérifier de nouveau), vous déconnecte partout"
            default: "Il vous déconnecte partout"
            }
        let undo: [Block] = [
            .paragraph(
                "Si ce n'était pas vous, ouvrez ce lien dans les \(v.undoHours) heures. \(undoes) et ferme la récupération par e-mail jusqu'à ce que vous utilisiez un code de récupération ou qu'un administrateur la rouvre."
            ),
            .link(label: "Ce n'était pas moi", url: v.link ?? ""),
        ]
        let context = "Quand : \(stamp(v)). Depuis : \(origin(v).isEmpty ? "inconnu" : origin(v))."
        switch kind {
        case .verifyAddress:
            return (
                "Confirmez votre adresse e-mail pour \(v.rpName)",
                [
                    .paragraph(
                        "Cette adresse a été donnée pour le compte \(v.username) sur \(v.rpName). Pour la confirmer, ouvrez ce lien dans les \(v.minutes) minutes :"
                    ),
                    .link(label: "Confirmer mon adresse", url: v.link ?? ""),
                    .paragraph("Ou saisissez ce code :"), .code(v.code ?? ""),
                    .paragraph("Si vous n'avez rien demandé, ignorez ce message : l'adresse ne sera pas utilisée."),
                ]
            )
        case .recovery:
            return (
                "Aide à la connexion pour \(v.rpName)",
                [
                    .paragraph(
                        "Quelqu'un a demandé à retrouver l'accès au compte \(v.username) sur \(v.rpName). Ouvrez ce lien dans les \(v.minutes) minutes pour créer une nouvelle clé d'accès :"
                    ),
                    .link(label: "Créer une nouvelle clé d'accès", url: v.link ?? ""),
                    .paragraph("Ou saisissez ce code :"), .code(v.code ?? ""),
                    .paragraph(
                        "Si ce n'était pas vous, ignorez ce message : rien ne change, et personne ne peut s'en servir sans accès à votre boîte."
                    ),
                ]
            )
        case .someoneTried:
            return (
                "Une demande d'aide à la connexion sur \(v.rpName)",
                [
                    .paragraph(
                        "Quelqu'un a demandé à retrouver l'accès à un compte sur \(v.rpName) avec cette adresse, mais aucun compte ne l'a vérifiée."
                    ),
                    .paragraph(
                        "Si c'était vous, vous vous êtes peut-être inscrit avec une autre adresse ou un autre nom. Sinon, ignorez ce message."
                    ),
                ]
            )
        case .passkeyAdded:
            return (
                "Une clé d'accès a été ajoutée à votre compte \(v.rpName)",
                [.paragraph("La clé d'accès « \(v.subject ?? "") » a été ajoutée à votre compte \(v.username). \(context)")] + undo
            )
        case .passkeyRemoved:
            return (
                "Une clé d'accès a été retirée de votre compte \(v.rpName)",
                [.paragraph("La clé d'accès « \(v.subject ?? "") » a été retirée de votre compte \(v.username). \(context)")] + undo
            )
        case .recoveryUsed:
            guard let passkey = v.subject else {
                return (
                    "Un code de récupération a été utilisé sur votre compte \(v.rpName)",
                    [.paragraph("Un code de récupération a connecté votre compte \(v.username). \(context)")] + undo
                )
            }
            return (
                "Votre compte \(v.rpName) a été récupéré par e-mail",
                [.paragraph("La récupération par e-mail a créé la clé d'accès « \(passkey) » sur votre compte \(v.username). \(context)")]
                    + undo
            )
        case .addressChanged:
            return (
                "L'adresse e-mail de votre compte \(v.rpName) a changé",
                [
                    .paragraph(
                        "L'adresse de votre compte \(v.username) est désormais \(v.subject ?? "aucune"). Cette adresse-ci ne reçoit plus ses messages. \(context)"
                    )
                ] + undo
            )
        case .passwordOff:
            return (
                "Le mot de passe de votre compte \(v.rpName) a été désactivé",
                [.paragraph("Votre compte \(v.username) ne se connecte plus avec un mot de passe. \(context)")] + undo
            )
        }
    }
}
