/// What a job's journal held for its valid rows when a run started: the rows earlier runs settled, by outcome,
/// and the rows they wrote without settling (uncertain: the process ended with them on a connection). A pure
/// value, counted by `TokenSource.validate()` from the journal's states.
public struct JournalTally: Hashable, Sendable {
    public var confirmed = 0
    public var presumed = 0
    public var expired = 0
    /// Rows refused in an earlier run (their reasons are in the journal's reject log).
    public var rejectedRows: [TokenRow] = []
    /// Rows written by an earlier run and never settled: uncertain.
    public var uncertainRows: [TokenRow] = []

    public init() {}

    /// Valid rows an earlier run settled: a run that resumes the job does not send them.
    public var settled: Int { self.confirmed + self.presumed + self.expired + self.rejectedRows.count }

    /// Whether the journal held anything at all for these rows.
    public var isEmpty: Bool { self.settled == 0 && self.uncertainRows.isEmpty }

    /// Counts one valid row in the state the journal holds for it.
    public mutating func count(_ row: TokenRow, _ state: RowState) {
        switch state {
        case .none: break
        case .written: self.uncertainRows.append(row)
        case .confirmed: self.confirmed += 1
        case .presumed: self.presumed += 1
        case .rejected: self.rejectedRows.append(row)
        case .expired: self.expired += 1
        }
    }

    /// Rows this run sends, of `validRows`: those not settled, less the uncertain ones unless they are resent.
    public func rowsToSend(validRows: Int, resendUncertain: Bool) -> Int {
        validRows - self.settled - (resendUncertain ? 0 : self.uncertainRows.count)
    }
}
