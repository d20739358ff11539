import Foundation
import PasskeyStore
import PasskeyStoreTesting
import Testing
import WebAuthn

@testable import PasskeyCore

/// Passwords hashed by a library (issue 35): scrypt in PHC format for every new hash, bcrypt
/// kept only to verify imported hashes, each replaced at its first successful sign-in.
@Suite("Password hashes: scrypt, bcrypt verified and upgraded")
struct PasswordHashTests {
    typealias Scrypt = PasswordHash.Scrypt

    /// RFC 7914 §12, the third vector: scrypt("password", "NaCl", N=1024, r=8, p=16, 64 bytes).
    /// Its 4-byte salt is below what a stored hash may have (8), so the digest is checked by the
    /// function the PHC form calls, and the PHC form with the same parameters by a round trip.
    @Test func theRFC7914VectorAndItsParametersInPHCForm() throws {
        let hex = Array(
            "fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"
        )
        let digest = stride(from: 0, to: hex.count, by: 2).map { UInt8(String(hex[$0...$0 + 1]), radix: 16)! }
        let parameters = Scrypt.Parameters(logN: 10, r: 8, p: 16)
        #expect(Scrypt.derive(Array("password".utf8), salt: Array("NaCl".utf8), parameters: parameters, count: 64) == digest)
        let salt = Array("NaCl and more".utf8)
        let derived = try #require(Scrypt.derive(Array("password".utf8), salt: salt, parameters: parameters, count: 64))
        let text = "$scrypt$ln=10,r=8,p=16$" + Scrypt.encode(salt) + "$" + Scrypt.encode(derived)
        let hash = try #require(Scrypt(text))
        #expect(hash.parameters == parameters)
        #expect(hash.text == text)
        #expect(hash.verify("password"))
        #expect(!hash.verify("passwore"))
        #expect(!hash.verify(""))
    }

    @Test func aNewHashRoundTripsThroughItsText() throws {
        let made = try Scrypt(hashing: "correct horse", parameters: .init(logN: 10))
        #expect(made.text.hasPrefix("$scrypt$ln=10,r=8,p=1$"))
        #expect(made.salt.count == 16 && made.digest.count == 32)
        let read = try #require(PasswordHash(made.text))
        #expect(read.verify("correct horse"))
        #expect(!read.verify("correct horsE"))
        // Two hashes of one password differ (random salt).
        #expect(try Scrypt(hashing: "correct horse", parameters: .init(logN: 10)).text != made.text)
    }

    /// BoringSSL's scrypt refuses N ≥ 2^(16·r) (here N = 2^16 with r = 1, within our bounds): a
    /// hash whose derivation failed must not be made, since stored it would never verify (it
    /// used to be saved with an empty digest).
    @Test func aFailedDerivationMakesNoHash() throws {
        let parameters = Scrypt.Parameters(logN: 16, r: 1, p: 1)
        #expect(parameters.isSane)
        #expect(Scrypt.derive(Array("pw".utf8), salt: Array(repeating: 1, count: 16), parameters: parameters, count: 32) == nil)
        #expect(throws: PasswordHash.HashingFailure.self) { try Scrypt(hashing: "pw", parameters: parameters) }
        #expect(throws: PasswordHash.HashingFailure.self) { try Scrypt(hashing: "pw", parameters: .init(logN: 30)) }
    }

    /// The decoy hash checked for unknown usernames costs a real check and matches nothing.
    @Test func theDecoyHashMatchesNoPassword() {
        let decoy = DecoyHash.shared.hash(.init(logN: 10))
        #expect(decoy.parameters == .init(logN: 10) && decoy.salt.count == 16 && decoy.digest.count == 32)
        #expect(DecoyHash.shared.hash(.init(logN: 10)) == decoy)
        #expect(!decoy.verify("") && !decoy.verify("password"))
    }

    @Test func absurdOrMalformedHashesDoNotParse() {
        let salt = Scrypt.encode(Array(repeating: 1, count: 16)), digest = Scrypt.encode(Array(repeating: 2, count: 32))
        for parameters in [
            "ln=25,r=8,p=1",  // 4 GiB
            "ln=20,r=16,p=1",  // 2 GiB
            "ln=17,r=8,p=16",  // 2^31 block mixes: minutes
            "ln=0,r=8,p=1", "ln=10,r=0,p=1", "ln=10,r=8,p=0", "ln=10,r=64,p=1", "ln=10,r=8,p=17",
            "ln=10,r=8", "ln=10,r=8,p=1,p=1", "ln=10,r=8,x=1", "ln=-1,r=8,p=1", "ln=1000000,r=8,p=1",
        ] {
            #expect(PasswordHash("$scrypt$\(parameters)$\(salt)$\(digest)") == nil, "\(parameters)")
        }
        #expect(PasswordHash("$scrypt$ln=10,r=8,p=1$\(salt)$\(digest)") != nil)
        #expect(PasswordHash("$scrypt$ln=10,r=8,p=1$\(salt)$") == nil)
        #expect(PasswordHash("$scrypt$ln=10,r=8,p=1$!!$\(digest)") == nil)
        #expect(PasswordHash("$scrypt$ln=10,r=8,p=1$\(salt)==$\(digest)") == nil)
        #expect(PasswordHash("$scrypt$ln=10,r=8,p=1$AAAA$\(digest)") == nil)  // 3-byte salt
        #expect(PasswordHash("$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA") == nil)
        #expect(PasswordHash("") == nil)
        // bcrypt: up to cost 16 (what passkeyd's own passwordHashCost allowed before scrypt), not past it.
        let bcrypt = Bcrypt(hashing: "x", cost: 4).text
        #expect(PasswordHash(bcrypt) != nil)
        #expect(PasswordHash(bcrypt.replacingOccurrences(of: "$04$", with: "$16$")) != nil)
        #expect(PasswordHash(bcrypt.replacingOccurrences(of: "$04$", with: "$17$")) == nil)
        #expect(PasswordHash(bcrypt.replacingOccurrences(of: "$04$", with: "$31$")) == nil)
    }

    @Test func bcryptAndWeakerScryptNeedARehashTheCurrentOneDoesNot() throws {
        let current = Scrypt.Parameters(logN: 11)
        #expect(try #require(PasswordHash(Bcrypt(hashing: "pw", cost: 4).text)).needsRehash(for: current))
        #expect(PasswordHash.scrypt(try Scrypt(hashing: "pw", parameters: .init(logN: 10))).needsRehash(for: current))
        #expect(!PasswordHash.scrypt(try Scrypt(hashing: "pw", parameters: .init(logN: 11))).needsRehash(for: current))
        // A stronger stored hash stays: its own parameters are used to check it.
        let stronger = PasswordHash.scrypt(try Scrypt(hashing: "pw", parameters: .init(logN: 12)))
        #expect(!stronger.needsRehash(for: current))
        #expect(stronger.verify("pw"))
    }

    /// An imported bcrypt hash signs in, is replaced by scrypt at the configured cost on that
    /// sign-in (once), and keeps working; a wrong password changes nothing.
    @Test func anImportedBcryptHashIsRehashedOnceAtSignIn() async throws {
        let harness = try await DomainHarness { $0.passwordScryptCost = 10 }
        let service = harness.service
        let account = Account(
            username: "grace", displayName: "Grace", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let imported = Bcrypt(hashing: "cobol rules", cost: 4).text
        #expect(try await harness.store.importAccounts([(account, imported)]) == [true])
        let client = DomainHarness.client
        await #expect(throws: PasskeyServiceError(.invalidCredentials, "")) {
            try await service.passwordSignIn(username: "grace", password: "fortran", client: client)
        }
        #expect(try await harness.store.account(username: "grace")?.passwordHash == imported)

        _ = try await service.passwordSignIn(username: "grace", password: "cobol rules", client: client)
        let upgraded = try #require(try await harness.store.account(username: "grace")?.passwordHash)
        #expect(upgraded.hasPrefix("$scrypt$ln=10,r=8,p=1$"))
        #expect(try #require(PasswordHash(upgraded)).verify("cobol rules"))

        _ = try await service.passwordSignIn(username: "grace", password: "cobol rules", client: client)
        #expect(try await harness.store.account(username: "grace")?.passwordHash == upgraded)
        await #expect(throws: PasskeyServiceError(.invalidCredentials, "")) {
            try await service.passwordSignIn(username: "grace", password: "fortran", client: client)
        }
    }

    /// A password chosen in passkeyd is scrypt at the configured cost; raising the cost rehashes
    /// it at the next sign-in.
    @Test func aChangedPasswordIsScryptAndARaisedCostRehashesIt() async throws {
        let account = Account(username: "hopper", displayName: "Hopper", userHandle: RelyingParty.makeUserHandle(), createdAt: Date())
        let low = try await DomainHarness { $0.passwordScryptCost = 10 }
        #expect(try await low.store.importAccounts([(account, Bcrypt(hashing: "first one", cost: 4).text)]) == [true])
        let first = try await low.service.passwordSignIn(username: "hopper", password: "first one", client: DomainHarness.client)
        let signedIn = try #require(try await low.service.signedIn(token: first.token))
        try await low.service.changePassword(signedIn, newPassword: "a second one", client: DomainHarness.client)
        let changed = try #require(try await low.store.account(username: "hopper")?.passwordHash)
        #expect(changed.hasPrefix("$scrypt$ln=10,"))
        let high = try await DomainHarness(store: low.store) { $0.passwordScryptCost = 11 }
        _ = try await high.service.passwordSignIn(username: "hopper", password: "a second one", client: DomainHarness.client)
        #expect(try await high.store.account(username: "hopper")?.passwordHash?.hasPrefix("$scrypt$ln=11,") == true)
    }

    /// Sixteen sign-ins at once with one imported hash: each upgrade replaces the hash only while
    /// it is still the one it checked, so exactly one replaces it, and every sign-in succeeds.
    @Test func concurrentSignInsRehashOnce() async throws {
        let harness = try await DomainHarness { $0.passwordScryptCost = 10 }
        let account = Account(username: "ada", displayName: "Ada", userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now)
        let imported = Bcrypt(hashing: "engine", cost: 4).text
        #expect(try await harness.store.importAccounts([(account, imported)]) == [true])
        let stored = try #require(try await harness.store.account(username: "ada"))
        let results = await Race.run(16) { _ in
            try await harness.store.rehashPassword(
                accountID: stored.id, from: imported, to: try Scrypt(hashing: "engine", parameters: .init(logN: 10)).text)
        }
        #expect(Race.winners(results) { $0 } == 1)
        #expect(try await harness.store.account(username: "ada")?.passwordHash?.hasPrefix("$scrypt$") == true)
    }
}
