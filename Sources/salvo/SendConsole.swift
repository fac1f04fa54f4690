import APNSWire
import Foundation
import SalvoBinary
import SalvoConsole
import SalvoHTTP2
import SalvoRows
import SalvoSend

/// The terminal around the library's `BulkSend` (shared by `send` and `demo`): names the first bad rows, shows a
/// progress line on a terminal, prints the summary. Everything else is the library's.
enum SendConsole {
    static func run(
        _ request: SendRequest,
        what: String,
        display: ProgressDisplay,
        metrics: JobMetrics? = nil,
        printSummary: Bool = true,
        stop: JobStop? = nil,
        record: CutShortRecord? = nil,
        quiet: Bool = false,
        log: (String) -> Void = { print($0) }
    ) async throws -> SendResult {
        let send = try await Self.prepare(request, stop: stop)
        record?.begin(send)
        if let journal = request.journal, journal.restart, !quiet {
            // Said once the journal is this run's: a run refused for another's lock begins nothing.
            printError(
                "journal \(journal.directory): beginning the job again (--journal-restart); rows an earlier run "
                    + "delivered may be sent again",
                prefix: ""
            )
        }
        if let finish = send.finishedJob, let journal = request.journal {
            log(
                "journal \(journal.directory): this job finished before (exit status \(finish.exitStatus)); "
                    + "nothing sent"
            )
            let result: SendResult
            do {
                result = try await send.run()
            } catch {
                record?.jobReturned()
                throw UserError(error.message)
            }
            record?.jobReturned()
            if printSummary { log(Self.terminalSafe(result.report.summary)) }
            return result
        }
        if let journal = send.journal, journal.manifest.runs > 1 {
            var settled = send.summary.journaled.settled
            var uncertain = send.summary.journaled.uncertainRows.count
            if !send.summary.isFinal, let counts = journal.rows?.stateCounts() {
                // Rows validated as they are sent: the journal's own marks (only valid rows are ever marked).
                settled = RowState.allCases.filter(\.isSettled).reduce(0) { $0 + counts[Int($1.rawValue)] }
                uncertain = counts[Int(RowState.written.rawValue)]
            }
            let policy = request.onUncertain == .resend ? "sent again" : "reported"
            // Started at the journal's checkpoint: the rows before it are not read before the first connection.
            let start =
                send.source.resumedAt.map { "; reading from row \($0.rows + 1), the journal's checkpoint" } ?? ""
            log(
                "journal \(journal.directory): resuming the job (run \(journal.manifest.runs)): \(settled) rows "
                    + "settled before, \(uncertain) uncertain (\(policy))\(start)"
            )
        }
        if send.summary.isFinal {
            Self.logRejects(send.summary.rejects, duplicates: send.summary.duplicates, request: request, log: log)
            let toSend = send.summary.journaled.rowsToSend(
                validRows: send.summary.validRows,
                resendUncertain: request.onUncertain == .resend
            )
            log("sending \(toSend) notifications of \(what) to \(request.gateway) over \(Self.connections(request))")
        } else {
            log(
                "sending the notifications of \(what) to \(request.gateway) over \(Self.connections(request)) "
                    + "(rows are checked as they are read; bad ones are named at the end)"
            )
        }
        // Every snapshot is kept for the record a second signal may have to write without the job.
        var progress = display.callback
        if let record {
            let show = display.callback
            progress = { snapshot in
                record.progress(snapshot)
                show?(snapshot)
            }
        }
        let result: SendResult
        do {
            result = try await send.run(progress: progress, metrics: metrics, stop: stop)
        } catch {
            record?.jobReturned()
            display.finish()
            throw UserError(error.message)
        }
        record?.jobReturned()
        display.finish()
        if !send.summary.isFinal {
            Self.logRejects(
                result.inputRejects,
                duplicates: result.report.duplicates ?? 0,
                request: request,
                log: log,
                after: true
            )
        }
        if printSummary {
            // The summary holds the server's words (reason names, why the job stopped): escaped as the errors are.
            log(Self.terminalSafe(result.report.summary))
            log("memory     \(peakResidentBytes() >> 20) MiB peak resident")
        }
        // The summary names why the job stopped and what it left; without it, say so here.
        if !printSummary || result.report.stopped == nil {
            if result.notSent > 0 { log("not sent   \(result.notSent)") }
            if let stopped = result.stopped { log(Self.terminalSafe("stopped    \(stopped)")) }
        }
        if result.unsettledCount > 0 {
            let listed = !result.outputFailures.contains { $0.output == "unsettled" }
            log(
                "unsettled  \(result.unsettledCount) rows"
                    + (listed
                        ? request.outputs.unsettled.map { " (in \($0): send it again to retry them)" } ?? ""
                        : " (NOT listed: the unsettled file could not be written)")
            )
        }
        // On standard error too, so that they show with --quiet; the exit status is 3.
        for failure in result.outputFailures { printError(failure.summary) }
        // The report and the files are written; the job still failed (exit 3).
        if let error = result.error { throw UserError(error.message) }
        if !result.unregistered.isEmpty {
            log("unregistered \(result.unregistered.count)\(request.outputs.unregistered.map { " (in \($0))" } ?? "")")
        }
        return result
    }

    /// `text` with every control character but the line feed escaped: what a server or a file chose never acts on
    /// the terminal.
    static func terminalSafe(_ text: String) -> String {
        TerminalText.escaped(text, keepingLineBreaks: true)
    }

    /// Prepares the send (off the concurrency pool: `BulkSend.prepare` blocks on `BlockingWork`'s threads). A stop
    /// requested meanwhile ends a wait for the journal's lock.
    private static func prepare(_ request: SendRequest, stop: JobStop?) async throws -> BulkSend {
        do {
            return try await BulkSend.prepare(request, stop: stop)
        } catch {
            throw UserError(error.message)
        }
    }

    /// Names the first bad rows (the rejects file has them all), and warns of repeated tokens.
    private static func logRejects(
        _ rejects: [InputReject],
        duplicates: Int,
        request: SendRequest,
        log: (String) -> Void,
        after: Bool = false
    ) {
        for reject in rejects.prefix(10) {
            // Input text is escaped: a token file may hold escape sequences that would act on the terminal.
            log(
                TerminalText.escaped("\(reject.file): line \(reject.line): \(reject.reason) (value: \(reject.value))")
            )
        }
        if rejects.count > 10 {
            log("… and \(rejects.count - 10) more bad rows\(request.outputs.rejects.map { " (all in \($0))" } ?? "")")
        }
        if duplicates > 0 {
            log(
                after
                    ? "warning: \(duplicates) rows repeated the token of an earlier row and were sent again "
                        + "(--dedupe leaves them out)"
                    : "warning: \(duplicates) rows repeat the token of an earlier row and will be sent again "
                        + "(--dedupe leaves them out)"
            )
        }
    }

    /// How many connections, as the job will open them.
    private static func connections(_ request: SendRequest) -> String {
        if case .http2(let configuration) = request.interface, let maximum = configuration.client.maximumConnections {
            return "\(request.connections) connection(s) at first, more as the round trip needs (at most \(maximum))"
        }
        return "\(request.connections) connection(s)"
    }
}
