/// A small CBOR encoder (RFC 8949) producing definite lengths and the shortest argument form,
/// as CTAP2 canonical encoding requires. Map entries are written in the order given; build them
/// in canonical order (CTAP2 §6: shorter keys first, then bytewise) where that matters.
///
/// Used by the software authenticator and by tests; the verifier never re-encodes what it checks.
public enum CBORWriter {
    /// Encodes one data item. Floats are written as 8-byte doubles; encoding never fails.
    public static func encode(_ value: CBORValue) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    private static func head(_ major: UInt8, _ argument: UInt64, into out: inout [UInt8]) {
        let m = major << 5
        switch argument {
        case 0..<24: out.append(m | UInt8(argument))
        case 24...0xff: out += [m | 24, UInt8(argument)]
        case 0x100...0xffff:
            out.append(m | 25)
            appendBigEndian(argument, width: 2, into: &out)
        case 0x10000...0xffff_ffff:
            out.append(m | 26)
            appendBigEndian(argument, width: 4, into: &out)
        default:
            out.append(m | 27)
            appendBigEndian(argument, width: 8, into: &out)
        }
    }

    private static func appendBigEndian(_ value: UInt64, width: Int, into out: inout [UInt8]) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }

    private static func write(_ value: CBORValue, into out: inout [UInt8]) {
        switch value {
        case .unsigned(let n): head(0, n, into: &out)
        case .negative(let n): head(1, n, into: &out)
        case .bytes(let b):
            head(2, UInt64(b.count), into: &out)
            out += b
        case .text(let t):
            let u = Array(t.utf8)
            head(3, UInt64(u.count), into: &out)
            out += u
        case .array(let a):
            head(4, UInt64(a.count), into: &out)
            for element in a { write(element, into: &out) }
        case .map(let entries):
            head(5, UInt64(entries.count), into: &out)
            for entry in entries {
                write(entry.key, into: &out)
                write(entry.value, into: &out)
            }
        case .tagged(let tag, let inner):
            head(6, tag, into: &out)
            write(inner, into: &out)
        case .simple(let s):
            if s < 24 { out.append(0xe0 | s) } else { out += [0xf8, s] }
        case .bool(let b): out.append(b ? 0xf5 : 0xf4)
        case .null: out.append(0xf6)
        case .undefined: out.append(0xf7)
        case .float(let d):
            out.append(0xfb)
            appendBigEndian(d.bitPattern, width: 8, into: &out)
        }
    }
}
