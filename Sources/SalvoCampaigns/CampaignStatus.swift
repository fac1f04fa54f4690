import SalvoRows
import SalvoService

/// A campaign as the API shows it: its record, its settings, and its counts — the last run's report, with the
/// running job's counts so far added while one runs.
public struct CampaignStatus: Sendable {
    public var record: CampaignRecord
    public var state: CampaignState
    public var settings: CampaignSettings
    /// The report its last run wrote (covering every run before it: the journal's), if it has run.
    public var report: JobReport?
    /// The running job's counts so far (this run's alone), while one runs.
    public var progress: JobProgress?
    /// Its `send_at` had come when it was made, so it started at once (only in the answer that made it).
    public var startedNow = false
    /// A local-time campaign's groups, once its rows are grouped.
    public var local: Local?

    /// A local-time campaign's groups, and which are sent.
    public struct Local: Sendable {
        public var plan: LocalTimePlan
        /// The indices of the groups sent.
        public var sent: Set<Int>

        public init(plan: LocalTimePlan, sent: Set<Int>) {
            self.plan = plan
            self.sent = sent
        }

        /// When the next group not sent goes (milliseconds since 1970), and the rows of every group not sent.
        public var waiting: (next: Int64?, rows: Int) {
            LocalTimeSchedule.waiting(groups: self.plan.scheduleGroups, sent: self.sent)
        }
    }

    public init(record: CampaignRecord, state: CampaignState, settings: CampaignSettings) {
        self.record = record
        self.state = state
        self.settings = settings
    }

    /// The counts per outcome, named as `send`'s report names them.
    public struct Counts: Hashable, Sendable {
        public var validRows = 0
        public var inputRows = 0
        public var invalidInput = 0
        public var confirmed = 0
        public var presumed = 0
        public var rejected: [String: Int] = [:]
        public var expired = 0
        public var uncertain = 0
        /// Rows no run has sent (known once a run has ended: its report's `notSent`).
        public var notSent = 0
        public var suppressed = 0

        public var delivered: Int { self.confirmed + self.presumed }
        public var rejectedTotal: Int { self.rejected.values.reduce(0, +) }
    }

    public var counts: Counts {
        var counts = Counts()
        if let report {
            counts.validRows = report.validRows
            counts.inputRows = report.inputRows
            counts.invalidInput = report.invalidInput
            counts.confirmed = report.confirmed
            counts.presumed = report.presumed
            counts.rejected = report.rejected
            counts.expired = report.expired
            counts.uncertain = report.uncertain
            counts.notSent = report.notSent
            counts.suppressed = report.suppressed
        }
        guard let progress, self.state == .running else { return counts }
        // What earlier runs settled stays; this run's outcomes so far are added, and what it has not settled yet is
        // neither uncertain nor unsent until it ends.
        counts.confirmed += progress.report.confirmed
        counts.presumed += progress.report.presumed
        counts.rejected.merge(progress.report.rejected, uniquingKeysWith: +)
        counts.expired += progress.report.expired
        counts.uncertain = progress.report.uncertain
        // A local-time campaign's report is its groups' that ran; the running job is one more group's.
        counts.validRows =
            self.settings.deliverAtLocal != nil
            ? counts.validRows + progress.validRows : max(counts.validRows, progress.validRows)
        counts.notSent = max(
            0,
            counts.validRows - counts.delivered - counts.rejectedTotal - counts.expired - counts.uncertain
                - progress.inFlight
        )
        return counts
    }

    /// Notifications settled per second by the running job, so far.
    public var rate: Double? {
        guard self.state == .running, let progress, progress.seconds > 0 else { return nil }
        return progress.rate
    }

    /// When the running job should end, at its rate so far (milliseconds since 1970).
    public func estimatedEnd(now: Int64) -> Int64? {
        guard self.state == .running, let left = self.progress?.secondsLeft else { return nil }
        return now + Int64(left * 1000)
    }
}
