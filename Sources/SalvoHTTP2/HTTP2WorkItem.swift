import APNSWire
import NIOCore
import SalvoRows

/// A row on its way: the token row, how often it has been sent, and when it may be sent next.
public struct HTTP2WorkItem: Hashable, Sendable {
    public var row: TokenRow
    /// Sends so far that ended in a retryable answer (429, 500, 503).
    public var attempts: Int
    /// Refused streams (never processed, so not attempts).
    public var refusals: Int
    /// Sends lost with their stream or connection (no answer): the connection's fault, not the row's, so they use
    /// none of its attempts and are bounded on their own (`maximumLosses`).
    public var losses = 0
    /// Not before this time (retries after a backoff).
    public var notBefore: NIODeadline
    /// Its last send went out and got no answer (the stream or the connection was lost): if the job stops before
    /// it goes again, it may have been delivered.
    public var unanswered = false
    /// The row's own request body, rendered from a payload template (nil: the job's one payload). A slice of its
    /// chunk's buffer: rendered once, kept for a retry.
    public var payload: ByteBuffer?
    /// The row's own `apns-*` headers (a service's notification names its own push type, topic, id…); nil: the
    /// job's.
    public var headers: HTTP2RowHeaders?

    public init(
        row: TokenRow,
        attempts: Int = 0,
        refusals: Int = 0,
        notBefore: NIODeadline = .uptimeNanoseconds(0),
        payload: ByteBuffer? = nil,
        headers: HTTP2RowHeaders? = nil
    ) {
        self.row = row
        self.payload = payload
        self.headers = headers
        self.attempts = attempts
        self.refusals = refusals
        self.notBefore = notBefore
    }
}

/// A row's own request header fields, which replace the job's fields of the same name on its request. Made once
/// per row from `APNSRequestHeaders` (checked there), never per send.
public struct HTTP2RowHeaders: Hashable, Sendable {
    public struct Field: Hashable, Sendable {
        public var name: String
        public var value: String
    }

    public let fields: [Field]

    /// `headers.fields()`, in its order, made in one array (the service makes one for every notification it sends).
    public init(_ headers: APNSRequestHeaders) {
        var fields: [Field] = []
        fields.reserveCapacity(6)
        headers.forEachField { fields.append(Field(name: $0, value: $1)) }
        self.fields = fields
    }

    /// Whether the row sets the field `name`.
    func sets(_ name: String) -> Bool { self.fields.contains { $0.name == name } }
}

/// Why a job stopped before every row had its answer.
public struct HTTP2JobStop: Hashable, Sendable, CustomStringConvertible {
    /// The reason the service gave (`BadCertificate`, `InvalidProviderToken`, …), when it gave one.
    public var reason: String?
    /// What happened and what to do, for a person.
    public var message: String

    public init(reason: String?, message: String) {
        self.reason = reason
        self.message = message
    }

    public var description: String { self.message }
}
