import Foundation
import Logging
import PasskeyStoreTesting
import PostgresNIO
import Synchronization
import Testing

@testable import PasskeyStore

/// Tenants (issue 44), on SQLite and PostgreSQL: another tenant's rows are never read, changed
/// or counted. Tenant A (the store as opened, `default`) holds one of everything; tenant B, on
/// the same connections, calls every tenant-scoped method of ``PasskeyStore`` and ``MailStore``
/// with A's identifiers and finds nothing, changes nothing, counts nothing, while every
/// statement it sends names its tenant (``CheckingEngine``). Then B makes its own rows under A's
/// very identifiers, and A reads back exactly what it held before, through every read of the
/// store and row by row. The list of methods is checked against the protocols' source, so a
/// method added later without a place here fails the suite.
@Suite("Tenant isolation (SQLite and PostgreSQL)")
struct TenantIsolationTests {
    typealias Fixtures = StoreConformanceTests
    static let t0 = Fixtures.t0
    static let day: TimeInterval = 86_400
    static let tenantB = "tenant-b"

    static func random(_ count: Int = 32) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    // MARK: The methods

    /// Every method of ``PasskeyStore`` and ``MailStore`` that reads, writes or counts one
    /// tenant's rows: each is called by tenant B in ``anotherTenantsRowsAreNeverReadChangedOrCounted(_:)``.
    static let scopedMethods = [
        // Accounts
        "account(id:)", "account(username:)", "account(userHandle:)", "createAccount(_:passkey:session:audit:)",
        // Passkeys
        "addPasskey(_:)", "passkey(credentialID:)", "passkeys(accountID:)", "passkeyAndAccount(credentialID:)",
        "completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)",
        "renamePasskey(accountID:credentialID:name:)", "ensurePRFSalt(credentialID:salt:)", "setPRFSalt(accountID:credentialID:salt:)",
        "deletePasskey(accountID:credentialID:keepSession:)", "revokePasskey(credentialID:audit:)",
        // Administration
        "accounts(after:limit:)", "setDisabled(accountID:disabled:audit:)", "sessions(accountID:now:)", "statistics(now:activeSince:)",
        // Ceremonies
        "saveChallenge(_:)", "takeChallenge(_:)", "challenge(_:)", "challengeAndPasskey(_:credentialID:)", "openChallengeCount(now:)",
        "discardOldestChallenges(count:)",
        // Sessions
        "createSession(_:)", "session(tokenHash:now:)", "revokeSession(tokenHash:)", "rebindSession(tokenHash:credentialID:)",
        "revokeSessions(accountID:except:audit:)",
        // Passwords and recovery
        "importAccounts(_:)", "removePassword(accountID:)", "changePassword(accountID:hash:keepSession:)",
        "rehashPassword(accountID:from:to:)", "recordSignIn(accountID:session:audit:revokeOtherSessions:)",
        "replaceRecoveryCodes(accountID:hashes:at:)", "useRecoveryCode(accountID:hash:at:)", "recoveryCodesLeft(accountID:)",
        "saveRecoveryToken(hash:accountID:createdAt:expiresAt:)", "takeRecoveryToken(hash:now:)",
        // Abuse limits
        "countHit(key:windowStart:expiresAt:)", "rateLimitHits(key:windowStart:)", "refundHit(key:windowStart:)",
        // Audit
        "appendAudit(_:)", "auditEvents(accountID:limit:)",
        // Apps that trust passkeyd
        "account(externalID:)", "usernames(accountIDs:)", "createAccount(_:audit:)", "setExternalID(accountID:externalID:)",
        "touchSession(tokenHash:at:)", "saveRegistrationToken(hash:accountID:createdAt:expiresAt:)", "takeRegistrationToken(hash:now:)",
        // Signing keys
        "signingKeys(now:)", "addSigningKey(_:retiringOthersAt:)", "addFirstSigningKey(_:now:)", "signingKeysVersion()",
        // API keys
        "createAPIKey(_:audit:)", "apiKey(hash:)", "apiKeys()", "revokeAPIKey(id:at:audit:)", "touchAPIKey(id:at:)",
        // Webhooks
        "addWebhookEndpoint(_:)", "webhookEndpoints()", "removeWebhookEndpoint(id:)",
        "claimWebhookDeliveries(endpointID:now:leaseUntil:limit:)",
        "settleWebhookDelivery(eventID:endpointID:deliveredAt:status:error:latencyMs:retryAt:)", "webhookDeliveries(endpointID:limit:)",
        // OpenID Connect
        "addOAuthClient(_:)", "oauthClient(id:)", "oauthClients()", "removeOAuthClient(id:)",
        "saveOAuthRequest(hash:clientID:request:createdAt:expiresAt:)", "oauthRequest(hash:now:)", "deleteOAuthRequest(hash:)",
        "saveOAuthCode(hash:grant:createdAt:)", "useOAuthCode(hash:clientID:family:at:)", "oauthCode(hash:clientID:)",
        "saveRefreshToken(hash:grant:createdAt:)", "useRefreshToken(hash:clientID:at:)",
        "revokeOAuthGrant(family:clientID:accountID:at:until:)",
        "revokeRefreshToken(hash:clientID:at:until:)", "oauthGrantRevoked(family:)", "revokeRefreshFamily(_:at:)", "refreshFamily(hash:)",
        "consent(accountID:clientID:)", "saveConsent(accountID:clientID:scope:at:)",
        "recordAssertion(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:audit:)",
        // The console
        "adminRole(accountID:)", "adminGrants()", "adminCount()", "setAdminRole(accountID:role:by:at:audit:)",
        "saveAdminBootstrapToken(hash:createdAt:expiresAt:audit:)", "adminBootstrapTokenIsLive(hash:now:)",
        "redeemAdminBootstrapToken(hash:accountID:now:audit:)", "createAdminSession(_:)", "adminSession(tokenHash:now:idleUntil:)",
        "verifyAdminSession(tokenHash:at:csrfHash:)", "revokeAdminSession(tokenHash:)", "revokeAdminSessions(accountID:)",
        "dailyMetrics(from:to:)", "metricTotals(before:)", "liveMetrics(from:to:)", "searchAccounts(field:prefix:after:limit:)",
        "searchAudit(_:)", "liveSessionCount(now:)", "webhookBacklog(now:)", "passkeyCountsByAAGUID()", "deleteAccount(accountID:audit:)",
        "setWebhookPaused(id:paused:)", "setWebhookSecret(id:secret:)", "retryWebhookDelivery(endpointID:eventID:now:)",
        "setOAuthClientSecret(id:secretHash:)",
        // Mail (MailStore)
        "accountEmail(accountID:)", "account(verifiedEmailKey:)", "accounts(unverifiedEmailKey:limit:)",
        "setUnverifiedEmail(accountID:address:key:language:)", "verifyEmail(accountID:address:key:at:audit:)",
        "restoreEmail(accountID:address:key:verifiedAt:)", "setEmailRecoveryClosed(accountID:closed:)",
        "setEmailLanguage(accountID:language:)",
        "queueMail(_:token:audit:)", "saveEmailToken(_:)", "takeEmailToken(linkHash:purpose:now:)",
        "attemptEmailCode(accountID:purpose:codeHash:now:)", "endEmailTokens(accountID:purpose:now:)", "mailStatistics(now:)",
        "emailRecoveryFigures(since:)",
    ]

    /// The methods that span every tenant on purpose (the store itself, the schema, the tenant
    /// registry, the server secret, FIDO metadata, sweeps, the metrics rollup and the outboxes'
    /// dispatchers): not called by tenant B.
    static let upkeepMethods = [
        "scoped(to:)", "tenantsVersion()", "tenantRecords()", "addTenant(_:)", "updateTenant(_:unchangedSince:)",
        "removeTenant(id:deleteData:)",
        "deleteTenantData(id:)", "tenantMark(id:)", "setTenantMark(id:mark:)", "markedTenants()",
        "migrate()", "schemaVersion()", "pendingMigrations()", "ping()", "serverSecret()", "rekeyUsernames()", "sweepExpired(now:)",
        "allWebhookEndpoints()", "saveMetadataBLOB(_:force:)", "metadataBLOB()", "metadataBLOBNumber()", "rollUpMetrics(before:)",
        "metricsRolledThrough()", "claimMail(now:leaseUntil:leaseToken:limit:)", "markMailSent(id:leaseToken:at:)",
        "markMailFailed(id:leaseToken:error:retryAt:at:)", "sweepMail(now:)",
    ]

    /// A method added to either protocol must be listed above (and, when scoped, be called by
    /// tenant B below): the protocols' `func` declarations, read from their source, are exactly
    /// the two lists.
    @Test func everyStoreMethodIsListedAsScopedOrUpkeep() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/PasskeyStore")
        var declared: [String] = []
        var funcLines = 0
        for (file, name) in [("PasskeyStore.swift", "PasskeyStore"), ("MailStore.swift", "MailStore")] {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            let body = Self.protocolBody(text, declaration: "public protocol \(name)")
            #expect(!body.isEmpty, "no protocol \(name) in \(file)")
            funcLines += body.split(separator: "\n").filter { $0.contains("func ") }.count
            declared += Self.selectors(in: body)
        }
        let listed = Self.scopedMethods + Self.upkeepMethods
        #expect(funcLines == declared.count, "one func per declaration: \(declared)")
        #expect(declared.count == listed.count, "\(declared.count) methods declared, \(listed.count) listed")
        #expect(Set(declared).subtracting(listed).sorted() == [], "declared but not listed as scoped or upkeep")
        #expect(Set(listed).subtracting(declared).sorted() == [], "listed but not declared")
        #expect(Set(Self.scopedMethods).isDisjoint(with: Self.upkeepMethods))
        #expect(Set(listed).count == listed.count, "listed twice")
    }

    /// The protocol's body (from its declaration to the first `}` at the start of a line),
    /// comment lines left out.
    static func protocolBody(_ text: String, declaration: String) -> String {
        var lines: [Substring] = []
        var inside = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if !inside {
                inside = line.hasPrefix(declaration)
                continue
            }
            if line == "}" { break }
            if !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") { lines.append(line) }
        }
        return lines.joined(separator: "\n")
    }

    /// Each `func name(label: Type, …)` of `body` as `name(label:…)`.
    static func selectors(in body: String) -> [String] {
        let characters = Array(body)
        var selectors: [String] = []
        var index = 0
        while index + 5 <= characters.count {
            guard String(characters[index..<index + 5]) == "func ", index == 0 || !characters[index - 1].isLetter else {
                index += 1
                continue
            }
            index += 5
            var name = ""
            while index < characters.count, characters[index].isLetter || characters[index].isNumber || characters[index] == "_" {
                name.append(characters[index])
                index += 1
            }
            while index < characters.count, characters[index] != "(" { index += 1 }
            index += 1
            // The parameters, split at top-level commas.
            var depth = 0
            var parameter = ""
            var labels: [String] = []
            func label(_ parameter: String) {
                let head = parameter.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
                if let first = head.split(whereSeparator: \.isWhitespace).first { labels.append(String(first)) }
            }
            while index < characters.count {
                let character = characters[index]
                index += 1
                if character == "-", index < characters.count, characters[index] == ">" {
                    parameter.append("->")
                    index += 1
                    continue
                }
                if "([<".contains(character) { depth += 1 }
                if ")]>".contains(character) {
                    if depth == 0 { break }
                    depth -= 1
                }
                if character == ",", depth == 0 {
                    label(parameter)
                    parameter = ""
                    continue
                }
                parameter.append(character)
            }
            label(parameter)
            selectors.append(name + "(" + labels.map { $0 + ":" }.joined() + ")")
        }
        return selectors
    }

    // MARK: The checking engine

    /// The checker itself: a statement on a tenant's table that does not name `tenant_id` (once
    /// per table it names) is caught; a table no tenant owns needs none.
    @Test func theCheckerCatchesAStatementWithoutItsTenant() {
        let log = StatementLog(tenantTables: SQLDialect.sqlite.tenantTables)
        log.check("SELECT * FROM accounts WHERE id = \(UUID())")
        log.check("SELECT p.* FROM passkeys p JOIN accounts a ON a.id = p.account_id WHERE p.tenant_id = \("b")")
        log.check("UPDATE sessions SET last_seen_at = 1")
        log.check("INSERT INTO mail_outbox (kind) VALUES ('x')")
        #expect(log.unscoped.count == 4)
        let clean = StatementLog(tenantTables: SQLDialect.sqlite.tenantTables)
        clean.check("SELECT value FROM settings WHERE name = 'tenants'")
        clean.check("DELETE FROM challenges WHERE tenant_id = \("b") AND challenge_hash = \([UInt8]([1]))")
        clean.check(
            "SELECT p.* FROM passkeys p JOIN accounts a ON a.tenant_id = p.tenant_id AND a.id = p.account_id WHERE p.tenant_id = \("b")")
        #expect(clean.unscoped.isEmpty)
        #expect(clean.statements == 3)
    }

    // MARK: Tenant A

    /// What tenant A holds: one of everything, made through the store.
    struct TenantA {
        var ada: Account
        var bob: Account
        var grace: Account
        var key: Passkey
        var secondKey: Passkey
        var graceKey: Passkey
        var session: SessionRecord
        var challenge: [UInt8]
        var recoveryToken: [UInt8]
        var registrationToken: [UInt8]
        var apiKey: APIKey
        var endpoint: WebhookEndpoint
        var client: OAuthClient
        var requestHash: [UInt8]
        var codeHash: [UInt8]
        var refreshHash: [UInt8]
        var signingKey: SigningKey
        var bootstrapHash: [UInt8]
        var adminSession: AdminSessionRecord
        var linkHash: [UInt8]
        var emailCode: [UInt8]
        let family = "family-a"
        let revokedFamily = "family-revoked"
        let rateKey = "sign_in:192.0.2.1"
        let graceHash = "$2b$04$grace-of-tenant-a"
        let adaEmail = "ada@a.example"
        let graceEmail = "grace@a.example"
    }

    /// Fills tenant A (the store as opened) through the store's API.
    static func fill(_ a: any PasskeyStore) async throws -> TenantA {
        let t0 = Self.t0
        // The endpoint first: every audit line after it has a delivery.
        let endpoint = WebhookEndpoint(url: "https://hooks.a.example/", secret: [1], events: ["*"], createdAt: t0)
        try await a.addWebhookEndpoint(endpoint)

        let ada = Fixtures.account("ada")
        let key = Fixtures.passkey(for: ada)
        let session = Fixtures.session(for: ada, credentialID: key.credentialID)
        try await a.createAccount(
            ada, passkey: key, session: session,
            audit: [
                AuditEvent(
                    time: t0, kind: .signUp, accountID: ada.id, credentialID: key.credentialID, ipAddress: "192.0.2.1",
                    metric: "sign_up_passkey")
            ])
        var secondKey = Fixtures.passkey(for: ada)
        secondKey.aaguid = "ea9b8d66-4d01-1d21-3ce4-b6b48cb575d4"
        try await a.addPasskey(secondKey)
        #expect(try await a.ensurePRFSalt(credentialID: key.credentialID, salt: [7, 7, 7]) == [7, 7, 7])
        #expect(try await a.setExternalID(accountID: ada.id, externalID: "crm-ada"))

        var bob = Fixtures.account("bob")
        bob.externalID = "crm-bob"
        try await a.createAccount(bob, audit: [AuditEvent(time: t0, kind: .accountCreated, accountID: bob.id)])

        var fixture = TenantA(
            ada: ada, bob: bob, grace: Fixtures.account("grace"), key: key, secondKey: secondKey, graceKey: key, session: session,
            challenge: random(), recoveryToken: random(), registrationToken: random(),
            apiKey: APIKey(name: "ci", keyHash: random(), scopes: ["accounts:read"], createdAt: t0), endpoint: endpoint,
            client: OAuthClient(
                id: "app", name: "App of A", secretHash: [1], redirectURIs: ["https://a.example/cb"], createdAt: t0),
            requestHash: random(), codeHash: random(), refreshHash: random(),
            signingKey: SigningKey(kid: "k1", algorithm: "RS256", privateKey: [5, 6], createdAt: t0, activatesAt: t0),
            bootstrapHash: random(),
            adminSession: AdminSessionRecord(
                tokenHash: random(), accountID: ada.id, createdAt: t0, expiresAt: t0.addingTimeInterval(8 * 3600),
                idleExpiresAt: t0.addingTimeInterval(900), verifiedAt: t0, csrfHash: [1, 2], ipAddress: "192.0.2.1", userAgent: "test"),
            linkHash: random(), emailCode: random())

        #expect(try await a.importAccounts([(fixture.grace, fixture.graceHash)]) == [true])
        fixture.graceKey = Fixtures.passkey(for: fixture.grace)
        try await a.addPasskey(fixture.graceKey)

        try await a.saveChallenge(
            ChallengeRecord(
                challenge: fixture.challenge, ceremony: .authentication, accountID: ada.id, userVerification: "required", createdAt: t0,
                expiresAt: t0.addingTimeInterval(300)))
        try await a.replaceRecoveryCodes(accountID: ada.id, hashes: [[1], [2], [3]], at: t0)
        try await a.saveRecoveryToken(
            hash: fixture.recoveryToken, accountID: ada.id, createdAt: t0, expiresAt: t0.addingTimeInterval(600))
        try await a.saveRegistrationToken(
            hash: fixture.registrationToken, accountID: ada.id, createdAt: t0, expiresAt: t0.addingTimeInterval(600))
        try await a.createAPIKey(fixture.apiKey, audit: [AuditEvent(time: t0, kind: .apiKeyCreated, detail: "ci")])
        try await a.appendAudit(
            AuditEvent(
                time: t0.addingTimeInterval(60), kind: .signIn, accountID: ada.id, credentialID: key.credentialID, ipAddress: "192.0.2.1",
                metric: "sign_in_passkey"))
        try await a.appendAudit(
            AuditEvent(time: t0.addingTimeInterval(120), kind: .emailRecoveryRequested, accountID: ada.id, ipAddress: "192.0.2.2"))

        try await a.addOAuthClient(fixture.client)
        try await a.saveOAuthRequest(
            hash: fixture.requestHash, clientID: "app", request: [1, 2], createdAt: t0, expiresAt: t0.addingTimeInterval(600))
        try await a.saveOAuthCode(
            hash: fixture.codeHash,
            grant: OAuthGrant(clientID: "app", accountID: ada.id, grant: [3], family: nil, expiresAt: t0.addingTimeInterval(600)),
            createdAt: t0)
        try await a.saveRefreshToken(
            hash: fixture.refreshHash,
            grant: OAuthGrant(
                clientID: "app", accountID: ada.id, grant: [4], family: fixture.family, expiresAt: t0.addingTimeInterval(day)),
            createdAt: t0)
        try await a.saveRefreshToken(
            hash: random(),
            grant: OAuthGrant(
                clientID: "app", accountID: ada.id, grant: [5], family: fixture.revokedFamily, expiresAt: t0.addingTimeInterval(day)),
            createdAt: t0)
        #expect(
            try await a.revokeOAuthGrant(
                family: fixture.revokedFamily, clientID: "app", accountID: ada.id, at: t0, until: t0.addingTimeInterval(day)) == 1)
        try await a.saveConsent(accountID: ada.id, clientID: "app", scope: "openid", at: t0)
        #expect(try await a.addFirstSigningKey(fixture.signingKey, now: t0))

        #expect(try await a.setAdminRole(accountID: ada.id, role: .admin, by: "cli", at: t0, audit: []) == .changed)
        #expect(try await a.setAdminRole(accountID: bob.id, role: .viewer, by: "cli", at: t0, audit: []) == .changed)
        try await a.saveAdminBootstrapToken(hash: fixture.bootstrapHash, createdAt: t0, expiresAt: t0.addingTimeInterval(3600), audit: [])
        try await a.createAdminSession(fixture.adminSession)

        #expect(try await a.setUnverifiedEmail(accountID: ada.id, address: fixture.adaEmail, key: fixture.adaEmail, language: "en"))
        try await a.verifyEmail(
            accountID: ada.id, address: fixture.adaEmail, key: fixture.adaEmail, at: t0,
            audit: [AuditEvent(time: t0, kind: .emailVerified, accountID: ada.id)])
        #expect(
            try await a.setUnverifiedEmail(
                accountID: fixture.grace.id, address: fixture.graceEmail, key: fixture.graceEmail, language: "de"))
        try await a.saveEmailToken(
            EmailToken(
                accountID: ada.id, purpose: .recover, address: fixture.adaEmail, linkHash: fixture.linkHash, codeHash: fixture.emailCode,
                createdAt: t0, expiresAt: t0.addingTimeInterval(3600)))
        try await a.queueMail(
            QueuedMail(
                accountID: fixture.grace.id, kind: "verify", recipient: fixture.graceEmail, sender: "passkeyd@a.example",
                message: [1, 2, 3],
                createdAt: t0, nextAttemptAt: t0),
            token: EmailToken(
                accountID: fixture.grace.id, purpose: .verify, address: fixture.graceEmail, linkHash: random(), codeHash: random(),
                createdAt: t0, expiresAt: t0.addingTimeInterval(3600)),
            audit: [AuditEvent(time: t0, kind: .emailVerificationSent, accountID: fixture.grace.id)])

        #expect(try await a.countHit(key: fixture.rateKey, windowStart: t0, expiresAt: t0.addingTimeInterval(60)) == 1)
        #expect(try await a.countHit(key: fixture.rateKey, windowStart: t0, expiresAt: t0.addingTimeInterval(60)) == 2)
        #expect(try await a.rollUpMetrics(before: t0.addingTimeInterval(2 * day)) >= 1)
        return fixture
    }

    /// The prefix each account search of tenant A finds ada by.
    static func searchPrefix(_ field: AccountSearchField, _ fixture: TenantA) -> String {
        switch field {
        case .username: "ada"
        case .displayName: "ada"
        case .externalID: "crm-ada"
        case .id: String(fixture.ada.id.uuidString.lowercased().prefix(6))
        case .credentialID: String(AccountSearch.base64URL(fixture.key.credentialID).prefix(6))
        }
    }

    static func sorted(_ counts: [String: Int]) -> String { "\(counts.sorted { $0.key < $1.key })" }

    /// Everything tenant A reads through its store (the reads that write nothing, and the console
    /// session's with an idle expiry that leaves it as it is), each rendered as text.
    static func snapshot(_ a: any PasskeyStore, _ f: TenantA) async throws -> [String: String] {
        let t0 = Self.t0
        var s: [String: String] = [:]
        for account in [f.ada, f.bob, f.grace] {
            s["account(id:) \(account.username)"] = "\(try await a.account(id: account.id) as Any)"
            s["accountEmail(accountID:) \(account.username)"] = "\(try await a.accountEmail(accountID: account.id) as Any)"
            s["adminRole(accountID:) \(account.username)"] = "\(try await a.adminRole(accountID: account.id) as Any)"
        }
        s["passkeys(accountID:)"] = "\(try await a.passkeys(accountID: f.ada.id))"
        s["sessions(accountID:now:)"] = "\(try await a.sessions(accountID: f.ada.id, now: t0))"
        s["recoveryCodesLeft(accountID:)"] = "\(try await a.recoveryCodesLeft(accountID: f.ada.id))"
        s["account(username:)"] = "\(try await a.account(username: "ada") as Any)"
        s["account(userHandle:)"] = "\(try await a.account(userHandle: f.ada.userHandle) as Any)"
        s["account(externalID:)"] = "\(try await a.account(externalID: "crm-bob") as Any)"
        s["usernames(accountIDs:)"] = "\(try await a.usernames(accountIDs: [f.ada.id, f.bob.id, f.grace.id]).values.sorted())"
        s["accounts(after:limit:)"] = "\(try await a.accounts(after: nil, limit: 100))"
        for key in [f.key, f.secondKey, f.graceKey] {
            s["passkey(credentialID:) \(key.credentialID)"] = "\(try await a.passkey(credentialID: key.credentialID) as Any)"
        }
        s["passkeyAndAccount(credentialID:)"] = "\(try await a.passkeyAndAccount(credentialID: f.key.credentialID) as Any)"
        s["session(tokenHash:now:)"] = "\(try await a.session(tokenHash: f.session.tokenHash, now: t0) as Any)"
        var statistics = try await a.statistics(now: t0, activeSince: t0.addingTimeInterval(-day))
        s["statistics(now:activeSince:) providers"] = Self.sorted(statistics.passkeysByAAGUID)
        statistics.passkeysByAAGUID = [:]
        s["statistics(now:activeSince:)"] = "\(statistics)"
        s["challenge(_:)"] = "\(try await a.challenge(f.challenge) as Any)"
        s["challengeAndPasskey(_:credentialID:)"] = "\(try await a.challengeAndPasskey(f.challenge, credentialID: f.key.credentialID))"
        s["openChallengeCount(now:)"] = "\(try await a.openChallengeCount(now: t0))"
        s["rateLimitHits(key:windowStart:)"] = "\(try await a.rateLimitHits(key: f.rateKey, windowStart: t0))"
        s["auditEvents(accountID:limit:)"] = "\(try await a.auditEvents(accountID: nil, limit: 1000))"
        s["signingKeys(now:)"] = "\(try await a.signingKeys(now: t0))"
        s["signingKeysVersion()"] = "\(try await a.signingKeysVersion())"
        s["apiKey(hash:)"] = "\(try await a.apiKey(hash: f.apiKey.keyHash) as Any)"
        s["apiKeys()"] = "\(try await a.apiKeys())"
        s["webhookEndpoints()"] = "\(try await a.webhookEndpoints())"
        s["webhookDeliveries(endpointID:limit:)"] = "\(try await a.webhookDeliveries(endpointID: nil, limit: 1000))"
        s["webhookBacklog(now:)"] = "\(try await a.webhookBacklog(now: t0))"
        s["oauthClient(id:)"] = "\(try await a.oauthClient(id: f.client.id) as Any)"
        s["oauthClients()"] = "\(try await a.oauthClients())"
        s["oauthRequest(hash:now:)"] = "\(try await a.oauthRequest(hash: f.requestHash, now: t0) as Any)"
        s["oauthCode(hash:clientID:)"] = "\(try await a.oauthCode(hash: f.codeHash, clientID: f.client.id) as Any)"
        s["oauthGrantRevoked(family:)"] = "\(try await a.oauthGrantRevoked(family: f.revokedFamily))"
        s["refreshFamily(hash:)"] = "\(try await a.refreshFamily(hash: f.refreshHash) as Any)"
        s["consent(accountID:clientID:)"] = "\(try await a.consent(accountID: f.ada.id, clientID: f.client.id) as Any)"
        s["adminGrants()"] = "\(try await a.adminGrants())"
        s["adminCount()"] = "\(try await a.adminCount())"
        s["adminSession(tokenHash:now:idleUntil:)"] =
            "\(try await a.adminSession(tokenHash: f.adminSession.tokenHash, now: t0, idleUntil: f.adminSession.idleExpiresAt) as Any)"
        s["dailyMetrics(from:to:)"] =
            "\(try await a.dailyMetrics(from: t0.addingTimeInterval(-10 * day), to: t0.addingTimeInterval(10 * day)))"
        s["metricTotals(before:)"] = Self.sorted(try await a.metricTotals(before: t0.addingTimeInterval(10 * day)))
        s["liveMetrics(from:to:)"] = Self.sorted(try await a.liveMetrics(from: t0.addingTimeInterval(-day), to: t0.addingTimeInterval(day)))
        for field in AccountSearchField.allCases {
            let found = try await a.searchAccounts(field: field, prefix: Self.searchPrefix(field, f), after: nil, limit: 100)
            s["searchAccounts(field:prefix:after:limit:) \(field)"] = "\(found.accounts)"
        }
        s["searchAudit(_:)"] = "\(try await a.searchAudit(AuditQuery(limit: 1000)))"
        s["liveSessionCount(now:)"] = "\(try await a.liveSessionCount(now: t0))"
        s["passkeyCountsByAAGUID()"] = Self.sorted(try await a.passkeyCountsByAAGUID())
        s["account(verifiedEmailKey:)"] = "\(try await a.account(verifiedEmailKey: f.adaEmail) as Any)"
        s["accounts(unverifiedEmailKey:limit:)"] = "\(try await a.accounts(unverifiedEmailKey: f.graceEmail, limit: 10))"
        s["mailStatistics(now:)"] = "\(try await a.mailStatistics(now: t0))"
        s["emailRecoveryFigures(since:)"] = "\(try await a.emailRecoveryFigures(since: t0.addingTimeInterval(-day)))"
        return s
    }

    /// Every row of every table `tenant` owns, as text, by table: what no read above may miss
    /// (a token marked used, a lease taken, a time moved).
    static func rows(_ store: SQLStore, tenant: String) async throws -> [String: [String]] {
        var rows: [String: [String]] = [:]
        for table in store.dialect.tenantTables {
            let select: SQL
            switch store.dialect {
            case .sqlite:
                let columns = try await store.reader.rows(SQL(unsafeText: "PRAGMA table_info(\(table))")).map { try $0.text("name") }
                let row = columns.map { "quote(\($0))" }.joined(separator: " || '|' || ")
                select = SQL(unsafeText: "SELECT \(row) AS r FROM \(table) WHERE tenant_id = ").appending("\(tenant)")
            case .postgres:
                select = SQL(unsafeText: "SELECT t::text AS r FROM \(table) t WHERE t.tenant_id = ").appending("\(tenant)")
            }
            rows[table] = try await store.reader.rows(select).map { try $0.text("r") }.sorted()
        }
        return rows
    }

    // MARK: Another tenant's rows

    /// Tenant B, on A's connections, calls every scoped method with A's identifiers: reads find
    /// nothing, counts are 0, writes find nothing to change (or are refused: a row of B cannot
    /// point at A's account or client). Then B makes its own rows under A's very identifiers
    /// (account ids, username, user handle, credential ID, challenge, token hashes, client id,
    /// kid, email address, link hash) and reads back its own. Through all of it, every statement
    /// B sends names its tenant, and nothing of A changes: not one read of A's, not one row.
    @Test(arguments: TestDatabase.kinds)
    func anotherTenantsRowsAreNeverReadChangedOrCounted(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let a: any PasskeyStore = store
        let f = try await Self.fill(a)
        let before = try await Self.snapshot(a, f)
        let rowsBefore = try await Self.rows(store, tenant: TenantID.defaultTenant)
        // A holds one of everything: every read above finds something (the few that are false
        // or empty by design aside), and every table has rows.
        let emptyByDesign: Set<String> = ["adminRole(accountID:) grace"]
        for (name, value) in before where !emptyByDesign.contains(name) {
            #expect(!["nil", "[]", "0", "false", "(nil, nil)"].contains(value), "tenant A's \(name) is empty: the fixture misses it")
        }
        for (table, rows) in rowsBefore { #expect(!rows.isEmpty, "tenant A has no \(table)") }

        let log = StatementLog(tenantTables: store.dialect.tenantTables)
        let b = SQLStore(engine: CheckingEngine(base: store.engine, log: log), tenant: Self.tenantB)
        let probe = Coverage()
        try await Self.findNothingOfA(b, f, probe)
        try await Self.makeOwnRowsUnderAsIdentifiers(b, a, f, probe)

        #expect(try await Self.snapshot(a, f) == before, "tenant A changed")
        let rowsAfter = try await Self.rows(store, tenant: TenantID.defaultTenant)
        for table in store.dialect.tenantTables {
            #expect(rowsAfter[table] == rowsBefore[table], "tenant A's \(table) changed")
        }
        // What B tried on A's single-use rows left them for A.
        #expect(try await a.takeRecoveryToken(hash: f.recoveryToken, now: Self.t0) == f.ada.id)
        #expect(try await a.takeRegistrationToken(hash: f.registrationToken, now: Self.t0) == f.ada.id)
        #expect(try await a.takeEmailToken(linkHash: f.linkHash, purpose: .recover, now: Self.t0)?.accountID == f.ada.id)
        #expect(try await a.takeChallenge(f.challenge)?.accountID == f.ada.id)
        let claimed = try await a.claimWebhookDeliveries(
            endpointID: f.endpoint.id, now: Self.t0.addingTimeInterval(Self.day), leaseUntil: Self.t0.addingTimeInterval(Self.day + 60),
            limit: 100)
        #expect(!claimed.isEmpty)

        #expect(log.statements > 100, "the checking engine saw \(log.statements) statements")
        #expect(log.unscoped.isEmpty, "statements of tenant B that do not name their tenant: \(log.unscoped)")
        let missed = Set(Self.scopedMethods).subtracting(probe.covered).sorted()
        #expect(missed == [], "scoped methods tenant B never called")
        #expect(probe.covered.subtracting(Self.scopedMethods).sorted() == [], "called but not listed")
    }

    /// B, empty, with A's identifiers: nothing found, nothing counted, nothing changed.
    static func findNothingOfA(_ b: any PasskeyStore, _ f: TenantA, _ probe: Coverage) async throws {
        let t0 = Self.t0
        let later = t0.addingTimeInterval(3600)
        let refused = StoreError(.conflict, "")
        let signIn = AuditEvent(time: t0, kind: .signIn, accountID: f.ada.id)
        let ada = f.ada.id, key = f.key.credentialID

        // Accounts and passkeys
        #expect(try await probe("account(id:)") { try await b.account(id: ada) } == nil)
        #expect(try await probe("account(username:)") { try await b.account(username: "ada") } == nil)
        #expect(try await probe("account(userHandle:)") { try await b.account(userHandle: f.ada.userHandle) } == nil)
        #expect(try await probe("account(externalID:)") { try await b.account(externalID: "crm-bob") } == nil)
        #expect(try await probe("usernames(accountIDs:)") { try await b.usernames(accountIDs: [ada, f.bob.id, f.grace.id]) }.isEmpty)
        #expect(try await probe("accounts(after:limit:)") { try await b.accounts(after: nil, limit: 100) }.isEmpty)
        #expect(try await probe("passkey(credentialID:)") { try await b.passkey(credentialID: key) } == nil)
        #expect(try await probe("passkeys(accountID:)") { try await b.passkeys(accountID: ada) }.isEmpty)
        #expect(try await probe("passkeyAndAccount(credentialID:)") { try await b.passkeyAndAccount(credentialID: key) } == nil)
        #expect(
            try await probe("statistics(now:activeSince:)") { try await b.statistics(now: t0, activeSince: t0.addingTimeInterval(-day)) }
                == StoreStatistics())
        #expect(try await probe("passkeyCountsByAAGUID()") { try await b.passkeyCountsByAAGUID() }.isEmpty)
        #expect(
            try await probe("renamePasskey(accountID:credentialID:name:)") {
                try await b.renamePasskey(accountID: ada, credentialID: key, name: "mine")
            } == false)
        #expect(
            try await probe("ensurePRFSalt(credentialID:salt:)") { try await b.ensurePRFSalt(credentialID: key, salt: [9]) } == nil)
        #expect(try await b.ensurePRFSalt(credentialID: f.secondKey.credentialID, salt: [9]) == nil)
        #expect(
            try await probe("setPRFSalt(accountID:credentialID:salt:)") {
                try await b.setPRFSalt(accountID: ada, credentialID: key, salt: [9])
            }
                == false)
        #expect(
            try await probe("deletePasskey(accountID:credentialID:keepSession:)") {
                try await b.deletePasskey(accountID: f.grace.id, credentialID: f.graceKey.credentialID, keepSession: nil)
            } == .notFound)
        #expect(try await b.deletePasskey(accountID: ada, credentialID: key, keepSession: nil) == .notFound)
        #expect(
            try await probe("revokePasskey(credentialID:audit:)") { try await b.revokePasskey(credentialID: key, audit: [signIn]) } == false
        )
        #expect(
            try await probe("setDisabled(accountID:disabled:audit:)") {
                try await b.setDisabled(accountID: ada, disabled: true, audit: [signIn])
            }
                == nil)
        #expect(
            try await probe("setExternalID(accountID:externalID:)") { try await b.setExternalID(accountID: ada, externalID: "crm-b") }
                == false)
        #expect(
            try await probe("deleteAccount(accountID:audit:)") { try await b.deleteAccount(accountID: ada, audit: [signIn]) } == .notFound)

        // Sign-ins: the account is not B's, nor the challenge, nor the passkey.
        #expect(
            try await probe("completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)")
            {
                try await b.completeSignIn(
                    challenge: f.challenge, credentialID: key, previousSignCount: 0, signCount: 1, backedUp: true, counterAnomaly: false,
                    at: later, session: Fixtures.session(for: f.ada), audit: [signIn])
            } == .credentialGone)
        #expect(
            try await b.completeSignIn(
                challenge: nil, credentialID: key, previousSignCount: 0, signCount: 1, backedUp: true, counterAnomaly: false, at: later,
                session: Fixtures.session(for: f.ada), audit: [signIn]) == .credentialGone)
        #expect(
            try await probe("recordAssertion(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:audit:)") {
                try await b.recordAssertion(
                    challenge: f.challenge, credentialID: key, previousSignCount: 0, signCount: 1, backedUp: true, counterAnomaly: false,
                    at: later, audit: [signIn])
            } == .challengeTaken)
        #expect(
            try await b.recordAssertion(
                challenge: nil, credentialID: key, previousSignCount: 0, signCount: 1, backedUp: true, counterAnomaly: true, at: later,
                audit: [signIn]) == .counterRaced)

        // Ceremonies
        #expect(try await probe("challenge(_:)") { try await b.challenge(f.challenge) } == nil)
        let pair = try await probe("challengeAndPasskey(_:credentialID:)") {
            try await b.challengeAndPasskey(f.challenge, credentialID: key)
        }
        #expect(pair.0 == nil && pair.1 == nil)
        #expect(try await probe("openChallengeCount(now:)") { try await b.openChallengeCount(now: t0) } == 0)
        #expect(try await probe("discardOldestChallenges(count:)") { try await b.discardOldestChallenges(count: 100) } == 0)
        #expect(try await probe("takeChallenge(_:)") { try await b.takeChallenge(f.challenge) } == nil)

        // Sessions
        let token = f.session.tokenHash
        #expect(try await probe("sessions(accountID:now:)") { try await b.sessions(accountID: ada, now: t0) }.isEmpty)
        #expect(try await probe("session(tokenHash:now:)") { try await b.session(tokenHash: token, now: t0) } == nil)
        #expect(try await probe("liveSessionCount(now:)") { try await b.liveSessionCount(now: t0) } == 0)
        try await probe("touchSession(tokenHash:at:)") { try await b.touchSession(tokenHash: token, at: later) }
        try await probe("rebindSession(tokenHash:credentialID:)") {
            try await b.rebindSession(tokenHash: token, credentialID: f.secondKey.credentialID)
        }
        try await probe("revokeSession(tokenHash:)") { try await b.revokeSession(tokenHash: token) }
        #expect(
            try await probe("revokeSessions(accountID:except:audit:)") {
                try await b.revokeSessions(accountID: ada, except: nil, audit: [])
            }
                == 0)
        // A session of B cannot be made for A's account (the composite foreign key).
        await #expect(throws: refused) {
            try await probe("createSession(_:)") { try await b.createSession(Fixtures.session(for: f.ada)) }
        }
        await #expect(throws: refused) {
            try await probe("recordSignIn(accountID:session:audit:revokeOtherSessions:)") {
                try await b.recordSignIn(accountID: ada, session: Fixtures.session(for: f.ada), audit: [signIn], revokeOtherSessions: true)
            }
        }

        // Passwords and recovery
        #expect(try await probe("removePassword(accountID:)") { try await b.removePassword(accountID: f.grace.id) } == false)
        #expect(
            try await probe("changePassword(accountID:hash:keepSession:)") {
                try await b.changePassword(accountID: f.grace.id, hash: "$2b$04$of-b", keepSession: nil)
            } == false)
        #expect(
            try await probe("rehashPassword(accountID:from:to:)") {
                try await b.rehashPassword(accountID: f.grace.id, from: f.graceHash, to: "$2b$04$of-b")
            } == false)
        #expect(try await probe("recoveryCodesLeft(accountID:)") { try await b.recoveryCodesLeft(accountID: ada) } == 0)
        #expect(
            try await probe("useRecoveryCode(accountID:hash:at:)") { try await b.useRecoveryCode(accountID: ada, hash: [1], at: t0) }
                == false)
        // Replacing B's codes of that account replaces none of A's; new ones cannot point at A's account.
        try await probe("replaceRecoveryCodes(accountID:hashes:at:)") {
            try await b.replaceRecoveryCodes(accountID: ada, hashes: [], at: t0)
        }
        await #expect(throws: refused) { try await b.replaceRecoveryCodes(accountID: ada, hashes: [[9]], at: t0) }
        #expect(try await probe("takeRecoveryToken(hash:now:)") { try await b.takeRecoveryToken(hash: f.recoveryToken, now: t0) } == nil)
        await #expect(throws: refused) {
            try await probe("saveRecoveryToken(hash:accountID:createdAt:expiresAt:)") {
                try await b.saveRecoveryToken(hash: Self.random(), accountID: ada, createdAt: t0, expiresAt: later)
            }
        }
        #expect(
            try await probe("takeRegistrationToken(hash:now:)") { try await b.takeRegistrationToken(hash: f.registrationToken, now: t0) }
                == nil)
        await #expect(throws: refused) {
            try await probe("saveRegistrationToken(hash:accountID:createdAt:expiresAt:)") {
                try await b.saveRegistrationToken(hash: Self.random(), accountID: ada, createdAt: t0, expiresAt: later)
            }
        }

        // Abuse limits
        #expect(try await probe("rateLimitHits(key:windowStart:)") { try await b.rateLimitHits(key: f.rateKey, windowStart: t0) } == 0)
        try await probe("refundHit(key:windowStart:)") { try await b.refundHit(key: f.rateKey, windowStart: t0) }

        // Audit and metrics
        #expect(try await probe("auditEvents(accountID:limit:)") { try await b.auditEvents(accountID: nil, limit: 100) }.isEmpty)
        #expect(try await b.auditEvents(accountID: ada, limit: 100).isEmpty)
        #expect(try await probe("searchAudit(_:)") { try await b.searchAudit(AuditQuery(limit: 100)) }.isEmpty)
        #expect(try await b.searchAudit(AuditQuery(accountID: ada, kind: "sign_in", addressPrefix: "192.0.2.", limit: 100)).isEmpty)
        for field in AccountSearchField.allCases {
            let found = try await probe("searchAccounts(field:prefix:after:limit:)") {
                try await b.searchAccounts(field: field, prefix: Self.searchPrefix(field, f), after: nil, limit: 100)
            }
            #expect(found.accounts.isEmpty && found.next == nil, "\(field)")
        }
        let days = (from: t0.addingTimeInterval(-10 * day), to: t0.addingTimeInterval(10 * day))
        #expect(try await probe("dailyMetrics(from:to:)") { try await b.dailyMetrics(from: days.from, to: days.to) }.isEmpty)
        #expect(try await probe("metricTotals(before:)") { try await b.metricTotals(before: days.to) }.isEmpty)
        #expect(try await probe("liveMetrics(from:to:)") { try await b.liveMetrics(from: days.from, to: days.to) }.isEmpty)

        // Signing keys
        #expect(try await probe("signingKeys(now:)") { try await b.signingKeys(now: t0) }.isEmpty)
        #expect(try await probe("signingKeysVersion()") { try await b.signingKeysVersion() } == [])

        // API keys
        #expect(try await probe("apiKey(hash:)") { try await b.apiKey(hash: f.apiKey.keyHash) } == nil)
        #expect(try await probe("apiKeys()") { try await b.apiKeys() }.isEmpty)
        #expect(
            try await probe("revokeAPIKey(id:at:audit:)") { try await b.revokeAPIKey(id: f.apiKey.id, at: t0, audit: [signIn]) } == false)
        try await probe("touchAPIKey(id:at:)") { try await b.touchAPIKey(id: f.apiKey.id, at: later) }

        // Webhooks: A's deliveries are due, none is B's to claim, settle or retry.
        let endpoint = f.endpoint.id
        #expect(try await probe("webhookEndpoints()") { try await b.webhookEndpoints() }.isEmpty)
        #expect(
            try await probe("webhookDeliveries(endpointID:limit:)") { try await b.webhookDeliveries(endpointID: endpoint, limit: 100) }
                .isEmpty)
        #expect(try await b.webhookDeliveries(endpointID: nil, limit: 100).isEmpty)
        #expect(try await probe("webhookBacklog(now:)") { try await b.webhookBacklog(now: later) } == 0)
        let lease = (now: t0.addingTimeInterval(day), until: t0.addingTimeInterval(2 * day))
        #expect(
            try await probe("claimWebhookDeliveries(endpointID:now:leaseUntil:limit:)") {
                try await b.claimWebhookDeliveries(endpointID: endpoint, now: lease.now, leaseUntil: lease.until, limit: 100)
            }.isEmpty)
        #expect(try await b.claimWebhookDeliveries(endpointID: nil, now: lease.now, leaseUntil: lease.until, limit: 100).isEmpty)
        for eventID in Int64(1)...Int64(20) {
            try await probe("settleWebhookDelivery(eventID:endpointID:deliveredAt:status:error:latencyMs:retryAt:)") {
                try await b.settleWebhookDelivery(
                    eventID: eventID, endpointID: endpoint, deliveredAt: later, status: 204, error: nil, latencyMs: 5, retryAt: later)
            }
            #expect(
                try await probe("retryWebhookDelivery(endpointID:eventID:now:)") {
                    try await b.retryWebhookDelivery(endpointID: endpoint, eventID: eventID, now: later)
                } == false)
        }
        #expect(try await probe("setWebhookPaused(id:paused:)") { try await b.setWebhookPaused(id: endpoint, paused: true) } == false)
        #expect(try await probe("setWebhookSecret(id:secret:)") { try await b.setWebhookSecret(id: endpoint, secret: [9]) } == false)
        #expect(try await probe("removeWebhookEndpoint(id:)") { try await b.removeWebhookEndpoint(id: endpoint) } == false)

        // OpenID Connect: A's client, request, code and tokens are not B's; B's cannot point at them.
        let app = f.client.id
        let grant = OAuthGrant(clientID: app, accountID: ada, grant: [9], family: "family-b", expiresAt: later)
        #expect(try await probe("oauthClient(id:)") { try await b.oauthClient(id: app) } == nil)
        #expect(try await probe("oauthClients()") { try await b.oauthClients() }.isEmpty)
        #expect(
            try await probe("setOAuthClientSecret(id:secretHash:)") { try await b.setOAuthClientSecret(id: app, secretHash: [9]) } == false)
        #expect(try await probe("removeOAuthClient(id:)") { try await b.removeOAuthClient(id: app) } == false)
        #expect(try await probe("oauthRequest(hash:now:)") { try await b.oauthRequest(hash: f.requestHash, now: t0) } == nil)
        try await probe("deleteOAuthRequest(hash:)") { try await b.deleteOAuthRequest(hash: f.requestHash) }
        await #expect(throws: refused) {
            try await probe("saveOAuthRequest(hash:clientID:request:createdAt:expiresAt:)") {
                try await b.saveOAuthRequest(hash: Self.random(), clientID: app, request: [9], createdAt: t0, expiresAt: later)
            }
        }
        #expect(try await probe("oauthCode(hash:clientID:)") { try await b.oauthCode(hash: f.codeHash, clientID: app) } == nil)
        #expect(
            try await probe("useOAuthCode(hash:clientID:family:at:)") {
                try await b.useOAuthCode(hash: f.codeHash, clientID: app, family: "family-b", at: t0)
            } == .unknown)
        await #expect(throws: refused) {
            try await probe("saveOAuthCode(hash:grant:createdAt:)") {
                try await b.saveOAuthCode(hash: Self.random(), grant: grant, createdAt: t0)
            }
        }
        #expect(
            try await probe("useRefreshToken(hash:clientID:at:)") {
                try await b.useRefreshToken(hash: f.refreshHash, clientID: app, at: t0)
            }
                == .unknown)
        #expect(try await probe("refreshFamily(hash:)") { try await b.refreshFamily(hash: f.refreshHash) } == nil)
        #expect(try await probe("oauthGrantRevoked(family:)") { try await b.oauthGrantRevoked(family: f.revokedFamily) } == false)
        #expect(try await probe("revokeRefreshFamily(_:at:)") { try await b.revokeRefreshFamily(f.family, at: t0) } == 0)
        #expect(
            try await probe("revokeRefreshToken(hash:clientID:at:until:)") {
                try await b.revokeRefreshToken(hash: f.refreshHash, clientID: app, at: t0, until: later)
            } == false)
        // Revoking A's family in B revokes none of A's tokens; B's revocation marker cannot
        // point at A's client and account, so the call is refused as a whole.
        await #expect(throws: refused) {
            try await probe("revokeOAuthGrant(family:clientID:accountID:at:until:)") {
                try await b.revokeOAuthGrant(family: f.family, clientID: app, accountID: ada, at: t0, until: later)
            }
        }
        await #expect(throws: refused) {
            try await probe("saveRefreshToken(hash:grant:createdAt:)") {
                try await b.saveRefreshToken(hash: Self.random(), grant: grant, createdAt: t0)
            }
        }
        #expect(try await probe("consent(accountID:clientID:)") { try await b.consent(accountID: ada, clientID: app) } == nil)
        await #expect(throws: refused) {
            try await probe("saveConsent(accountID:clientID:scope:at:)") {
                try await b.saveConsent(accountID: ada, clientID: app, scope: "openid", at: t0)
            }
        }

        // The console
        #expect(try await probe("adminRole(accountID:)") { try await b.adminRole(accountID: ada) } == nil)
        #expect(try await probe("adminGrants()") { try await b.adminGrants() }.isEmpty)
        #expect(try await probe("adminCount()") { try await b.adminCount() } == 0)
        for role in [AdminRole.viewer, .admin, nil] {
            #expect(
                try await probe("setAdminRole(accountID:role:by:at:audit:)") {
                    try await b.setAdminRole(accountID: ada, role: role, by: "cli", at: t0, audit: [signIn])
                } == .accountNotFound)
        }
        // B has no admin: A's token would be live here if B could see it.
        #expect(
            try await probe("adminBootstrapTokenIsLive(hash:now:)") {
                try await b.adminBootstrapTokenIsLive(hash: f.bootstrapHash, now: t0)
            }
                == false)
        #expect(
            try await probe("redeemAdminBootstrapToken(hash:accountID:now:audit:)") {
                try await b.redeemAdminBootstrapToken(hash: f.bootstrapHash, accountID: ada, now: t0, audit: [signIn])
            } == false)
        let console = f.adminSession.tokenHash
        #expect(
            try await probe("adminSession(tokenHash:now:idleUntil:)") {
                try await b.adminSession(tokenHash: console, now: t0, idleUntil: later)
            }
                == nil)
        #expect(
            try await probe("verifyAdminSession(tokenHash:at:csrfHash:)") {
                try await b.verifyAdminSession(tokenHash: console, at: t0, csrfHash: [9])
            }
                == false)
        try await probe("revokeAdminSession(tokenHash:)") { try await b.revokeAdminSession(tokenHash: console) }
        #expect(try await probe("revokeAdminSessions(accountID:)") { try await b.revokeAdminSessions(accountID: ada) } == 0)
        var foreignConsole = f.adminSession
        foreignConsole.tokenHash = Self.random()
        await #expect(throws: refused) { try await probe("createAdminSession(_:)") { try await b.createAdminSession(foreignConsole) } }

        // Mail
        #expect(try await probe("accountEmail(accountID:)") { try await b.accountEmail(accountID: ada) } == nil)
        #expect(try await probe("account(verifiedEmailKey:)") { try await b.account(verifiedEmailKey: f.adaEmail) } == nil)
        #expect(
            try await probe("accounts(unverifiedEmailKey:limit:)") { try await b.accounts(unverifiedEmailKey: f.graceEmail, limit: 10) }
                .isEmpty)
        #expect(
            try await probe("setUnverifiedEmail(accountID:address:key:language:)") {
                try await b.setUnverifiedEmail(accountID: f.grace.id, address: nil, key: nil, language: "fr")
            } == false)
        // A's verified address is no conflict for B (and B has no such account to change).
        try await probe("verifyEmail(accountID:address:key:at:audit:)") {
            try await b.verifyEmail(accountID: f.grace.id, address: f.adaEmail, key: f.adaEmail, at: t0, audit: [])
        }
        try await probe("restoreEmail(accountID:address:key:verifiedAt:)") {
            try await b.restoreEmail(accountID: ada, address: nil, key: nil, verifiedAt: nil)
        }
        try await probe("setEmailRecoveryClosed(accountID:closed:)") { try await b.setEmailRecoveryClosed(accountID: ada, closed: true) }
        try await probe("setEmailLanguage(accountID:language:)") { try await b.setEmailLanguage(accountID: ada, language: "fr") }
        #expect(
            try await probe("takeEmailToken(linkHash:purpose:now:)") {
                try await b.takeEmailToken(linkHash: f.linkHash, purpose: .recover, now: t0)
            }
                == nil)
        #expect(
            try await probe("attemptEmailCode(accountID:purpose:codeHash:now:)") {
                try await b.attemptEmailCode(accountID: ada, purpose: .recover, codeHash: f.emailCode, now: t0)
            } == EmailCodeAttempt.none)
        #expect(try await b.attemptEmailCode(accountID: ada, purpose: .recover, codeHash: [9], now: t0) == EmailCodeAttempt.none)
        try await probe("endEmailTokens(accountID:purpose:now:)") { try await b.endEmailTokens(accountID: ada, purpose: .recover, now: t0) }
        try await b.endEmailTokens(accountID: f.grace.id, purpose: .verify, now: t0)
        let foreignToken = EmailToken(
            accountID: ada, purpose: .recover, address: f.adaEmail, linkHash: Self.random(), codeHash: Self.random(), createdAt: t0,
            expiresAt: later)
        await #expect(throws: refused) { try await probe("saveEmailToken(_:)") { try await b.saveEmailToken(foreignToken) } }
        await #expect(throws: refused) {
            try await b.queueMail(
                QueuedMail(
                    accountID: ada, kind: "recover", recipient: f.adaEmail, sender: "passkeyd@b.example", message: [9], createdAt: t0,
                    nextAttemptAt: t0), token: foreignToken, audit: [])
        }
        #expect(try await probe("mailStatistics(now:)") { try await b.mailStatistics(now: t0) } == MailStatistics())
        #expect(
            try await probe("emailRecoveryFigures(since:)") { try await b.emailRecoveryFigures(since: t0.addingTimeInterval(-day)) }
                == EmailRecoveryFigures())

        // Nothing B tried wrote a line of B's either.
        #expect(try await b.auditEvents(accountID: nil, limit: 100).isEmpty)
    }

    /// B makes its own rows under A's identifiers, and reads back its own.
    static func makeOwnRowsUnderAsIdentifiers(_ b: any PasskeyStore, _ a: any PasskeyStore, _ f: TenantA, _ probe: Coverage) async throws {
        let t0 = Self.t0
        let later = t0.addingTimeInterval(3600)
        // The same account id, username, user handle and credential IDs as A's.
        var ada = f.ada
        ada.displayName = "Ada of B"
        ada.externalID = nil
        let session = SessionRecord(
            tokenHash: f.session.tokenHash, accountID: ada.id, createdAt: t0, expiresAt: later, method: "passkey",
            credentialID: f.key.credentialID)
        try await probe("createAccount(_:passkey:session:audit:)") {
            try await b.createAccount(
                ada, passkey: f.key, session: session, audit: [AuditEvent(time: t0, kind: .signUp, accountID: ada.id)])
        }
        try await probe("addPasskey(_:)") { try await b.addPasskey(f.secondKey) }
        #expect(try await b.account(username: "ADA")?.displayName == "Ada of B")
        #expect(try await b.account(userHandle: f.ada.userHandle)?.displayName == "Ada of B")
        #expect(try await b.passkeyAndAccount(credentialID: f.key.credentialID)?.1.displayName == "Ada of B")
        #expect(try await b.passkey(credentialID: f.key.credentialID)?.prfSalt == nil)
        #expect(try await b.session(tokenHash: session.tokenHash, now: t0)?.1.displayName == "Ada of B")
        #expect(try await b.statistics(now: t0, activeSince: t0).accounts == 1)

        var bob = f.bob
        bob.displayName = "Bob of B"
        try await probe("createAccount(_:audit:)") { try await b.createAccount(bob, audit: []) }
        #expect(try await b.account(externalID: "crm-bob")?.displayName == "Bob of B")
        var grace = f.grace
        grace.displayName = "Grace of B"
        #expect(try await probe("importAccounts(_:)") { try await b.importAccounts([(grace, "$2b$04$grace-of-b")]) } == [true])
        #expect(try await b.usernames(accountIDs: [ada.id, bob.id, grace.id]).count == 3)

        // Ceremonies and tokens under A's challenge and hashes.
        try await probe("saveChallenge(_:)") {
            try await b.saveChallenge(
                ChallengeRecord(
                    challenge: f.challenge, ceremony: .registration, pendingUserHandle: [1], userVerification: "preferred", createdAt: t0,
                    expiresAt: later))
        }
        #expect(try await b.challenge(f.challenge)?.ceremony == .registration)
        try await probe("createSession(_:)") { try await b.createSession(Fixtures.session(for: ada)) }
        try await b.saveRegistrationToken(hash: f.registrationToken, accountID: ada.id, createdAt: t0, expiresAt: later)
        try await b.saveRecoveryToken(hash: f.recoveryToken, accountID: ada.id, createdAt: t0, expiresAt: later)
        try await b.replaceRecoveryCodes(accountID: ada.id, hashes: [[1]], at: t0)
        #expect(try await b.recoveryCodesLeft(accountID: ada.id) == 1)
        #expect(try await b.useRecoveryCode(accountID: ada.id, hash: [1], at: t0))
        #expect(
            try await probe("countHit(key:windowStart:expiresAt:)") {
                try await b.countHit(key: f.rateKey, windowStart: t0, expiresAt: later)
            } == 1)
        try await probe("appendAudit(_:)") {
            try await b.appendAudit(
                AuditEvent(time: t0, kind: .signIn, accountID: ada.id, ipAddress: "192.0.2.1", metric: "sign_in_passkey"))
        }
        // B's own lines only: its sign-in and its import's line.
        #expect(try await b.liveMetrics(from: t0, to: later) == ["sign_in_passkey": 1, "import_password": 1])

        // The same kid, key hash, client id, request, code and refresh token hashes.
        #expect(try await probe("addFirstSigningKey(_:now:)") { try await b.addFirstSigningKey(f.signingKey, now: t0) })
        var rotated = f.signingKey
        rotated.kid = "k2"
        try await probe("addSigningKey(_:retiringOthersAt:)") { try await b.addSigningKey(rotated, retiringOthersAt: later) }
        #expect(try await b.signingKeysVersion() == Array("k2".utf8))
        try await probe("createAPIKey(_:audit:)") { try await b.createAPIKey(f.apiKey, audit: []) }
        #expect(try await b.apiKey(hash: f.apiKey.keyHash)?.id == f.apiKey.id)
        var client = f.client
        client.name = "App of B"
        try await probe("addOAuthClient(_:)") { try await b.addOAuthClient(client) }
        #expect(try await b.oauthClient(id: client.id)?.name == "App of B")
        try await probe("saveOAuthRequest(hash:clientID:request:createdAt:expiresAt:)") {
            try await b.saveOAuthRequest(hash: f.requestHash, clientID: client.id, request: [8], createdAt: t0, expiresAt: later)
        }
        #expect(try await b.oauthRequest(hash: f.requestHash, now: t0)?.request == [8])
        let grant = OAuthGrant(clientID: client.id, accountID: ada.id, grant: [8], family: f.family, expiresAt: later)
        try await probe("saveOAuthCode(hash:grant:createdAt:)") { try await b.saveOAuthCode(hash: f.codeHash, grant: grant, createdAt: t0) }
        if case .taken(let taken) = try await b.useOAuthCode(hash: f.codeHash, clientID: client.id, family: f.family, at: t0) {
            #expect(taken.grant == [8])
        } else {
            Issue.record("tenant B could not take its own code")
        }
        try await probe("saveRefreshToken(hash:grant:createdAt:)") {
            try await b.saveRefreshToken(hash: f.refreshHash, grant: grant, createdAt: t0)
        }
        #expect(
            try await probe("revokeOAuthGrant(family:clientID:accountID:at:until:)") {
                try await b.revokeOAuthGrant(family: f.family, clientID: client.id, accountID: ada.id, at: t0, until: later)
            } == 1)
        #expect(try await b.oauthGrantRevoked(family: f.family))
        try await probe("saveConsent(accountID:clientID:scope:at:)") {
            try await b.saveConsent(accountID: ada.id, clientID: client.id, scope: "openid profile", at: t0)
        }
        #expect(try await b.consent(accountID: ada.id, clientID: client.id) == "openid profile")

        // The console: B's first admin by its own bootstrap token (A's admin does not count
        // here), and B's last admin stays one.
        try await probe("saveAdminBootstrapToken(hash:createdAt:expiresAt:audit:)") {
            try await b.saveAdminBootstrapToken(hash: f.bootstrapHash, createdAt: t0, expiresAt: later, audit: [])
        }
        #expect(try await b.adminBootstrapTokenIsLive(hash: f.bootstrapHash, now: t0))
        #expect(try await b.redeemAdminBootstrapToken(hash: f.bootstrapHash, accountID: ada.id, now: t0, audit: []))
        #expect(try await b.adminRole(accountID: ada.id) == .admin)
        #expect(try await b.adminCount() == 1)
        #expect(try await b.setAdminRole(accountID: ada.id, role: nil, by: "cli", at: t0, audit: []) == .lastAdmin)
        #expect(try await b.deleteAccount(accountID: ada.id, audit: []) == .lastAdmin)
        var console = f.adminSession
        console.csrfHash = [8]
        try await probe("createAdminSession(_:)") { try await b.createAdminSession(console) }
        #expect(
            try await b.adminSession(tokenHash: console.tokenHash, now: t0, idleUntil: console.idleExpiresAt)?.1.displayName == "Ada of B")
        #expect(try await b.adminGrants().map(\.account.displayName) == ["Ada of B"])

        // Mail: A's verified address, verified again in B; A's link hash, B's token.
        #expect(try await b.setUnverifiedEmail(accountID: ada.id, address: f.adaEmail, key: f.adaEmail, language: "en"))
        try await b.verifyEmail(accountID: ada.id, address: f.adaEmail, key: f.adaEmail, at: t0, audit: [])
        #expect(try await b.account(verifiedEmailKey: f.adaEmail)?.displayName == "Ada of B")
        try await b.saveEmailToken(
            EmailToken(
                accountID: ada.id, purpose: .recover, address: f.adaEmail, linkHash: f.linkHash, codeHash: f.emailCode, createdAt: t0,
                expiresAt: later))
        try await probe("queueMail(_:token:audit:)") {
            try await b.queueMail(
                QueuedMail(
                    accountID: ada.id, kind: "recover", recipient: f.adaEmail, sender: "passkeyd@b.example", message: [8], createdAt: t0,
                    nextAttemptAt: t0), token: nil, audit: [])
        }
        #expect(try await b.mailStatistics(now: t0).queued == 1)
        #expect(try await b.takeEmailToken(linkHash: f.linkHash, purpose: .recover, now: t0)?.address == f.adaEmail)

        // A webhook endpoint of B's gets B's events only.
        let endpoint = WebhookEndpoint(url: "https://hooks.b.example/", secret: [8], events: ["*"], createdAt: t0)
        try await probe("addWebhookEndpoint(_:)") { try await b.addWebhookEndpoint(endpoint) }
        try await b.appendAudit(AuditEvent(time: t0, kind: .signIn, accountID: ada.id))
        #expect(try await b.webhookDeliveries(endpointID: nil, limit: 100).count == 1)
        #expect(try await b.webhookBacklog(now: t0) == 1)

        // B's changes to its own account of A's id touch only B's: its sessions, then the
        // account with everything of it.
        #expect(try await b.revokeSessions(accountID: ada.id, except: nil, audit: []) == 2)
        #expect(try await b.revokeAdminSessions(accountID: ada.id) == 1)
        #expect(try await b.setDisabled(accountID: ada.id, disabled: true, audit: []) == 0)
        #expect(try await b.deleteAccount(accountID: grace.id, audit: []) == .deleted)
        #expect(try await b.account(id: grace.id) == nil)
        #expect(try await a.account(id: grace.id) != nil)
    }

    // MARK: The same identifiers in two tenants

    /// Two tenants hold the same username, user handle, credential ID and OAuth client id at
    /// once, each reading back its own.
    @Test(arguments: TestDatabase.kinds)
    func twoTenantsHoldTheSameIdentifiersEachItsOwn(_ kind: TestDatabase.Kind) async throws {
        let a = try await TestDatabase.makeStore(kind)
        defer { (a as? PostgresStore)?.close() }
        let b = a.scoped(to: Self.tenantB)
        #expect(b.tenant == Self.tenantB && a.tenant == TenantID.defaultTenant)
        let handle = Self.random(64)
        let credential = Self.random()
        var accounts: [Account] = []
        for (store, name) in [(a, "Ada of A"), (b, "Ada of B")] {
            var account = Fixtures.account("ada")
            account.displayName = name
            account.userHandle = handle
            try await store.createAccount(account, passkey: Fixtures.passkey(for: account, id: credential), session: nil, audit: [])
            try await store.addOAuthClient(
                OAuthClient(id: "app", name: name, secretHash: nil, redirectURIs: ["https://app.example/cb"], createdAt: Self.t0))
            accounts.append(account)
        }
        for (store, account) in [(a, accounts[0]), (b, accounts[1])] {
            #expect(try await store.account(username: "Ada")?.id == account.id)
            #expect(try await store.account(userHandle: handle)?.id == account.id)
            #expect(try await store.passkey(credentialID: credential)?.accountID == account.id)
            #expect(try await store.passkeyAndAccount(credentialID: credential)?.1.displayName == account.displayName)
            #expect(try await store.challengeAndPasskey([1], credentialID: credential).1?.1.id == account.id)
            #expect(try await store.oauthClient(id: "app")?.name == account.displayName)
            #expect(try await store.oauthClients().count == 1)
            #expect(try await store.statistics(now: Self.t0, activeSince: Self.t0).accounts == 1)
        }
        // Either tenant's copy conflicts with its own only.
        await #expect(throws: StoreError(.conflict, "")) {
            var again = Fixtures.account("ADA")
            again.userHandle = Self.random(64)
            try await b.createAccount(again, passkey: Fixtures.passkey(for: again), session: nil, audit: [])
        }
        await #expect(throws: StoreError(.conflict, "")) {
            let again = Fixtures.account("someone")
            try await a.createAccount(again, passkey: Fixtures.passkey(for: again, id: credential), session: nil, audit: [])
        }
    }

    /// One username signed up in A and in B at the same instant: both succeed. Sixteen sign-ups
    /// of another name, eight per tenant, released together: exactly one per tenant, the others
    /// a conflict.
    @Test(arguments: TestDatabase.kinds)
    func oneUsernameSignsUpOncePerTenantAtTheSameInstant(_ kind: TestDatabase.Kind) async throws {
        let a = try await TestDatabase.makeStore(kind)
        defer { (a as? PostgresStore)?.close() }
        let b = a.scoped(to: Self.tenantB)
        for round in 0..<5 {
            let pair = await Race.run(2) { taker in
                let account = Fixtures.account("pair\(round)")
                try await (taker == 0 ? a : b).createAccount(account, passkey: Fixtures.passkey(for: account), session: nil, audit: [])
                return account.id
            }
            #expect(Race.winners(pair) { _ in true } == 2, "round \(round): \(pair)")
            #expect(try await a.account(username: "pair\(round)")?.id == (try? pair[0].get()))
            #expect(try await b.account(username: "pair\(round)")?.id == (try? pair[1].get()))

            let results = await Race.run(16) { taker in
                let account = Fixtures.account("crowd\(round)")
                try await (taker % 2 == 0 ? a : b).createAccount(
                    account, passkey: Fixtures.passkey(for: account), session: nil, audit: [])
                return taker % 2
            }
            #expect(Race.winners(results) { $0 == 0 } == 1, "round \(round): \(results)")
            #expect(Race.winners(results) { $0 == 1 } == 1, "round \(round): \(results)")
            for case .failure(let error) in results {
                #expect((error as? StoreError)?.code == .conflict, "round \(round): \(error)")
            }
        }
        #expect(try await a.statistics(now: Self.t0, activeSince: Self.t0).accounts == 10)
        #expect(try await b.statistics(now: Self.t0, activeSince: Self.t0).accounts == 10)
    }

    /// The composite foreign keys: a row of tenant B cannot point at tenant A's account, on
    /// either database, whatever the statement (written here by hand, past the store).
    @Test(arguments: TestDatabase.kinds)
    func aRowOfOneTenantCannotPointAtAnothersAccount(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let ada = Fixtures.account("ada")
        try await store.createAccount(ada, passkey: Fixtures.passkey(for: ada), session: nil, audit: [])
        func passkeyRow(tenant: String) -> SQL {
            """
            INSERT INTO passkeys (tenant_id, credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                                  user_verified, attestation_format, attestation_trusted, name, created_at, counter_anomalies)
            VALUES (\(tenant), \(Self.random()), \(ada.id), \([UInt8]([1])), 0, \("fbfc3007-154e-4ecc-8c0b-6e020557d7bd"), \("[]"), \(true),
                    \(true), \(true), \("none"), \(false), \("raw"), \(Self.t0), 0)
            """
        }
        func sessionRow(tenant: String) -> SQL {
            """
            INSERT INTO sessions (tenant_id, token_hash, account_id, created_at, expires_at, method)
            VALUES (\(tenant), \(Self.random()), \(ada.id), \(Self.t0), \(Self.t0.addingTimeInterval(60)), \("passkey"))
            """
        }
        for row in [passkeyRow, sessionRow] {
            // PostgreSQL's row-level security first: a connection of tenant A writes no row of B.
            if kind == .postgres {
                await #expect(throws: StoreError(.invalidDatabase, "")) { try await store.writer.run(row(Self.tenantB)) }
            }
            // The composite foreign key, on the connection that sees every tenant (upkeep's).
            await #expect(throws: StoreError(.conflict, "")) { try await store.upkeepWriter.run(row(Self.tenantB)) }
            // The same statement in A's own tenant is taken: only the tenant made it fail.
            try await store.writer.run(row(TenantID.defaultTenant))
        }
        #expect(try await store.scoped(to: Self.tenantB).passkeys(accountID: ada.id).isEmpty)
        #expect(try await store.passkeys(accountID: ada.id).count == 2)
        #expect(try await store.sessions(accountID: ada.id, now: Self.t0).count == 1)
    }

    /// A tenant added under a name that has rows left (a removed tenant's service, still built
    /// on an instance until its poll, wrote them after the removal) starts with none of them.
    @Test(arguments: TestDatabase.kinds)
    func aTenantAddedUnderAUsedNameInheritsNothing(_ kind: TestDatabase.Kind) async throws {
        let store = try #require(try await TestDatabase.makeStore(kind) as? SQLStore)
        defer { (store as? PostgresStore)?.close() }
        let record = TenantRecord(
            id: "ghost", hosts: ["ghost.example"], settings: #"{"rpID":"ghost.example","origins":["https://ghost.example"]}"#,
            createdAt: Self.t0, updatedAt: Self.t0)
        try await store.addTenant(record)
        #expect(try await store.removeTenant(id: "ghost", deleteData: true) == .removed)
        // Written by the removed tenant's still-built service after the removal.
        let ghost = store.scoped(to: "ghost")
        let leftover = Fixtures.account("late")
        try await ghost.createAccount(leftover, passkey: Fixtures.passkey(for: leftover), session: nil, audit: [])
        try await ghost.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: leftover.id))
        #expect(try await ghost.statistics(now: Self.t0, activeSince: Self.t0).accounts == 1)

        try await store.addTenant(record)
        #expect(try await ghost.account(username: "late") == nil)
        #expect(try await ghost.statistics(now: Self.t0, activeSince: Self.t0).accounts == 0)
        #expect(try await ghost.searchAudit(AuditQuery(limit: 10)).isEmpty)
        #expect(try await ghost.passkeys(accountID: leftover.id).isEmpty)
    }

    /// Tenants added at the same instant (two operators, two instances) for one host, or under
    /// one name: one wins, the others get `conflict`, and the registry holds exactly one of them
    /// with its hosts.
    @Test(arguments: TestDatabase.kinds)
    func racingAddsForOneHostOrOneNameLeaveOneTenant(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        let settings = #"{"rpID":"race.example","origins":["https://race.example"]}"#
        let byHost = await Race.run(8) { taker in
            try await store.addTenant(
                TenantRecord(id: "host-\(taker)", hosts: ["race.example"], settings: settings, createdAt: Self.t0, updatedAt: Self.t0))
        }
        #expect(Race.winners(byHost) { true } == 1)
        for case .failure(let error) in byHost { #expect((error as? StoreError)?.code == .conflict, "\(error)") }
        let byName = await Race.run(8) { taker in
            try await store.addTenant(
                TenantRecord(id: "same", hosts: ["same-\(taker).example"], settings: settings, createdAt: Self.t0, updatedAt: Self.t0))
        }
        #expect(Race.winners(byName) { true } == 1)
        for case .failure(let error) in byName { #expect((error as? StoreError)?.code == .conflict, "\(error)") }
        let records = try await store.tenantRecords()
        #expect(records.count == 2)
        #expect(records.filter { $0.hosts == ["race.example"] }.count == 1)
        let same = try #require(records.first { $0.id == "same" })
        #expect(same.hosts.count == 1, "the winner's hosts alone: \(same.hosts)")
        #expect(try await store.tenantsVersion() == 2)
        // Changes that all succeed each move the registry's counter: an instance that read it
        // between two of them must see it move again, or it never serves the later one.
        let distinct = await Race.run(8) { taker in
            try await store.addTenant(
                TenantRecord(id: "t-\(taker)", hosts: ["t-\(taker).example"], settings: settings, createdAt: Self.t0, updatedAt: Self.t0))
        }
        #expect(Race.winners(distinct) { true } == 8)
        #expect(try await store.tenantsVersion() == 10)
    }

    /// A tenant's own database holds no registry: the tenants its upkeep rolls metrics up for
    /// are also the ones marked there (`tenant add --database`), so their adoption charts get
    /// their past days as the server database's tenants do.
    @Test(arguments: TestDatabase.kinds)
    func aTenantsOwnDatabaseRollsUpTheTenantsMarkedInIt(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        let day = 86_400.0
        let day0 = Date(timeIntervalSince1970: (Self.t0.timeIntervalSince1970 / day).rounded(.down) * day)
        #expect(try await store.tenantMark(id: "gamma") == nil)
        try await store.setTenantMark(id: "gamma", mark: [1, 2, 3])
        #expect(try await store.tenantMark(id: "gamma") == [1, 2, 3])
        #expect(try await store.markedTenants() == ["gamma"])
        let gamma = store.scoped(to: "gamma")
        try await gamma.appendAudit(AuditEvent(time: day0.addingTimeInterval(0.5 * day), kind: .signIn, metric: "sign_in_passkey"))
        try await gamma.appendAudit(AuditEvent(time: day0.addingTimeInterval(0.7 * day), kind: .signIn, metric: "sign_in_passkey"))
        #expect(try await store.rollUpMetrics(before: day0.addingTimeInterval(1.5 * day)) == 1)
        #expect(
            try await gamma.dailyMetrics(from: day0, to: day0.addingTimeInterval(day)) == [
                DailyMetric(day: day0, metric: "sign_in_passkey", n: 2)
            ])
        #expect(try await store.dailyMetrics(from: day0, to: day0.addingTimeInterval(day)).isEmpty)
    }

    /// A tenant's own database (`tenant add --database`) is cleared of the tenant's rows when it
    /// is added and when it is removed: every row of that tenant, no row of another one there.
    @Test(arguments: TestDatabase.kinds)
    func deletingATenantsDataTakesItsRowsAndNoOneElses(_ kind: TestDatabase.Kind) async throws {
        let store = try await TestDatabase.makeStore(kind)
        defer { (store as? PostgresStore)?.close() }
        for tenant in ["gone", "kept", TenantID.defaultTenant] {
            let scoped = store.scoped(to: tenant)
            let account = Fixtures.account("sam")
            try await scoped.createAccount(account, passkey: Fixtures.passkey(for: account), session: nil, audit: [])
            try await scoped.appendAudit(AuditEvent(time: Self.t0, kind: "sign_in", accountID: account.id))
        }
        try await store.deleteTenantData(id: "gone")
        #expect(try await store.scoped(to: "gone").statistics(now: Self.t0, activeSince: Self.t0).accounts == 0)
        #expect(try await store.scoped(to: "gone").searchAudit(AuditQuery(limit: 10)).isEmpty)
        for tenant in ["kept", TenantID.defaultTenant] {
            let scoped = store.scoped(to: tenant)
            let account = try #require(try await scoped.account(username: "sam"), "\(tenant)")
            #expect(try await scoped.passkeys(accountID: account.id).count == 1)
            #expect(try await scoped.searchAudit(AuditQuery(limit: 10)).count == 1)
        }
        // The server's own tenant is never cleared this way.
        try await store.deleteTenantData(id: TenantID.defaultTenant)
        #expect(try await store.account(username: "sam") != nil)
    }

    /// PostgreSQL's row-level security (migration 17), the second line behind each statement's
    /// own `tenant_id = …`: a statement that forgot its tenant reads, changes and counts only
    /// the rows of the tenant its connection names; a connection that names none reads nothing;
    /// upkeep's (`*`) sees every tenant. The tests connect as a role that is no superuser
    /// (``TestDatabase/applicationRole``), as a deployment does.
    @Test func aStatementThatForgetsItsTenantSeesOnlyItsConnectionsTenant() async throws {
        guard TestDatabase.kinds.contains(.postgres) else { return }
        let url = try await TestDatabase.makeURL(.postgres)
        let store = try PostgresStore(url: url, options: TestDatabase.postgresOptions())
        defer { store.close() }
        try await store.migrate()
        let b = store.scoped(to: Self.tenantB)
        let ada = Fixtures.account("ada"), abe = Fixtures.account("abe")
        for account in [ada, abe] {
            try await store.createAccount(account, passkey: Fixtures.passkey(for: account), session: nil, audit: [])
        }
        let bea = Fixtures.account("bea")
        try await b.createAccount(bea, passkey: Fixtures.passkey(for: bea), session: nil, audit: [])

        // No tenant filter in these statements: the policies alone decide.
        let count: SQL = "SELECT COUNT(*) AS n FROM accounts"
        #expect(try await store.engine.reader(tenant: TenantID.defaultTenant).count(count) == 2)
        #expect(try await store.engine.reader(tenant: Self.tenantB).count(count) == 1)
        #expect(try await store.engine.reader(tenant: "nobody").count(count) == 0)
        #expect(try await store.engine.reader(tenant: TenantID.everyTenant).count(count) == 3)
        let renamed = try await store.engine.writer(tenant: Self.tenantB).run(
            "UPDATE accounts SET display_name = \("changed") RETURNING 1")
        #expect(renamed == 1)
        #expect(try await store.account(username: "ada")?.displayName == ada.displayName)
        #expect(try await b.account(username: "bea")?.displayName == "changed")
        let deleted = try await store.engine.writer(tenant: Self.tenantB).run("DELETE FROM passkeys RETURNING 1")
        #expect(deleted == 1)
        let adas = try await store.passkeys(accountID: ada.id)
        #expect(adas.count == 1)

        // A connection that names no tenant (another client, a forgotten set_config) reads nothing.
        guard let components = URLComponents(string: url) else { throw StoreError(.invalidDatabase, url) }
        let connection = try await PostgresConnection.connect(
            configuration: .init(
                host: components.host ?? "127.0.0.1", port: components.port ?? 5432, username: components.user ?? "postgres",
                password: nil, database: String(components.path.dropFirst()), tls: .disable),
            id: 1, logger: Logger(label: "test"))
        let rows = try await connection.query("SELECT COUNT(*) AS n FROM accounts", logger: Logger(label: "test")).collect()
        #expect(try rows.first?.decode(Int64.self) == 0)
        try await connection.close()
    }

    /// Two tenants' webhook endpoints and accounts under the same ids (each key is the
    /// tenant's, so the schema allows it) deliver apart: an undelivered delivery of A's does not
    /// hold B's back, and delivering A's passes A's queue on to A's next delivery, not to B's.
    /// The outbox triggers (migration 16, both databases) look for an older undelivered
    /// delivery, and hand the head on, within the tenant: without it, equal ids in two tenants
    /// (a copy of one tenant's rows into another) held each other's queues.
    @Test(arguments: TestDatabase.kinds)
    func webhookQueuesOfTwoTenantsNeverMeetUnderTheSameIDs(_ kind: TestDatabase.Kind) async throws {
        let a = try await TestDatabase.makeStore(kind)
        defer { (a as? PostgresStore)?.close() }
        let b = a.scoped(to: Self.tenantB)
        let endpoint = WebhookEndpoint(url: "https://hooks.example/", secret: [1], events: ["*"], createdAt: Self.t0)
        let ada = Fixtures.account("ada")
        for store in [a, b] {
            try await store.addWebhookEndpoint(endpoint)
            try await store.createAccount(ada, passkey: Fixtures.passkey(for: ada), session: nil, audit: [])
        }
        // A's first line, B's, A's second: each tenant's queue is its own.
        try await a.appendAudit(AuditEvent(time: Self.t0, kind: .signIn, accountID: ada.id))
        try await b.appendAudit(AuditEvent(time: Self.t0, kind: .signIn, accountID: ada.id))
        try await a.appendAudit(AuditEvent(time: Self.t0, kind: .signIn, accountID: ada.id))
        let now = Self.t0.addingTimeInterval(60)
        let lease = now.addingTimeInterval(60)
        let fromB = try await b.claimWebhookDeliveries(endpointID: endpoint.id, now: now, leaseUntil: lease, limit: 10)
        #expect(fromB.count == 1, "B's first delivery waits behind A's")
        let fromA = try await a.claimWebhookDeliveries(endpointID: endpoint.id, now: now, leaseUntil: lease, limit: 10)
        #expect(fromA.count == 1)
        let first = try #require(fromA.first?.0)
        try await a.settleWebhookDelivery(
            eventID: first.eventID, endpointID: endpoint.id, deliveredAt: now, status: 204, error: nil, retryAt: now)
        let next = try await a.claimWebhookDeliveries(
            endpointID: endpoint.id, now: lease, leaseUntil: lease.addingTimeInterval(60), limit: 10)
        #expect(next.count == 1, "A's second delivery waits behind B's")
        #expect(try await a.webhookBacklog(now: now) == 1)
        #expect(try await b.webhookBacklog(now: now) == 1)
    }
}

/// Which methods a test called (by selector).
final class Coverage: Sendable {
    private let names = Mutex<Set<String>>([])

    func callAsFunction<T>(_ name: String, _ body: () async throws -> T) async rethrows -> T {
        names.withLock { _ = $0.insert(name) }
        return try await body()
    }

    var covered: Set<String> { names.withLock { $0 } }
}

/// The statements a store sent, and those that named a tenant's table without naming the
/// tenant (`tenant_id`) once for each table they name.
final class StatementLog: Sendable {
    private let state = Mutex<(statements: Int, unscoped: [String])>((0, []))
    let tenantTables: Set<String>

    init(tenantTables: [String]) { self.tenantTables = Set(tenantTables) }

    var statements: Int { state.withLock { $0.statements } }
    var unscoped: [String] { state.withLock { $0.unscoped } }

    func check(_ sql: SQL) {
        let text = sql.text(.sqlite)
        let words = text.split(whereSeparator: { " \n\t(),;".contains($0) }).map(String.init)
        var named = 0
        for (index, word) in words.enumerated().dropLast()
        where ["FROM", "JOIN", "INTO", "UPDATE"].contains(word.uppercased()) && tenantTables.contains(words[index + 1].lowercased()) {
            named += 1
        }
        let tenants = text.components(separatedBy: "tenant_id").count - 1
        state.withLock {
            $0.statements += 1
            if tenants < named { $0.unscoped.append(text) }
        }
    }
}

/// An engine that runs every statement on `base` and checks it first (``StatementLog``).
struct CheckingEngine: SQLEngine {
    let base: any SQLEngine
    let log: StatementLog

    var dialect: SQLDialect { base.dialect }
    var reader: any SQLConnection { Connection(base: base.reader, log: log) }
    var writer: any SQLConnection { Connection(base: base.writer, log: log) }
    func schemaChanged() { base.schemaChanged() }

    func reader(tenant: String) -> any SQLConnection { Connection(base: base.reader(tenant: tenant), log: log) }
    func writer(tenant: String) -> any SQLConnection { Connection(base: base.writer(tenant: tenant), log: log) }

    func transaction<T: Sendable>(timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T) async throws -> T {
        let log = self.log
        return try await base.transaction(timeout: timeout) { connection in
            try await body(Connection(base: connection, log: log))
        }
    }

    func transaction<T: Sendable>(
        tenant: String, timeout: Duration?, _ body: @escaping @Sendable (any SQLConnection) async throws -> T
    ) async throws -> T {
        let log = self.log
        return try await base.transaction(tenant: tenant, timeout: timeout) { connection in
            try await body(Connection(base: connection, log: log))
        }
    }

    struct Connection: SQLConnection {
        let base: any SQLConnection
        let log: StatementLog

        func rows(_ sql: SQL) async throws -> [any StoreRow] {
            log.check(sql)
            return try await base.rows(sql)
        }

        func execute(_ sql: SQL) async throws {
            log.check(sql)
            try await base.execute(sql)
        }
    }
}
