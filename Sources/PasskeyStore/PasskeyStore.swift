import Foundation

/// What a passkey server keeps: accounts, passkeys, ceremonies in progress, sessions and the
/// audit log. Every method is one transaction: it happens entirely or not at all.
///
/// Two implementations share one conformance suite: ``SQLiteStore`` (embedded, the default)
/// and the PostgreSQL store (several instances behind a load balancer).
public protocol PasskeyStore: MailStore {
    /// The tenant whose rows this store reads and writes (``TenantID/defaultTenant`` for a store
    /// as opened). Every method but the upkeep ones (sweeps, the webhook and mail outboxes'
    /// claims, the metrics rollup, the server secret, FIDO metadata and the tenants themselves)
    /// reads, writes and counts this tenant's rows only.
    var tenant: String { get }
    /// The same database, scoped to another tenant's rows.
    func scoped(to tenant: String) -> any PasskeyStore

    // Tenants (the registry is the server's: these read and write it whatever the store's tenant)
    /// A counter every change to the tenants moves: instances poll it and reload on a change.
    func tenantsVersion() async throws -> Int64
    func tenantRecords() async throws -> [TenantRecord]
    /// `conflict` when the name or a host is taken.
    func addTenant(_ tenant: TenantRecord) async throws
    /// Replaces its settings and hosts; false when unknown; `conflict` when a host is taken, or
    /// when `unchangedSince` is given and the stored record's `updatedAt` is no longer it (a
    /// change made meanwhile is never overwritten by one read before it).
    func updateTenant(_ tenant: TenantRecord, unchangedSince: Date?) async throws -> Bool
    /// Refused while it has accounts, unless `deleteData` (every row it owns goes with it).
    func removeTenant(id: String, deleteData: Bool) async throws -> TenantRemoval
    /// Deletes every row tenant `id` owns in this database (a tenant with a database of its own:
    /// the leftovers of an earlier tenant of the name when it is added, its data when it is
    /// removed with it).
    func deleteTenantData(id: String) async throws
    /// The mark a tenant's own database keeps of the registry that put tenant `id` there (nil:
    /// none): rows under a name are cleared only for the registry that marked them.
    func tenantMark(id: String) async throws -> [UInt8]?
    /// Marks this database as holding tenant `id` of the registry `mark` names (its upkeep then
    /// rolls that tenant's metrics up, as it does for the tenants of its own registry).
    func setTenantMark(id: String, mark: [UInt8]) async throws
    /// The tenants marked in this database (empty: it holds no tenant of another's registry).
    func markedTenants() async throws -> [String]

    /// Applies pending schema migrations; returns the versions applied.
    @discardableResult func migrate() async throws -> [Int]
    /// The schema version in the database (0 when empty).
    func schemaVersion() async throws -> Int
    /// The migrations this release knows that the database has not had (empty: up to date).
    func pendingMigrations() async throws -> [Int]
    /// The newest schema version this release knows.
    var knownSchemaVersion: Int { get }
    /// Fails when the database cannot be reached.
    func ping() async throws

    // Accounts
    func account(id: UUID) async throws -> Account?
    func account(username: String) async throws -> Account?
    func account(userHandle: [UInt8]) async throws -> Account?

    /// Creates an account with its first passkey (sign-up), its first session and audit lines, in
    /// one transaction. `conflict` when the username, user handle or credential ID exists; then
    /// nothing is written.
    func createAccount(_ account: Account, passkey: Passkey, session: SessionRecord?, audit: [AuditEvent]) async throws

    // Passkeys
    /// Adds a passkey to an existing account; `conflict` when the credential ID is registered.
    func addPasskey(_ passkey: Passkey) async throws
    func passkey(credentialID: [UInt8]) async throws -> Passkey?
    func passkeys(accountID: UUID) async throws -> [Passkey]
    /// A passkey with its account, in one read (the sign-in path).
    func passkeyAndAccount(credentialID: [UInt8]) async throws -> (Passkey, Account)?
    /// A verified sign-in, in one transaction: the ceremony's challenge is taken (single use:
    /// of two sign-ins answering one challenge, one gets it), the counter moves from
    /// `previousSignCount` to `signCount` only if nobody moved it first (compare-and-set), then
    /// the last use, the new session and the audit events.
    ///
    /// - `.challengeTaken`: the challenge was gone (taken by another answer); nothing is written.
    /// - `.counterRaced`: the counter had moved; the challenge is taken, nothing else is written.
    /// - `.credentialGone`: the account (and so the passkey) was deleted first; the challenge is
    ///   taken, nothing else is written. The account row is locked before anything else, in the
    ///   order of ``deleteAccount(accountID:audit:)``, so the two never deadlock.
    /// - `challenge` nil: no challenge to take (the caller took it already).
    func completeSignIn(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, session: SessionRecord, audit: [AuditEvent]
    ) async throws -> SignInCompletion
    /// Renames one of the account's passkeys; false when it has no such passkey.
    func renamePasskey(accountID: UUID, credentialID: [UInt8], name: String) async throws -> Bool
    /// The passkey's PRF input: `salt` is stored when it has none yet (atomically: of concurrent
    /// callers one writes, all read the same value). `nil` when the passkey does not exist.
    func ensurePRFSalt(credentialID: [UInt8], salt: [UInt8]) async throws -> [UInt8]?
    /// Replaces the PRF input of one of the account's passkeys; `false` when it has no such passkey.
    func setPRFSalt(accountID: UUID, credentialID: [UInt8], salt: [UInt8]) async throws -> Bool
    /// Deletes one of the account's passkeys unless it is the last way in (the last passkey of an
    /// account without a password), with the sessions it made but `keepSession` (the one asking,
    /// which then stands on no passkey), in one transaction that holds the account (a concurrent
    /// password removal cannot take the other way in at the same time).
    func deletePasskey(accountID: UUID, credentialID: [UInt8], keepSession: [UInt8]?) async throws -> PasskeyDeletion

    /// Removes a passkey, and the sessions it made, whatever the account has left (an
    /// administrator revoking it, or a passkey replaced by a new one).
    func revokePasskey(credentialID: [UInt8], audit: [AuditEvent]) async throws -> Bool

    // Administration
    /// Accounts ordered by username key, after `afterUsername` (paging), at most `limit`.
    func accounts(after afterUsername: String?, limit: Int) async throws -> [Account]
    /// Disables or re-enables an account; disabling revokes every session of the account in the
    /// same transaction.
    /// With `audit` lines, in the same transaction; returns the sessions revoked, nil when there
    /// is no such account.
    func setDisabled(accountID: UUID, disabled: Bool, audit: [AuditEvent]) async throws -> Int?
    /// The account's live sessions, newest first.
    func sessions(accountID: UUID, now: Date) async throws -> [SessionRecord]
    /// Counts for metrics and the adoption report.
    func statistics(now: Date, activeSince: Date) async throws -> StoreStatistics

    // Ceremonies
    func saveChallenge(_ record: ChallengeRecord) async throws
    /// Removes and returns the ceremony for this challenge (single use: of two concurrent calls,
    /// one gets it). Expired records are returned too so the caller can say "expired".
    func takeChallenge(_ challenge: [UInt8]) async throws -> ChallengeRecord?
    /// The ceremony for this challenge, left in place (a read): a sign-in takes it in the
    /// transaction that completes it (``completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)``)
    /// or, when it fails, with ``takeChallenge(_:)``. Expired records are returned too.
    func challenge(_ challenge: [UInt8]) async throws -> ChallengeRecord?
    /// A sign-in's two reads in one: the ceremony for this challenge (as ``challenge(_:)``) and
    /// the passkey with its account (as ``passkeyAndAccount(credentialID:)``), each nil when
    /// absent. One statement, so PostgreSQL answers in one round trip instead of two. The
    /// passkey comes without what a sign-in does not use: its ``Passkey/extensions`` and
    /// ``Passkey/prfSalt`` read as unknown (``passkey(credentialID:)`` has them).
    func challengeAndPasskey(_ challenge: [UInt8], credentialID: [UInt8]) async throws -> (ChallengeRecord?, (Passkey, Account)?)
    /// How many ceremonies are open (for flood limits and metrics).
    func openChallengeCount(now: Date) async throws -> Int
    /// Deletes the `count` open ceremonies that expire first (the oldest): the ceremony cap makes
    /// room this way instead of refusing everyone. Returns how many were deleted.
    @discardableResult func discardOldestChallenges(count: Int) async throws -> Int

    // Sessions
    func createSession(_ session: SessionRecord) async throws
    /// The live session for a token hash, with its account (nil when unknown, expired or revoked).
    func session(tokenHash: [UInt8], now: Date) async throws -> (SessionRecord, Account)?
    func revokeSession(tokenHash: [UInt8]) async throws
    /// Binds a session to another passkey (the one that replaced the passkey it was made with,
    /// so replacing the passkey in use does not end the session replacing it).
    func rebindSession(tokenHash: [UInt8], credentialID: [UInt8]) async throws
    /// Revokes every session of an account but `except` (nil: all); returns how many.
    @discardableResult func revokeSessions(accountID: UUID, except tokenHash: [UInt8]?, audit: [AuditEvent]) async throws -> Int

    /// A random 32-byte secret kept in the database, created on first use: the same on every
    /// instance that shares the database (used to answer unknown usernames consistently).
    func serverSecret() async throws -> [UInt8]

    // Passwords and recovery (the road from passwords to passkeys, and back in)
    /// Imports accounts with their password hashes (bcrypt or scrypt) in one transaction; an
    /// existing username is left as it is. Returns, per row, whether it was inserted.
    func importAccounts(_ rows: [(Account, String)]) async throws -> [Bool]
    /// Turns the account's password off; refused (false) unless it has a passkey. Holds the
    /// account like ``deletePasskey(accountID:credentialID:)``.
    func removePassword(accountID: UUID) async throws -> Bool
    /// Replaces the password hash of an account that has a password and revokes every other
    /// session (`keepSession`: the one making the change); false when it has no password.
    func changePassword(accountID: UUID, hash: String, keepSession: [UInt8]?) async throws -> Bool
    /// Replaces the account's password hash with a stronger hash of the same password (after a
    /// successful sign-in), only while it is still `old`: a change made meanwhile wins. No session
    /// ends. True when replaced.
    func rehashPassword(accountID: UUID, from old: String, to new: String) async throws -> Bool
    /// A sign-in by password or recovery, in one transaction: last sign-in, the new session,
    /// audit lines, and (for recovery) every other session of the account revoked first.
    func recordSignIn(accountID: UUID, session: SessionRecord, audit: [AuditEvent], revokeOtherSessions: Bool) async throws
    /// Replaces the account's recovery codes with these (hashed) ones.
    func replaceRecoveryCodes(accountID: UUID, hashes: [[UInt8]], at time: Date) async throws
    /// Marks an unused code used; false when there is no such unused code (single use, races included).
    func useRecoveryCode(accountID: UUID, hash: [UInt8], at time: Date) async throws -> Bool
    func recoveryCodesLeft(accountID: UUID) async throws -> Int
    /// An admin-issued recovery link's token (hashed), single use, expiring.
    func saveRecoveryToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws
    /// Takes a live token (single use): the account it was issued for, or nil.
    func takeRecoveryToken(hash: [UInt8], now: Date) async throws -> UUID?

    // Abuse limits
    /// Counts one hit on `key` in the fixed window starting at `windowStart` (atomic, shared
    /// by every instance on the database) and returns the count including this hit.
    func countHit(key: String, windowStart: Date, expiresAt: Date) async throws -> Int
    /// The hits counted so far on `key` in the window starting at `windowStart` (0 when none).
    func rateLimitHits(key: String, windowStart: Date) async throws -> Int
    /// Takes one hit back from `key` in that window (never below 0).
    func refundHit(key: String, windowStart: Date) async throws

    /// Brings every account's username comparison key to the current ``Username`` rules;
    /// accounts whose new key another account holds keep their old one and are returned. The
    /// console's search keys (display name, external id) are brought to passkeyd's folding too
    /// (run it after migration 13: its backfill folds ASCII only on SQLite).
    func rekeyUsernames() async throws -> [UsernameCollision]

    // Audit and upkeep
    func appendAudit(_ event: AuditEvent) async throws
    func auditEvents(accountID: UUID?, limit: Int) async throws -> [AuditEvent]
    /// Deletes expired challenges, sessions and rate-limit windows, and webhook deliveries
    /// delivered more than `SQLStore.deliveredWebhookRetention` (7 days) ago; returns how many
    /// rows went.
    @discardableResult func sweepExpired(now: Date) async throws -> Int

    // Apps that trust passkeyd (issue 17)
    func account(externalID: String) async throws -> Account?

    /// The usernames of the accounts `accountIDs` names, in one query (an account that no longer
    /// exists is absent): the usernames of a page of audit lines.
    func usernames(accountIDs: Set<UUID>) async throws -> [UUID: String]
    /// Creates an account with no way in yet (the server API); a registration token then lets
    /// its person add a passkey. Throws `conflict` for a username or external id in use.
    func createAccount(_ account: Account, audit: [AuditEvent]) async throws
    /// Sets or clears the account's external id; false when there is no such account.
    func setExternalID(accountID: UUID, externalID: String?) async throws -> Bool
    /// Records that a session was used, at most once a minute per session.
    func touchSession(tokenHash: [UInt8], at time: Date) async throws

    func saveRegistrationToken(hash: [UInt8], accountID: UUID, createdAt: Date, expiresAt: Date) async throws
    /// Takes (deletes) a registration token: its account while it was live, else nil.
    func takeRegistrationToken(hash: [UInt8], now: Date) async throws -> UUID?

    /// Every signing key not yet retired at `now`, oldest first.
    func signingKeys(now: Date) async throws -> [SigningKey]
    /// Adds a key; with `retiringOthersAt`, every key of its algorithm not yet retiring gets
    /// that retirement time.
    func addSigningKey(_ key: SigningKey, retiringOthersAt: Date?) async throws
    /// Adds `key` only when no key of its algorithm is live (the first start); true when added.
    func addFirstSigningKey(_ key: SigningKey, now: Date) async throws -> Bool
    /// Which set of signing keys is current: changes with every key added (the newest key's id,
    /// written in the same transaction), so an instance holding the keys in memory sees a
    /// rotation by another instance or the CLI with one primary-key read.
    func signingKeysVersion() async throws -> [UInt8]

    func createAPIKey(_ key: APIKey, audit: [AuditEvent]) async throws
    func apiKey(hash: [UInt8]) async throws -> APIKey?
    func apiKeys() async throws -> [APIKey]
    /// Revokes a key; false when there is no such live key.
    func revokeAPIKey(id: UUID, at time: Date, audit: [AuditEvent]) async throws -> Bool
    /// Records a use, at most once a minute per key.
    func touchAPIKey(id: UUID, at time: Date) async throws

    func addWebhookEndpoint(_ endpoint: WebhookEndpoint) async throws
    func webhookEndpoints() async throws -> [WebhookEndpoint]
    /// Upkeep: every tenant's endpoints (the webhook dispatcher gives each a worker with a store
    /// of its tenant).
    func allWebhookEndpoints() async throws -> [(tenant: String, endpoint: WebhookEndpoint)]
    func removeWebhookEndpoint(id: UUID) async throws -> Bool
    /// Claims up to `limit` deliveries that are due (to one endpoint, or any), each the oldest
    /// undelivered one of its (endpoint, account), leased until `leaseUntil` so no other
    /// instance takes them: one atomic UPDATE decides, so of several instances claiming at once
    /// each row goes to at most one.
    func claimWebhookDeliveries(endpointID: UUID?, now: Date, leaseUntil: Date, limit: Int) async throws -> [(
        WebhookDelivery, AuditEvent
    )]
    /// Settles a claimed delivery: delivered, or tried once more and due again at `retryAt`;
    /// `latencyMs`: how long the attempt took (shown in the console), nil when not measured.
    func settleWebhookDelivery(
        eventID: Int64, endpointID: UUID, deliveredAt: Date?, status: Int?, error: String?, latencyMs: Int?, retryAt: Date) async throws
    /// The newest deliveries (for an endpoint, or all), newest first.
    func webhookDeliveries(endpointID: UUID?, limit: Int) async throws -> [WebhookDelivery]

    // OpenID Connect (issue 18)
    func addOAuthClient(_ client: OAuthClient) async throws
    func oauthClient(id: String) async throws -> OAuthClient?
    func oauthClients() async throws -> [OAuthClient]
    func removeOAuthClient(id: String) async throws -> Bool
    /// A pending authorization request (waiting for a sign-in or consent), kept until it expires.
    func saveOAuthRequest(hash: [UInt8], clientID: String, request: [UInt8], createdAt: Date, expiresAt: Date) async throws
    func oauthRequest(hash: [UInt8], now: Date) async throws -> (clientID: String, request: [UInt8])?
    func deleteOAuthRequest(hash: [UInt8]) async throws
    func saveOAuthCode(hash: [UInt8], grant: OAuthGrant, createdAt: Date) async throws
    /// Takes a code issued to `clientID` by one statement (`UPDATE … WHERE code_hash = … AND
    /// client_id = … AND used_at IS NULL AND expires_at > … RETURNING`), recording the grant
    /// (refresh-token family) its exchange makes: of callers racing for one code, exactly one
    /// gets `taken`, the others `reused` with the winner's family. A code of another client is
    /// `unknown` and left as it was (RFC 6749 §4.1.3: the code is checked to be the client's
    /// before anything is touched).
    func useOAuthCode(hash: [UInt8], clientID: String, family: String, at time: Date) async throws -> OAuthTake
    /// A code issued to `clientID`, used or not, without touching it (its PKCE challenge and
    /// redirect URI are checked before it is taken).
    func oauthCode(hash: [UInt8], clientID: String) async throws -> OAuthGrant?
    func saveRefreshToken(hash: [UInt8], grant: OAuthGrant, createdAt: Date) async throws
    /// Takes a refresh token issued to `clientID` by one statement, the same way: `taken` by one
    /// caller alone, `reused` for every other (rotation: each token refreshes once), `revoked`
    /// when its grant was revoked (even when the token was written after the revocation),
    /// `unknown` (nothing changed) for another client's token.
    func useRefreshToken(hash: [UInt8], clientID: String, at time: Date) async throws -> OAuthTake
    /// Revokes a grant: every refresh token of its family, those written later too, and (through
    /// ``oauthGrantRevoked(family:)``) the access tokens that carry it, until `until`.
    @discardableResult func revokeOAuthGrant(family: String, clientID: String, accountID: UUID, at time: Date, until: Date)
        async throws -> Int
    /// Revokes the grant of a refresh token issued to `clientID` (RFC 7009); false, and nothing
    /// changed, for an unknown token or another client's.
    func revokeRefreshToken(hash: [UInt8], clientID: String, at time: Date, until: Date) async throws -> Bool
    /// Whether a grant (refresh-token family) was revoked: its access tokens are refused.
    func oauthGrantRevoked(family: String) async throws -> Bool
    /// Revokes every refresh token of a family; returns how many.
    @discardableResult func revokeRefreshFamily(_ family: String, at time: Date) async throws -> Int
    /// The refresh token's family, if it exists.
    func refreshFamily(hash: [UInt8]) async throws -> String?
    func consent(accountID: UUID, clientID: String) async throws -> String?
    func saveConsent(accountID: UUID, clientID: String, scope: String, at time: Date) async throws

    /// A verified assertion that opens no account session (the operator's console signs in and
    /// steps up with one), in one transaction: the challenge taken unless nil (single use, as in
    /// ``completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)``),
    /// the counter compare-and-set, the passkey's last use and backup state, and the audit lines.
    /// The account's last sign-in is left alone (this was no sign-in to the account).
    func recordAssertion(
        challenge: [UInt8]?, credentialID: [UInt8], previousSignCount: UInt32, signCount: UInt32, backedUp: Bool,
        counterAnomaly: Bool, at time: Date, audit: [AuditEvent]
    ) async throws -> SignInCompletion

    // FIDO metadata (MDS3)
    /// Stores a verified FIDO metadata BLOB in place of the one stored, only when its number is
    /// greater (MDS3 §3.2 step 5), unless `force`; `outdated` otherwise, and nothing is written.
    func saveMetadataBLOB(_ record: MetadataBLOBRecord, force: Bool) async throws
    /// The stored BLOB, if any.
    func metadataBLOB() async throws -> MetadataBLOBRecord?
    /// The stored BLOB's number, without its text (the cheap check every instance polls).
    func metadataBLOBNumber() async throws -> Int?

    // MARK: The operator's console (issue 36; SQLStore+Console*.swift)

    // Roles
    /// The account's console role; nil when it has none.
    func adminRole(accountID: UUID) async throws -> AdminRole?
    /// Every account holding a role, ordered by username key.
    func adminGrants() async throws -> [AdminGrant]
    /// How many accounts hold the `admin` role.
    func adminCount() async throws -> Int
    /// Grants, changes (`role`) or removes (nil) an account's role, with `audit` lines, in one
    /// transaction that also ends the account's console sessions when a role is changed or
    /// removed. Removing or downgrading the last `admin` is refused (`lastAdmin`, nothing
    /// written), atomically: of two concurrent demotions of the last two admins one is refused.
    func setAdminRole(accountID: UUID, role: AdminRole?, by grantedBy: String, at time: Date, audit: [AuditEvent]) async throws
        -> AdminRoleChange

    // The first admin's bootstrap token (single use, expiring)
    /// Stores a bootstrap token (its SHA-256) with `audit` lines, in one transaction.
    func saveAdminBootstrapToken(hash: [UInt8], createdAt: Date, expiresAt: Date, audit: [AuditEvent]) async throws
    /// Whether the token exists, is unused and has not expired (a read: nothing is taken).
    func adminBootstrapTokenIsLive(hash: [UInt8], now: Date) async throws -> Bool
    /// Takes the token for `accountID` in one transaction: marks it used (single use: of callers
    /// racing for one token, one alone gets `true`), grants the account `admin` and writes the
    /// audit lines. `false`, and nothing written, when the token is unknown, used or expired.
    func redeemAdminBootstrapToken(hash: [UInt8], accountID: UUID, now: Date, audit: [AuditEvent]) async throws -> Bool

    // Console sessions
    func createAdminSession(_ session: AdminSessionRecord) async throws
    /// The live console session for a token hash, with its account and role, its idle expiry
    /// moved to `min(idleUntil, expiresAt)` (and returned so). nil when unknown, expired (either
    /// expiry at or before `now`), the account disabled, or the account holds no role.
    func adminSession(tokenHash: [UInt8], now: Date, idleUntil: Date) async throws -> (AdminSessionRecord, Account, AdminRole)?
    /// A step-up: records a passkey verification at `time` and replaces the CSRF token's hash.
    /// false when there is no such session.
    func verifyAdminSession(tokenHash: [UInt8], at time: Date, csrfHash: [UInt8]) async throws -> Bool
    func revokeAdminSession(tokenHash: [UInt8]) async throws
    /// Ends every console session of an account; returns how many.
    @discardableResult func revokeAdminSessions(accountID: UUID) async throws -> Int

    // Adoption rollups (daily_metrics, from audit_events.metric)
    /// Rolls up every UTC day before the day containing `before` not rolled up yet (at most 400
    /// per call), idempotently (recomputing a day writes the same rows), and moves the watermark
    /// forward; returns the number of days rolled. Safe to run on several instances at once.
    @discardableResult func rollUpMetrics(before: Date) async throws -> Int
    /// Rolled-up rows of the days `from ≤ day < to` (00:00 UTC each), by day then metric.
    func dailyMetrics(from: Date, to: Date) async throws -> [DailyMetric]
    /// Per metric, the sum over rolled-up days before `before` (running totals start there; the
    /// migration's `baseline_*` rows included).
    func metricTotals(before: Date) async throws -> [String: Int]
    /// Per metric, the audit lines in `[from, to)` counted now (today, not rolled up yet).
    func liveMetrics(from: Date, to: Date) async throws -> [String: Int]
    /// The first day not rolled up yet (00:00 UTC); nil on a database without the watermark.
    func metricsRolledThrough() async throws -> Date?

    // Search
    /// Accounts whose `field` starts with `prefix` (case-insensitive), in the field's order,
    /// `limit` at a time; `next` is the cursor of the following page (nil on the last). Every
    /// field is an index range scan. The store validates its input: `prefix` 1…128 UTF-8 bytes,
    /// `limit` 1…100, a cursor it made; anything else throws `invalid_query`
    /// (``StoreError/Code/invalidQuery``). A prefix that cannot match (an id prefix that is not
    /// hex) finds nothing.
    func searchAccounts(field: AccountSearchField, prefix: String, after cursor: String?, limit: Int) async throws -> (
        accounts: [Account], next: String?
    )
    /// Audit lines matching every filter of `query`, newest first (id descending). A limit
    /// outside 1…10 000 or an address prefix over 128 bytes throws `invalid_query`.
    func searchAudit(_ query: AuditQuery) async throws -> [AuditEvent]

    // Overview
    /// Sessions not expired at `now`.
    func liveSessionCount(now: Date) async throws -> Int
    /// Webhook deliveries not delivered yet (due or waiting their retry).
    func webhookBacklog(now: Date) async throws -> Int
    /// Passkeys counted by AAGUID (which providers people use).
    func passkeyCountsByAAGUID() async throws -> [String: Int]

    // Changes
    /// Deletes the account and everything of it (passkeys, sessions, recovery codes and links,
    /// registration tokens, OAuth codes, refresh tokens and consents, its role and console
    /// sessions) with the `audit` lines, in one transaction. Audit lines stay (the history), and
    /// webhook deliveries of them too. Nothing is written when there is no such account, or when
    /// it holds the last `admin` role (the same guard as ``setAdminRole(accountID:role:by:at:audit:)``,
    /// in the same transaction: two admins deleting each other at once leave one).
    func deleteAccount(accountID: UUID, audit: [AuditEvent]) async throws -> AccountDeletion
    /// Pauses or resumes an endpoint (its `disabled` flag: a paused endpoint gets no new
    /// deliveries, and its waiting ones are not claimed). false when there is no such endpoint.
    func setWebhookPaused(id: UUID, paused: Bool) async throws -> Bool
    /// Replaces an endpoint's signing secret; false when there is no such endpoint.
    func setWebhookSecret(id: UUID, secret: [UInt8]) async throws -> Bool
    /// Makes an undelivered delivery due at `now` with its lease cleared; false when there is no
    /// such delivery or it was delivered.
    func retryWebhookDelivery(endpointID: UUID, eventID: Int64, now: Date) async throws -> Bool
    /// Replaces a client's secret hash; false when there is no such client.
    func setOAuthClientSecret(id: String, secretHash: [UInt8]) async throws -> Bool
}

/// How ``PasskeyStore/completeSignIn(challenge:credentialID:previousSignCount:signCount:backedUp:counterAnomaly:at:session:audit:)`` ended.
public enum SignInCompletion: Sendable, Equatable {
    /// Challenge taken, counter moved, session and audit lines written.
    case signedIn
    /// Another sign-in moved the counter first: only the challenge was taken.
    case counterRaced
    /// The challenge was already taken: nothing was written.
    case challengeTaken
    /// The account was deleted (with its passkeys) before the sign-in could complete: only the
    /// challenge was taken.
    case credentialGone
}

public enum PasskeyDeletion: Sendable, Equatable {
    case deleted
    case notFound
    /// Refused: it is the account's only way in.
    case lastPasskey
}

/// What the store holds, counted (metrics, `passkeyd admin adoption`).
public struct StoreStatistics: Sendable, Equatable, Codable {
    public var accounts: Int
    public var disabledAccounts: Int
    public var passkeys: Int
    /// Passkeys by AAGUID (the provider).
    public var passkeysByAAGUID: [String: Int]
    public var liveSessions: Int
    public var openChallenges: Int
    /// Accounts that signed in (with anything) since `activeSince`.
    public var activeAccounts: Int
    /// Of those, how many have at least one passkey.
    public var activeAccountsWithPasskey: Int
    /// Accounts with at least one passkey.
    public var accountsWithPasskey: Int

    public init(
        accounts: Int = 0, disabledAccounts: Int = 0, passkeys: Int = 0, passkeysByAAGUID: [String: Int] = [:], liveSessions: Int = 0,
        openChallenges: Int = 0, activeAccounts: Int = 0, activeAccountsWithPasskey: Int = 0, accountsWithPasskey: Int = 0
    ) {
        self.accounts = accounts
        self.disabledAccounts = disabledAccounts
        self.passkeys = passkeys
        self.passkeysByAAGUID = passkeysByAAGUID
        self.liveSessions = liveSessions
        self.openChallenges = openChallenges
        self.activeAccounts = activeAccounts
        self.activeAccountsWithPasskey = activeAccountsWithPasskey
        self.accountsWithPasskey = accountsWithPasskey
    }
}

extension PasskeyStore {
    /// Deletes one of the account's passkeys and every session it made.
    public func deletePasskey(accountID: UUID, credentialID: [UInt8]) async throws -> PasskeyDeletion {
        try await deletePasskey(accountID: accountID, credentialID: credentialID, keepSession: nil)
    }

    /// Revokes every session of an account; returns how many.
    @discardableResult public func revokeSessions(accountID: UUID) async throws -> Int {
        try await revokeSessions(accountID: accountID, except: nil, audit: [])
    }

    /// Revokes every session of an account but `except` (nil: all); returns how many.
    @discardableResult public func revokeSessions(accountID: UUID, except tokenHash: [UInt8]?) async throws -> Int {
        try await revokeSessions(accountID: accountID, except: tokenHash, audit: [])
    }

    /// Disables or re-enables an account (disabling revokes its sessions); false when there is no
    /// such account.
    public func setDisabled(accountID: UUID, disabled: Bool) async throws -> Bool {
        try await setDisabled(accountID: accountID, disabled: disabled, audit: []) != nil
    }

    /// Removes a passkey and the sessions it made.
    public func revokePasskey(credentialID: [UInt8]) async throws -> Bool {
        try await revokePasskey(credentialID: credentialID, audit: [])
    }

    /// Settles a claimed delivery without a measured latency.
    public func settleWebhookDelivery(
        eventID: Int64, endpointID: UUID, deliveredAt: Date?, status: Int?, error: String?, retryAt: Date
    ) async throws {
        try await settleWebhookDelivery(
            eventID: eventID, endpointID: endpointID, deliveredAt: deliveredAt, status: status, error: error, latencyMs: nil,
            retryAt: retryAt)
    }

    /// Claims due deliveries to any endpoint.
    public func claimWebhookDeliveries(now: Date, leaseUntil: Date, limit: Int) async throws -> [(WebhookDelivery, AuditEvent)] {
        try await claimWebhookDeliveries(endpointID: nil, now: now, leaseUntil: leaseUntil, limit: limit)
    }
}
