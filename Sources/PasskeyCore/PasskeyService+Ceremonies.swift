import Crypto
import Foundation
import Logging
import PasskeyStore
import Synchronization
import WebAuthn

/// What every ceremony shares: the challenge taken from the store once, the client data parsed
/// once, the bound on open ceremonies, the server secret, the audit log, and the input rules.
extension PasskeyService {
    // MARK: Helpers

    /// Finds and consumes the ceremony a response answers, from the challenge in its client
    /// data (untrusted until the full verification re-checks it against the stored one).
    func takeChallenge(_ clientData: CollectedClientData, ceremony: ChallengeRecord.Ceremony, api: String) async throws
        -> ChallengeRecord
    {
        guard !clientData.challenge.isEmpty, clientData.challenge.count <= 1024,
            let record = try await store.takeChallenge(clientData.challenge)
        else { throw PasskeyServiceError.unknownChallenge }
        try check(record, ceremony: ceremony, api: api)
        return record
    }

    /// A ceremony record found by a response's challenge answers it only while it has not
    /// expired, and only on the ceremony and API that began it.
    func check(_ record: ChallengeRecord, ceremony: ChallengeRecord.Ceremony, api: String) throws {
        guard record.expiresAt > now() else { throw PasskeyServiceError.expiredChallenge }
        guard record.ceremony == ceremony, record.api == api else { throw PasskeyServiceError.ceremonyMismatch }
    }

    /// clientDataJSON parsed once per verify request. A malformed one is refused here (before
    /// anything is looked up), with the library's code.
    func parseClientData(_ bytes: [UInt8], signIn: Bool) throws -> CollectedClientData {
        do {
            return try CollectedClientData(bytes: bytes)
        } catch {
            throw PasskeyServiceError(error, signIn: signIn)
        }
    }

    /// Bounded challenge creation: a flood of options requests cannot fill the database. The
    /// open count is read from the store at most once a second (plus what this process issued
    /// since), not on every request.
    ///
    /// At the cap the ceremonies that expire first (a tenth of the cap) are deleted to make room,
    /// rather than refusing every new one: a refusal would be a switch anyone able to send
    /// `maxOpenChallenges` options requests within a challenge's lifetime could hold down for
    /// everyone. Deleting the oldest keeps storage bounded and makes a flood cost the people
    /// signing in only if it is fast enough to push out a ceremony while someone is still
    /// answering its prompt (a tenth of the cap within that time).
    func checkCeremonyCapacity() async throws {
        let time = now()
        let open: Int
        if let estimate = capacity.estimate(now: time) {
            open = estimate
        } else {
            open = try await store.openChallengeCount(now: time)
            capacity.refreshed(open, now: time)
        }
        let cap = configuration.maxOpenChallenges
        guard open >= cap, capacity.startReclaiming() else { return }
        defer { capacity.finishedReclaiming() }
        let discarded = try await store.discardOldestChallenges(count: open - cap + max(1, cap / 10))
        let left = try await store.openChallengeCount(now: time)
        capacity.refreshed(left, now: time)
        metrics.ceremoniesDiscarded(discarded)
        logger.warning(
            "open ceremonies reached maxOpenChallenges; the oldest were deleted",
            metadata: ["discarded": "\(discarded)", "open": "\(left)", "maxOpenChallenges": "\(cap)"])
    }

    /// A credential ID that looks real and is the same every time for one unknown username.
    func decoyCredentialID(for username: String) async throws -> [UInt8] {
        let secret = SymmetricKey(data: try await decoySecret())
        return Array(HMAC<SHA256>.authenticationCode(for: Array(("unknown-user:" + Account.key(for: username)).utf8), using: secret))
    }

    /// The key of this tenant's decoys (an unknown name's credential ID and PRF salt): the
    /// server secret for the default tenant (as before tenants), a key derived from it and the
    /// tenant's name for every other. One key for all tenants would give an unknown name the
    /// same decoy on every host, and a name with passkeys on one host a different one: an
    /// oracle, asked on a tenant where the name is unknown, for which names have passkeys on
    /// another.
    package func decoySecret() async throws -> [UInt8] {
        let secret = try await serverSecret()
        guard store.tenant != TenantID.defaultTenant else { return secret }
        return Array(HMAC<SHA256>.authenticationCode(for: Array(("tenant decoys:" + store.tenant).utf8), using: SymmetricKey(data: secret)))
    }

    /// The store's server secret, read once.
    package func serverSecret() async throws -> [UInt8] {
        if let known = secret.value { return known }
        let value = try await store.serverSecret()
        secret.value = value
        return value
    }

    package func auditEvent(
        _ kind: AuditEvent.Kind, accountID: UUID? = nil, credentialID: [UInt8]? = nil, client: Client, detail: String? = nil
    )
        -> AuditEvent
    {
        AuditEvent(
            time: now(), kind: kind, accountID: accountID, credentialID: credentialID, ipAddress: client.ipAddress,
            userAgent: client.userAgent.map { String($0.prefix(256)) }, detail: detail, traceParent: client.traceParent)
    }

    package func audit(_ kind: AuditEvent.Kind, accountID: UUID? = nil, credentialID: [UInt8]? = nil, client: Client, detail: String? = nil)
        async
    {
        do {
            try await store.appendAudit(auditEvent(kind, accountID: accountID, credentialID: credentialID, client: client, detail: detail))
        } catch {
            logger.error("audit write failed", metadata: ["kind": "\(kind)", "error": "\(error)"])
        }
    }

    func lifetime(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    // MARK: Validation

    /// The display form of a valid username (``Username``: PRECIS UsernameCaseMapped rules),
    /// or 400 `invalid_username` saying why not.
    public static func validUsername(_ raw: String?) throws -> String {
        do {
            return try Username.validate(raw ?? "").display
        } catch {
            throw PasskeyServiceError.invalid(.invalidUsername, error.description)
        }
    }

    /// Most bytes of a display or passkey name: 64 characters, but a character can be a long
    /// cluster of combining marks (64 of them made a 20 KB name), so bytes are bounded too.
    public static let maxNameBytes = 256

    public static func validDisplayName(_ raw: String?, default fallback: String) throws -> String {
        let refused = PasskeyServiceError.invalid(
            .invalidDisplayName, "Display names have at most 64 characters (\(maxNameBytes) bytes) and no control characters.")
        guard (raw?.utf8.count ?? 0) <= 4 * maxNameBytes else { throw refused }
        let name = (raw ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        if name.isEmpty { return fallback }
        guard isValidName(name) else { throw refused }
        return name
    }

    package static func validPasskeyName(_ raw: String) throws -> String {
        let refused = PasskeyServiceError.invalid(
            .invalidName, "Passkey names have 1 to 64 characters (at most \(maxNameBytes) bytes) and no control characters.")
        guard raw.utf8.count <= 4 * maxNameBytes else { throw refused }
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, isValidName(name) else { throw refused }
        return name
    }

    static func isValidName(_ name: String) -> Bool {
        name.utf8.count <= maxNameBytes && name.count <= 64
            && !name.unicodeScalars.contains(where: { CharacterSet.controlCharacters.contains($0) })
    }
}

/// The server secret once read from the store.
package final class CachedSecret: Sendable {
    private let stored = Mutex<[UInt8]?>(nil)
    package var value: [UInt8]? {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}

/// The open-ceremony count between store reads: refreshed once a second, plus the challenges this
/// process issued since.
package final class CeremonyCapacity: Sendable {
    private let state = Mutex<(count: Int, at: Date?, issued: Int)>((0, nil, 0))

    package func estimate(now: Date) -> Int? {
        state.withLock { state in
            guard let at = state.at, now.timeIntervalSince(at) < 1, now >= at else { return nil }
            return state.count + state.issued
        }
    }

    package func refreshed(_ count: Int, now: Date) { state.withLock { $0 = (count, now, 0) } }
    package func issued() { state.withLock { $0.issued += 1 } }

    /// One request at a time makes room; the others go on meanwhile (the cap is overshot by at
    /// most the requests in flight).
    package func startReclaiming() -> Bool {
        reclaiming.withLock { busy in
            if busy { return false }
            busy = true
            return true
        }
    }

    package func finishedReclaiming() { reclaiming.withLock { $0 = false } }
    private let reclaiming = Mutex(false)
}
