import Testing
import WebAuthnTesting

@testable import WebAuthn

@Suite("CBOR reader")
struct CBORTests {
    /// A COSE key and an attestation-object-like map: the shapes WebAuthn reads most.
    static let sample: [UInt8] = CBORWriter.encode(
        .map([
            CBORMapEntry(.text("fmt"), .text("packed")),
            CBORMapEntry(
                .text("attStmt"),
                .map([
                    CBORMapEntry(.text("alg"), .int(-7)),
                    CBORMapEntry(.text("sig"), .bytes(Array(repeating: 0xab, count: 70))),
                    CBORMapEntry(.text("x5c"), .array([.bytes([1, 2, 3]), .bytes(Array(repeating: 9, count: 300))])),
                ])),
            CBORMapEntry(.text("authData"), .bytes(Array(0..<200))),
            CBORMapEntry(.int(-65535), .unsigned(UInt64.max)),
            CBORMapEntry(.bool(true), .null),
            CBORMapEntry(.float(1.5), .undefined),
        ]))

    @Test func roundTripsWhatTheWriterWrites() async throws {
        let value = try CBORReader.decode(Self.sample)
        #expect(CBORWriter.encode(value) == Self.sample)
        #expect(value[text: "fmt"]?.textValue == "packed")
        #expect(value[text: "attStmt"]?[text: "alg"]?.intValue == -7)
        #expect(value[.int(-65535)] == .unsigned(UInt64.max))
    }

    @Test(
        arguments: [
            ([0x00], CBORValue.unsigned(0)), ([0x17], .unsigned(23)), ([0x18, 0x18], .unsigned(24)),
            ([0x19, 0x01, 0x00], .unsigned(256)), ([0x20], .negative(0)), ([0x38, 0x63], .negative(99)),
            ([0x40], .bytes([])), ([0x60], .text("")), ([0x80], .array([])), ([0xa0], .map([])),
            ([0xf4], .bool(false)), ([0xf5], .bool(true)), ([0xf6], .null), ([0xf7], .undefined),
            ([0xf9, 0x3c, 0x00], .float(1.0)), ([0xfa, 0x3f, 0xc0, 0x00, 0x00], .float(1.5)),
            ([0xc2, 0x41, 0x01], .tagged(2, .bytes([1]))), ([0xf0], .simple(16)),
        ] as [([UInt8], CBORValue)])
    func decodesRFC8949Examples(_ bytes: [UInt8], _ expected: CBORValue) throws {
        #expect(try CBORReader.decode(bytes) == expected)
    }

    @Test func negativeIntegersMapToSwiftValues() async throws {
        #expect(try CBORReader.decode([0x26]).intValue == -7)
        #expect(try CBORReader.decode([0x39, 0x01, 0x00]).intValue == -257)
        #expect(CBORValue.negative(UInt64.max).intValue == nil)
    }

    @Test func everyTruncatedPrefixThrows() {
        for length in 0..<Self.sample.count {
            #expect(throws: WebAuthnError.self) { try CBORReader.decode(Array(Self.sample[0..<length])) }
        }
    }

    @Test func trailingBytesAreRejected() {
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x01, 0x00]) }
        #expect(throws: WebAuthnError.self) { try CBORReader.decode(Self.sample + [0x00]) }
    }

    @Test func prefixDecodingReportsTheLengthUsed() async throws {
        let (value, length) = try CBORReader.decodePrefix([0x82, 0x01, 0x02, 0xff, 0xff])
        #expect(value == .array([.unsigned(1), .unsigned(2)]))
        #expect(length == 3)
    }

    @Test func duplicateMapKeysAreRejected() {
        // {1: 1, 1: 2}
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0xa2, 0x01, 0x01, 0x01, 0x02]) }
        // {"a": 1, "a": 1}
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x01]) }
    }

    @Test func duplicatesInLargeMapsAreFound() async throws {
        // 40 distinct keys then a repeat of the first: past the linear-scan size.
        var entries = (0..<40).map { CBORMapEntry(.int(Int64($0)), .null) }
        let distinct = CBORWriter.encode(.map(entries))
        #expect(try CBORReader.decode(distinct).mapValue?.count == 40)
        entries.append(CBORMapEntry(.int(0), .bool(true)))
        #expect(throws: WebAuthnError.self) { try CBORReader.decode(CBORWriter.encode(.map(entries))) }
    }

    @Test func nestingDeeperThanTheLimitIsRejected() {
        let deep = [UInt8](repeating: 0x81, count: 17) + [0x00]
        #expect(throws: WebAuthnError.self) { try CBORReader.decode(deep) }
        let fine = [UInt8](repeating: 0x81, count: 16) + [0x00]
        #expect(throws: Never.self) { try CBORReader.decode(fine) }
    }

    @Test func tooManyItemsAreRejected() {
        // An array of 5000 zeros: fits the bytes, exceeds the item limit.
        let many: [UInt8] = [0x99, 0x13, 0x88] + [UInt8](repeating: 0, count: 5000)
        #expect(throws: WebAuthnError.self) { try CBORReader.decode(many) }
    }

    @Test func lengthsBeyondTheInputAreRejectedBeforeAllocating() {
        // Byte string claiming 2^63 bytes; array claiming 2^32 elements; map claiming 2^31 pairs.
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x5b, 0x80, 0, 0, 0, 0, 0, 0, 0]) }
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x9b, 0, 0, 0, 1, 0, 0, 0, 0, 0]) }
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0xba, 0x80, 0, 0, 0, 0, 0]) }
    }

    @Test func indefiniteLengthsAreRejectedUnlessAllowed() async throws {
        let indefiniteMap: [UInt8] = [0xbf, 0x61, 0x61, 0x01, 0xff]
        #expect(throws: WebAuthnError.self) { try CBORReader.decode(indefiniteMap) }
        let lenient = CBORReader.Limits(allowIndefiniteLength: true)
        #expect(try CBORReader.decode(indefiniteMap, limits: lenient) == .map([CBORMapEntry(.text("a"), .unsigned(1))]))
        #expect(try CBORReader.decode([0x5f, 0x41, 0x01, 0x42, 0x02, 0x03, 0xff], limits: lenient) == .bytes([1, 2, 3]))
        #expect(try CBORReader.decode([0x9f, 0x01, 0x9f, 0xff, 0xff], limits: lenient) == .array([.unsigned(1), .array([])]))
        // Chunks of the wrong type, a break with no container, an unterminated array.
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x5f, 0x61, 0x61, 0xff], limits: lenient) }
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0xff], limits: lenient) }
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x9f, 0x01], limits: lenient) }
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x3f], limits: lenient) }
    }

    @Test func malformedHeadsAreRejected() {
        for bytes: [UInt8] in [[0x1c], [0x1d], [0x1e], [0xfc], [0xf8, 0x10], [0x7f, 0xff], [0x62, 0xc3, 0x28]] {
            #expect(throws: WebAuthnError.self, "\(bytes)") { try CBORReader.decode(bytes) }
        }
    }

    @Test func invalidUTF8TextIsRejected() {
        #expect(throws: WebAuthnError.self) { try CBORReader.decode([0x62, 0xff, 0xfe]) }
    }

    @Test func flippedBitsNeverCrash() {
        // Every single-bit flip of the sample either decodes or throws; none traps.
        var decoded = 0
        for index in Self.sample.indices {
            for bit in 0..<8 {
                var mutated = Self.sample
                mutated[index] ^= 1 << bit
                if (try? CBORReader.decode(mutated)) != nil { decoded += 1 }
            }
        }
        #expect(decoded > 0)
    }

    @Test func randomInputNeverCrashes() {
        var generator = SplitMix64(seed: 0x5eed)
        for _ in 0..<20_000 {
            let length = Int.random(in: 0..<64, using: &generator)
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = try? CBORReader.decode(bytes, limits: .init(allowIndefiniteLength: true))
        }
    }
}
