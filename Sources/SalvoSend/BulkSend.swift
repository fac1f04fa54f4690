import APNSWire
import SalvoEngine
import SalvoHTTP2

/// A bulk send over either provider interface, from token files to written results: the library's one entry
/// point, which the command line only parses options for and prints.
///
/// `prepare` reads the input once (bad rows are named with file, line and reason; the good ones still go) and
/// checks that every output can be written before anything is sent; `run` sends every valid row, and writes
/// the report, the rejects and the unregistered tokens.
public struct BulkSend: Sendable {
    public let request: SendRequest
    public let source: TokenSource
    /// What validation found.
    public let summary: TokenSource.Summary
    /// The input files as they were when validated.
    public let inputFiles: [InputFile]

    /// Validates the input and the outputs.
    ///
    /// - Throws: `JobError(.input)` for a file that cannot be read at all, `JobError(.output)` for an output that
    ///   cannot be written or would overwrite an input or another output.
    public static func prepare(_ request: SendRequest) throws(JobError) -> BulkSend {
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
        if request.payloads != nil, case .http2 = request.interface {
            throw JobError(
                .configuration,
                "payload templates are sent over the binary interface only (--protocol binary)"
            )
        }
        let source = TokenSource(
            files: request.files,
            options: request.input,
            suppression: suppression,
            payloads: request.payloads.map { RowPayloads(templates: $0, limit: request.payloadLimit) }
        )
        let summary: TokenSource.Summary
        do {
            summary = try source.validate()
        } catch {
            throw JobError(.input, error.description)
        }
        let inputFiles = request.files.map { path in
            var status = stat()
            return InputFile(path: path, bytes: stat(path, &status) == 0 ? Int(status.st_size) : 0)
        }
        return BulkSend(request: request, source: source, summary: summary, inputFiles: inputFiles)
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
        let result = try await self.send(progress: snapshots, stop: stop)
        // The final counts, so the metrics end equal to the report.
        metrics?.update(
            JobProgress(validRows: self.summary.validRows, seconds: result.report.seconds, report: result.report)
        )
        return result
    }

    private func send(
        progress: (@Sendable (JobProgress) -> Void)?,
        stop: JobStop?
    ) async throws(JobError) -> SendResult {
        var result: SendResult
        // Nothing valid to send: no connection at all (a gateway sees no empty session), and the files say so.
        guard self.summary.validRows > 0 else {
            var report = JobReport()
            report.gateway = self.request.gateway
            report.inputRows = self.summary.inputRows
            report.invalidInput = self.summary.rejects.count
            result = SendResult(
                report: report,
                inputRejects: self.summary.rejects,
                rejectedRows: [],
                unregistered: [],
                stopped: nil,
                notSent: 0,
                connectionErrors: []
            )
            try OutputFiles.write(result, to: self.request.outputs)
            return result
        }
        switch self.request.interface {
        case .binary(let configuration):
            result = try await self.runBinary(configuration, progress: progress, stop: stop)
        case .http2(let configuration):
            result = try await self.runHTTP2(configuration, progress: progress, stop: stop)
            result.report.notSent = result.notSent
            if result.notSent > 0 { result.report.stopped = result.stopped }
        }
        result.report.partition = self.request.input.partition
        result.report.inputFiles = self.inputFiles
        result.report.suppressed = self.summary.suppressed
        result.report.reregistered = self.summary.reregistered
        if self.summary.duplicates > 0 { result.report.duplicates = self.summary.duplicates }
        try OutputFiles.write(result, to: self.request.outputs)
        return result
    }

    private func runBinary(
        _ configuration: BinaryJobConfiguration,
        progress: (@Sendable (JobProgress) -> Void)?,
        stop: JobStop?
    ) async throws(JobError) -> SendResult {
        let job: JobResult
        do {
            job = try await BinaryJob.run(
                configuration: configuration,
                source: self.source,
                summary: self.summary,
                inputRows: self.summary.inputRows,
                progress: progress,
                stop: stop
            )
        } catch let error as JobError {
            throw error
        } catch {
            throw JobError(.unreachable, "\(error)")
        }
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
        progress: (@Sendable (JobProgress) -> Void)?,
        stop: JobStop?
    ) async throws(JobError) -> SendResult {
        let job: HTTP2JobResult
        do {
            job = try await HTTP2Job.run(
                configuration: configuration,
                source: self.source,
                summary: self.summary,
                progress: progress,
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
    private func inInputOrder(_ rows: [RejectedRow]) -> [RejectedRow] {
        let order = self.fileOrder
        return rows.sorted { (order[$0.file] ?? 0, $0.line) < (order[$1.file] ?? 0, $1.line) }
    }

    private func inInputOrder(_ rows: [UnsettledRow]) -> [UnsettledRow] {
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
