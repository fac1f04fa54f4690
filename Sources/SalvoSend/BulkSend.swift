import APNSWire
import Dispatch
import SalvoBinary
import SalvoHTTP2
import SalvoRows

/// A bulk send over either provider interface, from token files to written results: the library's one entry
/// point, which the command line only parses options for and prints.
///
/// `prepare` checks that every output can be written and opens the input (each file's header and first chunk are
/// read: a file whose first chunk holds no token is refused before anything is sent); `run` validates the rows as
/// it sends them, so the input is read once (bad rows are named with file, line and reason in the rejects and the
/// report; the good ones still go), and writes the report, the rejects and the unregistered tokens.
public struct BulkSend: Sendable {
    public let request: SendRequest
    public let source: TokenSource
    /// What validation found: the whole input's counts (`isFinal`), or, when the rows are validated as they are
    /// sent, none yet (the result has them).
    public let summary: TokenSource.Summary
    /// The input files as they were when validated.
    public let inputFiles: [InputFile]
    /// The job's journal (`SendRequest.journal`), if it keeps one.
    public let journal: JobJournal?
    /// When the journal holds a finished job: how it ended (nothing is sent, and `run` returns its report).
    public var finishedJob: JournalManifest.Finish? { self.journal?.manifest.finish }
    /// When `prepare` began (`DispatchTime` uptime nanoseconds): the report's `firstRowSeconds` counts from here.
    public var startedAt: UInt64 = 0
    /// What every output file and the journal's finish pass through: a record written without the job (a second
    /// signal's deadline) closes it, and nothing of the job's reaches the paths afterwards.
    public let outputGate = OutputGate()

    /// Validates the input and the outputs. The work blocks (the journal's lock may be awaited, the input's files
    /// are opened and their first chunks read, a journal's files read whole): it runs on `BlockingWork`'s threads,
    /// never the caller's.
    ///
    /// - Parameter stop: a stop requested while the journal's lock is awaited (`--wait-for-journal`) ends the wait.
    /// - Throws: `JobError(.input)` for a file that cannot be read at all, `JobError(.output)` for an output that
    ///   cannot be written or would overwrite an input or another output.
    public static func prepare(_ request: SendRequest, stop: JobStop? = nil) async throws(JobError) -> BulkSend {
        let startedAt = DispatchTime.now().uptimeNanoseconds
        return try await BlockingWork.run { () throws(JobError) -> BulkSend in
            var send = try Self.open(request, stop: stop)
            send.startedAt = startedAt
            return send
        }
    }

    private static func open(_ request: SendRequest, stop: JobStop?) throws(JobError) -> BulkSend {
        guard !request.files.isEmpty else { throw JobError(.input, "name at least one token file") }
        try OutputFiles.check(request.outputs, inputs: request.files)
        var suppression: SuppressionList?
        if let path = request.suppress {
            do {
                suppression = try SuppressionList.load(path: path)
            } catch {
                throw JobError(.input, "--suppress \(error.description)")
            }
        }
        let source = TokenSource(
            files: request.files,
            spools: request.inputSpools,
            options: request.input,
            suppression: suppression,
            payloads: request.payloads.map { RowPayloads(templates: $0, limit: request.payloadLimit) },
            firstChunkRows: request.firstChunkRows
        )
        let inputFiles = request.files.map { path in
            var status = stat()
            // `-` is standard input's spool (`InputSpools`), named `-` in the report.
            return InputFile(
                path: path,
                bytes: stat(request.inputSpools.path(of: path), &status) == 0 ? Int(status.st_size) : 0
            )
        }
        var session: JournalSession?
        if let options = request.journal {
            let opened = try JournalSession(options, request: request, source: source, stop: stop)
            if let finished = opened.finished {
                return BulkSend(
                    request: request,
                    source: source,
                    summary: TokenSource.Summary(validRows: 0, rejects: []),
                    inputFiles: inputFiles,
                    journal: finished
                )
            }
            session = opened
        }
        var summary: TokenSource.Summary
        do {
            summary = try source.open() ?? TokenSource.Summary(validRows: 0, rejects: [])
            if source.summary == nil { summary.isFinal = false }
        } catch {
            throw JobError(.input, error.description)
        }
        // One rule for every kind of input (a file, a pipe, a query's rows): nothing to send is a job that could not
        // run, not one that delivered every row.
        if summary.isFinal && summary.inputRows == 0 {
            let names = request.files.map { $0 == "-" ? "standard input" : $0 }.joined(separator: ", ")
            throw JobError(.input, "\(names): no row to send (the input holds a header at most)")
        }
        let journal = try session?.journal(opened: summary)
        return BulkSend(request: request, source: source, summary: summary, inputFiles: inputFiles, journal: journal)
    }

    /// The input files with their sizes, a file still being written when the job opened it (`GrowingInput`: a
    /// query's rows) measured again now that the job has read it to its end.
    private var inputFilesAtTheEnd: [InputFile] {
        self.inputFiles.map { file in
            let spools = self.request.inputSpools
            var status = stat()
            guard spools.growing(of: file.path) != nil, stat(spools.path(of: file.path), &status) == 0 else {
                return file
            }
            return InputFile(path: file.path, bytes: Int(status.st_size))
        }
    }

    /// Sends every valid row and writes the results where `request.outputs` says.
    ///
    /// - Parameter progress: called about twice a second while the job runs (either interface).
    /// - Parameter metrics: fed from the same snapshots, and once more with the final counts, so that after the run
    ///   its counters equal the report.
    /// - Throws: `JobError` when the job cannot run or cannot go on (credentials refused, gateway unreachable,
    ///   an output that cannot be written); refused rows are in the result, never thrown.
    /// - Parameter stop: lets the caller stop the job (a signal); the result counts what did not settle and the
    ///   files are written.
    public func run(
        progress: (@Sendable (JobProgress) -> Void)? = nil,
        metrics: JobMetrics? = nil,
        stop: JobStop? = nil
    ) async throws(JobError) -> SendResult {
        var snapshots: (@Sendable (JobProgress) -> Void)?
        if metrics != nil || progress != nil {
            snapshots = { @Sendable (snapshot: JobProgress) -> Void in
                metrics?.update(snapshot)
                progress?(snapshot)
            }
        }
        var answerLatency: (@Sendable (Int64) -> Void)?
        if let metrics {
            answerLatency = { @Sendable (nanoseconds: Int64) -> Void in metrics.recordAnswer(nanoseconds: nanoseconds) }
        }
        let result = try await self.send(progress: snapshots, answerLatency: answerLatency, stop: stop)
        // The final counts, so the metrics end equal to the report.
        metrics?.update(
            JobProgress(validRows: result.report.validRows, seconds: result.report.seconds, report: result.report)
        )
        return result
    }

    private func send(
        progress: (@Sendable (JobProgress) -> Void)?,
        answerLatency: (@Sendable (Int64) -> Void)?,
        stop: JobStop?
    ) async throws(JobError) -> SendResult {
        guard let journal = self.journal else {
            return try await self.send(self.summary, progress: progress, answerLatency: answerLatency, stop: stop)
        }
        if let finish = journal.manifest.finish {
            // The job is done: its report again, and no other file (the run that finished it wrote them).
            let result = SendResult(
                report: finish.report,
                inputRejects: [],
                rejectedRows: [],
                unregistered: [],
                stopped: nil,
                notSent: 0,
                connectionErrors: []
            )
            return await BlockingWork.run { [self, result] in
                var result = result
                OutputFiles.write(&result, to: SendOutputs(report: self.request.outputs.report), gate: self.outputGate)
                self.recordWhole()
                return result
            }
        }
        let resend = self.request.onUncertain == .resend
        var thisRun = self.summary
        if self.summary.isFinal {
            thisRun.validRows = self.summary.journaled.rowsToSend(
                validRows: self.summary.validRows,
                resendUncertain: resend
            )
        }
        let source = self.source
        journal.startSyncing(checkpoint: { source.settledCheckpoint() })
        var result: SendResult
        do throws(JobError) {
            result = try await self.send(
                thisRun,
                progress: progress,
                answerLatency: answerLatency,
                stop: stop,
                write: false
            )
        } catch {
            journal.stopSyncing()
            if self.source.checkpointRefuted { journal.discardCheckpoint() }
            throw error
        }
        // The journal's reject log is read, and the rows before a checkpoint may still be being read again.
        result = await BlockingWork.run { [self, result] in
            var result = result
            if self.source.checkpointRefuted { journal.discardCheckpoint() }
            // Rows validated as they were sent: the journal's tally is complete now that every row was read.
            let whole = self.summary.isFinal ? self.summary : self.source.summarySoFar
            JournalResume.add(
                whole.journaled,
                rejectLog: journal.rejectLog(),
                files: self.request.files,
                resendUncertain: resend,
                run: journal.manifest.runs,
                startedAt: self.source.resumedAt,
                to: &result
            )
            result.report.validRows = whole.validRows
            result.report.inputRows = whole.inputRows
            result.rejectedRows = self.inInputOrder(result.rejectedRows)
            result.unsettledRows = self.inInputOrder(result.unsettledRows)
            return result
        }
        // The outputs first: a job whose rejects, unsettled or unregistered file (or write-back) failed is not recorded
        // finished, so that the same command again (sending nothing: every row is settled) writes them.
        await self.writeOutputs(&result)
        let outputsLost = result.outputFailures.contains { $0.output != "report" }
        let finished = result
        try await BlockingWork.run { [self] () throws(JobError) in
            if finished.stopped == nil && finished.report.stopped == nil && finished.error == nil && !outputsLost {
                // Through the gate, completing the record: a job recorded finished has its outputs at their paths.
                try journal.finish(
                    JournalManifest.Finish(exitStatus: finished.isComplete ? 0 : 1, report: finished.report),
                    through: self.outputGate
                )
            } else {
                journal.stopSyncing()
                self.recordWhole()
            }
        }
        return result
    }

    private func send(
        _ summary: TokenSource.Summary,
        progress: (@Sendable (JobProgress) -> Void)?,
        answerLatency: (@Sendable (Int64) -> Void)?,
        stop: JobStop?,
        write: Bool = true
    ) async throws(JobError) -> SendResult {
        var result: SendResult
        // Nothing valid to send: no connection at all (a gateway sees no empty session), and the files say so.
        guard summary.validRows > 0 || !summary.isFinal else {
            var report = JobReport()
            report.gateway = self.request.gateway
            report.inputRows = summary.inputRows
            report.invalidInput = summary.rejects.count
            report.onUncertain = self.request.onUncertain.rawValue
            report.partition = self.request.input.partition
            report.inputFiles = self.inputFiles
            report.job = JobFingerprint(self.request)
            result = SendResult(
                report: report,
                inputRejects: summary.rejects,
                rejectedRows: [],
                unregistered: [],
                stopped: nil,
                notSent: 0,
                connectionErrors: []
            )
            if write {
                await self.writeOutputs(&result)
                await BlockingWork.run { [self] in self.recordWhole() }
            }
            return result
        }
        // The rows a stopped job never took: spilled beside the unsettled file as they are read, not held in memory
        // (counted only when there is no unsettled file).
        let tail = UnsettledTail(spillingTo: self.request.outputs.unsettled.map { $0 + ".untaken-\(getpid())" })
        switch self.request.interface {
        case .binary(var configuration):
            configuration.unsettledTail = tail
            configuration.journal = self.journal?.rows
            result = try await self.runBinary(configuration, summary: summary, progress: progress, stop: stop)
        case .http2(var configuration):
            configuration.unsettledTail = tail
            configuration.journal = self.journal?.rows
            result = try await self.runHTTP2(
                configuration,
                summary: summary,
                progress: progress,
                answerLatency: answerLatency,
                stop: stop
            )
        }
        result.unsettledTail = tail
        // Only when a row went out: a job that never connected reads its rows only to list them as unsent.
        if result.report.written > 0, let first = self.source.firstRowUptimeNanoseconds, self.startedAt > 0,
            first >= self.startedAt
        {
            result.report.firstRowSeconds = Double(first - self.startedAt) / 1e9
        }
        // Rows validated as they were sent: the input's summary is complete now that the job has read every row (a
        // resumed source's rows before its checkpoint may still be being read again: waited for off the pool).
        let final = self.summary.isFinal ? self.summary : await BlockingWork.run { [source] in source.summarySoFar }
        result.inputRejects = final.rejects
        result.report.partition = self.request.input.partition
        result.report.inputFiles = self.inputFilesAtTheEnd
        result.report.job = JobFingerprint(self.request)
        result.report.suppressed = final.suppressed
        result.report.reregistered = final.reregistered
        if final.duplicates > 0 { result.report.duplicates = final.duplicates }
        if write {
            await self.writeOutputs(&result)
            await BlockingWork.run { [self] in self.recordWhole() }
        }
        return result
    }

    /// The job's record is written whole: a deadline that comes now leaves it as it is.
    private func recordWhole() {
        _ = try? self.outputGate.pass(completing: true) {}
    }

    private func runBinary(
        _ configuration: BinaryJobConfiguration,
        summary: TokenSource.Summary,
        progress: (@Sendable (JobProgress) -> Void)?,
        stop: JobStop?
    ) async throws(JobError) -> SendResult {
        let job = try await BinaryJob.run(
            configuration: configuration,
            source: self.source,
            summary: summary,
            inputRows: summary.inputRows,
            progress: progress,
            stop: stop
        )
        return SendResult(
            report: job.report,
            inputRejects: self.summary.rejects,
            rejectedRows: self.inInputOrder(job.rejectedRows),
            unregistered: job.unregistered,
            stopped: job.report.stopped,
            notSent: job.report.notSent,
            error: job.error,
            connectionErrors: [],
            unsettledRows: self.inInputOrder(job.unsettledRows)
        )
    }

    private func runHTTP2(
        _ configuration: HTTP2JobConfiguration,
        summary: TokenSource.Summary,
        progress: (@Sendable (JobProgress) -> Void)?,
        answerLatency: (@Sendable (Int64) -> Void)?,
        stop: JobStop?
    ) async throws(JobError) -> SendResult {
        let job: HTTP2JobResult
        do {
            job = try await HTTP2Job.run(
                configuration: configuration,
                source: self.source,
                summary: summary,
                progress: progress,
                answerLatency: answerLatency,
                stop: stop
            )
        } catch {
            throw JobError(.configuration, error.message)
        }
        return SendResult(
            report: job.report,
            inputRejects: self.summary.rejects,
            rejectedRows: self.inInputOrder(job.rejectedRows),
            unregistered: job.unregistered,
            stopped: job.stopped?.message,
            notSent: job.notSent,
            connectionErrors: job.connectionErrors,
            unsettledRows: self.inInputOrder(job.unsettledRows)
        )
    }

    /// Rows in the order of the input: by file as the request names them, then by line.
    func inInputOrder(_ rows: [RejectedRow]) -> [RejectedRow] {
        let order = self.fileOrder
        return rows.sorted { (order[$0.file] ?? 0, $0.line) < (order[$1.file] ?? 0, $1.line) }
    }

    func inInputOrder(_ rows: [UnsettledRow]) -> [UnsettledRow] {
        let order = self.fileOrder
        return rows.sorted { (order[$0.file] ?? 0, $0.line) < (order[$1.file] ?? 0, $1.line) }
    }

    private var fileOrder: [String: Int] {
        Dictionary(self.request.files.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }
}

#if canImport(Glibc)
import Glibc
#endif
