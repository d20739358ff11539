import Foundation
import PasskeyStore
import Testing
import WebAuthn

@testable import PasskeyServer

/// The hand-written answers are byte for byte what `JSONEncoder` (the API's encoder) writes.
@Suite("JSONWriter")
struct JSONWriterTests {
    static func both(_ value: some Encodable & JSONWritable) throws -> (String, String) {
        var writer = JSONWriter()
        value.write(to: &writer)
        return (String(decoding: writer.bytes, as: UTF8.self), String(decoding: try HTTP.encoder.encode(value), as: UTF8.self))
    }

    static let awkward = [
        "", "plain", "quote \" backslash \\ slash / done", "lines\n\r\t\u{08}\u{0C}", "controls \u{01}\u{1F}\u{7F}", "é 名前 🙂",
        "</script>",
    ]

    @Test func requestOptions() throws {
        for text in Self.awkward {
            let options = PublicKeyCredentialRequestOptionsJSON(
                challenge: Base64URLBytes(Array(0..<32)), timeout: 300_000, rpId: text,
                allowCredentials: [
                    PublicKeyCredentialDescriptorJSON(id: [1, 2, 3], transports: ["internal", text]),
                    PublicKeyCredentialDescriptorJSON(id: Array(repeating: 0xFF, count: 40)),
                ], userVerification: text, hints: [text, "hybrid"],
                extensions: [
                    "z": .object(["b": .number(1), "a": .array([.bool(true), .null, .number(-2.5), .number(1e20), .string(text)])]),
                    "appid": .string(text),
                ])
            let (fast, reference) = try Self.both(options)
            #expect(fast == reference)
        }
        let bare = PublicKeyCredentialRequestOptionsJSON(
            challenge: Base64URLBytes([9]), timeout: nil, rpId: "example.com", allowCredentials: [], userVerification: "required")
        let (fast, reference) = try Self.both(bare)
        #expect(fast == reference)
    }

    @Test func signInAnswers() throws {
        for (index, text) in Self.awkward.enumerated() {
            let account = Account(
                username: text, displayName: text, userHandle: Array(0..<64), createdAt: Date(),
                externalID: index % 2 == 0 ? nil : text)
            for date in [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_000_000.999), Date()] {
                let answer = SignInJSON(
                    user: UserJSON(account), token: text, expiresAt: date, accessToken: "eyJ.\(text)", accessTokenExpiresAt: date)
                let (fast, reference) = try Self.both(answer)
                #expect(fast == reference)
            }
        }
    }
}
