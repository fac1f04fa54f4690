import APNSWire

/// The one place where a row's end is counted, for both protocols: a connection (binary shard or HTTP/2
/// connection) records what became of each row here, and a job merges the connections' outcomes into its
/// `JobReport` and its lists of refused rows.
///
/// Every valid row ends in exactly one of confirmed, presumed, rejected, expired or uncertain (left, by policy);
/// `resent` and `uncertainEvents` count what happened on the way. A value with no I/O: each connection owns one
/// and is the only one to mutate it, so recording an outcome takes no lock.
public struct RowOutcomes: Sendable {
    /// The counts (`mode`, `gateway` and the input counts are the job's to fill).
    public private(set) var report = JobReport()
    /// Every row the gateway or the service refused, for the rejects file.
    public private(set) var rejectedRows: [RejectedRow] = []
    /// Tokens the service called unregistered (HTTP/2 410) and tokens either interface refused as invalid
    /// (`tokenReasons`), for the suppression list.
    public private(set) var unregistered: [UnregisteredToken] = []
    /// Every row left without an end (uncertain and not resent, or unsent or unanswered when the job stopped),
    /// for the unsettled file.
    public private(set) var unsettledRows: [UnsettledRow] = []
    /// What happens to a row whose fate is unknown.
    public let onUncertain: OnUncertain
    /// The input files, so that a refused row names its file (`RowReference.file` indexes this).
    public let files: [String]
    /// Where each row's settled outcome is recorded (`send --journal`), if anywhere.
    public let journal: RowJournal?

    public init(onUncertain: OnUncertain = .resend, files: [String] = [], journal: RowJournal? = nil) {
        self.onUncertain = onUncertain
        self.files = files
        self.journal = journal
        self.report.onUncertain = onUncertain.rawValue
    }

    /// Accepted for certain (an answer for a later row on the same connection, a barrier, or HTTP/2 200).
    public mutating func confirm(_ count: Int = 1) { self.report.confirmed += count }

    /// This row is about to be written (HTTP/2: on a new stream): marked in the journal, so that after a crash it is
    /// uncertain.
    public func writing(_ row: TokenRow) {
        self.journal?.mark(file: row.reference.file, line: row.line, .written)
    }

    /// This row accepted for certain (HTTP/2 200), recorded in the journal too.
    public mutating func confirm(_ row: TokenRow) {
        self.report.confirmed += 1
        self.journal?.mark(file: row.reference.file, line: row.line, .confirmed)
    }

    /// On a live connection longer than the settle time with no error.
    public mutating func presume(_ count: Int) { self.report.presumed += count }

    /// Rows presumed earlier that a later answer proved accepted (an error response for a row written after them
    /// on the same connection, or the barrier's): counted as confirmed instead.
    public mutating func upgradePresumed(_ count: Int) {
        let count = min(count, self.report.presumed)
        self.report.presumed -= count
        self.report.confirmed += count
    }

    /// Not sent (or not sent again) because its expiry passed.
    public mutating func expire(_ count: Int = 1) { self.report.expired += count }

    /// This row not sent because its expiry passed, recorded in the journal too.
    public mutating func expire(_ row: TokenRow) {
        self.report.expired += 1
        self.journal?.mark(file: row.reference.file, line: row.line, .expired)
    }

    /// To be written again after the gateway discarded it, a retryable answer or a refused stream.
    public mutating func resend(_ count: Int = 1) { self.report.resent += count }

    /// Refused: counted under `reason` (the same key scheme for both protocols: a reason name, such as
    /// `BadDeviceToken` or, for a binary status, `ErrorStatus.reasonName`), and listed with its file.
    ///
    /// - Parameters:
    ///   - status: the binary status code or the HTTP status.
    ///   - unregisteredSince: for a token the service called unregistered, since when (milliseconds since 1970,
    ///     when it said); the row is listed in `unregistered` too.
    public mutating func reject(
        _ row: TokenRow,
        status: Int,
        reason: String,
        unregistered: Bool = false,
        unregisteredSince: Int64? = nil
    ) {
        self.report.rejected[reason, default: 0] += 1
        let file = self.fileName(of: row)
        self.journal?.reject(
            file: row.reference.file,
            line: row.line,
            status: status,
            reason: reason,
            token: row.token.hexString
        )
        self.rejectedRows.append(
            RejectedRow(file: file, line: row.line, token: row.token.hexString, status: status, reason: reason)
        )
        if unregistered || Self.tokenReasons.contains(reason) {
            self.unregistered.append(
                UnregisteredToken(
                    file: file,
                    line: row.line,
                    token: row.token.hexString,
                    timestamp: unregisteredSince,
                    reason: reason
                )
            )
        }
    }

    /// Refusals that condemn the token itself rather than the notification: listed in `unregistered` with their
    /// reason (binary status 8, HTTP/2 400 BadDeviceToken).
    public static let tokenReasons: Set<String> = ["InvalidToken", "BadDeviceToken"]

    /// A row whose connection ended (or whose request timed out) with no answer: it may or may not have been
    /// delivered. Follows the policy: with `.resend`, and while `mayRetry` (the protocol's own bound on tries),
    /// it is to be sent again (counted as resent); otherwise it stays uncertain.
    ///
    /// - Returns: whether to send the row again.
    public mutating func uncertain(_ count: Int = 1, mayRetry: Bool = true) -> Bool {
        self.report.uncertainEvents += count
        if self.onUncertain == .resend && mayRetry {
            self.report.resent += count
            return true
        }
        self.report.uncertain += count
        return false
    }

    /// Like `uncertain(_:mayRetry:)` for these rows: those not to be sent again are listed as unsettled.
    ///
    /// - Returns: whether to send the rows again.
    public mutating func uncertain(_ rows: some Collection<TokenRow>, mayRetry: Bool = true) -> Bool {
        guard !self.uncertain(rows.count, mayRetry: mayRetry) else { return true }
        for row in rows { self.leave(row, .uncertain) }
        return false
    }

    /// A valid row the job ends without settling: listed in the unsettled file with why. An `.uncertain` row is
    /// counted by `uncertain`; the others are the report's `notSent`, which the job counts.
    public mutating func leave(_ row: TokenRow, _ outcome: UnsettledRow.Outcome) {
        // Never written: a run that resumes the job sends it as new. Written ones stay marked, uncertain.
        if outcome == .unsent { self.journal?.mark(file: row.reference.file, line: row.line, .none) }
        self.unsettledRows.append(
            UnsettledRow(token: row.token.hexString, file: self.fileName(of: row), line: row.line, outcome: outcome)
        )
    }

    /// A valid row the stopped job never took from its source: to `tail` when there is one (spilled or counted, not
    /// held in memory), else listed like `leave(_:_:)` as unsent.
    public mutating func leaveUntaken(_ row: TokenRow, to tail: UnsettledTail?) {
        guard let tail else { return self.leave(row, .unsent) }
        self.journal?.mark(file: row.reference.file, line: row.line, .none)
        tail.append(row, file: self.fileName(of: row))
    }

    /// A row that, sent alone, made the gateway drop the connection `BinaryConnectionMachine.poisonDrops` times:
    /// left uncertain, listed as unsettled, never sent again.
    public mutating func connectionDropped(_ row: TokenRow) {
        self.report.uncertainEvents += 1
        self.report.uncertain += 1
        self.report.droppedConnection = (self.report.droppedConnection ?? 0) + 1
        self.leave(row, .connectionDropped)
    }

    /// A barrier the gateway never answered (the connection was left after the answer timeout).
    public mutating func barrierUnanswered() { self.report.unansweredBarriers += 1 }

    /// A connection that ends (reconnects count toward the report), and why, when the protocol knows
    /// (`ReconnectCause`, or an error response's reason name).
    public mutating func reconnected(cause: String? = nil) {
        self.report.reconnects += 1
        if let cause { self.report.reconnectCauses[cause, default: 0] += 1 }
    }

    /// An answer whose identifier named no unsettled notification (late, or unknown).
    public mutating func unmatchedAnswer() { self.report.unmatchedErrors += 1 }

    /// Bytes and notifications handed to the connection (counted per batch).
    public mutating func wrote(bytes: Int = 0, notifications: Int = 0) {
        self.report.bytesWritten += bytes
        self.report.written += notifications
    }

    /// Adds another connection's outcomes to these.
    public mutating func merge(_ other: RowOutcomes) {
        self.report.merge(other.report)
        self.rejectedRows.append(contentsOf: other.rejectedRows)
        self.unregistered.append(contentsOf: other.unregistered)
        self.unsettledRows.append(contentsOf: other.unsettledRows)
    }

    /// Adds another connection's counts to these, not its rows (a job whose rows' answers go elsewhere as they come).
    public mutating func mergeCounts(_ other: RowOutcomes) {
        self.report.merge(other.report)
    }

    /// Takes the outcomes recorded so far, leaving these empty (a connection hands a batch to its job).
    public mutating func take() -> RowOutcomes {
        var taken = RowOutcomes(onUncertain: self.onUncertain, files: self.files, journal: self.journal)
        swap(&taken, &self)
        return taken
    }

    /// Rows settled so far: delivered, rejected, expired or left uncertain.
    public var settled: Int {
        self.report.delivered + self.report.rejectedTotal + self.report.expired + self.report.uncertain
    }

    private func fileName(of row: TokenRow) -> String {
        let index = row.reference.file
        return index < self.files.count ? self.files[index] : ""
    }
}

/// What ended a binary connection without an error response, as `JobReport.reconnectCauses` names it (an error
/// response is named by its reason instead).
public enum ReconnectCause {
    /// The gateway closed or reset the connection after rows were written, without an answer.
    public static let closedWithoutAnswer = "closed without an answer"
    /// The gateway closed the connection before anything was written (a gateway pacing connects does this).
    public static let closedOnConnect = "closed on connect"
    /// The connect itself failed (refused, timed out).
    public static let connectFailed = "connect failed"
    /// The gateway stopped answering or reading, and the connection was left.
    public static let silent = "silent gateway"
    /// Closed from this side.
    public static let closedLocally = "closed locally"
    /// The barrier's answer closed it: written at the end of the rows, or on a full flight.
    public static let barrier = "barrier"
}
