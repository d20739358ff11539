import Foundation
import Testing

@testable import PasskeyStore

/// The stores' list column (transports) is read without Foundation when it is plain; the fast
/// reader agrees with `JSONDecoder` on everything it accepts and leaves everything else to it.
@Suite("Store values")
struct StoreValuesTests {
    /// `UUID.random()` makes version 4, variant 10 UUIDs (RFC 9562 §5.4), every one new.
    @Test func randomUUIDsAreVersion4() {
        var seen = Set<UUID>()
        for _ in 0..<1000 {
            let id = UUID.random()
            let text = id.uuidString
            #expect(Array(text)[14] == "4", "\(text)")
            #expect("89AB".contains(Array(text)[19]), "\(text)")
            #expect(UUID(uuidString: text) == id)
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }

    /// IDs are bound as the text `uuidString` writes and read back as Foundation reads them.
    @Test func uuidTextIsFoundations() {
        for _ in 0..<1000 {
            let id = UUID()
            let written = id.withUppercaseText { String(decoding: $0, as: UTF8.self) }
            #expect(written == id.uuidString)
            #expect(UUID(text: written) == id)
            #expect(UUID(text: written.lowercased()) == id)
        }
        let odd = [
            "", "not a uuid", "E621E1F8-C36C-495A-93FC-0C247A3E6E5", "E621E1F8-C36C-495A-93FC-0C247A3E6E5FF",
            "E621E1F8XC36C-495A-93FC-0C247A3E6E5F", "G621E1F8-C36C-495A-93FC-0C247A3E6E5F", "E621E1F8-C36C-495A-93FC-0C247A3E6E5F",
            "e621e1f8-c36c-495a-93fc-0c247a3e6e5f", "E621E1F8C36C495A93FC0C247A3E6E5F", " E621E1F8-C36C-495A-93FC-0C247A3E6E5",
            "E621E1F8-C36C-495A-93FC-0C247A3E6É",
        ]
        for text in odd { #expect(UUID(text: text) == UUID(uuidString: text), "\(text)") }
    }

    @Test func plainListsReadAsJSONDecoderReadsThem() throws {
        let lists: [[String]] = [
            [], ["internal"], ["internal", "hybrid"], ["usb", "nfc", "ble", "smart-card", "hybrid", "internal"], ["é", "名前", ""],
            ["comma, inside"], ["quote \" inside"], ["back\\slash"], ["slash/"], ["line\nbreak"], ["tab\t"], ["del\u{7F}"],
            ["~ !#$%&'()*+,-.:;<=>?@[]^_`{|}"], ["usb", "a/b"],
        ]
        for list in lists {
            let text = StoreValues.encodeList(list)
            #expect(text == String(decoding: try JSONEncoder().encode(list), as: UTF8.self))
            #expect(StoreValues.decodeList(text) == list, "\(text)")
            if let plain = StoreValues.plainList(text) { #expect(plain == list, "\(text)") }
        }
        for text in [
            "", "[", "]", "[,]", #"["a",]"#, #"[,"a"]"#, #"["a""b"]"#, #"["a" ]"#, #"[ "a"]"#, #"["a\"]"#, "[\"a\u{01}\"]", #"["a"#,
            #"{"a":1}"#, "[1]", "null",
        ] {
            let reference = try? JSONDecoder().decode([String].self, from: Data(text.utf8))
            if let plain = StoreValues.plainList(text) {
                #expect(plain == reference, "\(text)")
            }
            #expect(StoreValues.decodeList(text) == (reference ?? []), "\(text)")
        }
        #expect(StoreValues.decodeList(nil) == [])
    }

    /// ASCII usernames take a path of their own: it gives what Foundation's trimming,
    /// lower-casing and normalisation give, on names with every ASCII character (controls and
    /// the whitespace Foundation trims included).
    @Test func asciiUsernamesNormaliseAsFoundationDoes() {
        var samples = [
            "", " ", "ada", "Ada", "  ADA\t", "\r\nada\r\n", "a b", "\u{0B}x\u{0C}", "\u{1C}x\u{1F}", "MiXeD.Case_1-2@x+y", "\u{00}",
            "\u{7F}",
        ]
        for _ in 0..<500 {
            samples.append(String(decoding: (0..<Int.random(in: 0...12)).map { _ in UInt8.random(in: 0...0x7F) }, as: UTF8.self))
        }
        for raw in samples {
            let display = Username.unicodeDisplayForm(raw)
            #expect(Username.asciiDisplayForm(raw) == display, "\(Array(raw.utf8))")
            #expect(Username.displayForm(raw) == display)
            #expect(Username.asciiLowercased(display) == display.lowercased().precomposedStringWithCanonicalMapping)
            #expect(Array(Username.comparisonKey(display).utf8) == Array(display.lowercased().precomposedStringWithCanonicalMapping.utf8))
        }
        #expect(Username.key(" Ada ") == "ada" && Username.key("Ａｄａ") == "ada")
    }
}
