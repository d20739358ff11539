import Foundation
import Testing

@testable import WebAuthn

@Suite("JSON reader")
struct JSONReaderTests {
    static let sample = #"{"id":"AQID","n":[1,-2.5e3,0,true,false,null],"s":"a\"b\\c\/\u00e9\ud83d\ude00\n","o":{"k":{}}}"#

    @Test func readsEveryJSONValue() async throws {
        let value = try JSONReader.parse(Array(Self.sample.utf8))
        #expect(value["id"] == .string("AQID"))
        #expect(value["n"] == .array([.number(1), .number(-2500), .number(0), .bool(true), .bool(false), .null]))
        #expect(value["s"] == .string("a\"b\\c/é😀\n"))
        #expect(value["o"]?["k"] == .object([:]))
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#, "{" + (0..<40).map { "\"k\($0)\":1" }.joined(separator: ",") + ",\"k3\":2}",
        "{} x", "[1,]", "{\"a\" 1}", "01", "1.", "-", "1e", "\"\\x\"", "\"\\ud800\"", "\"a\u{01}\"", "tru", "nul",
        "\"unterminated", "[", "", "{\"a\":}", String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
    ])
    func rejectsMalformedJSON(_ text: String) {
        #expect(throws: WebAuthnError(.malformedJSON, "")) { try JSONReader.parse(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: WebAuthnError(.malformedJSON, "")) { try JSONReader.parse([0x22, 0xff, 0x22]) }
    }

    @Test func everyTruncatedPrefixThrows() {
        let bytes = Array(Self.sample.utf8)
        for length in 0..<bytes.count {
            #expect(throws: WebAuthnError.self) { try JSONReader.parse(Array(bytes[0..<length])) }
        }
    }

    @Test func flippedBitsNeverCrash() {
        let bytes = Array(Self.sample.utf8)
        for index in bytes.indices {
            for bit in 0..<8 {
                var mutated = bytes
                mutated[index] ^= 1 << bit
                _ = try? JSONReader.parse(mutated)
            }
        }
    }

    @Test func typedAccessNamesThePath() async throws {
        let object = try JSONObject(bytes: Array(#"{"response":{"signature":5,"x":"!!"}}"#.utf8))
        do {
            _ = try object.object("response").bytes("signature")
            Issue.record("a number is not bytes")
        } catch {
            #expect(error.reason == "response.signature has the wrong JSON type")
        }
        #expect(throws: WebAuthnError(.malformedJSON, "")) { try object.object("response").bytes("x") }
        #expect(throws: WebAuthnError(.malformedJSON, "")) { try object.object("response").bytes("missing") }
    }

    @Test func optionsJSONMayLeaveOutEveryMemberWithADefault() async throws {
        let creation = try JSONDecoder().decode(
            PublicKeyCredentialCreationOptionsJSON.self,
            from: Data(
                #"{"rp":{"id":"example.com","name":"Example"},"user":{"id":"AAAA","name":"ada","displayName":"Ada"},"challenge":"AAAA","pubKeyCredParams":[{"type":"public-key","alg":-7}]}"#
                    .utf8))
        #expect(creation.hints.isEmpty && creation.excludeCredentials.isEmpty && creation.attestation == "none" && creation.timeout == nil)
        let request = try JSONDecoder().decode(
            PublicKeyCredentialRequestOptionsJSON.self, from: Data(#"{"challenge":"AAAA","rpId":"example.com"}"#.utf8))
        #expect(request.allowCredentials.isEmpty && request.hints.isEmpty && request.userVerification == "preferred")
        // What is required stays required.
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(PublicKeyCredentialRequestOptionsJSON.self, from: Data(#"{"rpId":"example.com"}"#.utf8))
        }
    }

    @Test func aTokenBindingStringFromOlderBrowsersIsToleratedAsAbsent() async throws {
        let old = try CollectedClientData(
            bytes: Array(#"{"type":"webauthn.get","challenge":"AAAA","origin":"https://example.com","tokenBinding":"not-supported"}"#.utf8))
        #expect(old.tokenBindingStatus == nil)
        let current = try CollectedClientData(
            bytes: Array(
                #"{"type":"webauthn.get","challenge":"AAAA","origin":"https://example.com","tokenBinding":{"status":"supported"}}"#.utf8))
        #expect(current.tokenBindingStatus == "supported")
        #expect(throws: WebAuthnError.self) {
            try CollectedClientData(
                bytes: Array(#"{"type":"webauthn.get","challenge":"AAAA","origin":"https://example.com","tokenBinding":5}"#.utf8))
        }
    }
}
