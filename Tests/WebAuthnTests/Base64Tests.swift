import Foundation
import Testing
import WebAuthnTesting

@testable import WebAuthn

@Suite("Base64 at the JSON edge")
struct Base64Tests {
    @Test(arguments: ["-_8", "-_8=", "+/8", "+/8="])
    func acceptsBase64URLAndStandardPaddedOrNot(_ text: String) {
        #expect(Base64URLBytes(encoded: text)?.bytes == [0xfb, 0xff])
    }

    @Test(arguments: ["-/8", "ab=c", "a", "ab===", "ab c", "abc*", "YQ==YQ==", "ab=", "YR"])
    func rejectsAnythingElse(_ text: String) {
        #expect(Base64URLBytes(encoded: text) == nil)
    }

    @Test func encodesUnpaddedBase64URL() {
        #expect(Base64URLBytes([0xfb, 0xff]).base64URL == "-_8")
        #expect(Base64URLBytes([0xfb, 0xff]).base64 == "+/8=")
        #expect(Base64URLBytes([]).base64URL == "")
    }

    @Test func roundTripsEveryLength() {
        var generator = SplitMix64(seed: 7)
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64URLBytes(encoded: Base64URLBytes(bytes).base64URL)?.bytes == bytes)
            #expect(Base64URLBytes(encoded: Base64URLBytes(bytes).base64)?.bytes == bytes)
        }
    }

    /// Every length, every alphabet and padding choice, as Foundation writes it.
    @Test func encodesAsFoundationDoes() {
        var generator = SplitMix64(seed: 11)
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let standard = Data(bytes).base64EncodedString()
            let unpadded = String(standard.prefix { $0 != "=" })
            #expect(Base64.encodeStandard(bytes) == standard)
            #expect(Base64.encodeStandardUnpadded(bytes) == unpadded)
            #expect(Base64.encodeURL(bytes) == unpadded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_"))
        }
    }

    @Test func unpaddedURLFlavorRejectsOtherSpellings() {
        #expect(Base64.decode("-_8", flavor: .urlUnpadded) == [0xfb, 0xff])
        #expect(Base64.decode("+/8", flavor: .urlUnpadded) == nil)
        #expect(Base64.decode("-_8=", flavor: .urlUnpadded) == nil)
    }
}
