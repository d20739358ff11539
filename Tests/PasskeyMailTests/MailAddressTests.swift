import Foundation
import Testing

@testable import PasskeyMail

struct MailAddressTests {
    @Test(arguments: [
        ("ann@example.com", "ann@example.com"),
        ("  Ann.Lee+passkeys@Example.COM ", "Ann.Lee+passkeys@example.com"),
        ("\"ann lee\"@example.com", "\"ann lee\"@example.com"),
        ("\"a@b\"@example.com", "\"a@b\"@example.com"),
        ("ann@bücher.example", "ann@xn--bcher-kva.example"),
        ("ann@例え.テスト", "ann@xn--r8jz45g.xn--zckzah"),
        ("josé@example.com", "josé@example.com"),
        ("ann@münchen.de", "ann@xn--mnchen-3ya.de"),
    ])
    func addressesAreReadInOneSpelling(input: String, expected: String) throws {
        #expect(try MailAddress(input).description == expected)
    }

    @Test(arguments: [
        "ann@example.com\r\nBcc: eve@example.com", "ann@example.com\n", "ann\r@example.com", "an\u{0}n@example.com",
        "ann", "@example.com", "ann@", "ann@localhost", "ann@[192.0.2.1]", "ann@192.0.2.1", "ann..lee@example.com", ".ann@example.com",
        "ann.@example.com", "ann lee@example.com", "ann@exa mple.com", "ann@-example.com", "ann@example-.com", "ann@exa_mple.com",
        "\"ann\"lee\"@example.com", "\"ann\\\"@example.com", "ann@ex..ample.com", "ann@example.com.",
        String(repeating: "a", count: 65) + "@example.com", "ann@" + String(repeating: "a", count: 64) + ".com",
        String(repeating: "a", count: 64) + "@" + Array(repeating: String(repeating: "b", count: 60), count: 4).joined(separator: ".")
            + ".com",
        "ann@exa\u{2028}mple.com", "ann@bü☃.example",
    ])
    func badAddressesAreRefused(input: String) {
        #expect(throws: MailAddress.Invalid.self) { try MailAddress(input) }
    }

    @Test func theKeyIgnoresCase() throws {
        #expect(try MailAddress("Ann@Example.com").key == MailAddress("ann@EXAMPLE.com").key)
        #expect(try MailAddress("josé@example.com").needsSMTPUTF8)
        #expect(try !MailAddress("ann@bücher.example").needsSMTPUTF8)
    }

    /// RFC 3492 §7.1's samples (lowercased where the RFC mixes case).
    @Test(arguments: [
        (
            "\u{0644}\u{064A}\u{0647}\u{0645}\u{0627}\u{0628}\u{062A}\u{0643}\u{0644}\u{0645}\u{0648}\u{0634}\u{0639}\u{0631}\u{0628}\u{064A}\u{061F}",
            "egbpdaj6bu4bxfgehfvwxn"
        ),
        ("\u{4ED6}\u{4EEC}\u{4E3A}\u{4EC0}\u{4E48}\u{4E0D}\u{8BF4}\u{4E2D}\u{6587}", "ihqwcrb4cv8a8dqg056pqjye"),
        ("bücher", "bcher-kva"),
        ("\u{3072}\u{3068}\u{3064}\u{5C4B}\u{6839}\u{306E}\u{4E0B}2", "2-u9tlzr9756bt3uc0v"),
    ])
    func punycodeMatchesTheRFCSamples(unicode: String, ascii: String) {
        #expect(Punycode.encode(unicode) == ascii)
    }
}
