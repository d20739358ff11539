import Foundation
import Testing
import WebAuthnTesting

@testable import PasskeyMail

struct MailMessageTests {
    func message(fromName: String = "Example", subject: String = "Your code", text: String = "Hello", html: String = "<p>Hello</p>") throws
        -> MailMessage
    {
        MailMessage(
            fromName: fromName, from: try MailAddress("no-reply@example.com"), to: try MailAddress("ann@example.com"), subject: subject,
            text: text, html: html, language: "fr")
    }

    func headers(_ bytes: [UInt8]) -> [String] {
        let text = String(decoding: bytes, as: UTF8.self)
        let head = text.components(separatedBy: "\r\n\r\n")[0]
        // Unfolded: a continuation line joins the one before it.
        return head.replacingOccurrences(of: "\r\n ", with: " ").components(separatedBy: "\r\n")
    }

    @Test func aDisplayNameCannotAddAHeader() throws {
        for name in ["Eve\r\nBcc: eve@evil.example", "Eve\nBcc: eve@evil.example", "Évé\r\nBcc: x@y.z", "Eve\u{2028}Bcc: x@y.z"] {
            let bytes = try message(fromName: name, subject: "Hi\r\nBcc: eve@evil.example").rendered(messageID: "id1", date: Date())
            let lines = headers(bytes)
            #expect(!lines.contains { $0.hasPrefix("Bcc:") }, "\(name.debugDescription) made a header")
            // Every line of the whole message ends in CRLF: no bare CR or LF.
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\n"))
            #expect(!text.replacingOccurrences(of: "\r\n", with: "").contains("\r"))
        }
    }

    @Test func nonASCIIHeadersAreEncodedWords() throws {
        let bytes = try message(fromName: "Société Générale", subject: "Votre code de connexion à passkeyd — ça marche")
            .rendered(messageID: "id2", date: Date(timeIntervalSince1970: 0))
        let lines = headers(bytes)
        #expect(bytes.allSatisfy { $0 < 0x80 })
        let from = try #require(lines.first { $0.hasPrefix("From: ") })
        #expect(from.hasPrefix("From: =?utf-8?b?") && from.hasSuffix(" <no-reply@example.com>"))
        let subject = try #require(lines.first { $0.hasPrefix("Subject: ") })
        let decoded = subject.dropFirst(9).split(separator: " ").map { word -> String in
            let base64 = word.dropFirst(10).dropLast(2)
            return String(decoding: Data(base64Encoded: String(base64)) ?? Data(), as: UTF8.self)
        }.joined()
        #expect(decoded == "Votre code de connexion à passkeyd — ça marche")
        #expect(lines.contains("Date: Thu, 1 Jan 1970 00:00:00 +0000"))
        #expect(lines.contains("Content-Language: fr"))
        #expect(lines.contains("Message-ID: <id2@example.com>"))
        // RFC 2047 §2: no encoded word is longer than 75 characters.
        for word in subject.split(separator: " ") where word.hasPrefix("=?") { #expect(word.count <= 75) }
    }

    @Test func anASCIINameIsAQuotedString() throws {
        let lines = headers(try message(fromName: "Ann \"the\" Admin\\").rendered(messageID: "x", date: Date()))
        #expect(lines.contains("From: \"Ann \\\"the\\\" Admin\\\\\" <no-reply@example.com>"))
    }

    @Test func bodiesAreQuotedPrintableLinesOfAtMost76() throws {
        let long = String(repeating: "é", count: 200) + " end"
        let text = ".starts with a dot\nFrom the start\ntrailing space \n\(long)\n= sign"
        let bytes = try message(text: text).rendered(messageID: "x", date: Date())
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        #expect(lines.allSatisfy { $0.utf8.count <= 78 })
        #expect(lines.contains("=2Estarts with a dot"))
        #expect(lines.contains("=46rom the start"))
        #expect(lines.contains("trailing space=20"))
        #expect(lines.contains("=3D sign"))
        // Decoding the plain part gives the text back.
        let plain = try #require(
            String(decoding: bytes, as: UTF8.self).components(separatedBy: "quoted-printable\r\n\r\n").dropFirst().first)
        let body = plain.components(separatedBy: "\r\n--=_passkeyd_")[0]
        #expect(SMTPTestServer.decodeQuotedPrintable(body) == text.replacingOccurrences(of: "\n", with: "\r\n"))
    }

    @Test func dotStuffingDoublesLeadingDotsAndEndsTheData() {
        let stuffed = SMTPClient.dotStuffed(Array(".\r\n..x\r\nline\nbare\rcr\r\nlast".utf8))
        #expect(String(decoding: stuffed, as: UTF8.self) == "..\r\n...x\r\nline\r\nbare\r\ncr\r\nlast\r\n.\r\n")
    }

    /// A character longer than an encoded word's 45 bytes is left out, never cut in two.
    @Test func encodedWordsHoldOnlyWholeCharacters() throws {
        let monster = "e" + String(repeating: "\u{0301}", count: 30)  // one character, 61 bytes
        let words = MailMessage.encodedWords("Bonjour \(monster) à vous")
        for word in words.split(separator: " ") {
            let base64 = word.dropFirst(10).dropLast(2)
            let bytes = try #require(Data(base64Encoded: String(base64)))
            #expect(String(bytes: bytes, encoding: .utf8) != nil, "\(word) is not whole UTF-8")
        }
    }
}
