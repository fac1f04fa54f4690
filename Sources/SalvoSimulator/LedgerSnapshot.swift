/// The ledger's counters at one moment: a Codable value for tests, `--ledger` files and verdicts.
public struct LedgerSnapshot: Codable, Sendable, Equatable {
    /// Notifications accepted (recorded in the ledger).
    public var accepted: Int = 0
    /// Distinct device tokens among them.
    public var distinctTokens: Int = 0
    /// Tokens accepted more than once.
    public var tokensAcceptedMoreThanOnce: Int = 0
    /// Accepted notifications not recorded because the table was full at its maximum size.
    public var refusedForCapacity: Int = 0
    /// Notifications read after an error response (or a reset) on the same connection: discarded.
    public var discardedAfterError: Int = 0
    /// Error responses sent, by status code (decimal string keys, e.g. "8").
    public var errorResponses: [String: Int] = [:]
    /// Command-0 notifications refused by closing without a packet (the simple format has no identifier).
    public var closedWithoutResponse: Int = 0
    /// Connections reset on purpose (fault plan), with no error response.
    public var resets: Int = 0
    /// Gateway connections accepted (past the connection limits).
    public var connectionsAccepted: Int = 0
    /// Connections closed right after accept or at the handshake, by reason
    /// (`maxOpen`, `minInterval`, `rate`, `tls`).
    public var connectionsRefused: [String: Int] = [:]
    /// HTTP/2 streams refused (RST_STREAM REFUSED_STREAM) because they were opened above the announced
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`: a client that follows the limit never earns one.
    public var refusedStreams: Int = 0
    /// Plaintext bytes read by the gateway.
    public var bytesReceived: Int = 0
    /// Reads (channel read cycles) that delivered at least one byte.
    public var reads: Int = 0
    /// The most notifications accepted in one read.
    public var maxNotificationsPerRead: Int = 0
    /// Reads by accepted notifications in them: bucket i counts reads with 2^(i-1) ..< 2^i (bucket 0: none).
    public var notificationsPerReadHistogram: [Int] = []
    /// Feedback connections served, and tuples sent on them.
    public var feedbackConnections: Int = 0
    public var feedbackTuplesSent: Int = 0
    /// Quality of service: notifications stored for offline devices, replaced by newer ones, not
    /// stored (expiry 0), expired before the device came back, delivered when it came back.
    public var stored: Int = 0
    public var coalesced: Int = 0
    public var notStored: Int = 0
    public var expired: Int = 0
    public var deliveredLater: Int = 0
    /// Bytes held by the token table.
    public var tableBytes: Int = 0

    public init() {}

    /// Error responses sent with `status`.
    public func errors(_ status: UInt8) -> Int {
        self.errorResponses[String(status)] ?? 0
    }
}

extension LedgerSnapshot {
    /// Every counter is optional when decoding: a ledger written by a simulator that did not yet have a counter (or a
    /// remote simulator of another version answering `GET /ledger`) reads with that counter at zero, not as an error.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func read<Value: Decodable>(_ key: CodingKeys, _ absent: Value) throws -> Value {
            try container.decodeIfPresent(Value.self, forKey: key) ?? absent
        }
        self.init()
        self.accepted = try read(.accepted, 0)
        self.distinctTokens = try read(.distinctTokens, 0)
        self.tokensAcceptedMoreThanOnce = try read(.tokensAcceptedMoreThanOnce, 0)
        self.refusedForCapacity = try read(.refusedForCapacity, 0)
        self.discardedAfterError = try read(.discardedAfterError, 0)
        self.errorResponses = try read(.errorResponses, [:])
        self.closedWithoutResponse = try read(.closedWithoutResponse, 0)
        self.resets = try read(.resets, 0)
        self.connectionsAccepted = try read(.connectionsAccepted, 0)
        self.connectionsRefused = try read(.connectionsRefused, [:])
        self.refusedStreams = try read(.refusedStreams, 0)
        self.bytesReceived = try read(.bytesReceived, 0)
        self.reads = try read(.reads, 0)
        self.maxNotificationsPerRead = try read(.maxNotificationsPerRead, 0)
        self.notificationsPerReadHistogram = try read(.notificationsPerReadHistogram, [])
        self.feedbackConnections = try read(.feedbackConnections, 0)
        self.feedbackTuplesSent = try read(.feedbackTuplesSent, 0)
        self.stored = try read(.stored, 0)
        self.coalesced = try read(.coalesced, 0)
        self.notStored = try read(.notStored, 0)
        self.expired = try read(.expired, 0)
        self.deliveredLater = try read(.deliveredLater, 0)
        self.tableBytes = try read(.tableBytes, 0)
    }
}
