import Dispatch
import Foundation
import SalvoRows

/// The record of a send that a second stop request's deadline ends before it returned: the report, built from the
/// last progress snapshot (with what earlier runs of a journaled job settled) and marked `cutShort`, naming the
/// outputs it could not write (the unsettled list above all); the journal synced. What to print, and ending the
/// process, are the caller's (`deadlinePassed` returns them).
///
/// Fed by whoever runs the send (the prepared send, every progress snapshot, the job's return); the reason of the
/// first request is `JobStop`'s. The job's own writing passes the send's `OutputGate`, which the deadline closes
/// first: no file of the job's lands after the record, and a job whose record was already whole (or that returned)
/// is left to end by itself.
///
/// `@unchecked Sendable`: every field is guarded by `lock`.
public final class CutShortRecord: @unchecked Sendable {
    /// What the deadline did.
    public enum Ending: Sendable {
        /// The job returned first: its own record is written, and the process ends as it does.
        case jobReturned
        /// The job's record was whole when the gate closed: the job returns in a moment with it.
        case jobRecordWhole
        /// The send was never prepared: nothing to write. `message` says so.
        case notStarted(message: String)
        /// The record is written. From here on the record holds its lock, so that a job returning meanwhile (its
        /// `jobReturned`, its progress) waits for the process to end instead of writing its summary after this one:
        /// the caller prints the report's summary and `errors`, clears `outputs`' leftovers once more (a file the job
        /// began meanwhile) and ends the process, 128 + the first signal.
        case written(report: JobReport, errors: [String], outputs: SendOutputs)
    }

    private let stop: JobStop
    private let lock = NSLock()
    private var send: BulkSend?
    private var earlier = EarlierRuns()
    private var latest: JobProgress?
    private var returned = false

    /// How long the deadline waits for a rename of the job's in progress, and for the journal's queue.
    public static let commitWait: Duration = .milliseconds(300)

    /// - Parameter stop: the job's stop; its first request's reason (`interrupted by SIGINT`) heads the record's
    ///   `stopped`.
    public init(stop: JobStop) {
        self.stop = stop
    }

    /// The send is prepared: its request, input and journal are known. What earlier runs settled is read now, before
    /// this run marks anything.
    public func begin(_ send: BulkSend) {
        let earlier = EarlierRuns(before: send)
        self.lock.withLock {
            self.send = send
            self.earlier = earlier
        }
    }

    /// Whether the send is prepared (before, the process only waits: for the journal, the input's first chunk).
    public var hasBegun: Bool { self.lock.withLock { self.send != nil } }

    /// A progress snapshot (about twice a second).
    public func progress(_ snapshot: JobProgress) {
        self.lock.withLock { self.latest = snapshot }
    }

    /// The job returned: its own record is written, the deadline has nothing to do.
    public func jobReturned() {
        self.lock.withLock { self.returned = true }
    }

    /// Writes the record, unless the job returned or wrote its whole record first. `second` names the request that
    /// armed the deadline (`SIGTERM`), `deadline` how long after it the job had to return.
    public func deadlinePassed(second name: String, after deadline: Duration) -> Ending {
        self.lock.lock()
        guard !self.returned else {
            self.lock.unlock()
            return .jobReturned
        }
        guard let send = self.send else {
            self.lock.unlock()
            return .notStarted(message: "\(name): the job had not started; no report written")
        }
        let closing = send.outputGate.close(within: Self.commitWait)
        guard closing != .completed else {
            self.lock.unlock()
            return .jobRecordWhole
        }
        if let journal = send.journal { Self.sync(journal, within: Self.commitWait) }
        var report = send.cutShortReport(latest: self.latest, earlier: self.earlier)
        report.stopped = "\(self.stop.reason ?? "interrupted"), then \(name): stopped at once"
        let at = self.latest.map { "\(Self.seconds(.milliseconds(Int($0.seconds * 1000)))) s into the job" }
        let estimated = send.summary.isFinal ? "" : "; the valid rows are estimated from the part of the input read"
        let busy =
            closing == .busy
            ? "; a file the job was renaming into place did not finish within "
                + "\(Self.seconds(Self.commitWait)) s and may be its own" : ""
        report.cutShort =
            "the job had not returned \(Self.seconds(deadline)) s after the second signal: the counts are the "
            + "last progress snapshot's (\(at ?? "none taken")), rows then in flight are counted not settled, and "
            + "the unsettled list is incomplete\(estimated)\(busy)"
        send.request.outputs.clearLeftovers()
        if let path = send.request.outputs.report {
            do throws(JobError) {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                let writer = try AtomicFileWriter(path: path)
                try writer.write((try? encoder.encode(report)) ?? Data())
                try writer.commit()
            } catch {
                report.outputFailures =
                    (report.outputFailures ?? []) + [
                        OutputFailure(output: "report", path: path, error: error.message)
                    ]
            }
        }
        let errors =
            (report.outputFailures ?? []).map(\.summary) + [
                "\(name): the job did not stop within \(Self.seconds(deadline)) s; ended with the record of its last "
                    + "progress" + (send.request.outputs.report.map { " (in \($0))" } ?? "")
            ]
        // The lock stays held: see `Ending.written`.
        return .written(report: report, errors: errors, outputs: send.request.outputs)
    }

    /// Syncs the journal's marks, waiting at most `limit` (a sync of the job's may hold the journal's queue). The
    /// periodic sync is the job's to stop: this only syncs once more.
    private static func sync(_ journal: JobJournal, within limit: Duration) {
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            journal.syncNow()
            done.signal()
        }
        let (seconds, attoseconds) = limit.components
        _ = done.wait(timeout: .now() + .nanoseconds(Int(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
    }

    /// `duration` in seconds as messages write it (`1.0`, `0.3`).
    static func seconds(_ duration: Duration) -> String {
        String(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}
