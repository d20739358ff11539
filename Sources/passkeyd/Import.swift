import ArgumentParser
import Foundation
import Logging
import PasskeyCore
import PasskeyServer
import PasskeyStore
import WebAuthn

/// `passkeyd import FILE`: loads existing users (username, display name, bcrypt hash) so they
/// can sign in with their password and move to passkeys.
///
/// The file is read twice, streaming, never whole: the first pass checks every row; if any row is
/// wrong (or the file is malformed) nothing is written and every problem is reported with its
/// line, unless `--skip-invalid` says to import the good rows anyway. The second pass inserts in
/// batches of 500 per transaction. Usernames already present are left untouched, so running it
/// again imports nothing twice.
struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import users with bcrypt password hashes from CSV (username,displayName,passwordHash) or JSON Lines.")

    @OptionGroup var options: ServerOptions
    @Argument(help: "The file (.csv or .jsonl), or - for standard input is not supported: it is read twice.") var file: String
    @Option(help: "csv or jsonl (default: from the file name).") var format: String?
    @Flag(help: "Import the valid rows even when others are wrong (they are reported).") var skipInvalid = false
    @Flag(help: "Check the file only; write nothing.") var dryRun = false

    struct Row {
        let line: Int
        let username: String
        let displayName: String
        let hash: String
    }
    struct Problem: Error {
        let line: Int
        let message: String
    }

    func run() async throws {
        let kind = format ?? (file.hasSuffix(".csv") ? "csv" : file.hasSuffix(".jsonl") || file.hasSuffix(".ndjson") ? "jsonl" : "")
        guard kind == "csv" || kind == "jsonl" else { throw ValidationError("say --format csv or --format jsonl") }
        guard FileManager.default.isReadableFile(atPath: file) else { throw ValidationError("cannot read \(file)") }

        // Pass 1: check everything.
        var problems: [Problem] = []
        var seen = Set<String>()
        var valid = 0
        try await Self.rows(of: file, kind: kind) { result in
            switch result {
            case .failure(let problem): problems.append(problem)
            case .success(let row):
                if !seen.insert(Account.key(for: row.username)).inserted {
                    problems.append(Problem(line: row.line, message: "username \(row.username) appears twice in the file"))
                } else {
                    valid += 1
                }
            }
        }
        for problem in problems.prefix(200) { FileHandle.standardError.write(Data("line \(problem.line): \(problem.message)\n".utf8)) }
        if problems.count > 200 { FileHandle.standardError.write(Data("… and \(problems.count - 200) more\n".utf8)) }
        if dryRun {
            print("checked: \(valid) row(s) to import, \(problems.count) with problems; nothing written (--dry-run)")
            throw ExitCode(problems.isEmpty ? 0 : 1)
        }

        if !problems.isEmpty && !skipInvalid {
            print("nothing imported: \(problems.count) row(s) need fixing (or pass --skip-invalid); \(valid) row(s) are fine")
            throw ExitCode(1)
        }
        // Pass 2: insert the good rows.
        let loaded = try options.load()
        let (opened, _) = try await Database.openMigrated(loaded.databaseURL, logger: Logger(label: "passkeyd.import"))
        defer { (opened as? PostgresStore)?.close() }
        // Into the tenant `--tenant` names (the server's own by default).
        let scoped = try await Tenant.store(opened, for: options.tenant)
        defer { scoped.close() }
        let store = scoped.store
        let badLines = Set(problems.map(\.line))
        var batch: [(Account, String)] = []
        var inserted = 0, present = 0
        func flush() async throws {
            guard !batch.isEmpty else { return }
            let results = try await store.importAccounts(batch)
            inserted += results.filter { $0 }.count
            present += results.filter { !$0 }.count
            batch.removeAll(keepingCapacity: true)
        }
        let now = Date()
        var reported = Set<String>()
        try await Self.rows(of: file, kind: kind) { result in
            guard case .success(let row) = result, !badLines.contains(row.line), reported.insert(Account.key(for: row.username)).inserted
            else { return }
            batch.append(
                (
                    Account(
                        username: row.username, displayName: row.displayName, userHandle: RelyingParty.makeUserHandle(),
                        createdAt: now), row.hash
                ))
            if batch.count == 500 { try await flush() }
        }
        try await flush()
        try await store.appendAudit(
            AuditEvent(
                time: now, kind: .importRun, userAgent: "passkeyd import",
                detail: "\(inserted) imported, \(present) already present, \(problems.count) skipped"))
        print("imported \(inserted), already present \(present), skipped \(problems.count)")
        if !problems.isEmpty { throw ExitCode(1) }
    }

    /// Streams the rows of a CSV (with a header naming `username`, `passwordHash` and optionally
    /// `displayName`) or JSON Lines file, each checked.
    static func rows(of path: String, kind: String, _ body: (Result<Row, Problem>) async throws -> Void) async throws {
        guard let reader = LineReader(path: path) else { throw ValidationError("cannot read \(path)") }
        var columns: [String: Int]?
        var number = 0
        while let line = reader.next() {
            number += 1
            if line.trimmingCharacters(in: .whitespaces).isEmpty { continue }
            if kind == "csv" {
                guard let fields = CSV.fields(line) else {
                    try await body(.failure(Problem(line: number, message: "malformed CSV (unbalanced quotes)")))
                    continue
                }
                guard let header = columns else {
                    var map: [String: Int] = [:]
                    for (index, name) in fields.enumerated() { map[name.trimmingCharacters(in: .whitespaces)] = index }
                    guard map["username"] != nil, map["passwordHash"] != nil else {
                        throw ValidationError("line \(number): the header must name username and passwordHash (and may name displayName)")
                    }
                    columns = map
                    continue
                }
                guard fields.count == header.count else {
                    try await body(.failure(Problem(line: number, message: "\(fields.count) fields where the header has \(header.count)")))
                    continue
                }
                try await body(
                    check(
                        line: number, username: fields[header["username"]!], displayName: header["displayName"].map { fields[$0] },
                        hash: fields[header["passwordHash"]!]))
            } else {
                guard let object = try? JSONObject(bytes: Array(line.utf8)),
                    let username = try? object.optionalString("username"), let hash = try? object.optionalString("passwordHash")
                else {
                    try await body(.failure(Problem(line: number, message: "not a JSON object with username and passwordHash strings")))
                    continue
                }
                try await body(check(line: number, username: username, displayName: try? object.optionalString("displayName"), hash: hash))
            }
        }
        if let error = reader.error { throw ValidationError("reading \(path): \(error)") }
    }

    static func check(line: Int, username: String?, displayName: String?, hash: String?) -> Result<Row, Problem> {
        do {
            let name = try PasskeyService.validUsername(username)
            let display = try PasskeyService.validDisplayName(displayName, default: name)
            guard let hash, let bcrypt = Bcrypt(hash) else {
                return .failure(Problem(line: line, message: "\(name): passwordHash is not a bcrypt hash ($2a$/$2b$/$2y$, cost 4-31)"))
            }
            // Each sign-in pays the cost: 2^cost rounds. Past 14 (about 1.5 s a check here) one
            // imported row could tie up the password pool; refuse it rather than serve it.
            guard bcrypt.cost <= Bcrypt.maxImportCost else {
                return .failure(Problem(line: line, message: "\(name): bcrypt cost \(bcrypt.cost) is above \(Bcrypt.maxImportCost)"))
            }
            return .success(Row(line: line, username: name, displayName: display, hash: hash))
        } catch let error as PasskeyServiceError {
            return .failure(Problem(line: line, message: error.message))
        } catch {
            return .failure(Problem(line: line, message: "\(error)"))
        }
    }
}

/// Lines of a file, read in 64 KiB chunks.
final class LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    private var start = 0
    private var finished = false
    private(set) var error: Error?

    init?(path: String) {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        self.handle = handle
    }

    deinit { try? handle.close() }

    func next() -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                var end = newline
                if end > start && buffer[end - 1] == 0x0D { end -= 1 }
                let line = String(decoding: buffer[start..<end], as: UTF8.self)
                start = newline + 1
                return line
            }
            if finished {
                guard start < buffer.count else { return nil }
                let line = String(decoding: buffer[start...], as: UTF8.self)
                start = buffer.count
                return line
            }
            do {
                let chunk = try handle.read(upToCount: 65_536) ?? Data()
                buffer.removeFirst(start)
                start = 0
                if chunk.isEmpty { finished = true } else { buffer.append(contentsOf: chunk) }
            } catch {
                self.error = error
                finished = true
            }
        }
    }
}

/// One CSV record on one line (RFC 4180 quoting; a quoted field cannot span lines).
enum CSV {
    static func fields(_ line: String) -> [String]? {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var iterator = Array(line).makeIterator()
        var atFieldStart = true
        while let character = iterator.next() {
            if quoted {
                if character == "\"" {
                    if let following = iterator.next() {
                        if following == "\"" {
                            field.append("\"")
                        } else if following == "," {
                            quoted = false
                            fields.append(field)
                            field = ""
                            atFieldStart = true
                        } else {
                            return nil
                        }
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
            } else if character == "," {
                fields.append(field)
                field = ""
                atFieldStart = true
            } else if character == "\"" && atFieldStart {
                quoted = true
                atFieldStart = false
            } else {
                field.append(character)
                atFieldStart = false
            }
        }
        if quoted { return nil }
        fields.append(field)
        return fields
    }
}
