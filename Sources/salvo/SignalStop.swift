import Dispatch
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoRows
import SalvoSend

#if canImport(Glibc)
import Glibc
#endif

/// SIGINT and SIGTERM during a send, as `DispatchSource` signal sources: the first asks the job to stop (it stops
/// taking rows and gives the rows in flight a short time to settle), the second stops it at once; either way the
/// summary, the report and the files are still written, and the process exits 128 + the signal (130, 143).
///
/// The second signal also arms a deadline (`secondSignalDeadline`): a job that has not returned by then (a connection
/// stuck where the engine cannot see it, the unsettled file still being read out of a large input) is not waited
/// for: `CutShortRecord` writes what can be written and the process exits 128 + the signal.
///
/// For a job that cannot be stopped in order (`stop` nil), a signal ends the process at once, as the default
/// action would.
///
/// `@unchecked Sendable`: `received` and `armed` are confined to `queue`.
final class SignalStop: @unchecked Sendable {
    /// How long after the second signal the job may take to return before the process ends without it.
    static let secondSignalDeadline: Duration = .seconds(1)

    private let queue = DispatchQueue(label: "salvo.signals")
    private var sources: [DispatchSourceSignal] = []
    private var received: Int32?
    private var armed = false

    /// With `endsBeforeStart`, a signal before the job has started (work before it that does not watch for a stop:
    /// a query's rows or standard input being read) ends the process at once, 128 + the signal, nothing sent.
    init(stop: JobStop?, record: CutShortRecord? = nil, endsBeforeStart: Bool = false) {
        let registered = DispatchSemaphore(value: 0)
        for number in [SIGINT, SIGTERM] {
            // The default action would end the process before the record is written.
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: self.queue)
            source.setEventHandler { [weak self] in
                self?.handle(number, stop: stop, record: record, endsBeforeStart: endsBeforeStart)
            }
            source.setRegistrationHandler { registered.signal() }
            source.resume()
            self.sources.append(source)
        }
        // A source is registered with the kernel on Dispatch's own thread, after `resume` returns: until then the
        // signal is ignored, and one sent then was lost (a CI run's SIGINT, sent as standard input began to be read,
        // went unheard). Waiting here for both, bounded, leaves no such gap once the watch is made.
        for _ in self.sources { _ = registered.wait(timeout: .now() + .seconds(2)) }
    }

    private func handle(_ number: Int32, stop: JobStop?, record: CutShortRecord?, endsBeforeStart: Bool) {
        let name = Self.name(number)
        guard let stop else { exit(128 + number) }
        let first = self.received == nil
        if first { self.received = number }
        let message: String
        if !first {
            message = "\n\(name): stopping now\n"
        } else if record?.hasBegun == false {
            // Nothing sent yet (waiting for the journal, reading the input's first chunk): a wait ends at once.
            message = "\n\(name): stopping (nothing sent yet)\n"
        } else {
            message =
                "\n\(name): stopping; rows in flight have \(Self.seconds(stop.grace)) s to settle (again to stop now)\n"
        }
        FileHandle.standardError.write(Data(message.utf8))
        if endsBeforeStart {
            stop.request(reason: "interrupted by \(name)") {
                FileHandle.standardError.write(Data("\(name): stopped before the job began: nothing was sent\n".utf8))
                exit(128 + number)
            }
        } else {
            stop.request(reason: "interrupted by \(name)")
        }
        guard !first, !self.armed else { return }
        self.armed = true
        let deadline = Self.secondSignalDeadline
        self.queue.asyncAfter(deadline: .now() + Self.interval(deadline)) {
            // The first signal's number decides the status, as it does when the job returns.
            let status = self.received ?? number
            if let record {
                record.deadlinePassed(signal: status, second: name, after: deadline)
            } else {
                exit(128 + status)
            }
        }
    }

    /// The first signal received, if any.
    var signal: Int32? { self.queue.sync { self.received } }

    /// Ends the watch: the default actions come back, unless a signal was received. Then the process is on its way
    /// out with 128 + that signal, its record written, and a second signal in that last moment (after the job returned,
    /// before the process exited) must not kill it by the default action, which would end it with the signal itself
    /// instead of the documented status: the signals stay ignored.
    func cancel() {
        for source in self.sources { source.cancel() }
        guard self.signal == nil else { return }
        Glibc.signal(SIGINT, SIG_DFL)
        Glibc.signal(SIGTERM, SIG_DFL)
    }

    static func name(_ number: Int32) -> String { number == SIGINT ? "SIGINT" : "SIGTERM" }

    static func interval(_ duration: Duration) -> DispatchTimeInterval {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(Int(max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
    }

    static func seconds(_ duration: Duration) -> String {
        String(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}

/// The record of a send that a second signal's deadline ends before it returned: the report, built from the last
/// progress snapshot (with what earlier runs of a journaled job settled) and marked `cutShort`, naming the outputs it
/// could not write (the unsettled list above all); the journal synced; the summary printed. Then the process exits
/// 128 + the signal.
///
/// Fed by `SendConsole.run` (the prepared send, every progress snapshot, the job's return). The job's own writing
/// passes the send's `OutputGate`, which the deadline closes first: no file of the job's lands after the record, and
/// a job whose record was already whole (or that returned) is left to end by itself.
///
/// `@unchecked Sendable`: every field is guarded by `lock`.
final class CutShortRecord: @unchecked Sendable {
    private let lock = NSLock()
    private var send: BulkSend?
    private var earlier = EarlierRuns()
    private var latest: JobProgress?
    private var returned = false

    /// How long the deadline waits for a rename of the job's in progress, and for the journal's queue.
    static let commitWait: Duration = .milliseconds(300)

    /// The send is prepared: its request, input and journal are known. What earlier runs settled is read now, before
    /// this run marks anything.
    func begin(_ send: BulkSend) {
        let earlier = EarlierRuns(before: send)
        self.lock.withLock {
            self.send = send
            self.earlier = earlier
        }
    }

    /// Whether the send is prepared (before, the process only waits: for the journal, the input's first chunk).
    var hasBegun: Bool { self.lock.withLock { self.send != nil } }

    /// A progress snapshot (about twice a second).
    func progress(_ snapshot: JobProgress) {
        self.lock.withLock { self.latest = snapshot }
    }

    /// The job returned: its own record is written, the deadline has nothing to do.
    func jobReturned() {
        self.lock.withLock { self.returned = true }
    }

    /// Writes the record and ends the process, unless the job returned or wrote its whole record first. Holds the
    /// lock and the send's output gate to the end, so that nothing of the job's is written over the record.
    func deadlinePassed(signal: Int32, second name: String, after deadline: Duration) {
        self.lock.lock()
        guard !self.returned else {
            self.lock.unlock()
            return
        }
        guard let send = self.send else {
            printError("\(name): the job had not started; no report written")
            _exit(128 + signal)
        }
        let closing = send.outputGate.close(within: Self.commitWait)
        guard closing != .completed else {
            // The job's record is whole: the job returns in a moment with it.
            self.lock.unlock()
            return
        }
        if let journal = send.journal { Self.sync(journal, within: Self.commitWait) }
        var report = send.cutShortReport(latest: self.latest, earlier: self.earlier)
        report.stopped = "interrupted by \(SignalStop.name(signal)), then \(name): stopped at once"
        let at = self.latest.map { "\(SignalStop.seconds(.milliseconds(Int($0.seconds * 1000)))) s into the job" }
        let estimated = send.summary.isFinal ? "" : "; the valid rows are estimated from the part of the input read"
        let busy =
            closing == .busy
            ? "; a file the job was renaming into place did not finish within "
                + "\(SignalStop.seconds(Self.commitWait)) s and may be its own" : ""
        report.cutShort =
            "the job had not returned \(SignalStop.seconds(deadline)) s after the second signal: the counts are the "
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
        print(SendConsole.terminalSafe(report.summary))
        for failure in report.outputFailures ?? [] { printError(failure.summary) }
        printError(
            "\(name): the job did not stop within \(SignalStop.seconds(deadline)) s; ended with the record of its last "
                + "progress"
                + (send.request.outputs.report.map { " (in \($0))" } ?? "")
        )
        fflush(nil)
        // Once more: a file the job began meanwhile (its spill's first row) is not left behind.
        send.request.outputs.clearLeftovers()
        // Not `exit`: the job's threads still run, and the process's exit handlers must not run under them.
        _exit(128 + signal)
    }

    /// Syncs the journal's marks, waiting at most `limit` (a sync of the job's may hold the journal's queue). The
    /// periodic sync is the job's to stop: this only syncs once more.
    private static func sync(_ journal: JobJournal, within limit: Duration) {
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            journal.syncNow()
            done.signal()
        }
        _ = done.wait(timeout: .now() + SignalStop.interval(limit))
    }
}
