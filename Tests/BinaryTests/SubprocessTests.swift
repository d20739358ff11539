import Foundation
import Testing
import WebAuthnTesting

/// The child-process runner every binary test goes through: its timeout is what turns a hang
/// into a failure, so it is tested on its own.
@Suite("Subprocess: output, exit status and timeout")
struct SubprocessTests {
    @Test func aChildRunsToCompletionWithItsOutputAndStatus() throws {
        let result = try Subprocess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "cat; echo oops >&2; exit 3"], stdin: Array("piped".utf8), timeout: .seconds(60))
        #expect(result.status == 3 && result.stdout == "piped" && result.stderr == "oops\n" && !result.timedOut)
    }

    @Test func aChildStillRunningAfterItsTimeoutIsKilledAndSaysSo() throws {
        let result = try Subprocess.run(
            URL(fileURLWithPath: "/bin/sh"), ["-c", "echo started; exec sleep 600"], timeout: .seconds(3))
        #expect(result.timedOut)
        #expect(result.status == SIGKILL)
        #expect(result.stdout == "started\n")
    }
}
