import SalvoBinary
import SalvoRows

/// Folds what earlier runs of a journaled job settled into this run's result, so that the report covers the whole
/// job: their confirmed, presumed, rejected (with the reasons of the reject log) and expired rows, and the rows
/// they left uncertain, which this run sent again (`--on-uncertain resend`: counted by this run) or counts as
/// uncertain and lists in the unsettled file (`report`). The tokens among the refused rows that the service called
/// unregistered (HTTP/2 410) or invalid go to `unregistered` as a run refusing them lists them, so a run after one
/// whose `--unregistered` file could not be written writes them (dated by this run: the log keeps no date). A pure
/// function of its arguments.
enum JournalResume {
    /// The reason of a refused row whose log line a crash cut off.
    static let unrecordedReason = "Unrecorded"

    static func add(
        _ tally: JournalTally,
        rejectLog: JournalRejectLog,
        files: [String],
        resendUncertain: Bool,
        run: Int,
        startedAt: InputCheckpoint? = nil,
        to result: inout SendResult
    ) {
        result.report.confirmed += tally.confirmed
        result.report.presumed += tally.presumed
        result.report.expired += tally.expired
        for row in tally.rejectedRows {
            let record = rejectLog.record(file: row.reference.file, line: row.line)
            let reason = record?.reason ?? Self.unrecordedReason
            result.report.rejected[reason, default: 0] += 1
            result.rejectedRows.append(
                RejectedRow(
                    file: Self.name(row, files),
                    line: row.line,
                    token: row.token.hexString,
                    status: record?.status ?? 0,
                    reason: reason
                )
            )
            if let record, record.status == 410 || RowOutcomes.tokenReasons.contains(record.reason) {
                result.unregistered.append(
                    UnregisteredToken(
                        file: Self.name(row, files),
                        line: row.line,
                        token: row.token.hexString,
                        // The log keeps no date: the list dates the entry when it is merged (now).
                        timestamp: nil,
                        reason: record.reason
                    )
                )
            }
        }
        if !resendUncertain {
            result.report.uncertain += tally.uncertainRows.count
            for row in tally.uncertainRows {
                result.unsettledRows.append(
                    UnsettledRow(
                        token: row.token.hexString,
                        file: Self.name(row, files),
                        line: row.line,
                        outcome: .uncertain
                    )
                )
            }
        }
        if run > 1 {
            result.report.resumed = JobResume(
                run: run,
                settledBefore: tally.settled,
                inheritedUncertain: tally.uncertainRows.count,
                startedAt: startedAt
            )
        }
    }

    private static func name(_ row: TokenRow, _ files: [String]) -> String {
        row.reference.file < files.count ? files[row.reference.file] : ""
    }
}
