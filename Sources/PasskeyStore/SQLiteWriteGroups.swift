import Foundation
import NIOCore
import NIOPosix
import Synchronization

/// The SQLite writer, shared by group commit: writes that reach the writer within one turn of
/// an event loop run one after another inside one SQLite transaction, which commits once for
/// all of them.
///
/// Why: a commit appends every page its transaction changed to the WAL (two `pwrite`s and a
/// checksum per page), and the checkpointer later copies each page to the database file. A
/// sign-in changes ~13 pages, about half of them the same for every sign-in (the last leaf of
/// each index on time, the challenge table, `sqlite_sequence`), so a group writes those once.
/// It also takes SQLite's write locks (`fcntl`) once per group.
///
/// How: one member uses the writer connection at a time (`busy`; the others wait in order
/// without blocking a thread). The first member of a group begins the transaction (`BEGIN
/// IMMEDIATE`); a member of several statements runs inside a savepoint of its own, so a member
/// that fails is rolled back alone; a single statement is atomic by itself. A member whose work
/// is done waits for the group's commit, which runs when the event loop it finished on has run
/// the jobs already queued on it (`EventLoop.execute`): the other requests that loop read in the
/// same turn join the group, and so do members from other loops that come in the meantime.
/// Off an event loop (tools, tests), or once a group has `maximumMembers`, a member commits at
/// once. A member returns only after the commit, so what it wrote is durable and visible to
/// every reader when its caller goes on; if the commit fails, every member of the group fails.
/// A transaction that SQLite itself rolled back (an I/O error, a full disk), or a member failing
/// with such an error, fails the whole group: nothing is committed that its member was told
/// failed, and nothing is reported written that was not.
///
/// The writer holds SQLite's write lock from a group's first member to its commit (one loop
/// turn): another process writing the same file (`passkeyd admin`) waits that long at most, as
/// it waits for any transaction.
final class WriteGroups: Sendable {
    private struct State {
        /// A member (or a commit) is using the writer connection.
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
        var head = 0
        /// The writer connection is inside the group's transaction.
        var open = false
        /// Members whose work is done, waiting for the group's commit.
        var members: [CheckedContinuation<Void, any Error>] = []
        /// A commit is scheduled on an event loop.
        var commitScheduled = false
        /// The scheduled commit came while the writer was busy: whoever holds it commits next.
        var commitDue = false
    }

    /// Most members in one group: bounds the time a transaction stays open and what one
    /// failure can take down.
    static let maximumMembers = 64

    private enum Next {
        case commitNow
        case schedule(any EventLoop)
        case wait
    }

    private let state = Mutex(State())
    private let writer: SQLiteConnection
    private let writes: WriteCount
    /// Groups committed so far (for tests).
    let commits = Atomic<UInt64>(0)
    /// Called as a holder leaves the writer, just before it decides what comes next (for tests:
    /// it lets another loop's scheduled commit run at that moment). Set before the writes it
    /// is for; nil in the server.
    nonisolated(unsafe) var leaving: (@Sendable () -> Void)?

    init(writer: SQLiteConnection, writes: WriteCount) {
        self.writer = writer
        self.writes = writes
    }

    /// Runs `body` as one member of a group and returns its result once the group has
    /// committed. With `savepoint` (a transaction of several statements) its statements run
    /// inside a savepoint of their own; without, `body` must run one statement (atomic by
    /// itself).
    func member<T: Sendable>(savepoint: Bool, _ body: (SQLiteEngine.InTransaction) async throws -> T) async throws -> T {
        await acquire()
        var prologue: [String] = []
        if !state.withLock({ $0.open }) { prologue.append("BEGIN IMMEDIATE") }
        if savepoint { prologue.append("SAVEPOINT member") }
        let connection = SQLiteEngine.InTransaction(connection: writer, prologue: prologue, epilogue: savepoint ? ["RELEASE member"] : [])
        let result: T
        do {
            result = try await body(connection)
            try connection.finish()
        } catch {
            failed(error, savepoint: savepoint && connection.begun)
            throw SQLiteEngine.storeError(error)
        }
        return try await joined(result)
    }

    /// The member's work is in the transaction: it joins the group and waits for the commit,
    /// or commits now.
    private func joined<T: Sendable>(_ result: T) async throws -> T {
        let loop = MultiThreadedEventLoopGroup.currentEventLoop
        let next = state.withLock { state -> Next in
            state.open = true
            guard let loop, !state.commitDue, state.members.count + 1 < Self.maximumMembers else { return .commitNow }
            if state.commitScheduled { return .wait }
            state.commitScheduled = true
            return .schedule(loop)
        }
        switch next {
        case .commitNow:
            try commit().get()
            return result
        case .schedule(let loop):
            loop.execute { self.scheduledCommit() }
        case .wait: break
        }
        try await withCheckedThrowingContinuation { (member: CheckedContinuation<Void, any Error>) in
            state.withLock { $0.members.append(member) }
            leave()
        }
        return result
    }

    /// A member failed: undoes its work (its savepoint, when it began one; a single statement
    /// SQLite has undone already), or the whole group's when the transaction cannot go on
    /// (SQLite rolled it back, or the error is about the database itself, not this member's
    /// data).
    private func failed(_ error: any Error, savepoint: Bool) {
        let fatal = Self.breaksGroup(error)
        let hadGroup = state.withLock { $0.open }
        var broken: (any Error)?
        do {
            if !writer.isInsideTransaction {
                // Never begun, or SQLite rolled it back (and with it any members before).
                if hadGroup { broken = error }
            } else {
                if fatal {
                    broken = error
                } else if savepoint {
                    try writer.execute("ROLLBACK TO member")
                    try writer.execute("RELEASE member")
                }
                // Nothing of another member's to commit: end the transaction now.
                if broken != nil || !hadGroup { try writer.execute("ROLLBACK") }
            }
        } catch {
            broken = broken ?? error
            try? writer.rollbackIfOpen()
        }
        if let broken {
            let members = state.withLock { state in
                defer { state.members = [] }
                state.open = false
                return state.members
            }
            let error = SQLiteEngine.storeError(broken)
            for member in members { member.resume(throwing: error) }
        } else {
            state.withLock { $0.open = hadGroup }
        }
        leave()
    }

    /// Whether `error` means the transaction itself is in doubt (SQLite failed), rather than
    /// this member's data (a constraint, a row it could not read).
    private static func breaksGroup(_ error: any Error) -> Bool {
        switch error {
        case let error as StoreError: error.code == .unavailable
        default: false
        }
    }

    /// Commits the group (the caller holds the writer), then hands the writer on and tells the
    /// members that wait.
    private func commit() -> Result<Void, StoreError> {
        let result: Result<Void, StoreError>
        do {
            if writer.isInsideTransaction { try writer.execute("COMMIT") }
            result = .success(())
        } catch {
            try? writer.rollbackIfOpen()
            result = .failure(SQLiteEngine.storeError(error))
        }
        commits.add(1, ordering: .relaxed)
        writes.add()
        let (members, next) = state.withLock { state in
            defer { state.members = [] }
            state.open = false
            state.commitScheduled = false
            state.commitDue = false
            return (state.members, Self.nextHolder(&state))
        }
        next?.resume()
        for member in members { member.resume(with: result.mapError { $0 as any Error }) }
        return result
    }

    /// The event loop ran what was queued before the group began: commit, unless a member
    /// holds the writer (then it commits when it is done).
    private func scheduledCommit() {
        let now = state.withLock { state -> Bool in
            guard state.commitScheduled else { return false }
            if state.busy {
                state.commitDue = true
                return false
            }
            state.busy = true
            return true
        }
        if now { _ = commit() }
    }

    private enum Handover {
        case commit
        case handOff(CheckedContinuation<Void, Never>?)
    }

    /// The holder is done with the writer: commits if the group's commit is due, else hands
    /// the writer on. One decision under one lock: a scheduled commit that finds the writer
    /// busy leaves itself to the holder, so if the holder read "not due" and then freed the
    /// writer apart, a commit coming in between would be lost (its members waiting for the
    /// next write, the transaction open). Under the lock, the commit comes either before (the
    /// holder commits) or after (it finds the writer free, or with the next holder).
    private func leave() {
        leaving?()
        let next = state.withLock { state -> Handover in
            if state.commitDue { return .commit }
            return .handOff(Self.nextHolder(&state))
        }
        switch next {
        case .commit: _ = commit()
        case .handOff(let waiter): waiter?.resume()
        }
    }

    private func acquire() async {
        let acquired = state.withLock { state -> Bool in
            if state.busy { return false }
            state.busy = true
            return true
        }
        if acquired { return }
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if !state.busy {
                    state.busy = true
                    return true
                }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Under the lock, as the holder lets go of the writer: the next waiter, to resume once the
    /// lock is released (the writer stays busy, it is theirs), or nil and the writer is free.
    private static func nextHolder(_ state: inout State) -> CheckedContinuation<Void, Never>? {
        guard state.head < state.waiters.count else {
            state.busy = false
            state.waiters.removeAll(keepingCapacity: true)
            state.head = 0
            return nil
        }
        let next = state.waiters[state.head]
        state.head += 1
        return next
    }
}
