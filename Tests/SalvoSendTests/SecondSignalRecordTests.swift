import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSend

#if canImport(Glibc)
import Glibc
#endif

/// The record a second signal's deadline writes without the job: the job's own writing passes the send's
/// `OutputGate`, closed first, so nothing of the job's lands after the record; the record counts what earlier runs
/// of a journaled job settled; it clears every temporary file the job left, the suppression file's included.
@Suite(.tags(.process), .runs(.process)) struct SecondSignalRecordTests {
    /// A pass in progress ends before `close` returns, and every pass after it is refused without running.
    @Test func closingWaitsForAPassInProgressThenRefusesEveryLaterOne() async throws {
        let gate = OutputGate()
        // The pass runs on a thread of its own, held inside until released; the test awaits, holding no thread.
        let inside = SharedFlag()
        let release = DispatchSemaphore(value: 0)
        let finished = SharedFlag()
        let passer = Thread {
            _ = try? gate.pass {
                inside.set()
                release.wait()
                finished.set()
            }
        }
        passer.start()
        try await eventually("the pass began", timeout: .seconds(30)) { inside.value }
        let closed = SharedFlag()
        let closer = Thread {
            #expect(gate.close(within: .seconds(60)) == .closed)
            #expect(finished.value, "the pass in progress ended before close returned")
            closed.set()
        }
        closer.start()
        release.signal()
        #expect(try await eventually("close returns", timeout: .seconds(30)) { closed.value })
        var ran = false
        #expect(try gate.pass { ran = true } == false)
        #expect(!ran, "a refused pass does not run")
        #expect(throws: JobError.self) { try gate.passOrThrow("x") {} }
    }

    /// A pass that does not end within the limit: `close` says so (`.busy`) rather than wait without a bound, and
    /// later passes are refused all the same.
    @Test func closingDoesNotWaitPastItsLimit() async throws {
        let gate = OutputGate()
        let inside = SharedFlag()
        let release = DispatchSemaphore(value: 0)
        let done = SharedFlag()
        Thread {
            _ = try? gate.pass {
                inside.set()
                release.wait()
            }
            done.set()
        }.start()
        try await eventually("the pass began", timeout: .seconds(30)) { inside.value }
        // `close` itself waits (its limit, 100 ms) on this thread: that wait is what is tested, and it is short.
        #expect(gate.close(within: .milliseconds(100)) == .busy)
        release.signal()
        try await eventually("the pass ended", timeout: .seconds(30)) { done.value }
        #expect(try gate.pass {} == false)
    }

    /// A record the job completed is left as it is: `close` does nothing, and the gate stays open.
    @Test func aCompletedRecordIsLeftAsItIs() throws {
        let gate = OutputGate()
        #expect(try gate.pass(completing: true) {})
        #expect(gate.close(within: .seconds(1)) == .completed)
        #expect(try gate.pass {})
    }

    /// With the gate closed, the job's outputs are not written and nothing is left beside them; the file already at
    /// the report's path (the record's) is not removed.
    @Test func aClosedGateKeepsTheJobsFilesOffThePaths() throws {
        let folder = try Self.folder("salvo-gate-files")
        let outputs = SendOutputs(
            report: folder + "/report.json",
            rejects: folder + "/rejects.csv",
            unregistered: folder + "/unregistered.csv",
            unsettled: folder + "/report.unsettled.csv"
        )
        try Data("the record\n".utf8).write(to: URL(fileURLWithPath: outputs.report!))
        var result = SendResult(
            report: JobReport(),
            inputRejects: [],
            rejectedRows: [
                RejectedRow(
                    file: "t.csv",
                    line: 2,
                    token: String(repeating: "ab", count: 32),
                    status: 410,
                    reason: "Unregistered"
                )
            ],
            unregistered: [UnregisteredToken(line: 2, token: String(repeating: "ab", count: 32), timestamp: nil)],
            stopped: nil,
            notSent: 0,
            connectionErrors: [],
            unsettledRows: [
                UnsettledRow(token: String(repeating: "cd", count: 32), file: "t.csv", line: 3, outcome: .unsent)
            ]
        )
        let gate = OutputGate()
        #expect(gate.close(within: .seconds(1)) == .closed)
        OutputFiles.write(&result, to: outputs, gate: gate)
        #expect(Set(result.outputFailures.map(\.output)) == ["rejects", "unsettled", "unregistered", "report"])
        #expect(result.outputFailures.allSatisfy { $0.error.contains("cut short") }, "\(result.outputFailures)")
        let left = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(left == ["report.json"], "only the record: \(left)")
        #expect(try String(contentsOfFile: outputs.report!, encoding: .utf8) == "the record\n")
    }

    /// The journal is not recorded finished through a closed gate: the next run resumes the job.
    @Test func aClosedGateKeepsTheJobUnfinished() async throws {
        let (input, directory) = try Self.journaledInput("salvo-gate-finish", rows: 3)
        let send = try await BulkSend.prepare(try JournalManifestTests.journaledRequest(input, directory: directory))
        let journal = try #require(send.journal)
        #expect(send.outputGate.close(within: .seconds(1)) == .closed)
        let recorded = try journal.finish(
            JournalManifest.Finish(exitStatus: 0, report: JobReport()),
            through: send.outputGate
        )
        #expect(!recorded)
        #expect(try JobJournal.loadManifest(directory)?.finish == nil)
    }

    /// A resumed job cut short: the rows earlier runs settled are in the report's fields (by reason for the refused
    /// ones), not in `notSent`, and every valid row is in exactly one field, whether the input's summary was known
    /// before the run or its rows are checked as they are read.
    @Test(arguments: [false, true]) func theRecordOfAResumedJobCountsWhatEarlierRunsSettled(
        streaming: Bool
    ) async throws {
        let rows = 10
        let (input, directory) = try Self.journaledInput("salvo-cut-resumed", rows: rows)
        var request = try JournalManifestTests.journaledRequest(input, directory: directory)
        let folder = (directory as NSString).deletingLastPathComponent
        request.outputs = SendOutputs(report: folder + "/report.json", rejects: folder + "/rejects.csv")
        // Rows an earlier run left written are reported, not sent again: they are this record's to count.
        if case .binary(var configuration) = request.interface {
            configuration.onUncertain = .report
            request.interface = .binary(configuration)
        }
        do {
            let first = try await BulkSend.prepare(request)
            let journal = try #require(first.journal?.rows)
            // Lines 2-11 hold the rows (a header first).
            journal.mark(file: 0, line: 2, .confirmed)
            journal.mark(file: 0, line: 3, .presumed)
            journal.reject(
                file: 0,
                line: 4,
                status: 8,
                reason: "InvalidToken",
                token: String(repeating: "00", count: 32)
            )
            journal.mark(file: 0, line: 5, .rejected)
            journal.mark(file: 0, line: 6, .expired)
            journal.mark(file: 0, line: 7, .written)
            journal.sync()
        }
        try await Self.waitForRelease(directory)
        if streaming { request.firstChunkRows = 2 }
        let send = try await BulkSend.prepare(request)
        #expect(send.summary.isFinal == !streaming)
        let earlier = EarlierRuns(before: send)
        #expect(earlier.run == 2)
        #expect(earlier.confirmed == 1 && earlier.presumed == 1 && earlier.expired == 1 && earlier.written == 1)
        #expect(earlier.rejected == ["InvalidToken": 1, JournalResume.unrecordedReason: 1])
        // This run had delivered two rows and refused one when the snapshot was taken; its valid rows are the rows
        // it sends (a known summary) or the whole input's estimate (rows checked as they are read).
        var snapshot = JobProgress(validRows: streaming ? rows : rows - 5 - 1, seconds: 1.5)
        snapshot.report.confirmed = 2
        snapshot.report.rejected["BadDeviceToken"] = 1
        let report = send.cutShortReport(latest: snapshot, earlier: earlier)
        #expect(report.validRows == rows)
        #expect(report.confirmed == 3 && report.presumed == 1 && report.expired == 1)
        #expect(report.rejected == ["InvalidToken": 1, JournalResume.unrecordedReason: 1, "BadDeviceToken": 1])
        #expect(report.uncertain == 1, "the row an earlier run left written (reported, not resent)")
        #expect(report.notSent == rows - 3 - 1 - 1 - 3 - 1)
        let accounted = report.delivered + report.rejectedTotal + report.expired + report.uncertain + report.notSent
        #expect(accounted == report.validRows, "every valid row in exactly one field: \(report)")
        #expect(report.resumed?.run == 2 && report.resumed?.settledBefore == 5)
        #expect(report.outputFailures?.first { $0.output == "rejects" }?.rowsMissing == 3)
    }

    /// The record clears every temporary file this process left beside an output (the suppression file's
    /// included) and the rows' outputs, and keeps the suppression file and the report's path.
    @Test func clearingLeavesNoTemporaryFileOfThisProcess() throws {
        let folder = try Self.folder("salvo-cut-clear")
        let pid = getpid()
        let names = [
            "unregistered.csv", "unregistered.csv.salvo-\(pid)-77.tmp", "report.json", "report.json.salvo-\(pid)-1.tmp",
            "rejects.csv", "rejects.csv.salvo-\(pid)-9.tmp", "report.unsettled.csv",
            "report.unsettled.csv.untaken-\(pid)",
            "report.unsettled.csv.untaken-\(pid).salvo-\(pid)-5.tmp", "unregistered.csv.salvo-\(pid + 1)-3.tmp",
        ]
        for name in names { try Data("x".utf8).write(to: URL(fileURLWithPath: folder + "/" + name)) }
        SendOutputs(
            report: folder + "/report.json",
            rejects: folder + "/rejects.csv",
            unregistered: folder + "/unregistered.csv",
            unsettled: folder + "/report.unsettled.csv"
        ).clearLeftovers(of: pid)
        let left = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(left == ["report.json", "unregistered.csv", "unregistered.csv.salvo-\(pid + 1)-3.tmp"], "\(left)")
    }

    /// A run after one whose `--unregistered` file could not be written writes the tokens the journal holds as
    /// refused for being unregistered (410) or invalid, and no other.
    @Test func aRerunWritesTheUnregisteredTokensOfEarlierRuns() async throws {
        let (input, directory) = try Self.journaledInput("salvo-rerun-unregistered", rows: 4)
        let tokens = try String(contentsOfFile: input, encoding: .utf8).split(separator: "\n").dropFirst().map(
            String.init
        )
        do {
            let first = try await BulkSend.prepare(
                try JournalManifestTests.journaledRequest(input, directory: directory)
            )
            let journal = try #require(first.journal?.rows)
            journal.reject(file: 0, line: 2, status: 410, reason: "Unregistered", token: tokens[0])
            journal.reject(file: 0, line: 3, status: 400, reason: "BadDeviceToken", token: tokens[1])
            journal.reject(file: 0, line: 4, status: 400, reason: "TopicDisallowed", token: tokens[2])
            journal.mark(file: 0, line: 5, .confirmed)
            journal.sync()
        }
        try await Self.waitForRelease(directory)
        var request = try JournalManifestTests.journaledRequest(input, directory: directory)
        let suppression = (directory as NSString).deletingLastPathComponent + "/unregistered.csv"
        request.outputs = SendOutputs(unregistered: suppression)
        let result = try await BulkSend.prepare(request).run()
        #expect(result.outputFailures.isEmpty, "\(result.outputFailures)")
        #expect(Set(result.unregistered.map(\.token)) == [tokens[0], tokens[1]])
        let list = try SuppressionList.loadIfPresent(path: suppression)
        for token in tokens {
            let listed = list.entries[try DeviceToken(hex: token)] != nil
            #expect(listed == (token == tokens[0] || token == tokens[1]), "\(token)")
        }
        #expect(try JobJournal.loadManifest(directory)?.finish != nil, "the job is finished now")
    }

    /// The record's sync (`syncNow`, from a thread not the job's) writes the marks and the checkpoint at once while
    /// the job's periodic sync goes on, and leaves that sync to the job: started and stopped from other threads
    /// meanwhile, the timer is touched on the journal's queue only.
    @Test func theRecordsSyncLeavesThePeriodicSyncToTheJob() async throws {
        let manifest = JournalManifest(
            inputs: [JournalManifest.Input(path: "t.csv", bytes: 10, sha256: String(repeating: "a", count: 64))],
            settings: [:],
            lineCounts: [5]
        )
        let directory = try Self.folder("salvo-sync-now") + "/journal"
        let journal = try JobJournal.start(directory, manifest: manifest)
        let point = InputCheckpoint(file: 0, offset: 40, line: 3, rows: 2, validRows: 2, passesUncertain: false)
        journal.startSyncing(checkpoint: { point })
        // Well before the first periodic sync (200 ms): only `syncNow` can have written it.
        let synced = SharedFlag()
        Thread {
            journal.syncNow()
            synced.set()
        }.start()
        try await eventually("syncNow returned", timeout: .seconds(30)) { synced.value }
        #expect(JobJournal.loadCheckpoint(directory, manifest: manifest) == point)
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            switch index % 3 {
            case 0: journal.syncNow()
            case 1: journal.stopSyncing()
            default: journal.startSyncing(checkpoint: { point })
            }
        }
        journal.stopSyncing()
        #expect(JobJournal.loadCheckpoint(directory, manifest: manifest) == point)
    }

    // MARK: - Helpers

    static func folder(_ prefix: String) throws -> String {
        let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }

    /// A token file of `rows` distinct tokens (a header, then lines 2…) and a journal folder beside it.
    static func journaledInput(_ prefix: String, rows: Int) throws -> (input: String, directory: String) {
        let folder = try Self.folder(prefix)
        var generator = TokenGenerator(seed: 71)
        let text = "token\n" + (0..<rows).map { _ in generator.next().hexString + "\n" }.joined()
        let input = folder + "/tokens.csv"
        try Data(text.utf8).write(to: URL(fileURLWithPath: input))
        return (input, folder + "/journal")
    }

    /// Waits (bounded) for a dropped send's lock and hashes, so that the journal is the next run's.
    static func waitForRelease(_ directory: String) async throws {
        try await eventually("the first run's hashes recorded and its lock released", timeout: .seconds(30)) {
            try JobJournal.loadManifest(directory)?.inputs.contains(where: { !$0.isFingerprinted }) == false
                && JournalLock.holder(directory) == nil
        }
        #expect(JournalLock.holder(directory) == nil, "the first run's lock is released")
    }
}

/// A flag set on one thread and read on another.
private final class SharedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() { self.lock.withLock { self.flag = true } }
    var value: Bool { self.lock.withLock { self.flag } }
}
