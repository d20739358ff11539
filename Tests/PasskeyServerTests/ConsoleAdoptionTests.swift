import Foundation
import HTTPTypes
import PasskeyCore
import PasskeyServer
import PasskeyStore
import Testing
import WebAuthn
import WebAuthnTesting

/// The adoption picture (issue 36, item 2) after a scripted history over simulated days: the
/// chart's numbers, day by day, as people sign up, upgrade from imported passwords by each road,
/// turn passwords off and sign in by each method; the overview; the CSV; and the same numbers
/// whether a day is counted live or read from its rollup. Runs on SQLite, and on PostgreSQL with
/// `PASSKEYD_TEST_STORE=postgres`.
@Suite struct ConsoleAdoptionTests {
    /// One day of the chart, as the API writes it.
    struct Day: Equatable, CustomStringConvertible {
        var date = ""
        var withPasskey = 0
        var passwordOnly = 0
        var noWayIn = 0
        var newPasskeys = 0
        /// conditional, button, recovery
        var upgrades = [0, 0, 0]
        var passwordsOff = 0
        /// autofill, passkey, password, recovery, oidc
        var signIns = [0, 0, 0, 0, 0]

        var description: String {
            "\(date): \(withPasskey)/\(passwordOnly)/\(noWayIn) new \(newPasskeys) up \(upgrades) off \(passwordsOff) in \(signIns)"
        }

        init(
            _ withPasskey: Int, _ passwordOnly: Int, new: Int = 0, upgrades: [Int] = [0, 0, 0], off: Int = 0,
            signIns: [Int] = [0, 0, 0, 0, 0]
        ) {
            self.withPasskey = withPasskey
            self.passwordOnly = passwordOnly
            newPasskeys = new
            self.upgrades = upgrades
            passwordsOff = off
            self.signIns = signIns
        }

        init(json: JSONValue) {
            func n(_ value: JSONValue?) -> Int { ConsoleAPITests.number(value) ?? -1 }
            date = ConsoleAPITests.text(json["date"]) ?? ""
            withPasskey = n(json["accountsWithPasskey"])
            passwordOnly = n(json["passwordOnly"])
            noWayIn = n(json["noWayIn"])
            newPasskeys = n(json["newPasskeys"])
            upgrades = ["conditional", "button", "recovery"].map { n(json["upgrades"]?[$0]) }
            passwordsOff = n(json["passwordsOff"])
            signIns = ["autofill", "passkey", "password", "recovery", "oidc"].map { n(json["signIns"]?[$0]) }
        }

        init(csv line: String) {
            let fields = line.split(separator: ",").map(String.init)
            let values = fields.dropFirst().map { Int($0) ?? -1 }
            date = fields.first ?? ""
            guard values.count == 12 else { return }
            withPasskey = values[0]
            passwordOnly = values[1]
            newPasskeys = values[2]
            upgrades = Array(values[3...5])
            passwordsOff = values[6]
            signIns = Array(values[7...11])
        }

        /// Without the date, and without noWayIn (not in the CSV) when `csv`.
        func same(as other: Day, csv: Bool = false) -> Bool {
            var a = self
            var b = other
            a.date = ""
            b.date = ""
            if csv {
                a.noWayIn = 0
                b.noWayIn = 0
            }
            return a == b
        }
    }

    static let day: TimeInterval = 86_400

    static func passwordSignIn(_ api: APIClient, _ username: String) async throws -> String {
        let answer = try await api.post("/api/auth/password/sign-in", ["username": username, "password": "secret \(username)"])
        guard answer.status == .ok, let token = answer.string("token") else { throw HarnessError.unexpected(answer) }
        return token
    }

    /// Registers a passkey on the signed-in account (`conditional`: the browser's automatic create).
    static func addPasskey(_ api: APIClient, token: String, username: String, conditional: Bool = false) async throws
        -> (SoftwareAuthenticator, SoftwareCredential)
    {
        var authenticator = SoftwareAuthenticator(seed: Array(username.utf8))
        let body: [String: String] = conditional ? ["mediation": "conditional"] : [:]
        let options = try await api.post("/api/auth/register/options", body, token: token)
        guard options.status == .ok else { throw HarnessError.unexpected(options) }
        let (registration, credential) = try authenticator.register(
            options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
        let verify = try await api.post("/api/auth/register/verify", APIClient.CredentialBody(credential: registration), token: token)
        guard verify.status == .ok else { throw HarnessError.unexpected(verify) }
        return (authenticator, credential)
    }

    /// A passkey sign-in from a button, or (`autofill`) from the browser's AutoFill.
    static func passkeySignIn(
        _ api: APIClient, _ authenticator: SoftwareAuthenticator, _ credential: inout SoftwareCredential, autofill: Bool = false
    ) async throws -> String {
        let options = try await api.post("/api/auth/authenticate/options", autofill ? ["mediation": "conditional"] : [String: String]())
        guard options.status == .ok else { throw HarnessError.unexpected(options) }
        let assertion = try authenticator.authenticate(
            options: try options.decode(PublicKeyCredentialRequestOptionsJSON.self), origin: ServerHarness.origin, credential: &credential)
        let verify = try await api.post("/api/auth/authenticate/verify", APIClient.CredentialBody(credential: assertion))
        guard verify.status == .ok, let token = verify.string("token") else { throw HarnessError.unexpected(verify) }
        return token
    }

    static func importAccounts(_ harness: ServerHarness, _ names: [String]) async throws {
        let rows = names.map { name in
            (
                Account(username: name, displayName: name, userHandle: RelyingParty.makeUserHandle(), createdAt: harness.clock.now),
                Bcrypt(hashing: "secret \(name)", cost: 4).text
            )
        }
        #expect(try await harness.store.importAccounts(rows) == names.map { _ in true })
    }

    /// The chart through the API, its CSV, and checks that both say the same.
    static func chart(_ api: APIClient, _ admin: inout ConsoleAdmin) async throws -> [Day] {
        #expect(try await api.consoleSignIn(&admin).status == .ok)
        let answer = try await api.consoleGet("adoption?days=7", admin)
        #expect(answer.status == .ok)
        let days = ConsoleAPITests.array(answer.json["days"]).map(Day.init(json:))
        let csv = try await api.consoleGet("adoption.csv?days=7", admin)
        #expect(csv.status == .ok && csv.headers[.contentType]?.hasPrefix("text/csv") == true)
        let lines = String(decoding: csv.bytes, as: UTF8.self).split(separator: "\r\n").map(String.init)
        #expect(lines.first?.hasPrefix("date,accounts_with_passkey,password_only,new_passkeys,upgrades_conditional,") == true)
        let rows = lines.dropFirst().map(Day.init(csv:))
        #expect(rows.count == days.count)
        for (row, day) in zip(rows, days) {
            #expect(row.date == day.date && row.same(as: day, csv: true), "csv \(row) vs json \(day)")
        }
        return days
    }

    @Test func theChartCountsAScriptedHistoryDayByDay() async throws {
        let harness = try await ServerHarness {
            $0.passwordScryptCost = 10
            $0.rateLimits = .init(windowSeconds: 60, perIP: 10_000, perAccount: 100)
        }
        // Day 0 starts at 08:00 UTC (the test clock's start).
        let start = harness.clock.now
        let day0 = ConsoleService.dayStart(start)
        try await harness.run { api in
            // Day 0: the administrator and ann sign up with passkeys; four password accounts are
            // imported; pam signs in with her password.
            var root = try await api.consoleAccount(harness, "root", role: .admin)
            var ann = try await api.consoleAccount(harness, "ann")
            try await Self.importAccounts(harness, ["pam", "pat", "pia", "pod"])
            _ = try await Self.passwordSignIn(api, "pam")

            // Day 1: pam upgrades by the button, pat by the browser's conditional create; ann
            // signs in from a button and from AutoFill.
            harness.clock.advance(Self.day)
            let pam = try await Self.addPasskey(api, token: try await Self.passwordSignIn(api, "pam"), username: "pam")
            var pamCredential = pam.1
            _ = try await Self.addPasskey(api, token: try await Self.passwordSignIn(api, "pat"), username: "pat", conditional: true)
            _ = try await Self.passkeySignIn(api, ann.authenticator, &ann.credential)
            _ = try await Self.passkeySignIn(api, ann.authenticator, &ann.credential, autofill: true)

            // Day 2: pia signs in with her password, makes recovery codes, recovers with one and
            // adds a passkey (an upgrade by recovery); pam signs in with her passkey and turns her
            // password off; ann signs in and adds a second passkey.
            harness.clock.advance(Self.day)
            let piaToken = try await Self.passwordSignIn(api, "pia")
            let codes = try await api.post("/api/auth/recovery-codes", [String: String](), token: piaToken)
            let code = try #require(ConsoleAPITests.array(codes.json["codes"]).first.flatMap(ConsoleAPITests.text))
            let recovered = try await api.post("/api/auth/recovery/sign-in", ["username": "pia", "code": code])
            #expect(recovered.status == .ok)
            _ = try await Self.addPasskey(api, token: try #require(recovered.string("token")), username: "pia")
            let pamToken = try await Self.passkeySignIn(api, pam.0, &pamCredential)
            #expect(try await api.request(.delete, "/api/auth/password", token: pamToken).status == .noContent)
            let annToken = try await Self.passkeySignIn(api, ann.authenticator, &ann.credential)
            var annAuthenticator = ann.authenticator
            let (second, _) = try await MigrationTests.addPasskey(api, token: annToken, authenticator: &annAuthenticator)
            #expect(second.status == .ok)

            // Day 3: dan signs up and is deleted the same day.
            harness.clock.advance(Self.day)
            let dan = try await api.consoleAccount(harness, "dan")
            try await AdminService(store: harness.store, now: { harness.clock.now }).deleteAccount(
                dan.account, confirmation: "dan", by: "test")

            // Day 4 (today, noon): new1 signs up; pod signs in with his password; ann from AutoFill.
            harness.clock.advance(Self.day + 4 * 3600)
            _ = try await api.consoleAccount(harness, "new1")
            _ = try await Self.passwordSignIn(api, "pod")
            _ = try await Self.passkeySignIn(api, ann.authenticator, &ann.credential, autofill: true)

            // signIns: autofill, passkey, password, recovery, oidc
            let expected: [Day] = [
                Day(0, 0),
                Day(0, 0),
                Day(2, 4, new: 2, signIns: [0, 0, 1, 0, 0]),
                Day(4, 2, new: 2, upgrades: [1, 1, 0], signIns: [1, 1, 2, 0, 0]),
                Day(5, 1, new: 2, upgrades: [0, 0, 1], off: 1, signIns: [0, 2, 1, 1, 0]),
                Day(5, 1, new: 1),
                Day(6, 1, new: 1, signIns: [1, 0, 1, 0, 0]),
            ]
            let dates = (-2...4).map { ConsoleService.dayText(day0.addingTimeInterval(Double($0) * Self.day)) }
            let today = try await Self.chart(api, &root)
            #expect(today.map(\.date) == dates)
            for (got, want) in zip(today, expected) { #expect(got.same(as: want), "got \(got), want \(want)") }
            // Days 0–3 came from their rollups; today was counted live.
            #expect(try await harness.store.metricsRolledThrough() == day0.addingTimeInterval(4 * Self.day))

            // The overview: today's totals and sign-ins.
            let overview = try await api.consoleGet("overview", root)
            #expect(overview.status == .ok)
            #expect(ConsoleAPITests.number(overview.json["accounts"]) == 7)
            #expect(ConsoleAPITests.number(overview.json["accountsWithPasskey"]) == 6)
            #expect(ConsoleAPITests.number(overview.json["passwordOnly"]) == 1)
            #expect(ConsoleAPITests.number(overview.json["noWayIn"]) == 0)
            let signIns = ["autofill", "passkey", "password", "recovery", "oidc"].map {
                ConsoleAPITests.number(overview.json["signInsToday"]?[$0])
            }
            #expect(signIns == [1, 0, 1, 0, 0])
            #expect((ConsoleAPITests.number(overview.json["activeSessions"]) ?? 0) > 0)
            // Other ranges end on the same day; a range not offered is refused.
            for days in [30, 90, 365] {
                let long = try await api.consoleGet("adoption?days=\(days)", root)
                let list = ConsoleAPITests.array(long.json["days"]).map(Day.init(json:))
                #expect(list.count == days && list.last?.same(as: expected[6]) == true)
            }
            for bad in ["1", "8", "0", "-7", "seven", "366"] {
                #expect(try await api.consoleGet("adoption?days=\(bad)", root).errorCode == "invalid_query", "\(bad)")
            }

            // Past midnight: day 4 is counted live for five minutes, then from its rollup; the
            // numbers do not change.
            harness.clock.advance(12 * 3600 + 120)
            let early = try await Self.chart(api, &root)
            #expect(try await harness.store.metricsRolledThrough() == day0.addingTimeInterval(4 * Self.day))
            harness.clock.advance(240)
            let late = try await Self.chart(api, &root)
            #expect(try await harness.store.metricsRolledThrough() == day0.addingTimeInterval(5 * Self.day))
            for chart in [early, late] {
                #expect(chart.map(\.date) == Array(dates.dropFirst()) + [ConsoleService.dayText(day0.addingTimeInterval(5 * Self.day))])
                for (got, want) in zip(chart, Array(expected.dropFirst()) + [Day(6, 1)]) {
                    #expect(got.same(as: want), "got \(got), want \(want)")
                }
            }
            // Rolling up again changes nothing (idempotent).
            try await harness.store.rollUpMetrics(before: harness.clock.now)
            #expect(try await Self.chart(api, &root) == late)
        }
    }

    /// The bootstrap link's account is the console's own sign-up: the totals hold it (it exists,
    /// with a passkey) but no day counts it as a new passkey; a bootstrap refused after its
    /// account was made leaves the totals as they were.
    @Test func theFirstAdministratorsBootstrapIsNoSignUp() async throws {
        let harness = try await ConsoleAPITests.harness()
        let console = ConsoleService(service: harness.service)
        let token = try #require(try await console.issueBootstrapToken(by: "test")).token
        try await harness.run { api in
            func bootstrap(_ username: String, userVerified: Bool) async throws -> (APIResponse, ConsoleAdmin?) {
                var authenticator = SoftwareAuthenticator(seed: Array(username.utf8))
                authenticator.userVerified = userVerified
                let options = try await api.post("/admin/api/bootstrap/options", ["token": token, "username": username])
                #expect(options.status == .ok)
                let (registration, credential) = try authenticator.register(
                    options: try options.decode(PublicKeyCredentialCreationOptionsJSON.self), origin: ServerHarness.origin)
                let verify = try await api.post(
                    "/admin/api/bootstrap/verify", ConsoleAttackTests.BootstrapVerify(token: token, credential: registration))
                guard verify.status == .ok, let account = try await harness.store.account(username: username) else { return (verify, nil) }
                var admin = ConsoleAdmin(account: account, accountToken: "", authenticator: authenticator, credential: credential)
                admin.cookie = try #require(APIClient.consoleCookie(verify))
                return (verify, admin)
            }
            // Without user verification the account made for it is deleted again.
            let (refused, _) = try await bootstrap("early", userVerified: false)
            #expect(refused.errorCode == "user_not_verified")
            #expect(try await harness.store.account(username: "early") == nil)
            let (verify, made) = try await bootstrap("root", userVerified: true)
            #expect(verify.status == .ok)
            let root = try #require(made)
            let lines = try await harness.store.auditEvents(accountID: root.account.id, limit: 20)
            #expect(lines.filter { $0.kind == "sign_up" }.map(\.metric) == ["admin_bootstrap"])

            let adoption = try await api.consoleGet("adoption?days=7", root)
            let today = try #require(ConsoleAPITests.array(adoption.json["days"]).map(Day.init(json:)).last)
            #expect(today.same(as: Day(1, 0, new: 0)), "\(today)")
            let overview = try await api.consoleGet("overview", root)
            #expect(ConsoleAPITests.number(overview.json["accounts"]) == 1)
            #expect(ConsoleAPITests.number(overview.json["accountsWithPasskey"]) == 1)

            // A person's sign-up is one.
            _ = try await api.consoleAccount(harness, "ann")
            let after = try await api.consoleGet("adoption?days=7", root)
            let day = try #require(ConsoleAPITests.array(after.json["days"]).map(Day.init(json:)).last)
            #expect(day.same(as: Day(2, 0, new: 1)), "\(day)")
        }
    }
}
