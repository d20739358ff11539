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

    @Test func plainListsReadAsJSONDecoderReadsThem() throws {
        let lists: [[String]] = [
            [], ["internal"], ["internal", "hybrid"], ["usb", "nfc", "ble", "smart-card", "hybrid", "internal"], ["é", "名前", ""],
            ["comma, inside"], ["quote \" inside"], ["back\\slash"], ["slash/"], ["line\nbreak"],
        ]
        for list in lists {
            let text = StoreValues.encodeList(list)
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
}
