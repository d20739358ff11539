import Foundation

/// Usernames that cannot be confused with one another: the PRECIS UsernameCaseMapped profile
/// (RFC 8265 §3.3) with a stricter character set and a mixed-script rule.
///
/// - The **display form** keeps the person's case: surrounding spaces trimmed, full-width and
///   half-width characters mapped to their ordinary forms (RFC 8265 §3.3.2 step 1), NFC.
/// - The **comparison key** (what uniqueness and look-ups use): the display form lower-cased
///   (§3.3.2 step 2, toLowerCase) and NFC again (step 3). `Ａｄａ`, `ADA` and `ada` share one key.
///
/// Refused: control, format, private-use, unassigned and space characters, symbols and
/// punctuation other than `. _ - @ +`, characters with a compatibility decomposition (`ﬁ`, `²`),
/// default-ignorable code points (variation selectors like the `U+FE0F` in `mallory\u{FE0F}`,
/// the combining grapheme joiner, Hangul fillers: invisible, so a second account that looks like
/// the first), conjoining Hangul jamo left after NFC (PRECIS OldHangulJamo), a combining mark
/// first, letters from two scripts that are not used together (`аlice` with a Cyrillic `а`),
/// more than 64 characters or 256 bytes.
public enum Username {
    /// Why a username is refused (the server turns it into `invalid_username`).
    public enum Problem: Error, Sendable, Equatable, CustomStringConvertible {
        case empty
        case tooLong
        case disallowedCharacter(String)
        case mixedScripts
        case compatibilityCharacter

        public var description: String {
            switch self {
            case .empty: "Choose a username."
            case .tooLong: "Usernames have at most 64 characters (256 bytes)."
            case .disallowedCharacter(let text): "Usernames may use letters, digits and . _ - @ + (not \(text))."
            case .mixedScripts: "Usernames may not mix letters of different scripts (like Latin and Cyrillic)."
            case .compatibilityCharacter: "Usernames may not use compatibility characters (ligatures, superscripts, …)."
            }
        }
    }

    public static let maxCharacters = 64
    public static let maxBytes = 256

    /// The display form and comparison key of `raw`, or why it is refused.
    public static func validate(_ raw: String) throws(Problem) -> (display: String, key: String) {
        // Cheap refusal first: nothing long is normalised.
        guard raw.utf8.count <= maxBytes * 4 else { throw .tooLong }
        let display = displayForm(raw)
        guard !display.isEmpty else { throw .empty }
        guard display.utf8.count <= maxBytes, display.count <= maxCharacters else { throw .tooLong }
        let key = comparisonKey(display)
        // PRECIS IdentifierClass: no character with a compatibility decomposition (HasCompat);
        // no ASCII character has one.
        guard isASCII(key) || key.precomposedStringWithCompatibilityMapping == key else { throw .compatibilityCharacter }
        var scripts = Set<Script>()
        var first = true
        for scalar in key.unicodeScalars {
            defer { first = false }
            if scalar.isASCII {
                guard allowedASCII(scalar) else { throw .disallowedCharacter(describe(scalar)) }
                if isASCIILetter(scalar) { scripts.insert(.latin) }
                continue
            }
            // RFC 8264 §9.13 (DefaultIgnorableCodePoint) and §9.9 (OldHangulJamo): invisible or
            // left-over pieces that would make a name look like another one.
            if scalar.properties.isDefaultIgnorableCodePoint || isConjoiningJamo(scalar) {
                throw .disallowedCharacter(describe(scalar))
            }
            switch scalar.properties.generalCategory {
            case .lowercaseLetter, .uppercaseLetter, .otherLetter, .modifierLetter, .decimalNumber:
                scripts.insert(Script.of(scalar))
            case .nonspacingMark, .spacingMark:
                // Combining marks take the script of the letter they follow; never first.
                guard !first else { throw .disallowedCharacter(describe(scalar)) }
            default:
                throw .disallowedCharacter(describe(scalar))
            }
        }
        guard Script.mayMix(scripts) else { throw .mixedScripts }
        return (display, key)
    }

    /// The comparison key of any string (valid or not): width-mapped, trimmed, lower-cased, NFC.
    /// Look-ups of a name that fails ``validate(_:)`` simply find nothing.
    public static func key(_ raw: String) -> String {
        guard raw.utf8.count <= maxBytes * 4 else { return raw }
        return comparisonKey(displayForm(raw))
    }

    package static func displayForm(_ raw: String) -> String {
        isASCII(raw) ? asciiDisplayForm(raw) : unicodeDisplayForm(raw)
    }

    package static func comparisonKey(_ display: String) -> String {
        isASCII(display) ? asciiLowercased(display) : display.lowercased().precomposedStringWithCanonicalMapping
    }

    // ASCII (nearly every username) takes a path of its own with the same result: no width
    // mapping applies to it, it is its own NFC and NFKC, and Foundation's whitespace set holds
    // exactly U+0009–000D and U+0020 of it. Foundation's normalisation and trimming were ~5% of
    // a sign-up's server CPU. A test compares both paths on ASCII.

    static func isASCII(_ text: String) -> Bool { text.utf8.allSatisfy { $0 < 0x80 } }

    package static func asciiDisplayForm(_ raw: String) -> String {
        let utf8 = Array(raw.utf8)
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || (0x09...0x0D).contains($0) }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }), let last = utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        if first == 0 && last == utf8.count - 1 { return raw }
        return String(decoding: utf8[first...last], as: UTF8.self)
    }

    package static func asciiLowercased(_ text: String) -> String {
        guard text.utf8.contains(where: { (0x41...0x5A).contains($0) }) else { return text }
        return String(decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    package static func unicodeDisplayForm(_ raw: String) -> String {
        var mapped = String.UnicodeScalarView()
        for scalar in raw.unicodeScalars {
            // RFC 8265 width mapping: the Halfwidth and Fullwidth Forms block and the ideographic
            // space map to their <wide>/<narrow> decompositions.
            if (0xFF00...0xFFEF).contains(scalar.value) || scalar.value == 0x3000 {
                mapped.append(contentsOf: String(scalar).precomposedStringWithCompatibilityMapping.unicodeScalars)
            } else {
                mapped.append(scalar)
            }
        }
        return String(mapped).trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping
    }

    private static func allowedASCII(_ scalar: Unicode.Scalar) -> Bool {
        isASCIILetter(scalar) || ("0"..."9").contains(scalar) || ["." as Unicode.Scalar, "_", "-", "@", "+"].contains(scalar)
    }

    /// Conjoining jamo (U+1100–11FF, A960–A97F, D7B0–D7FF): NFC composes modern ones into
    /// syllables, so any left after NFC are old or stray pieces (fillers included).
    private static func isConjoiningJamo(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return (0x1100...0x11FF).contains(value) || (0xA960...0xA97F).contains(value) || (0xD7B0...0xD7FF).contains(value)
    }

    private static func isASCIILetter(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
    }

    private static func describe(_ scalar: Unicode.Scalar) -> String {
        String(format: "U+%04X", scalar.value)
    }

    /// The script of a letter, from the Unicode block it sits in (close enough to the Script
    /// property for the mixing rule; letters of blocks not listed form a script per 128-code-point
    /// range).
    enum Script: Hashable {
        case latin, greek, cyrillic, armenian, hebrew, arabic, devanagari, bengali, gurmukhi, gujarati, oriya, tamil, telugu
        case kannada, malayalam, sinhala, thai, lao, tibetan, myanmar, georgian, hangul, ethiopic, cherokee, khmer, mongolian
        case hiragana, katakana, bopomofo, han
        case other(UInt32)

        static let table: [(ClosedRange<UInt32>, Script)] = [
            (0x00C0...0x024F, .latin), (0x1E00...0x1EFF, .latin), (0x2C60...0x2C7F, .latin), (0xA720...0xA7FF, .latin),
            (0xAB30...0xAB6F, .latin), (0x0250...0x02AF, .latin), (0x02B0...0x02FF, .latin),
            (0x0370...0x03FF, .greek), (0x1F00...0x1FFF, .greek),
            (0x0400...0x052F, .cyrillic), (0x1C80...0x1C8F, .cyrillic), (0x2DE0...0x2DFF, .cyrillic), (0xA640...0xA69F, .cyrillic),
            (0x0530...0x058F, .armenian), (0x0590...0x05FF, .hebrew),
            (0x0600...0x06FF, .arabic), (0x0750...0x077F, .arabic), (0x08A0...0x08FF, .arabic), (0xFB50...0xFDFF, .arabic),
            (0xFE70...0xFEFF, .arabic),
            (0x0900...0x097F, .devanagari), (0x0980...0x09FF, .bengali), (0x0A00...0x0A7F, .gurmukhi), (0x0A80...0x0AFF, .gujarati),
            (0x0B00...0x0B7F, .oriya), (0x0B80...0x0BFF, .tamil), (0x0C00...0x0C7F, .telugu), (0x0C80...0x0CFF, .kannada),
            (0x0D00...0x0D7F, .malayalam), (0x0D80...0x0DFF, .sinhala), (0x0E00...0x0E7F, .thai), (0x0E80...0x0EFF, .lao),
            (0x0F00...0x0FFF, .tibetan), (0x1000...0x109F, .myanmar), (0x10A0...0x10FF, .georgian), (0x2D00...0x2D2F, .georgian),
            (0x1100...0x11FF, .hangul), (0x3130...0x318F, .hangul), (0xAC00...0xD7AF, .hangul), (0xA960...0xA97F, .hangul),
            (0xD7B0...0xD7FF, .hangul),
            (0x1200...0x139F, .ethiopic), (0x13A0...0x13FF, .cherokee), (0xAB70...0xABBF, .cherokee),
            (0x1780...0x17FF, .khmer), (0x1800...0x18AF, .mongolian),
            (0x3040...0x309F, .hiragana), (0x30A0...0x30FF, .katakana), (0x31F0...0x31FF, .katakana),
            (0x3100...0x312F, .bopomofo), (0x31A0...0x31BF, .bopomofo),
            (0x3400...0x4DBF, .han), (0x4E00...0x9FFF, .han), (0xF900...0xFAFF, .han), (0x20000...0x3FFFF, .han), (0x3005...0x3007, .han),
        ]

        static func of(_ scalar: Unicode.Scalar) -> Script {
            let value = scalar.value
            for (range, script) in table where range.contains(value) { return script }
            return .other(value >> 7)
        }

        /// One script, or the combinations UTS #39 "highly restrictive" allows: Latin with Han
        /// and Hiragana/Katakana (Japanese), with Han and Bopomofo (Chinese), with Han and Hangul
        /// (Korean).
        static func mayMix(_ scripts: Set<Script>) -> Bool {
            if scripts.count <= 1 { return true }
            let japanese: Set<Script> = [.latin, .han, .hiragana, .katakana]
            let chinese: Set<Script> = [.latin, .han, .bopomofo]
            let korean: Set<Script> = [.latin, .han, .hangul]
            return scripts.isSubset(of: japanese) || scripts.isSubset(of: chinese) || scripts.isSubset(of: korean)
        }
    }
}

/// Two accounts whose usernames have one comparison key under the current rules (made before
/// the rules were): reported by `passkeyd migrate` and at start, never merged. The account
/// that keeps its older key is no longer found by its username (the name now finds the other
/// account); it still signs in with its passkeys (discoverable sign-in) until an operator
/// renames or merges one of the two.
public struct UsernameCollision: Sendable, Hashable, Codable {
    public var key: String
    /// The account that keeps its old comparison key.
    public var accountID: UUID
    public var username: String
    /// The account that already holds `key`.
    public var otherAccountID: UUID
    public var otherUsername: String

    package init(key: String, accountID: UUID, username: String, otherAccountID: UUID, otherUsername: String) {
        self.key = key
        self.accountID = accountID
        self.username = username
        self.otherAccountID = otherAccountID
        self.otherUsername = otherUsername
    }
}
