import APNSWire
import SalvoRows

/// A notification the service accepted, with its `apns-id` (kept when `recordDeliveries` is on).
public struct HTTP2Delivery: Hashable, Sendable {
    public var line: Int
    public var token: DeviceToken
    public var apnsID: String?
    /// The `apns-unique-id` Apple's development environment answers with.
    public var apnsUniqueID: String? = nil
    /// An earlier send of the row was lost with its stream or connection (no answer) before this one was accepted:
    /// that one may have arrived too.
    public var afterLoss = false
}

/// Everything an HTTP/2 job did: the same `JobReport` the binary job writes, the rows the service refused, the
/// unregistered tokens, and why the job stopped early, if it did.
///
/// Every valid row is either delivered (`report.confirmed`), rejected (`report.rejected`, Unregistered included),
/// uncertain (`report.uncertain`, only with `OnUncertain.report`) or `notSent` (the job stopped first).
public struct HTTP2JobResult: Sendable {
    /// The counts, as the binary job writes them (`mode` "HTTP/2").
    public var report: JobReport
    /// Every row the service refused, 410 included, for the rejects file.
    public var rejectedRows: [RejectedRow]
    /// The 410 answers with their timestamps, for token pruning.
    public var unregistered: [UnregisteredToken]
    /// Accepted notifications and their `apns-id`s, in no particular order (empty unless recorded).
    public var deliveries: [HTTP2Delivery]
    /// Why the job stopped early; nil when every row got its answer.
    public var stopped: HTTP2JobStop?
    /// Valid rows that were never answered because the job stopped.
    public var notSent: Int
    /// Every valid row without an answer: uncertain and not resent, or not sent because the job stopped.
    public var unsettledRows: [UnsettledRow] = []
    /// The first connection failures and protocol errors of the job (bounded), to explain reconnects.
    public var connectionErrors: [String] = []
    /// 429 answers that halved a connection's flight (at most one per flight), and the smallest flight window
    /// (streams) they left; nil when none did.
    public var flightCuts = 0
    public var smallestFlightWindow: Int?
    /// From the job's end (its last answer, or the stop's end) to its return, every connection closed: what the
    /// end cost.
    public var closingSeconds = 0.0
    /// From the job's start to the end of its first TLS handshake (nil in cleartext, or when none ended).
    public var firstHandshakeSeconds: Double?
    /// From the job's start to each connection's first request, in order (at most 256 connections).
    public var firstRequestSeconds: [Double] = []

    public init(
        report: JobReport = JobReport(),
        rejectedRows: [RejectedRow] = [],
        unregistered: [UnregisteredToken] = [],
        deliveries: [HTTP2Delivery] = [],
        stopped: HTTP2JobStop? = nil,
        notSent: Int = 0
    ) {
        self.report = report
        self.rejectedRows = rejectedRows
        self.unregistered = unregistered
        self.deliveries = deliveries
        self.stopped = stopped
        self.notSent = notSent
    }

    /// The result of the outcomes a job's connections recorded (`RowOutcomes` does the counting).
    init(outcomes: RowOutcomes, deliveries: [HTTP2Delivery]) {
        self.init(
            report: outcomes.report,
            rejectedRows: outcomes.rejectedRows,
            unregistered: outcomes.unregistered,
            deliveries: deliveries
        )
        self.unsettledRows = outcomes.unsettledRows
    }
}
