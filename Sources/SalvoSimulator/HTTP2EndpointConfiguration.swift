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

        public init(keyID: String, teamID: String, publicKey: [UInt8], topics: Set<String> = []) {
            self.keyID = keyID
            self.teamID = teamID
            self.publicKey = publicKey
            self.topics = topics
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
        /// Every answer waits this long.
        public var responseDelayMilliseconds: Int = 0

        public init() {}
    }

    /// The port (TLS); 0 picks a free one.
    public var port: Int = 0
    /// A second port speaking cleartext HTTP/2 with prior knowledge (RFC 9113 §3.3), for loopback tests and
    /// measurements without TLS; nil for none, 0 picks a free one. Without TLS there is no client certificate,
    /// so requests there need a provider token.
    public var cleartextPort: Int?
    /// Token-signing keys by key id.
    public var providerKeys: [ProviderKey] = []
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` announced at the start (token-authenticated connections too).
    public var maximumConcurrentStreams = 1000
    public var faults = Faults()

    public init(port: Int = 0, providerKeys: [ProviderKey] = []) {
        self.port = port
        self.providerKeys = providerKeys
    }
}
