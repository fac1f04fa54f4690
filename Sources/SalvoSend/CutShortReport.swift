import Foundation
import SalvoBinary
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// What the runs before this one of a journaled job settled, as its journal held it when this run began (before it
/// marked anything): the counts the report of a run cut short adds to its own, as `JournalResume` adds the tally to
/// a run that returns.
public struct EarlierRuns: Hashable, Sendable {
    /// This run's number (1: no run before).
    public var run = 1
    public var confirmed = 0
    public var presumed = 0
    public var expired = 0
    /// Refused rows by reason (the reject log's; `JournalResume.unrecordedReason` for a row whose line it lacks).
    public var rejected: [String: Int] = [:]
    /// Rows an earlier run wrote and did not settle: uncertain.
    public var written = 0
    /// Where this run began reading (a checkpoint), if not at the top.
    public var startedAt: InputCheckpoint?

    public init() {}

    /// Valid rows the earlier runs settled.
    public var settled: Int { self.confirmed + self.presumed + self.expired + self.rejected.values.reduce(0, +) }

    /// What the journal of `send` holds before `send` runs: its marks counted, the refused rows' reasons from its
    /// log. Nothing for a new job or one without a journal. Reads the journal's files, and asks the source where it
    /// began (before the job reads: nothing holds it).
    public init(before send: BulkSend) {
        guard let journal = send.journal, let rows = journal.rows else { return }
        let run = journal.manifest.runs
        guard run > 1 else { return }
        self.run = run
        let counts = rows.stateCounts()
        func count(_ state: RowState) -> Int { counts[Int(state.rawValue)] }
        self.confirmed = count(.confirmed)
        self.presumed = count(.presumed)
        self.expired = count(.expired)
        self.written = count(.written)
        var recorded = 0
        for (file, lines) in journal.rejectLog().records {
            for (line, record) in lines where rows.state(file: file, line: line) == .rejected {
                self.rejected[record.reason, default: 0] += 1
                recorded += 1
            }
        }
        if count(.rejected) > recorded { self.rejected[JournalResume.unrecordedReason] = count(.rejected) - recorded }
        self.startedAt = send.source.resumedAt
    }
}

extension BulkSend {
    /// The report of this run as far as `latest` (the last progress snapshot) knew, with what `earlier` runs settled:
    /// every other valid row is counted not sent, so that each valid row is in exactly one field. The outputs the
    /// record cannot write are named in `outputFailures`; `stopped` and `cutShort` are the caller's to say.
    ///
    /// Calls nothing that waits: the input's valid rows are the summary's (read before the job) or the snapshot's
    /// estimate, never the source's (whose reader holds it for a whole chunk).
    public func cutShortReport(latest: JobProgress?, earlier: EarlierRuns) -> JobReport {
        let request = self.request
        var report = latest?.report ?? JobReport()
        switch request.interface {
        case .binary(let configuration): report.mode = "binary command \(configuration.template.command.rawValue)"
        case .http2: report.mode = "HTTP/2"
        }
        report.gateway = request.gateway
        report.connections = latest?.connections ?? 0
        report.onUncertain = request.onUncertain.rawValue
        report.partition = request.input.partition
        report.inputFiles = self.inputFiles
        report.job = JobFingerprint(request)
        let inherited = request.onUncertain == .resend ? 0 : earlier.written
        if self.summary.isFinal {
            report.validRows = self.summary.validRows
            report.inputRows = self.summary.inputRows
            report.invalidInput = self.summary.rejects.count
            report.suppressed = self.summary.suppressed
        } else {
            // Rows validated as they are read, and the reading had not ended: the snapshot's estimate of the whole
            // input's valid rows (the earlier runs' included); without one, only what they settled is known.
            report.validRows = latest?.validRows ?? (earlier.settled + inherited)
        }
        report.confirmed += earlier.confirmed
        report.presumed += earlier.presumed
        report.expired += earlier.expired
        report.rejected.merge(earlier.rejected, uniquingKeysWith: +)
        report.uncertain += inherited
        if earlier.run > 1 {
            report.resumed = JobResume(
                run: earlier.run,
                settledBefore: earlier.settled,
                inheritedUncertain: earlier.written,
                startedAt: earlier.startedAt
            )
        }
        let settled = report.delivered + report.rejectedTotal + report.expired + report.uncertain
        report.notSent = max(0, report.validRows - settled)
        report.seconds = latest?.seconds ?? 0
        report.notificationsPerSecond = report.seconds > 0 ? Double(report.delivered) / report.seconds : 0
        var failures: [OutputFailure] = []
        let reason = "not written: the job was cut short before it listed them"
        if let path = request.outputs.unsettled {
            failures.append(OutputFailure(output: "unsettled", path: path, error: reason, rowsMissing: report.notSent))
        }
        if let path = request.outputs.rejects {
            failures.append(
                OutputFailure(
                    output: "rejects",
                    path: path,
                    error: reason,
                    rowsMissing: report.invalidInput + report.rejectedTotal
                )
            )
        }
        if let path = request.outputs.unregistered {
            failures.append(
                OutputFailure(output: "unregistered", path: path, error: "not updated: the job was cut short")
            )
        }
        report.outputFailures = failures.isEmpty ? nil : failures
        return report
    }
}

extension SendOutputs {
    /// Removes what a job of process `pid` left half-written beside every output (its temporary files, the
    /// unsettled spill) and, but for the report and the suppression file merged into, the files at the rows'
    /// outputs, which would pass for this run's: for a record written without the job, after `OutputGate.close`.
    public func clearLeftovers(of pid: Int32 = getpid()) {
        for path in [self.unsettled, self.rejects, self.unregistered, self.report].compactMap({ $0 }) {
            if path == self.unsettled || path == self.rejects { unlink(path) }
            let url = URL(fileURLWithPath: path)
            let folder = url.deletingLastPathComponent().path
            let name = url.lastPathComponent
            let leftovers = ["\(name).salvo-\(pid)-", "\(name).untaken-\(pid)"]
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            where leftovers.contains(where: { entry.hasPrefix($0) }) {
                unlink(folder + "/" + entry)
            }
        }
    }
}
