import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real SMTP server for tests: `scripts/smtp_server.py` (aiosmtpd) on 127.0.0.1, with STARTTLS
/// and implicit TLS under a throwaway CA, started as a process. What it accepts is read back as
/// ``Received`` values. `options` are the script's (`--auth user:pass`, `--stall-data`, …).
public final class SMTPTestServer: @unchecked Sendable {  // the process is only started and stopped
    public private(set) var process: SpawnedProcess
    public let smtpPort: Int
    public let smtpsPort: Int
    /// The throwaway CA that issued the server's certificate (PEM).
    public let caPEM: [UInt8]
    public let output: URL
    public let options: [String]

    /// One accepted message.
    public struct Received: Sendable {
        public let mailFrom: String
        public let recipients: [String]
        /// The message as the server got it (after dot-unstuffing).
        public let data: [UInt8]
        public let tls: Bool
        public let authUser: String?
        public let mailOptions: [String]
        public var text: String { String(decoding: data, as: UTF8.self) }
        /// The `text/plain` part, decoded from quoted-printable, its line breaks LF.
        public var plainText: String {
            let parts = text.components(
                separatedBy: "Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
            guard parts.count > 1 else { return "" }
            return SMTPTestServer.decodeQuotedPrintable(parts[1].components(separatedBy: "\r\n--=_passkeyd_")[0])
                .replacingOccurrences(of: "\r\n", with: "\n")
        }
    }

    /// Quoted-printable (RFC 2045 §6.7) decoded: soft line breaks joined, `=XX` bytes read.
    public static func decodeQuotedPrintable(_ text: String) -> String {
        var bytes: [UInt8] = []
        let input = Array(text.replacingOccurrences(of: "=\r\n", with: "").utf8)
        var index = 0
        while index < input.count {
            if input[index] == 0x3D, index + 2 < input.count,
                let value = UInt8(String(decoding: input[(index + 1)...(index + 2)], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                index += 3
            } else {
                bytes.append(input[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The Python of `PASSKEYD_PYTHON`, else the package's `.venv`.
    public static var python: String? {
        ProcessInfo.processInfo.environment["PASSKEYD_PYTHON"]
            ?? {
                let venv = root.appendingPathComponent(".venv/bin/python").path
                return FileManager.default.isExecutableFile(atPath: venv) ? venv : nil
            }()
    }

    static var root: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// A Python with aiosmtpd is here (`./scripts/test` installs it).
    public static var available: Bool {
        guard let python, let check = try? SpawnedProcess(executable: python, arguments: ["-c", "import aiosmtpd, cryptography"]) else {
            return false
        }
        return check.waitUntilExit() == 0
    }

    /// Starts a server (nil when no Python here has aiosmtpd: see ``available``).
    public static func start(_ options: [String] = []) throws -> SMTPTestServer? {
        guard available, let python else { return nil }
        return try SMTPTestServer(python: python, options: options, output: nil, ports: nil)
    }

    private init(python: String, options: [String], output existing: URL?, ports: (Int, Int)?) throws {
        self.options = options
        output = existing ?? FileManager.default.temporaryDirectory.appendingPathComponent("smtp-\(UUID().uuidString).jsonl")
        if existing == nil { _ = FileManager.default.createFile(atPath: output.path, contents: nil) }
        var arguments = [Self.root.appendingPathComponent("scripts/smtp_server.py").path, output.path] + options
        if let ports { arguments += ["--smtp-port", "\(ports.0)", "--smtps-port", "\(ports.1)"] }
        let portFile = URL(fileURLWithPath: output.path + ".port")
        try? FileManager.default.removeItem(at: portFile)
        process = try SpawnedProcess(executable: python, arguments: arguments, stderr: 2)
        // It writes its ports once both listeners are up (bounded: 30 s, a Python start beside
        // the whole parallel run).
        let deadline = ContinuousClock.now + .seconds(30)
        var listening: [String: Any]?
        while listening == nil && process.isRunning && ContinuousClock.now < deadline {
            if let data = try? Data(contentsOf: portFile) {
                listening = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            }
            if listening == nil { usleep(50_000) }
        }
        guard let listening, let smtp = listening["smtp"] as? Int, let smtps = listening["smtps"] as? Int,
            let ca = listening["ca"] as? String, let pem = FileManager.default.contents(atPath: ca)
        else {
            process.signal(SIGKILL)
            process.waitUntilExit()
            throw POSIXError(.ETIMEDOUT)
        }
        smtpPort = smtp
        smtpsPort = smtps
        caPEM = Array(pem)
    }

    /// Stops the server (as a crash would: at once).
    public func stop() {
        process.signal(SIGKILL)
        process.waitUntilExit()
    }

    /// Starts it again on the same ports with the same options (and a new CA: the client's
    /// trust must be the new ``caPEM``: so tests that restart use plain loopback SMTP).
    public func restarted() throws -> SMTPTestServer {
        guard let python = Self.python else { throw POSIXError(.ENOENT) }
        return try SMTPTestServer(python: python, options: options, output: output, ports: (smtpPort, smtpsPort))
    }

    /// Stops it and deletes its files.
    public func close() {
        stop()
        for suffix in ["", ".port", ".ca.pem"] { try? FileManager.default.removeItem(atPath: output.path + suffix) }
    }

    /// What it has accepted so far.
    public func received() -> [Received] {
        ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let data = (object["data_b64"] as? String).flatMap({ Data(base64Encoded: $0) })
            else { return nil }
            return Received(
                mailFrom: object["mail_from"] as? String ?? "", recipients: object["rcpt_tos"] as? [String] ?? [], data: Array(data),
                tls: object["tls"] as? Bool ?? false, authUser: object["auth_user"] as? String,
                mailOptions: object["mail_options"] as? [String] ?? [])
        }
    }

    /// What it has accepted once `done` holds of it (polled for at most `seconds`).
    public func waitFor(seconds: Int = 20, _ done: ([Received]) -> Bool) async throws -> [Received] {
        for _ in 0..<(seconds * 10) {
            let received = received()
            if done(received) { return received }
            try await Task.sleep(for: .milliseconds(100))
        }
        return received()
    }
}
