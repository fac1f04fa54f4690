import APNSWire
import Foundation
import SalvoEngine
import SalvoIO

/// Runs a binary job the way `send` and `demo` share: validate the input and say what is wrong with it,
/// send with a progress line on a terminal, then print the summary and write the report and rejects.
enum BulkSend {
    static func run(
        files: [String],
        input: TokenSource.Options,
        configuration: BinaryJobConfiguration,
        output: OutputOptions,
        printSummary: Bool = true,
        log: (String) -> Void = { print($0) }
    ) async throws -> JobResult {
        let (source, summary) = try Self.validate(files: files, input: input, output: output, log: log)
        let inputRows = summary.validRows + summary.rejects.count
        log(
            "sending \(summary.validRows) notifications of \(configuration.template.frameByteCount) bytes to \(configuration.host):\(configuration.port) over \(configuration.connections) connection(s)"
        )

        let terminal = !output.quiet && isatty(STDERR_FILENO) == 1
        var callback: (@Sendable (BinaryJob.Progress) -> Void)?
        if terminal { callback = { progress in BulkSend.showProgress(progress) } }
        let result: JobResult
        do {
            result = try await BinaryJob.run(
                configuration: configuration,
                source: source,
                summary: summary,
                inputRows: inputRows,
                progress: callback
            )
        } catch let error as JobError {
            if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
            throw UserError(error.description)
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }

        if printSummary {
            log(result.report.summary)
            log("memory     \(peakResidentBytes() >> 20) MiB peak resident")
        }
        try Self.writeOutputs(
            output,
            report: result.report,
            files: files,
            summary: summary,
            rejected: result.rejectedRows
        )
        return result
    }

    /// Reads the input once, names up to ten bad rows, and returns the source ready to send.
    static func validate(
        files: [String],
        input: TokenSource.Options,
        output: OutputOptions,
        log: (String) -> Void
    ) throws -> (TokenSource, TokenSource.Summary) {
        let source = TokenSource(files: files, options: input)
        let summary: TokenSource.Summary
        do {
            summary = try source.validate()
        } catch {
            throw UserError(error.description)
        }
        for reject in summary.rejects.prefix(10) {
            log("\(reject.file): line \(reject.line): \(reject.reason) (value: \(reject.value))")
        }
        if summary.rejects.count > 10 {
            log("… and \(summary.rejects.count - 10) more bad rows\(output.rejects.map { " (all in \($0))" } ?? "")")
        }
        return (source, summary)
    }

    /// Writes the report (JSON) and the rejects (CSV: bad input rows, then the gateway's refusals) where
    /// `output` says.
    static func writeOutputs(
        _ output: OutputOptions,
        report: JobReport,
        files: [String],
        summary: TokenSource.Summary,
        rejected: [RejectedRow]
    ) throws {
        if let path = output.report {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try write(try encoder.encode(report), to: path)
        }
        if let path = output.rejects {
            var csv = RejectedRow.csvHeader + "\n"
            for reject in summary.rejects {
                csv +=
                    [reject.file, String(reject.line), reject.value, "", reject.reason].map(csvField)
                    .joined(separator: ",") + "\n"
            }
            for row in rejected {
                csv += row.csvLine + "\n"
            }
            try write(Data(csv.utf8), to: path)
        }
    }

    private static func showProgress(_ progress: BinaryJob.Progress) {
        let rate = progress.seconds > 0 ? Double(progress.settled) / progress.seconds : 0
        let remaining = max(0, progress.validRows - progress.settled)
        let eta = rate > 0 ? Int(Double(remaining) / rate) : 0
        let line =
            "\r\u{1B}[K\(progress.settled)/\(progress.validRows) settled, \(Int(rate))/s, \(progress.rejected) rejected, ETA \(eta) s"
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func write(_ data: Data, to path: String) throws {
        do {
            try data.write(to: URL(fileURLWithPath: path))
        } catch {
            throw UserError("\(path): cannot write the file: \(error.localizedDescription)")
        }
    }
}
