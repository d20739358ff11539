/// The TPM 2.0 structures a `tpm` attestation statement carries (TPM 2.0 Library, Part 2).
/// All integers are big-endian; `TPM2B_*` is a UInt16 size followed by that many bytes.
enum TPM {
    static let generatedValue: UInt32 = 0xff54_4347  // TPM_GENERATED_VALUE
    static let stAttestCertify: UInt16 = 0x8017  // TPM_ST_ATTEST_CERTIFY
    static let algRSA: UInt16 = 0x0001, algECC: UInt16 = 0x0023, algNull: UInt16 = 0x0010
    static let algSHA1: UInt16 = 0x0004, algSHA256: UInt16 = 0x000b, algSHA384: UInt16 = 0x000c, algSHA512: UInt16 = 0x000d

    /// `TPMT_PUBLIC` (Part 2 §12.2.4):
    /// ```
    /// type u16 | nameAlg u16 | objectAttributes u32 | authPolicy TPM2B
    /// parameters: RSA: symmetric u16 [keyBits u16, mode u16] | scheme u16 [hashAlg u16] | keyBits u16 | exponent u32
    ///             ECC: symmetric u16 [keyBits u16, mode u16] | scheme u16 [hashAlg u16] | curveID u16 | kdf u16 [hashAlg u16]
    /// unique:     RSA: TPM2B modulus;  ECC: TPM2B x | TPM2B y
    /// ```
    struct Public {
        enum Key {
            case rsa(modulus: [UInt8], exponent: UInt32)
            case ecc(curveID: UInt16, x: [UInt8], y: [UInt8])
        }
        let nameAlg: UInt16
        let key: Key

        init(bytes: [UInt8]) throws(WebAuthnError) {
            var reader = ByteReader(bytes, errorCode: .attestationInvalid)
            let type = try reader.readUInt16("pubArea.type")
            nameAlg = try reader.readUInt16("pubArea.nameAlg")
            _ = try reader.readUInt32("pubArea.objectAttributes")
            _ = try TPM.readSized(&reader, "pubArea.authPolicy")
            // symmetric: TPMT_SYM_DEF_OBJECT
            if try reader.readUInt16("pubArea.symmetric") != TPM.algNull {
                _ = try reader.readUInt16("pubArea.symmetric.keyBits")
                _ = try reader.readUInt16("pubArea.symmetric.mode")
            }
            // scheme: TPMT_RSA_SCHEME / TPMT_ECC_SCHEME
            if try reader.readUInt16("pubArea.scheme") != TPM.algNull {
                _ = try reader.readUInt16("pubArea.scheme.hashAlg")
            }
            switch type {
            case TPM.algRSA:
                _ = try reader.readUInt16("pubArea.keyBits")
                let exponent = try reader.readUInt32("pubArea.exponent")
                let modulus = try TPM.readSized(&reader, "pubArea.unique")
                key = .rsa(modulus: modulus, exponent: exponent == 0 ? 65537 : exponent)
            case TPM.algECC:
                let curveID = try reader.readUInt16("pubArea.curveID")
                if try reader.readUInt16("pubArea.kdf") != TPM.algNull {
                    _ = try reader.readUInt16("pubArea.kdf.hashAlg")
                }
                let x = try TPM.readSized(&reader, "pubArea.unique.x")
                let y = try TPM.readSized(&reader, "pubArea.unique.y")
                key = .ecc(curveID: curveID, x: x, y: y)
            default:
                throw WebAuthnError(.attestationInvalid, "tpm pubArea.type \(type) is neither RSA nor ECC")
            }
            try reader.finish("pubArea")
        }
    }

    /// `TPMS_ATTEST` for TPM2_Certify (Part 2 §10.12.12):
    /// ```
    /// magic u32 | type u16 | qualifiedSigner TPM2B | extraData TPM2B
    /// clockInfo: clock u64 | resetCount u32 | restartCount u32 | safe u8
    /// firmwareVersion u64 | attested (TPMS_CERTIFY_INFO): name TPM2B | qualifiedName TPM2B
    /// ```
    struct Attest {
        let magic: UInt32
        let type: UInt16
        let extraData: [UInt8]
        let attestedName: [UInt8]

        init(bytes: [UInt8]) throws(WebAuthnError) {
            var reader = ByteReader(bytes, errorCode: .attestationInvalid)
            magic = try reader.readUInt32("certInfo.magic")
            type = try reader.readUInt16("certInfo.type")
            _ = try TPM.readSized(&reader, "certInfo.qualifiedSigner")
            extraData = try TPM.readSized(&reader, "certInfo.extraData")
            try reader.skip(8 + 4 + 4 + 1, "certInfo.clockInfo")
            try reader.skip(8, "certInfo.firmwareVersion")
            attestedName = try TPM.readSized(&reader, "certInfo.attested.name")
            _ = try TPM.readSized(&reader, "certInfo.attested.qualifiedName")
            try reader.finish("certInfo")
        }
    }

    static func readSized(_ reader: inout ByteReader, _ what: String) throws(WebAuthnError) -> [UInt8] {
        let size = Int(try reader.readUInt16("\(what).size"))
        return try reader.readBytes(size, what)
    }
}
