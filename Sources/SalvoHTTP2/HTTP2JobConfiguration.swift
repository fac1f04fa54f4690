import APNSWire
import SalvoRows

/// Everything an HTTP/2 job needs besides its rows: where to send, the headers and payload every row shares,
/// and what to do with retries and unanswered requests.
public struct HTTP2JobConfiguration: Sendable {
    public var client: HTTP2ClientConfiguration
    /// The `apns-*` headers of every request.
    public var headers: APNSRequestHeaders
    /// The payload of every request, encoded once for the whole job.
    public var payload: Payload
    public var retry: HTTP2RetryPolicy = .default
    /// Rows whose request got no answer (a timeout, a connection lost): send again, or report.
    public var onUncertain: OnUncertain = .resend
    /// Keep every accepted notification's `apns-id` in the result (memory grows with the job).
    public var recordDeliveries = false
    /// Where the rows a stopped job never took go (spilled to a file, or counted); nil: listed in the result's
    /// `unsettledRows`.
    public var unsettledTail: UnsettledTail?
    /// Where the job marks each row it writes and settles (`send --journal`); nil: no journal. The token source
    /// reads the same journal to skip what an earlier run settled.
    public var journal: RowJournal?
    /// Asked right before each row is written (a first send or a resend): a row it withholds is not written by this
    /// job and is left unsettled (never written: not sent; written before: unanswered). A fleet's campaign partition
    /// closes it when its lease may have run out (`PartitionWriteGate`); nil: every row may be written.
    public var gate: (any HTTP2WriteGate)?

    public init(client: HTTP2ClientConfiguration, headers: APNSRequestHeaders, payload: Payload) {
        self.client = client
        self.headers = headers
        self.payload = payload
    }
}
