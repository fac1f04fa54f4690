extension RowOutcomes {
    /// How a job ends, the same for both protocols, once its connections are closed and their outcomes merged here:
    /// the rows no connection took (the job stopped first) are left unsettled, an opened source's counts become
    /// final (it has been read to its end by then), and the report gets the input's counts, the rows not sent, the
    /// time and the rate. `mode`, `gateway`, `connections` and what only one protocol knows are the job's to fill.
    ///
    /// - Parameters:
    ///   - source: the job's rows; read to the end here (rows no connection took).
    ///   - summary: what the job started with: final when the source was validated first, not when it was opened.
    ///   - inputRows: the input's rows, as the caller counted them for a validated source.
    ///   - chunkRows: how many rows to read at a time while leaving the rest.
    ///   - unsettledTail: where rows never taken are spilled (nil: only counted).
    ///   - seconds: the job's time, to its last answer or its stop.
    ///   - stopped: why the job stopped, if it did; the report names it when rows were left unsent.
    public mutating func finishJob(
        source: TokenSource,
        summary: TokenSource.Summary,
        inputRows: Int,
        chunkRows: Int,
        unsettledTail: UnsettledTail?,
        seconds: Double,
        stopped: String?
    ) -> JobReport {
        // Rows no connection took before the job stopped (none when every row was taken). A failure to read them
        // was the job's stop already; what was read so far is left.
        while let chunk = try? source.nextChunk(maximumRows: chunkRows) {
            for row in chunk { self.leaveUntaken(row, to: unsettledTail) }
        }
        let opened = !summary.isFinal
        let final = opened ? source.summarySoFar : summary
        var report = self.report
        report.inputRows = opened ? final.inputRows : inputRows
        // An opened source's rows to send: a journal's settled rows were read but not sent.
        report.validRows = opened ? source.rowsToSend(final) : final.validRows
        report.invalidInput = final.rejects.count
        report.onUncertain = self.onUncertain.rawValue
        report.notSent = max(0, report.validRows - self.settled)
        // An input that failed stopped the job whatever was left unsent: the rows after the failure were never read.
        if report.notSent > 0 { report.stopped = stopped }
        if let failure = source.failure { report.stopped = stopped ?? failure.description }
        report.seconds = seconds
        report.notificationsPerSecond = seconds > 0 ? Double(report.delivered) / seconds : 0
        return report
    }
}
