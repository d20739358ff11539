import Foundation
import PasskeyCore
import Testing
import WebAuthnTesting

/// bcrypt against hashes made by other implementations (Python's `bcrypt`, i.e. OpenBSD's C code,
/// and the OpenBSD test vector), and the other way round through py_webauthn's Python when present.
@Suite("bcrypt")
struct BcryptTests {
    static let vectors: [(String, String)] = [
        ("password", "$2b$04$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq."),
        ("", "$2b$04$32WDvjqX8Y.cvbQsTLdfsepk25iQwWnhHn.xTNB125/vRxdkZqlmy"),
        ("été pass", "$2b$05$yWgAi5PgpYKlVZv.lqzVMO1blDdmNETFVi9q82dNdTDr885kvhBGG"),
        ("U*U", "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"),
    ]

    @Test(arguments: vectors)
    func verifiesHashesFromOtherImplementations(_ password: String, _ text: String) throws {
        let hash = try #require(Bcrypt(text))
        #expect(hash.verify(password))
        #expect(!hash.verify(password + "x"))
        #expect(hash.text == text)
    }

    @Test func hashesRoundTripAndOnly72BytesCount() throws {
        let made = Bcrypt(hashing: "correct horse", cost: 4)
        #expect(made.text.hasPrefix("$2b$04$") && made.text.count == 60)
        let parsed = try #require(Bcrypt(made.text))
        #expect(parsed.verify("correct horse") && !parsed.verify("correct horsE"))
        let long = String(repeating: "a", count: 72)
        #expect(Bcrypt(hashing: long, cost: 4).verify(long + "ignored"))
    }

    @Test(arguments: [
        "", "$2b$04$short", "$2x$04$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq.",
        "$2b$03$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq.", "$2b$32$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq.",
        "$2b$04$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq!", "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$aGFzaA",
    ])
    func refusesWhatIsNotBcrypt(_ text: String) {
        #expect(Bcrypt(text) == nil)
    }

    @Test func pythonBcryptAcceptsOurHashes() throws {
        guard let python = ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"] else { return }
        let made = Bcrypt(hashing: "from swift ✓", cost: 5)
        let result = try Subprocess.run(
            URL(fileURLWithPath: python),
            ["-c", "import bcrypt,sys; sys.exit(0 if bcrypt.checkpw('from swift ✓'.encode(), sys.argv[1].encode()) else 1)", made.text])
        #expect(result.status == 0, "\(result.stderr)")
    }
}
