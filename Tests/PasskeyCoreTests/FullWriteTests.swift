import Foundation
import Testing

@testable import PasskeyCore

/// The JSON log handler writes each line with ``FullWrite``: the whole line arrives whatever
/// `write(2)` does on the way, and an error stops it without a crash.
@Suite("FullWrite")
struct FullWriteTests {
    /// A `write(2)` that follows a script: each step takes at most so many bytes, or fails with
    /// an `errno`; once the script is done it takes everything.
    final class ScriptedWrite {
        enum Step {
            case take(Int)
            case fail(Int32)
        }
        var steps: [Step]
        var received: [UInt8] = []
        var calls = 0

        init(_ steps: [Step]) { self.steps = steps }

        func write(_ bytes: UnsafeRawBufferPointer) -> WriteOutcome {
            calls += 1
            let step = steps.isEmpty ? .take(bytes.count) : steps.removeFirst()
            switch step {
            case .take(let limit):
                let count = min(limit, bytes.count)
                received += bytes.prefix(count)
                return .wrote(count)
            case .fail(let error):
                return .failed(error)
            }
        }
    }

    static let line = Array(#"{"time":"2026-11-27T04:00:00.000","level":"info","message":"a line of some length"}"#.utf8) + [0x0A]

    @Test(arguments: [
        [],
        [ScriptedWrite.Step.fail(EINTR)],
        [.take(1)],
        [.take(10), .take(0x7FFF)],
        [.fail(EINTR), .take(7), .fail(EINTR), .fail(EINTR), .take(3), .take(1)],
        Array(repeating: ScriptedWrite.Step.take(1), count: 200),
    ])
    func theWholeLineArrivesAfterShortWritesAndInterruptions(_ steps: [ScriptedWrite.Step]) {
        let writer = ScriptedWrite(steps)
        let error = Self.line.withUnsafeBytes { FullWrite.all($0, with: writer.write) }
        #expect(error == nil)
        #expect(writer.received == Self.line)
    }

    @Test func oneCallWritesALineInTheCommonCase() {
        let writer = ScriptedWrite([])
        #expect(Self.line.withUnsafeBytes { FullWrite.all($0, with: writer.write) } == nil)
        #expect(writer.calls == 1)
    }

    @Test(arguments: [EPIPE, EBADF, EAGAIN, ENOSPC])
    func anotherErrorStopsTheLine(_ failure: Int32) {
        let writer = ScriptedWrite([.take(5), .fail(EINTR), .fail(failure), .take(1000)])
        #expect(Self.line.withUnsafeBytes { FullWrite.all($0, with: writer.write) } == failure)
        #expect(writer.received == Array(Self.line.prefix(5)))
        #expect(writer.calls == 3)
    }

    @Test func aCallThatWritesNothingStopsInsteadOfSpinning() {
        let writer = ScriptedWrite([.take(4), .take(0), .take(1000)])
        #expect(Self.line.withUnsafeBytes { FullWrite.all($0, with: writer.write) } == EIO)
        #expect(writer.calls == 2)
    }

    /// Through a real pipe, with a reader draining it: a line far larger than the pipe's buffer
    /// (64 KiB on Linux) takes several `write(2)` calls and arrives whole.
    @Test func aLineLargerThanAPipeArrivesWhole() async throws {
        var descriptors: [Int32] = [0, 0]
        try #require(pipe(&descriptors) == 0)
        let (readEnd, writeEnd) = (descriptors[0], descriptors[1])
        let line = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
        let reader = Task.detached { () -> [UInt8] in
            var received: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                received += chunk.prefix(count)
            }
            close(readEnd)
            return received
        }
        let error = line.withUnsafeBytes { FullWrite.all($0, to: writeEnd) }
        close(writeEnd)
        #expect(error == nil)
        #expect(await reader.value == line)
    }
}
