import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

// Store conformance, part 2: sessions, passkeys, passwords and recovery, on both stores.
extension StoreConformanceTests {
    /// With no session to keep, deleting a passkey ends every session it made: the empty token
    /// hash the store compares against is bound as an empty blob, never as NULL (with NULL,
    /// `token_hash <> NULL` matches nothing and every session would survive its passkey).
    @Test(arguments: TestDatabase.kinds)
    func deletingAPasskeyWithNoSessionToKeepEndsAllItsSessions(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let phone = Self.passkey(for: ada), laptop = Self.passkey(for: ada)
        try await store.createAccount(ada, passkey: phone, session: nil, audit: [])
        try await store.addPasskey(laptop)
        let first = Self.session(for: ada, credentialID: laptop.credentialID)
        let second = Self.session(for: ada, credentialID: laptop.credentialID)
        let viaPhone = Self.session(for: ada, credentialID: phone.credentialID)
        for session in [first, second, viaPhone] { try await store.createSession(session) }
        #expect(try await store.deletePasskey(accountID: ada.id, credentialID: laptop.credentialID) == .deleted)
        #expect(try await store.session(tokenHash: first.tokenHash, now: Self.t0) == nil)
        #expect(try await store.session(tokenHash: second.tokenHash, now: Self.t0) == nil)
        #expect(try await store.session(tokenHash: viaPhone.tokenHash, now: Self.t0)?.0.credentialID == phone.credentialID)
    }

    /// The audit CSV's usernames in one query: the accounts named, never one that is gone, in
    /// batches past 500 IDs.
    @Test(arguments: TestDatabase.kinds)
    func usernamesOfManyAccountsComeInOneAsk(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada"), bob = Self.account("bob")
        for account in [ada, bob] { try await store.createAccount(account, passkey: Self.passkey(for: account), session: nil, audit: []) }
        #expect(try await store.usernames(accountIDs: []) == [:])
        #expect(try await store.usernames(accountIDs: [ada.id, bob.id, UUID()]) == [ada.id: "ada", bob.id: "bob"])
        let many = Set((0..<1200).map { _ in UUID() }).union([bob.id])
        #expect(try await store.usernames(accountIDs: many) == [bob.id: "bob"])
    }

    @Test(arguments: TestDatabase.kinds)
    func sessionsEndWithThePasskeyThatMadeThem(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        let phone = Self.passkey(for: ada), laptop = Self.passkey(for: ada), key = Self.passkey(for: ada)
        let signUp = Self.session(for: ada, method: "sign_up", credentialID: phone.credentialID)
        try await store.createAccount(ada, passkey: phone, session: signUp, audit: [])
        try await store.addPasskey(laptop)
        try await store.addPasskey(key)
        let viaLaptop = Self.session(for: ada, credentialID: laptop.credentialID)
        let viaKey = Self.session(for: ada, credentialID: key.credentialID)
        let viaRecovery = Self.session(for: ada, method: "recovery_code")
        for session in [viaLaptop, viaKey, viaRecovery] { try await store.createSession(session) }
        let stored = try #require(try await store.session(tokenHash: viaLaptop.tokenHash, now: Self.t0)?.0)
        #expect(stored.method == "passkey" && stored.credentialID == laptop.credentialID)

        let alsoViaLaptop = Self.session(for: ada, credentialID: laptop.credentialID)
        try await store.createSession(alsoViaLaptop)
        #expect(
            try await store.deletePasskey(accountID: ada.id, credentialID: laptop.credentialID, keepSession: alsoViaLaptop.tokenHash)
                == .deleted)
        #expect(try await store.session(tokenHash: viaLaptop.tokenHash, now: Self.t0) == nil)
        // The session that deleted it stays, standing on no passkey.
        #expect(try await store.session(tokenHash: alsoViaLaptop.tokenHash, now: Self.t0)?.0.credentialID == nil)
        try await store.revokeSession(tokenHash: alsoViaLaptop.tokenHash)
        // An administrator's revocation ends its sessions too; a rebound session survives.
        try await store.rebindSession(tokenHash: viaRecovery.tokenHash, credentialID: key.credentialID)
        #expect(try await store.session(tokenHash: viaRecovery.tokenHash, now: Self.t0)?.0.credentialID == key.credentialID)
        try await store.rebindSession(tokenHash: viaRecovery.tokenHash, credentialID: phone.credentialID)
        #expect(try await store.revokePasskey(credentialID: key.credentialID))
        #expect(try await store.session(tokenHash: viaKey.tokenHash, now: Self.t0) == nil)
        #expect(
            try await store.sessions(accountID: ada.id, now: Self.t0).map(\.tokenHash).sorted { $0.lexicographicallyPrecedes($1) }
                == [signUp.tokenHash, viaRecovery.tokenHash].sorted { $0.lexicographicallyPrecedes($1) })
    }

    @Test(arguments: TestDatabase.kinds)
    func aPasswordChangeKeepsOnlyTheChangingSession(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada"), bob = Self.account("bob")
        #expect(try await store.importAccounts([(ada, "$2b$04$old"), (bob, "$2b$04$bob")]) == [true, true])
        let mine = Self.session(for: ada, method: "password"), other = Self.session(for: ada, method: "password")
        try await store.createSession(mine)
        try await store.createSession(other)
        #expect(try await store.changePassword(accountID: ada.id, hash: "$2b$04$new", keepSession: mine.tokenHash))
        #expect(try await store.account(id: ada.id)?.passwordHash == "$2b$04$new")
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).map(\.tokenHash) == [mine.tokenHash])
        #expect(try await store.account(id: bob.id)?.passwordHash == "$2b$04$bob")
        #expect(try await store.removePassword(accountID: bob.id) == false)
        let carl = Self.account("carl")
        try await store.createAccount(carl, passkey: Self.passkey(for: carl), session: nil, audit: [])
        #expect(try await store.changePassword(accountID: carl.id, hash: "$2b$04$x", keepSession: nil) == false)
    }

    /// Deleting the last passkey and removing the password at the same moment never both
    /// succeed (each transaction holds the account).
    @Test(arguments: TestDatabase.kinds)
    func theLastWayInSurvivesConcurrentRemovals(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        for round in 0..<12 {
            let account = Self.account("race\(round)")
            let passkey = Self.passkey(for: account)
            #expect(try await store.importAccounts([(account, "$2b$04$hash")]) == [true])
            try await store.addPasskey(passkey)
            async let deleted = store.deletePasskey(accountID: account.id, credentialID: passkey.credentialID)
            async let removed = store.removePassword(accountID: account.id)
            let (deletion, removal) = try await (deleted, removed)
            #expect(!(deletion == .deleted && removal), "round \(round): both ways in were removed")
            let left =
                try await store.passkeys(accountID: account.id).count
                + (try await store.account(id: account.id)?.passwordHash == nil ? 0 : 1)
            #expect(left >= 1)
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func passkeysAreRenamedDeletedButNeverTheLast(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada"), bob = Self.account("bob")
        let first = Self.passkey(for: ada), second = Self.passkey(for: ada)
        try await store.createAccount(ada, passkey: first, session: nil, audit: [])
        try await store.createAccount(bob, passkey: Self.passkey(for: bob), session: nil, audit: [])
        try await store.addPasskey(second)
        #expect(try await store.passkeys(accountID: ada.id).count == 2)
        #expect(try await store.renamePasskey(accountID: ada.id, credentialID: first.credentialID, name: "Laptop"))
        #expect(try await store.renamePasskey(accountID: bob.id, credentialID: first.credentialID, name: "Stolen") == false)
        #expect(try await store.passkey(credentialID: first.credentialID)?.name == "Laptop")
        #expect(try await store.deletePasskey(accountID: bob.id, credentialID: first.credentialID) == .notFound)
        #expect(try await store.deletePasskey(accountID: ada.id, credentialID: first.credentialID) == .deleted)
        #expect(try await store.deletePasskey(accountID: ada.id, credentialID: second.credentialID) == .lastPasskey)
        // An administrator may revoke even the last one.
        #expect(try await store.revokePasskey(credentialID: second.credentialID))
        #expect(try await store.passkeys(accountID: ada.id).isEmpty)
        #expect(try await store.revokePasskey(credentialID: second.credentialID) == false)
    }

    @Test(arguments: TestDatabase.kinds)
    func sessionsExpireAndDisabledAccountsHaveNone(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let ada = Self.account("ada")
        try await store.createAccount(ada, passkey: Self.passkey(for: ada), session: nil, audit: [])
        let short = Self.session(for: ada, expires: 60), long = Self.session(for: ada, expires: 7200)
        try await store.createSession(short)
        try await store.createSession(long)
        #expect(try await store.session(tokenHash: short.tokenHash, now: Self.t0.addingTimeInterval(61)) == nil)
        #expect(try await store.session(tokenHash: long.tokenHash, now: Self.t0.addingTimeInterval(61)) != nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0.addingTimeInterval(61)).map(\.tokenHash) == [long.tokenHash])
        #expect(try await store.setDisabled(accountID: ada.id, disabled: true))
        #expect(try await store.session(tokenHash: long.tokenHash, now: Self.t0) == nil)
        #expect(try await store.account(id: ada.id)?.disabled == true)
        // Disabling revoked them: re-enabling brings none back.
        #expect(try await store.setDisabled(accountID: ada.id, disabled: false))
        #expect(try await store.session(tokenHash: long.tokenHash, now: Self.t0) == nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).isEmpty)
        let kept = Self.session(for: ada)
        try await store.createSession(kept)
        try await store.revokeSession(tokenHash: kept.tokenHash)
        #expect(try await store.session(tokenHash: kept.tokenHash, now: Self.t0) == nil)
        let mine = Self.session(for: ada)
        try await store.createSession(mine)
        try await store.createSession(Self.session(for: ada))
        try await store.createSession(Self.session(for: ada))
        #expect(try await store.revokeSessions(accountID: ada.id, except: mine.tokenHash) == 2)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).map(\.tokenHash) == [mine.tokenHash])
        #expect(try await store.revokeSessions(accountID: ada.id) == 1)
        #expect(try await store.setDisabled(accountID: UUID(), disabled: true) == false)
    }

    @Test(arguments: TestDatabase.kinds)
    func passwordAccountsImportOnceAndRecoveryIsSingleUse(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let grace = Self.account("grace"), alan = Self.account("alan")
        let hash = "$2b$04$3qMux.8nxGspCLzhfx/eU.ser0sR54o7M.rA2n04O.7vz1SB3Mlq."
        #expect(try await store.importAccounts([(grace, hash), (alan, hash)]) == [true, true])
        #expect(try await store.importAccounts([(Self.account("GRACE"), hash)]) == [false])
        #expect(try await store.account(username: "grace")?.passwordHash == hash)
        // The password goes only once there is a passkey; with a password, the last passkey may go.
        #expect(try await store.removePassword(accountID: grace.id) == false)
        let key = Self.passkey(for: grace)
        try await store.addPasskey(key)
        #expect(try await store.deletePasskey(accountID: grace.id, credentialID: key.credentialID) == .deleted)
        try await store.addPasskey(key)
        #expect(try await store.removePassword(accountID: grace.id))
        #expect(try await store.account(id: grace.id)?.passwordHash == nil)
        #expect(try await store.deletePasskey(accountID: grace.id, credentialID: key.credentialID) == .lastPasskey)

        // Recovery codes: racing uses of one code, one wins.
        try await store.replaceRecoveryCodes(accountID: alan.id, hashes: [[1], [2], [3]], at: Self.t0)
        let wins = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<10 { group.addTask { try await store.useRecoveryCode(accountID: alan.id, hash: [2], at: Self.t0) } }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        let left = try await store.recoveryCodesLeft(accountID: alan.id)
        #expect(wins == 1 && left == 2)
        #expect(try await store.useRecoveryCode(accountID: grace.id, hash: [1], at: Self.t0) == false)

        // A recovery sign-in ends every other session.
        try await store.createSession(Self.session(for: alan))
        let fresh = Self.session(for: alan)
        try await store.recordSignIn(
            accountID: alan.id, session: fresh, audit: [AuditEvent(time: Self.t0, kind: "recovery_sign_in", accountID: alan.id)],
            revokeOtherSessions: true)
        #expect(try await store.sessions(accountID: alan.id, now: Self.t0).map(\.tokenHash) == [fresh.tokenHash])

        // Recovery tokens: single use, expiring.
        try await store.saveRecoveryToken(hash: [7], accountID: alan.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        try await store.saveRecoveryToken(hash: [8], accountID: alan.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(60))
        #expect(try await store.takeRecoveryToken(hash: [7], now: Self.t0) == alan.id)
        #expect(try await store.takeRecoveryToken(hash: [7], now: Self.t0) == nil)
        #expect(try await store.takeRecoveryToken(hash: [8], now: Self.t0.addingTimeInterval(61)) == nil)
    }
}
