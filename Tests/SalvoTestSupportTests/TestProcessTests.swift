import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The harness the tests start child processes with, and the wait they poll conditions with: what they promise the
/// tests that rely on them.
@Suite(.tags(.process), .runs(.process)) struct TestProcessTests {
    @Test func aRunToItsEndGivesItsStatusAndEachStream() async throws {
        let run = try TestProcess("/bin/sh", ["-c", "echo out; echo err >&2; exit 3"], input: .nothing, output: .apart)
        #expect(try await run.wait(seconds: 30) == 3)
        #expect(run.reason == .exit)
        #expect(run.standardOutput == "out\n")
        #expect(run.standardError == "err\n")
        #expect(run.output == "out\nerr\n")
        let (status, together) = try await TestProcess.run(
            "/bin/sh",
            ["-c", "echo out; echo err >&2"],
            input: .nothing
        )
        #expect(status == 0)
        #expect(together == "out\nerr\n")
    }

    @Test func aWaitPastItsBoundKillsTheChildAndThrows() async throws {
        let run = try TestProcess("/bin/sh", ["-c", "echo started; exec sleep 60"], input: .nothing)
        let clock = ContinuousClock()
        let start = clock.now
        let error = await #expect(throws: TestProcess.Overrun.self) { try await run.wait(seconds: 0.5) }
        #expect(clock.now - start < .seconds(30), "the bound, and then the kill, not the child's 60 s")
        #expect(!run.isRunning)
        #expect(run.reason == .uncaughtSignal)
        #expect(error?.description.contains("did not end within 0.5 s") == true, "\(error?.description ?? "")")
        #expect(error?.description.contains("started") == true, "what it printed: \(error?.description ?? "")")
    }

    @Test func aPipedInputLargerThanThePipeReachesTheChildWholeAndAPipedOutputIsReadWhole() async throws {
        // 1 MiB: far more than a pipe holds, both ways.
        let input = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251) })
        let run = try TestProcess("/bin/cat", [], input: .pipe(input), output: .pipe)
        #expect(try await run.wait(seconds: 60) == 0)
        #expect(run.outputBytes == Array(input))
    }

    @Test func aChildThatStopsReadingItsPipeEndsTheFeedNotTheTests() async throws {
        let input = Data(repeating: 0x61, count: 1 << 20)
        let run = try TestProcess("/bin/sh", ["-c", "head -c 10 >/dev/null; exit 4"], input: .pipe(input))
        #expect(try await run.wait(seconds: 60) == 4)
    }

    @Test func aSignalReachesTheChild() async throws {
        let run = try TestProcess(
            "/bin/sh",
            ["-c", "trap 'exit 7' TERM; echo ready; while :; do sleep 0.05; done"],
            input: .nothing
        )
        try await eventually("the trap set", timeout: .seconds(30)) { run.output.contains("ready") }
        run.signal(SIGTERM)
        #expect(try await run.wait(seconds: 30) == 7)
    }

    @Test func eventuallyReturnsTrueOnceTheConditionHolds() async throws {
        let clock = ContinuousClock()
        let ready = clock.now + .milliseconds(100)
        #expect(try await eventually("the moment passes", timeout: .seconds(30)) { clock.now >= ready })
    }

    @Test func eventuallyRecordsWhatDidNotComeWhenItsBoundPasses() async throws {
        var held = true
        try await withKnownIssue {
            held = try await eventually("a condition that never holds", timeout: .milliseconds(100)) { false }
        } matching: { issue in
            issue.comments.contains { $0.rawValue.contains("a condition that never holds") }
        }
        #expect(!held)
    }
}
