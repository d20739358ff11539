/// A minimal DER TLV reader for the few certificate extensions attestation formats read
/// themselves (Android KeyDescription, Apple nonce, FIDO AAGUID). Definite lengths only,
/// high tag numbers supported (Android uses tags up to [719]), lengths checked with `Int(exactly:)`.
///
/// TLV layout: identifier (class 2 bits | constructed 1 bit | tag 5 bits, or 31 then base-128
/// tag bytes) | length (short form < 128, or 0x80|n then n big-endian bytes) | value.
struct DERReader {
    struct Element {
        enum TagClass: UInt8 {
            case universal = 0
            case application = 1
            case contextSpecific = 2
            case `private` = 3
        }
        let tagClass: TagClass
        let constructed: Bool
        let tag: UInt64
        let value: [UInt8]

        /// The children of a constructed element.
        func children() throws(WebAuthnError) -> [Element] {
            var reader = DERReader(value)
            var out: [Element] = []
            while !reader.isAtEnd { out.append(try reader.read()) }
            return out
        }

        /// An INTEGER or ENUMERATED value that fits in Int64.
        func integer() throws(WebAuthnError) -> Int64 {
            guard tagClass == .universal, tag == 2 || tag == 10, !value.isEmpty, value.count <= 8 else {
                throw WebAuthnError(.attestationInvalid, "expected a small DER INTEGER")
            }
            var result: Int64 = value[0] & 0x80 != 0 ? -1 : 0
            for byte in value { result = result << 8 | Int64(byte) }
            return result
        }

        func isUniversal(_ tag: UInt64) -> Bool { tagClass == .universal && self.tag == tag }
    }

    private var reader: ByteReader

    init(_ bytes: [UInt8]) {
        reader = ByteReader(bytes, errorCode: .attestationInvalid)
    }

    var isAtEnd: Bool { reader.isAtEnd }

    mutating func read() throws(WebAuthnError) -> Element {
        let identifier = try reader.readByte("DER identifier")
        guard let tagClass = Element.TagClass(rawValue: identifier >> 6) else {
            throw WebAuthnError(.attestationInvalid, "bad DER class")
        }
        var tag = UInt64(identifier & 0x1f)
        if tag == 0x1f {
            tag = 0
            var byte: UInt8
            var count = 0
            repeat {
                byte = try reader.readByte("DER tag")
                count += 1
                guard count <= 4 else { throw WebAuthnError(.attestationInvalid, "DER tag too long") }
                tag = tag << 7 | UInt64(byte & 0x7f)
            } while byte & 0x80 != 0
        }
        let first = try reader.readByte("DER length")
        let length: Int
        if first < 0x80 {
            length = Int(first)
        } else {
            let width = Int(first & 0x7f)
            guard width >= 1, width <= 4 else { throw WebAuthnError(.attestationInvalid, "unsupported DER length form") }
            let raw = try reader.readUInt(width: width, "DER length")
            guard let exact = Int(exactly: raw) else { throw WebAuthnError(.attestationInvalid, "DER length overflow") }
            length = exact
        }
        let value = try reader.readBytes(length, "DER value")
        return Element(tagClass: tagClass, constructed: identifier & 0x20 != 0, tag: tag, value: value)
    }

    /// Parses exactly one element spanning all of `bytes`.
    static func single(_ bytes: [UInt8]) throws(WebAuthnError) -> Element {
        var reader = DERReader(bytes)
        let element = try reader.read()
        guard reader.isAtEnd else { throw WebAuthnError(.attestationInvalid, "trailing bytes after DER element") }
        return element
    }
}
