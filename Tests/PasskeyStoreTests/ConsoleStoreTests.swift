import Foundation
import PasskeyStoreTesting
import Testing

@testable import PasskeyStore

/// The operator's console's store (issue 36, migration 13), on SQLite and PostgreSQL: audit
/// metrics, roles, the bootstrap token, console sessions, rollups, searches, the overview's
/// counts, account deletion and the integrations' changes. Races are in
/// ``ConsoleRaceTests``.
@Suite("Console store (SQLite and PostgreSQL)")
struct ConsoleStoreTests {
    typealias Fixtures = StoreConformanceTests
    static let t0 = Fixtures.t0
    static let day: TimeInterval = 86_400

    /// 00:00 UTC of the day holding `time`.
    static func dayStart(_ time: Date) -> Date { Date(timeIntervalSince1970: (time.timeIntervalSince1970 / day).rounded(.down) * day) }

    static func withPasskey(_ store: any PasskeyStore, _ name: String, displayName: String? = nil) async throws -> (Account, Passkey) {
        var account = Fixtures.account(name)
        if let displayName { account.displayName = displayName }
        let key = Fixtures.passkey(for: account)
        try await store.createAccount(account, passkey: key, session: nil, audit: [])
        return (account, key)
    }

    // MARK: Audit lines

    @Test(arguments: TestDatabase.kinds)
    func auditLinesKeepTheirMetricAndTraceParent(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, key) = try await Fixtures.adaWithPasskey(kind, signCount: 1)
        let parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        try await store.appendAudit(AuditEvent(time: Self.t0, kind: .passkeyAdded, accountID: ada.id, metric: "passkey_added"))
        // The sign-in path (one statement on PostgreSQL) writes them too.
        #expect(
            try await store.completeSignIn(
                challenge: nil, credentialID: key.credentialID, previousSignCount: 1, signCount: 2, backedUp: true, counterAnomaly: false,
                at: Self.t0, session: Fixtures.session(for: ada),
                audit: [AuditEvent(time: Self.t0, kind: .signIn, accountID: ada.id, metric: "sign_in_passkey", traceParent: parent)])
                == .signedIn)
        let lines = try await store.auditEvents(accountID: ada.id, limit: 10)
        #expect(lines.map(\.metric) == ["sign_in_passkey", "passkey_added"])
        #expect(lines.map(\.traceParent) == [parent, nil])
    }

    /// A paused endpoint's deliveries wait unclaimed (the claim skips `disabled` endpoints) and
    /// go once it is resumed; the claimed event carries its metric and traceparent.
    @Test(arguments: TestDatabase.kinds)
    func pausedEndpointsAreNotClaimedAndTheClaimCarriesTheTraceParent(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let endpoint = WebhookEndpoint(url: "https://hooks.example/a", secret: [1], events: ["*"], createdAt: Self.t0)
        try await store.addWebhookEndpoint(endpoint)
        let (ada, _) = try await Self.withPasskey(store, "ada")
        try await store.appendAudit(
            AuditEvent(time: Self.t0, kind: .signIn, accountID: ada.id, metric: "sign_in_password", traceParent: "00-ab"))
        #expect(try await store.webhookBacklog(now: Self.t0) == 1)
        #expect(try await store.setWebhookPaused(id: endpoint.id, paused: true))
        #expect(try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8).isEmpty)
        #expect(try await store.webhookEndpoints().first?.disabled == true)
        #expect(try await store.setWebhookPaused(id: endpoint.id, paused: false))
        let claimed = try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8)
        #expect(claimed.count == 1)
        #expect(claimed.first?.1.traceParent == "00-ab" && claimed.first?.1.metric == "sign_in_password")
        #expect(try await store.setWebhookPaused(id: UUID(), paused: true) == false)
        #expect(try await store.setWebhookSecret(id: endpoint.id, secret: [9, 9]))
        #expect(try await store.webhookEndpoints().first?.secret == [9, 9])
        #expect(try await store.setWebhookSecret(id: UUID(), secret: [1]) == false)

        // A failed attempt waits its back-off; a retry makes it due now, with its latency kept.
        let delivery = try #require(claimed.first?.0)
        try await store.settleWebhookDelivery(
            eventID: delivery.eventID, endpointID: endpoint.id, deliveredAt: nil, status: 500, error: "status 500", latencyMs: 42,
            retryAt: Self.t0.addingTimeInterval(3600))
        #expect(try await store.webhookDeliveries(endpointID: endpoint.id, limit: 5).first?.latencyMs == 42)
        // The integrations page shows each delivery's event kind (it was always nil).
        #expect(try await store.webhookDeliveries(endpointID: endpoint.id, limit: 5).map(\.kind) == ["sign_in"])
        #expect(try await store.webhookDeliveries(endpointID: nil, limit: 5).map(\.kind) == ["sign_in"])
        #expect(try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8).isEmpty)
        #expect(try await store.retryWebhookDelivery(endpointID: endpoint.id, eventID: delivery.eventID, now: Self.t0))
        #expect(try await store.claimWebhookDeliveries(now: Self.t0, leaseUntil: Self.t0.addingTimeInterval(60), limit: 8).count == 1)
        try await store.settleWebhookDelivery(
            eventID: delivery.eventID, endpointID: endpoint.id, deliveredAt: Self.t0, status: 204, error: nil, latencyMs: 7,
            retryAt: Self.t0)
        // Delivered: nothing to retry, nothing in the backlog.
        #expect(try await store.retryWebhookDelivery(endpointID: endpoint.id, eventID: delivery.eventID, now: Self.t0) == false)
        #expect(try await store.webhookBacklog(now: Self.t0) == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func aClientSecretIsReplaced(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        try await store.addOAuthClient(
            OAuthClient(id: "app", name: "App", secretHash: [1], redirectURIs: ["https://app.example/cb"], createdAt: Self.t0))
        #expect(try await store.setOAuthClientSecret(id: "app", secretHash: [2, 3]))
        #expect(try await store.oauthClient(id: "app")?.secretHash == [2, 3])
        #expect(try await store.setOAuthClientSecret(id: "nobody", secretHash: [2]) == false)
    }

    @Test(arguments: TestDatabase.kinds)
    func importedAccountsEachGetAnAuditLine(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let (ada, _) = try await Self.withPasskey(store, "ada")
        let bob = Fixtures.account("bob")
        let inserted = try await store.importAccounts([(Fixtures.account("Ada"), "$2b$10$x"), (bob, "$2b$10$y")])
        #expect(inserted == [false, true])
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).isEmpty)
        let lines = try await store.auditEvents(accountID: bob.id, limit: 5)
        #expect(lines.map(\.kind) == ["account_imported"])
        #expect(lines.first?.metric == "import_password" && lines.first?.userAgent == "passkeyd import")
        #expect(lines.first?.time == bob.createdAt)
    }

    // MARK: Roles

    @Test(arguments: TestDatabase.kinds)
    func rolesAreGrantedChangedAndRemovedButNeverTheLastAdmin(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let (bob, _) = try await Self.withPasskey(store, "bob")
        let (ada, _) = try await Self.withPasskey(store, "ada")
        let audit = AuditEvent(time: Self.t0, kind: "admin_role_granted", accountID: ada.id, detail: "admin")
        #expect(try await store.adminRole(accountID: ada.id) == nil)
        #expect(try await store.setAdminRole(accountID: ada.id, role: .admin, by: "cli", at: Self.t0, audit: [audit]) == .changed)
        #expect(try await store.setAdminRole(accountID: UUID(), role: .admin, by: "cli", at: Self.t0, audit: []) == .accountNotFound)
        #expect(try await store.adminRole(accountID: ada.id) == .admin)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).map(\.kind) == ["admin_role_granted"])
        // The last admin stays one: neither removed nor made a viewer; nothing is written.
        #expect(try await store.setAdminRole(accountID: ada.id, role: nil, by: "cli", at: Self.t0, audit: [audit]) == .lastAdmin)
        #expect(try await store.setAdminRole(accountID: ada.id, role: .viewer, by: "cli", at: Self.t0, audit: [audit]) == .lastAdmin)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).count == 1)
        #expect(try await store.adminCount() == 1)

        #expect(try await store.setAdminRole(accountID: bob.id, role: .viewer, by: ada.id.uuidString, at: Self.t0, audit: []) == .changed)
        let grants = try await store.adminGrants()
        #expect(grants.map(\.account.username) == ["ada", "bob"])
        #expect(grants.map(\.role) == [.admin, .viewer])
        #expect(grants.last?.grantedBy == ada.id.uuidString && grants.last?.grantedAt == Self.t0)
        #expect(try await store.adminCount() == 1)
        #expect(try await store.setAdminRole(accountID: bob.id, role: .admin, by: "cli", at: Self.t0, audit: []) == .changed)
        #expect(try await store.setAdminRole(accountID: ada.id, role: nil, by: "cli", at: Self.t0, audit: []) == .changed)
        #expect(try await store.adminRole(accountID: ada.id) == nil)
        #expect(try await store.adminCount() == 1)
    }

    @Test(arguments: TestDatabase.kinds)
    func consoleSessionsExpireIdleAndAbsoluteAndEndWithTheRole(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let (ada, _) = try await Self.withPasskey(store, "ada")
        let (bob, _) = try await Self.withPasskey(store, "bob")
        _ = try await store.setAdminRole(accountID: ada.id, role: .admin, by: "cli", at: Self.t0, audit: [])
        func session(_ account: Account) -> AdminSessionRecord {
            AdminSessionRecord(
                tokenHash: (0..<32).map { _ in UInt8.random(in: 0...255) }, accountID: account.id, createdAt: Self.t0,
                expiresAt: Self.t0.addingTimeInterval(8 * 3600), idleExpiresAt: Self.t0.addingTimeInterval(900), verifiedAt: Self.t0,
                csrfHash: [1, 2], ipAddress: "192.0.2.1", userAgent: "test")
        }
        let first = session(ada)
        try await store.createAdminSession(first)
        // Each use moves the idle expiry, never past the absolute one.
        let later = Self.t0.addingTimeInterval(600)
        let (record, account, role) = try #require(
            try await store.adminSession(tokenHash: first.tokenHash, now: later, idleUntil: later.addingTimeInterval(900)))
        #expect(account.id == ada.id && role == .admin)
        #expect(record.idleExpiresAt == later.addingTimeInterval(900) && record.csrfHash == [1, 2] && record.ipAddress == "192.0.2.1")
        let nearEnd = Self.t0.addingTimeInterval(8 * 3600 - 60)
        #expect(
            try await store.adminSession(
                tokenHash: first.tokenHash, now: later.addingTimeInterval(899), idleUntil: later.addingTimeInterval(2400)) != nil)
        // Idle past the moved expiry: gone (the row stays until the sweep).
        #expect(
            try await store.adminSession(tokenHash: first.tokenHash, now: later.addingTimeInterval(2400 + 1), idleUntil: nearEnd) == nil)

        let second = session(ada)
        try await store.createAdminSession(second)
        #expect(
            try await store.adminSession(tokenHash: second.tokenHash, now: Self.t0, idleUntil: nearEnd.addingTimeInterval(3600))?.0
                .idleExpiresAt == second.expiresAt)
        #expect(try await store.adminSession(tokenHash: second.tokenHash, now: second.expiresAt, idleUntil: nearEnd) == nil)

        // A step-up records the verification and the new CSRF token.
        let third = session(ada)
        try await store.createAdminSession(third)
        #expect(try await store.verifyAdminSession(tokenHash: third.tokenHash, at: later, csrfHash: [7]))
        let stepped = try #require(
            try await store.adminSession(tokenHash: third.tokenHash, now: later, idleUntil: later.addingTimeInterval(900)))
        #expect(stepped.0.verifiedAt == later && stepped.0.csrfHash == [7])
        #expect(try await store.verifyAdminSession(tokenHash: [0], at: later, csrfHash: [7]) == false)

        // No role, or a disabled account: no console.
        let bobs = session(bob)
        try await store.createAdminSession(bobs)
        #expect(try await store.adminSession(tokenHash: bobs.tokenHash, now: Self.t0, idleUntil: later) == nil)
        _ = try await store.setAdminRole(accountID: bob.id, role: .viewer, by: "cli", at: Self.t0, audit: [])
        let viewer = session(bob)
        try await store.createAdminSession(viewer)
        #expect(try await store.adminSession(tokenHash: viewer.tokenHash, now: Self.t0, idleUntil: later)?.2 == .viewer)
        #expect(try await store.setDisabled(accountID: bob.id, disabled: true))
        #expect(try await store.adminSession(tokenHash: viewer.tokenHash, now: Self.t0, idleUntil: later) == nil)
        #expect(try await store.setDisabled(accountID: bob.id, disabled: false))
        // A role change ends the account's console sessions.
        _ = try await store.setAdminRole(accountID: bob.id, role: .admin, by: "cli", at: Self.t0, audit: [])
        #expect(try await store.adminSession(tokenHash: viewer.tokenHash, now: Self.t0, idleUntil: later) == nil)

        let fourth = session(ada)
        try await store.createAdminSession(fourth)
        try await store.revokeAdminSession(tokenHash: fourth.tokenHash)
        #expect(try await store.adminSession(tokenHash: fourth.tokenHash, now: Self.t0, idleUntil: later) == nil)
        try await store.createAdminSession(session(ada))
        #expect(try await store.revokeAdminSessions(accountID: ada.id) == 4)
        // The sweep takes expired console sessions and old bootstrap tokens.
        try await store.createAdminSession(session(ada))
        try await store.saveAdminBootstrapToken(hash: [5], createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(3600), audit: [])
        #expect(try await store.sweepExpired(now: Self.t0.addingTimeInterval(3 * Self.day)) >= 2)
        #expect(try await store.revokeAdminSessions(accountID: ada.id) == 0)
    }

    // MARK: Bootstrap

    @Test(arguments: TestDatabase.kinds)
    func aBootstrapTokenMakesOneAdminOnceBeforeItExpires(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let (ada, _) = try await Self.withPasskey(store, "ada")
        let (bob, _) = try await Self.withPasskey(store, "bob")
        let hash = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveAdminBootstrapToken(hash: hash, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(3600), audit: [])
        #expect(try await store.adminBootstrapTokenIsLive(hash: hash, now: Self.t0))
        #expect(try await store.adminBootstrapTokenIsLive(hash: hash, now: Self.t0.addingTimeInterval(3600)) == false)
        #expect(try await store.adminBootstrapTokenIsLive(hash: [1], now: Self.t0) == false)
        // Expired: nothing written.
        #expect(
            try await store.redeemAdminBootstrapToken(
                hash: hash, accountID: ada.id, now: Self.t0.addingTimeInterval(3600),
                audit: [AuditEvent(time: Self.t0, kind: "admin_bootstrap", accountID: ada.id)]) == false)
        #expect(try await store.adminCount() == 0)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).isEmpty)
        let audit = [AuditEvent(time: Self.t0, kind: "admin_bootstrap", accountID: ada.id)]
        #expect(try await store.redeemAdminBootstrapToken(hash: hash, accountID: ada.id, now: Self.t0, audit: audit))
        #expect(try await store.adminRole(accountID: ada.id) == .admin)
        #expect(try await store.adminGrants().first?.grantedBy == "bootstrap")
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).map(\.kind) == ["admin_bootstrap"])
        // Used.
        #expect(try await store.adminBootstrapTokenIsLive(hash: hash, now: Self.t0) == false)
        #expect(try await store.redeemAdminBootstrapToken(hash: hash, accountID: bob.id, now: Self.t0, audit: []) == false)
        // Once an admin exists, no other token opens the console.
        let other = (0..<32).map { _ in UInt8.random(in: 0...255) }
        try await store.saveAdminBootstrapToken(hash: other, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(3600), audit: [])
        #expect(try await store.adminBootstrapTokenIsLive(hash: other, now: Self.t0) == false)
        #expect(try await store.redeemAdminBootstrapToken(hash: other, accountID: bob.id, now: Self.t0, audit: []) == false)
        #expect(try await store.adminRole(accountID: bob.id) == nil)
    }

    // MARK: Rollups

    /// Metric lines on three days: each completed day is rolled up once, today is counted live,
    /// and rolling up again changes nothing.
    @Test(arguments: TestDatabase.kinds)
    func completedDaysAreRolledUpOnceAndTodayIsCountedLive(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let day0 = Self.dayStart(Self.t0)
        // An empty database: no watermark until the first metric.
        #expect(try await store.metricsRolledThrough() == nil)
        #expect(try await store.rollUpMetrics(before: day0.addingTimeInterval(10 * Self.day)) == 0)
        #expect(
            try await store.dailyMetrics(from: day0.addingTimeInterval(-Self.day * 400), to: day0.addingTimeInterval(Self.day * 10)).isEmpty
        )
        let lines: [(TimeInterval, String?)] = [
            (0.1, "sign_in_passkey"), (0.5, "sign_in_passkey"), (0.9, "signup_passkey"), (0.95, nil),
            (1.2, "sign_in_password"), (2.0, "sign_in_passkey"), (2.5, "upgrade_button"),
        ]
        for (offset, metric) in lines {
            try await store.appendAudit(AuditEvent(time: day0.addingTimeInterval(offset * Self.day), kind: .signIn, metric: metric))
        }
        let today = day0.addingTimeInterval(2 * Self.day)
        #expect(try await store.rollUpMetrics(before: today.addingTimeInterval(3600)) == 2)
        #expect(try await store.metricsRolledThrough() == today)
        let rolled = try await store.dailyMetrics(from: day0, to: today.addingTimeInterval(Self.day))
        #expect(
            rolled == [
                DailyMetric(day: day0, metric: "sign_in_passkey", n: 2), DailyMetric(day: day0, metric: "signup_passkey", n: 1),
                DailyMetric(day: day0.addingTimeInterval(Self.day), metric: "sign_in_password", n: 1),
            ])
        #expect(try await store.metricTotals(before: today) == ["sign_in_passkey": 2, "signup_passkey": 1, "sign_in_password": 1])
        #expect(try await store.metricTotals(before: day0.addingTimeInterval(Self.day)) == ["sign_in_passkey": 2, "signup_passkey": 1])
        #expect(
            try await store.liveMetrics(from: today, to: today.addingTimeInterval(Self.day)) == ["sign_in_passkey": 1, "upgrade_button": 1])
        // Again: nothing left to roll; the rows are the same.
        #expect(try await store.rollUpMetrics(before: today.addingTimeInterval(7200)) == 0)
        #expect(try await store.dailyMetrics(from: day0, to: today.addingTimeInterval(Self.day)) == rolled)
        // Tomorrow, today is rolled too. The watermark never goes back.
        #expect(try await store.rollUpMetrics(before: today.addingTimeInterval(Self.day)) == 1)
        #expect(try await store.rollUpMetrics(before: day0) == 0)
        #expect(try await store.metricsRolledThrough() == today.addingTimeInterval(Self.day))
        // A long pause is caught up 400 days per call.
        #expect(try await store.rollUpMetrics(before: today.addingTimeInterval(1000 * Self.day)) == 400)
        #expect(try await store.rollUpMetrics(before: today.addingTimeInterval(1000 * Self.day)) == 400)
        #expect(try await store.rollUpMetrics(before: today.addingTimeInterval(1000 * Self.day)) == 199)
    }

    /// Migration 13 on a database with accounts: the baselines on the day before it ran (zero
    /// counts not written), and the watermark on its day.
    @Test(arguments: TestDatabase.kinds)
    func migrationThirteenWritesBaselinesAndStartsRollupsOnItsDay(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeUnmigratedStore(kind)
        defer { (store as? PostgresStore)?.close() }
        #expect(try await store.migrate(through: 12) == Array(1...12))
        let withPassword = {
            var account = Fixtures.account("Émile")
            account.passwordHash = "$2b$10$x"
            account.displayName = "Émile Zola"
            return account
        }()
        let ada = Fixtures.account("ada"), bob = Fixtures.account("bob"), cleo = Fixtures.account("cleo")
        try await store.transaction { db in
            for account in [ada, bob, cleo, withPassword] { try await db.execute(Fixtures.insertAsVersion12(account)) }
            try await db.execute(Fixtures.insertWithoutExtensionColumns(Fixtures.passkey(for: ada)))
            try await db.execute(Fixtures.insertWithoutExtensionColumns(Fixtures.passkey(for: ada)))
            try await db.execute(Fixtures.insertWithoutExtensionColumns(Fixtures.passkey(for: bob)))
        }
        let before = Date()
        #expect(try await store.migrate(through: 13) == [13])
        // Read as this release reads: migration 16 keeps every row, in the default tenant.
        #expect(try await store.migrate() == [14, 15, 16, 17, 18])
        let migrationDay = Self.dayStart(before)
        let rolledThrough = try #require(try await store.metricsRolledThrough())
        #expect(rolledThrough == migrationDay || rolledThrough == Self.dayStart(Date()))
        let baselines = try await store.dailyMetrics(from: rolledThrough.addingTimeInterval(-Self.day), to: rolledThrough)
        #expect(Set(baselines.map(\.metric)) == ["baseline_with_passkey", "baseline_password_only", "baseline_empty"])
        #expect(baselines.first { $0.metric == "baseline_with_passkey" }?.n == 2)
        #expect(baselines.first { $0.metric == "baseline_password_only" }?.n == 1)
        #expect(baselines.first { $0.metric == "baseline_empty" }?.n == 1)
        // The backfilled search keys: ASCII folded by the database, the rest by rekeyUsernames.
        #expect(try await store.searchAccounts(field: .displayName, prefix: "ada", after: nil, limit: 10).accounts.map(\.id) == [ada.id])
        _ = try await store.rekeyUsernames()
        #expect(
            try await store.searchAccounts(field: .displayName, prefix: "émile z", after: nil, limit: 10).accounts.map(\.id)
                == [withPassword.id])
    }

    // MARK: Searches

    @Test(arguments: TestDatabase.kinds)
    func accountsAreFoundByAPrefixOfEachFieldPageByPage(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        var made: [Account] = []
        for index in 0..<7 {
            let (account, _) = try await Self.withPasskey(
                store, "user\(index)", displayName: index % 2 == 0 ? "Élodie \(index)" : "Zed \(index)")
            made.append(account)
        }
        let (ada, adaKey) = try await Self.withPasskey(store, "Ada", displayName: "ÉLODIE Ada")
        _ = try await store.setExternalID(accountID: ada.id, externalID: "CRM-00042")

        // Username: folded like the username key, keyset pages.
        var found: [Account] = []
        var cursor: String?
        repeat {
            let page = try await store.searchAccounts(field: .username, prefix: "USER", after: cursor, limit: 3)
            #expect(page.accounts.count <= 3)
            found += page.accounts
            cursor = page.next
        } while cursor != nil
        #expect(found.map(\.username) == (0..<7).map { "user\($0)" })
        #expect(try await store.searchAccounts(field: .username, prefix: "ａｄ", after: nil, limit: 10).accounts.map(\.id) == [ada.id])

        // Display name: case-insensitive beyond ASCII; ties on the key page by id.
        let elodies = try await store.searchAccounts(field: .displayName, prefix: "élodie", after: nil, limit: 2)
        #expect(elodies.accounts.count == 2 && elodies.next != nil)
        let rest = try await store.searchAccounts(field: .displayName, prefix: "élodie", after: elodies.next, limit: 10)
        #expect(Set((elodies.accounts + rest.accounts).map(\.id)) == Set([ada.id] + [0, 2, 4, 6].map { made[$0].id }))
        #expect(rest.next == nil)

        #expect(try await store.searchAccounts(field: .externalID, prefix: "crm-0", after: nil, limit: 5).accounts.map(\.id) == [ada.id])
        #expect(try await store.searchAccounts(field: .externalID, prefix: "crm-1", after: nil, limit: 5).accounts.isEmpty)

        // Id: a prefix of the lower-case text, dashes optional.
        let idText = ada.id.uuidString.lowercased()
        let byID = try await store.searchAccounts(field: .id, prefix: String(idText.prefix(13)), after: nil, limit: 5)
        #expect(byID.accounts.map(\.id) == [ada.id])
        #expect(
            try await store.searchAccounts(
                field: .id, prefix: String(idText.filter { $0 != "-" }.prefix(12)).uppercased(), after: nil, limit: 5
            )
            .accounts.map(\.id) == [ada.id])
        #expect(try await store.searchAccounts(field: .id, prefix: "xyz", after: nil, limit: 5).accounts.isEmpty)
        #expect(
            try await store.searchAccounts(field: .id, prefix: "0", after: nil, limit: 100).accounts.allSatisfy {
                $0.id.uuidString.hasPrefix("0")
            })

        // Credential id: every prefix length of the passkey's base64url finds its account.
        let encoded = AccountSearch.base64URL(adaKey.credentialID)
        for length in [1, 2, 3, 5, 6, 7, 10, encoded.count] {
            let page = try await store.searchAccounts(field: .credentialID, prefix: String(encoded.prefix(length)), after: nil, limit: 100)
            #expect(page.accounts.map(\.id).contains(ada.id), "prefix length \(length)")
            #expect(page.accounts.count == Set(page.accounts.map(\.id)).count)
        }

        // Injection attempts are values, not SQL: they find nothing and break nothing. (`_` is
        // also a base64url character: as a credential ID prefix it finds exactly the accounts
        // with a passkey whose encoded ID starts with it, 1 in 64 of random IDs, never all.)
        let underscored = Fixtures.account("underscored")
        let underscoredKey = Fixtures.passkey(for: underscored, id: [0xFF] + (0..<15).map { _ in UInt8.random(in: 0...255) })
        try await store.createAccount(underscored, passkey: underscoredKey, session: nil, audit: [])
        for attack in ["' OR 1=1 --", "%", "_", "\"; DROP TABLE accounts; --", "<script>"] {
            for field in AccountSearchField.allCases {
                let found = try await store.searchAccounts(field: field, prefix: attack, after: nil, limit: 100).accounts
                if field == .credentialID && attack == "_" {
                    #expect(found.contains { $0.id == underscored.id })
                    for account in found {
                        let encoded = try await store.passkeys(accountID: account.id).map { AccountSearch.base64URL($0.credentialID) }
                        #expect(encoded.contains { $0.hasPrefix("_") }, "\(account.username): \(encoded)")
                    }
                } else {
                    #expect(found.isEmpty, "\(field) \(attack)")
                }
            }
        }
        #expect(try await store.account(id: ada.id) != nil)
    }

    /// Each search and count of the console is an index range scan (or an index-only scan),
    /// never a scan of the table: checked on SQLite's query plan and on PostgreSQL's with
    /// sequential scans priced out (a small table would otherwise be read whole, correctly).
    @Test(arguments: TestDatabase.kinds)
    func theConsoleQueriesUseTheirIndexes(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let someID = UUID()
        // As the store runs them: each names its tenant.
        let t = store.tenant
        let queries: [(String, SQL, String)] = [
            (
                "username",
                "SELECT id FROM accounts WHERE tenant_id = \(t) AND username_key >= \("ad") AND username_key < \("ad\u{10FFFF}") ORDER BY username_key LIMIT 26",
                "username_key"
            ),
            (
                "display name",
                """
                SELECT id FROM accounts WHERE tenant_id = \(t) AND display_name_key >= \("ad") AND display_name_key < \("ad\u{10FFFF}")
                AND (display_name_key, id) > (\("ad"), \(someID)) ORDER BY display_name_key, id LIMIT 26
                """, "accounts_display_name_key"
            ),
            (
                "external id",
                "SELECT id FROM accounts WHERE tenant_id = \(t) AND external_id_key >= \("crm") AND external_id_key < \("crm\u{10FFFF}") ORDER BY external_id_key, id LIMIT 26",
                "accounts_external_id_key"
            ),
            (
                "id", "SELECT id FROM accounts WHERE tenant_id = \(t) AND id >= \(someID) AND id <= \(someID) ORDER BY id LIMIT 26",
                "accounts"
            ),
            (
                "credential id",
                """
                SELECT a.id FROM passkeys p JOIN accounts a ON a.tenant_id = p.tenant_id AND a.id = p.account_id
                WHERE p.tenant_id = \(t) AND p.credential_id >= \([UInt8]([1, 2])) AND p.credential_id < \([UInt8]([1, 3])) ORDER BY p.credential_id LIMIT 26
                """, "passkeys"
            ),
            (
                "audit by kind", "SELECT * FROM audit_events WHERE tenant_id = \(t) AND kind = \("sign_in") ORDER BY id DESC LIMIT 50",
                "audit_kind"
            ),
            (
                "audit by address",
                "SELECT * FROM audit_events WHERE tenant_id = \(t) AND ip_address >= \("192.0.2.") AND ip_address < \("192.0.2.\u{10FFFF}") ORDER BY id DESC LIMIT 50",
                "audit_address"
            ),
            (
                "live metrics",
                "SELECT metric, COUNT(*) AS n FROM audit_events WHERE tenant_id = \(t) AND time >= \(Self.t0) AND time < \(Self.t0) AND metric IS NOT NULL GROUP BY metric",
                "audit_time"
            ),
            ("providers", "SELECT aaguid, COUNT(*) AS n FROM passkeys WHERE tenant_id = \(t) GROUP BY aaguid", "passkeys_aaguid"),
            // The tenant's range of the primary key, or of sessions_expiry: expired sessions are
            // swept every minute, so either reads about the live ones.
            ("live sessions", "SELECT COUNT(*) AS n FROM sessions WHERE tenant_id = \(t) AND expires_at > \(Self.t0)", "sessions"),
        ]
        for (name, query, index) in queries {
            let plan: String
            switch kind {
            case .sqlite:
                plan = try await store.reader.rows(SQL(stringLiteral: "EXPLAIN QUERY PLAN ").appending(query)).map { try $0.text("detail") }
                    .joined(separator: "\n")
                #expect(!plan.contains("SCAN") || plan.contains("COVERING INDEX \(index)"), "\(name): \(plan)")
                #expect(
                    (plan.contains("INDEX") || plan.contains("PRIMARY KEY"))
                        && (plan.contains(index) || index == "accounts" || index == "passkeys"), "\(name): \(plan)")
            case .postgres:
                plan = try await store.engine.transaction(tenant: TenantID.defaultTenant, timeout: nil) { db in
                    try await db.execute("SET LOCAL enable_seqscan = off")
                    return try await db.rows(SQL(stringLiteral: "EXPLAIN ").appending(query)).map { try $0.text("QUERY PLAN") }
                        .joined(separator: "\n")
                }
                #expect(!plan.contains("Seq Scan"), "\(name): \(plan)")
                #expect(plan.contains("Index"), "\(name): \(plan)")
            }
        }
    }

    @Test(arguments: TestDatabase.kinds)
    func searchInputOutOfBoundsIsRefused(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let invalid = StoreError(.invalidQuery, "")
        await #expect(throws: invalid) { try await store.searchAccounts(field: .username, prefix: "", after: nil, limit: 10) }
        await #expect(throws: invalid) {
            try await store.searchAccounts(field: .username, prefix: String(repeating: "é", count: 65), after: nil, limit: 10)
        }
        await #expect(throws: invalid) { try await store.searchAccounts(field: .username, prefix: "a", after: nil, limit: 0) }
        await #expect(throws: invalid) { try await store.searchAccounts(field: .username, prefix: "a", after: nil, limit: 101) }
        await #expect(throws: invalid) { try await store.searchAccounts(field: .username, prefix: "a", after: "garbage!", limit: 10) }
        // A cursor of another field is not one of this field's.
        let other = AccountSearch.Cursor(field: .displayName, key: "a", id: UUID()).text
        await #expect(throws: invalid) { try await store.searchAccounts(field: .username, prefix: "a", after: other, limit: 10) }
        #expect(
            try await store.searchAccounts(field: .username, prefix: String(repeating: "a", count: 128), after: nil, limit: 100).accounts
                .isEmpty)
        await #expect(throws: invalid) { try await store.searchAudit(AuditQuery(limit: 0)) }
        await #expect(throws: invalid) { try await store.searchAudit(AuditQuery(addressPrefix: String(repeating: "1", count: 129))) }
    }

    @Test func credentialRangesHoldExactlyThePrefix() throws {
        for _ in 0..<200 {
            let id = (0..<Int.random(in: 1...40)).map { _ in UInt8.random(in: 0...255) }
            let encoded = AccountSearch.base64URL(id)
            #expect(AccountSearch.base64URLDecode(encoded) == id)
            let length = Int.random(in: 1...encoded.count)
            let range = try #require(AccountSearch.credentialRange(String(encoded.prefix(length))))
            #expect(id.lexicographicallyPrecedes(range.low) == false, "\(encoded) \(length)")
            if let upper = range.upper { #expect(id.lexicographicallyPrecedes(upper), "\(encoded) \(length)") }
        }
        #expect(AccountSearch.credentialRange("ab/+")?.normalized == "ab_-")
        #expect(AccountSearch.credentialRange("a.b") == nil)
        #expect(AccountSearch.credentialRange("____")?.upper == nil)
    }

    @Test(arguments: TestDatabase.kinds)
    func theAuditLogIsSearchedByEachFilterNewestFirst(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let (ada, _) = try await Self.withPasskey(store, "ada")
        for index in 0..<10 {
            try await store.appendAudit(
                AuditEvent(
                    time: Self.t0.addingTimeInterval(Double(index) * 60), kind: index % 2 == 0 ? .signIn : .signInFailed,
                    accountID: index < 5 ? ada.id : nil, ipAddress: index % 3 == 0 ? "192.0.2.\(index)" : "2001:db8::\(index)"))
        }
        let all = try await store.searchAudit(AuditQuery(limit: 100))
        #expect(all.count == 10 && all.map(\.id) == all.map(\.id).sorted { ($0 ?? 0) > ($1 ?? 0) })
        #expect(try await store.searchAudit(AuditQuery(accountID: ada.id, limit: 100)).count == 5)
        #expect(try await store.searchAudit(AuditQuery(kind: "sign_in", limit: 100)).count == 5)
        #expect(try await store.searchAudit(AuditQuery(addressPrefix: "192.0.2.", limit: 100)).count == 4)
        #expect(try await store.searchAudit(AuditQuery(addressPrefix: "2001:db8::", limit: 100)).count == 6)
        let window = try await store.searchAudit(
            AuditQuery(from: Self.t0.addingTimeInterval(120), to: Self.t0.addingTimeInterval(300), limit: 100))
        #expect(window.map(\.time) == [240, 180, 120].map { Self.t0.addingTimeInterval($0) })
        // Keyset pages.
        let first = try await store.searchAudit(AuditQuery(limit: 4))
        let second = try await store.searchAudit(AuditQuery(beforeID: first.last?.id, limit: 4))
        #expect((first + second).map(\.id) == all.prefix(8).map(\.id))
        #expect(try await store.searchAudit(AuditQuery(kind: "sign_in", addressPrefix: "192.", limit: 100)).count == 2)
        #expect(try await store.searchAudit(AuditQuery(addressPrefix: "' OR '1'='1", limit: 100)).isEmpty)
    }

    // MARK: Overview and deletion

    @Test(arguments: TestDatabase.kinds)
    func theOverviewCountsLiveSessionsAndProviders(_ kind: TestDatabase.Kind) async throws {
        let (store, ada, _) = try await Fixtures.adaWithPasskey(kind, signCount: 0)
        var other = Fixtures.passkey(for: ada)
        other.aaguid = "ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4"
        try await store.addPasskey(other)
        try await store.createSession(Fixtures.session(for: ada))
        try await store.createSession(Fixtures.session(for: ada, expires: 10))
        #expect(try await store.liveSessionCount(now: Self.t0.addingTimeInterval(60)) == 1)
        #expect(
            try await store.passkeyCountsByAAGUID() == [
                "fbfc3007-154e-4ecc-8c0b-6e020557d7bd": 1, "ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4": 1,
            ])
        #expect(try await store.webhookBacklog(now: Self.t0) == 0)
    }

    @Test(arguments: TestDatabase.kinds)
    func deletingAnAccountTakesEverythingOfItButItsHistory(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        let (ada, key) = try await Self.withPasskey(store, "ada")
        let (bob, _) = try await Self.withPasskey(store, "bob")
        try await store.createSession(Fixtures.session(for: ada))
        try await store.replaceRecoveryCodes(accountID: ada.id, hashes: [[1], [2]], at: Self.t0)
        try await store.saveRecoveryToken(hash: [3], accountID: ada.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(600))
        try await store.saveRegistrationToken(hash: [4], accountID: ada.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(600))
        try await store.addOAuthClient(
            OAuthClient(id: "app", name: "App", secretHash: nil, redirectURIs: ["https://a.example/cb"], createdAt: Self.t0))
        try await store.saveConsent(accountID: ada.id, clientID: "app", scope: "openid", at: Self.t0)
        try await store.saveRefreshToken(
            hash: [5],
            grant: OAuthGrant(clientID: "app", accountID: ada.id, grant: [1], family: "f", expiresAt: Self.t0.addingTimeInterval(600)),
            createdAt: Self.t0)
        _ = try await store.setAdminRole(accountID: bob.id, role: .admin, by: "cli", at: Self.t0, audit: [])
        _ = try await store.setAdminRole(accountID: ada.id, role: .viewer, by: "cli", at: Self.t0, audit: [])
        try await store.createAdminSession(
            AdminSessionRecord(
                tokenHash: [6], accountID: ada.id, createdAt: Self.t0, expiresAt: Self.t0.addingTimeInterval(600),
                idleExpiresAt: Self.t0.addingTimeInterval(600), verifiedAt: Self.t0, csrfHash: [1]))
        try await store.appendAudit(AuditEvent(time: Self.t0, kind: .signIn, accountID: ada.id))

        let deletion = AuditEvent(
            time: Self.t0, kind: "admin_account_deleted", accountID: ada.id, detail: bob.id.uuidString, metric: "account_deleted_passkey")
        #expect(try await store.deleteAccount(accountID: ada.id, audit: [deletion]) == .deleted)
        #expect(try await store.account(id: ada.id) == nil)
        #expect(try await store.passkey(credentialID: key.credentialID) == nil)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).isEmpty)
        #expect(try await store.recoveryCodesLeft(accountID: ada.id) == 0)
        #expect(try await store.takeRecoveryToken(hash: [3], now: Self.t0) == nil)
        #expect(try await store.takeRegistrationToken(hash: [4], now: Self.t0) == nil)
        #expect(try await store.consent(accountID: ada.id, clientID: "app") == nil)
        #expect(try await store.refreshFamily(hash: [5]) == nil)
        #expect(try await store.adminRole(accountID: ada.id) == nil)
        #expect(try await store.adminSession(tokenHash: [6], now: Self.t0, idleUntil: Self.t0) == nil)
        // The history stays, with the deletion's own line.
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).map(\.kind) == ["admin_account_deleted", "sign_in"])
        #expect(try await store.account(id: bob.id) != nil)
        #expect(try await store.adminRole(accountID: bob.id) == .admin)
        #expect(try await store.deleteAccount(accountID: ada.id, audit: [deletion]) == .notFound)
        #expect(try await store.auditEvents(accountID: ada.id, limit: 5).count == 2)
        // bob is the last admin now: his account stays, with everything of it and no new line.
        let bobsDeletion = AuditEvent(time: Self.t0, kind: "admin_account_deleted", accountID: bob.id)
        #expect(try await store.deleteAccount(accountID: bob.id, audit: [bobsDeletion]) == .lastAdmin)
        #expect(try await store.account(id: bob.id) != nil)
        #expect(try await store.adminRole(accountID: bob.id) == .admin)
        #expect(try await store.auditEvents(accountID: bob.id, limit: 5).isEmpty)
        // With a second admin, he can go.
        let (carol, _) = try await Self.withPasskey(store, "carol")
        _ = try await store.setAdminRole(accountID: carol.id, role: .admin, by: "cli", at: Self.t0, audit: [])
        #expect(try await store.deleteAccount(accountID: bob.id, audit: [bobsDeletion]) == .deleted)
        #expect(try await store.adminCount() == 1)
    }
}
