/// A snapshot of a running job, either interface: the counts so far, what is in flight, and how long it has run.
/// Taken about twice a second for progress lines and metrics, never per row.
public struct JobProgress: Sendable {
    public var validRows: Int
    public var seconds: Double
    /// The counts so far (`mode`, `gateway` and the input counts are left empty).
    public var report = JobReport()
    /// Rows written to a connection and not settled yet.
    public var inFlight = 0
    /// Connections open now.
    public var connections = 0

    public init(
        validRows: Int,
        seconds: Double,
        report: JobReport = JobReport(),
        inFlight: Int = 0,
        connections: Int = 0
    ) {
        self.validRows = validRows
        self.seconds = seconds
        self.report = report
        self.inFlight = inFlight
        self.connections = connections
    }

    /// Rows with their end: delivered, rejected, expired or left uncertain.
    public var settled: Int {
        self.report.delivered + self.report.rejectedTotal + self.report.expired + self.report.uncertain
    }

    public var rejected: Int { self.report.rejectedTotal }

    /// Settled rows per second so far.
    public var rate: Double { self.seconds > 0 ? Double(self.settled) / self.seconds : 0 }

    /// Seconds left at the rate so far; nil before anything settled.
    public var secondsLeft: Double? {
        let rate = self.rate
        return rate > 0 ? Double(max(0, self.validRows - self.settled)) / rate : nil
    }
}
