import Crypto

/// The HTTP/2 provider API endpoint of the simulator: where it listens, which token-signing keys it knows, and
/// the faults it injects on top of the shared plan (uninstalled tokens from `FaultPlan.uninstalled` answer 410).
public struct HTTP2EndpointConfiguration: Sendable {
    /// A provider token signing key the endpoint accepts: its key id, its team, and the P-256 public key (raw
    /// 64-byte x||y form, as `P256.Signing.PublicKey.rawRepresentation` gives it).
    public struct ProviderKey: Sendable, Hashable {
        public var keyID: String
        public var teamID: String
        public var publicKey: [UInt8]
        /// Topics this team may push with token authentication; empty = any.
        public var topics: Set<String>
        /// The environment the key is scoped to (`.any`: a team key for both). A key of the other environment
        /// than the plan's (`FaultPlan.environment`) is refused with BadEnvironmentKeyIdInToken.
        public var environment: FaultPlan.Environment

        public init(
            keyID: String,
            teamID: String,
            publicKey: [UInt8],
            topics: Set<String> = [],
            environment: FaultPlan.Environment = .any
        ) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
            self.topics = topics
            self.environment = environment
        }
    }

    /// Faults of the HTTP/2 endpoint; rates are per request, drawn from a generator seeded by the plan's seed.
    public struct Faults: Sendable, Hashable, Codable {
        /// 429 TooManyRequests, with `Retry-After: retryAfterSeconds` when that is set.
        public var tooManyRequestsRate: Double = 0
        public var retryAfterSeconds: Int?
        /// 500 InternalServerError.
        public var internalServerErrorRate: Double = 0
        /// 503 ServiceUnavailable.
        public var serviceUnavailableRate: Double = 0
        /// After this many requests on a connection, GOAWAY naming the last of them; later streams are dropped.
        public var goAwayAfterStreams: Int?
        /// After `shrinkAfterStreams` requests on a connection, announce `shrinkTo` as the stream limit.
        public var shrinkAfterStreams: Int?
        public var shrinkTo: Int = 1
        /// Only the endpoint's first this-many connections shrink at `shrinkAfterStreams` (a client's long-lived
        /// connections slowed, those it opens later not); nil: every connection.
        public var shrinkConnections: Int?
        /// After this many requests on a connection (counted from its start; after `shrinkAfterStreams`), announce
        /// the endpoint's limit again: a limit lowered, then raised, mid-job.
        public var restoreAfterStreams: Int?
        /// Every answer waits this long.
        public var responseDelayMilliseconds: Int = 0
        /// As APNs: a connection without a client certificate (so its requests carry provider tokens) is
        /// announced 1 stream until its first accepted request, then the endpoint's limit.
        public var tokenConnectionsStartWithOneStream = true
        /// As APNs has been seen to do (radar 27870881): after a rejected request the limit drops to 1, and comes
        /// back after the next accepted one.
        public var dropToOneAfterRejection = false

        // Connection faults drawn per request from the connection's seeded generator, as proxies and gateways
        // misbehave mid-job (a plan's seed makes each connection's sequence of them the same run after run).

        /// After a request is answered: GOAWAY (NO_ERROR) naming the highest stream answered so far, while later
        /// streams are still in flight; those are dropped unprocessed (the client must send them again on another
        /// connection), and the connection closes once the streams it named are answered.
        public var goAwayRate: Double = 0
        /// When a new stream's HEADERS arrive: the answers written so far are sent, then the connection is reset
        /// (a TCP RST: no GOAWAY, no TLS close_notify). That stream and every later one are never processed. Drawn
        /// only while no processed request waits for its answer (a slow answer, a blocked body), and the RST goes
        /// only once the answers written have reached the socket and the client has acknowledged them (waited for
        /// at most half a second: `ConnectionResetHandler`), so a reset never loses the answer to a request the
        /// ledger recorded.
        public var resetRate: Double = 0
        /// After a request is answered: `SETTINGS_MAX_CONCURRENT_STREAMS` drops to `shrinkTo` for the next
        /// `shrinkForStreams` requests, then the endpoint's limit comes back.
        public var shrinkRate: Double = 0
        public var shrinkForStreams: Int = 100
        /// When a request would be accepted: a burst starts, and it and the next `errorBurstLength - 1` requests
        /// that would be accepted are answered one status drawn from 429 (with `retryAfterSeconds`), 500 and 503.
        public var errorBurstRate: Double = 0
        public var errorBurstLength: Int = 20

        public init() {}

        private enum CodingKeys: String, CodingKey {
            case tooManyRequestsRate, retryAfterSeconds, internalServerErrorRate, serviceUnavailableRate
            case goAwayAfterStreams, shrinkAfterStreams, shrinkTo, shrinkConnections, restoreAfterStreams
            case responseDelayMilliseconds
            case tokenConnectionsStartWithOneStream, dropToOneAfterRejection
            case goAwayRate, resetRate, shrinkRate, shrinkForStreams, errorBurstRate, errorBurstLength
        }

        // Plans are written by hand: every key is optional and takes its default.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let d = Faults()
            self.tooManyRequestsRate = try c.decodeIfPresent(Double.self, forKey: .tooManyRequestsRate) ?? 0
            self.retryAfterSeconds = try c.decodeIfPresent(Int.self, forKey: .retryAfterSeconds)
            self.internalServerErrorRate = try c.decodeIfPresent(Double.self, forKey: .internalServerErrorRate) ?? 0
            self.serviceUnavailableRate = try c.decodeIfPresent(Double.self, forKey: .serviceUnavailableRate) ?? 0
            self.goAwayAfterStreams = try c.decodeIfPresent(Int.self, forKey: .goAwayAfterStreams)
            self.shrinkAfterStreams = try c.decodeIfPresent(Int.self, forKey: .shrinkAfterStreams)
            self.shrinkTo = try c.decodeIfPresent(Int.self, forKey: .shrinkTo) ?? d.shrinkTo
            self.shrinkConnections = try c.decodeIfPresent(Int.self, forKey: .shrinkConnections)
            self.restoreAfterStreams = try c.decodeIfPresent(Int.self, forKey: .restoreAfterStreams)
            self.responseDelayMilliseconds = try c.decodeIfPresent(Int.self, forKey: .responseDelayMilliseconds) ?? 0
            self.tokenConnectionsStartWithOneStream =
                try c.decodeIfPresent(Bool.self, forKey: .tokenConnectionsStartWithOneStream)
                ?? d.tokenConnectionsStartWithOneStream
            self.dropToOneAfterRejection =
                try c.decodeIfPresent(Bool.self, forKey: .dropToOneAfterRejection) ?? d.dropToOneAfterRejection
            self.goAwayRate = try c.decodeIfPresent(Double.self, forKey: .goAwayRate) ?? 0
            self.resetRate = try c.decodeIfPresent(Double.self, forKey: .resetRate) ?? 0
            self.shrinkRate = try c.decodeIfPresent(Double.self, forKey: .shrinkRate) ?? 0
            self.shrinkForStreams = try c.decodeIfPresent(Int.self, forKey: .shrinkForStreams) ?? d.shrinkForStreams
            self.errorBurstRate = try c.decodeIfPresent(Double.self, forKey: .errorBurstRate) ?? 0
            self.errorBurstLength = try c.decodeIfPresent(Int.self, forKey: .errorBurstLength) ?? d.errorBurstLength
        }
    }

    /// The port (TLS); 0 picks a free one.
    public var port: Int = 0
    /// A second port speaking cleartext HTTP/2 with prior knowledge (RFC 9113 §3.3), for loopback tests and
    /// measurements without TLS; nil for none, 0 picks a free one. Without TLS there is no client certificate,
    /// so requests there need a provider token.
    public var cleartextPort: Int?
    /// Token-signing keys by key id.
    public var providerKeys: [ProviderKey] = []
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` announced at the start (to token-authenticated connections once their
    /// first request is accepted, unless `Faults.tokenConnectionsStartWithOneStream` is off).
    public var maximumConcurrentStreams = 1000
    /// The endpoint's faults; a plan's `http2` faults (`FaultPlan.http2`), when it has them, replace these.
    public var faults = Faults()

    public init(port: Int = 0, providerKeys: [ProviderKey] = []) {
        self.port = port
        self.providerKeys = providerKeys
    }
}
