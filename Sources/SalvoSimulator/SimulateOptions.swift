/// What `salvo simulate` is asked to do, independent of the command line that filled it in.
public struct SimulateOptions: Sendable {
    public var host: String = "127.0.0.1"
    /// 0 picks a free port.
    public var gatewayPort: Int = 2195
    public var feedbackPort: Int = 2196
    /// A fault plan JSON file (`data/faults/*.json`); nil = the clean plan.
    public var faultPlanPath: String?
    /// `name=value` fault options applied on top of the plan (see `FaultPlan.optionNames`).
    public var faultOptions: [String] = []
    /// Where to write the ledger snapshot (JSON) on exit.
    public var ledgerPath: String?
    /// Where to write the verdict (JSON) on exit; needs `expectedPath`.
    public var verdictPath: String?
    /// The expected tokens (CSV) for the verdict.
    public var expectedPath: String?
    public var threads: Int = 1
    /// The HTTP/2 endpoint's port (0 = any free port); no HTTP/2 endpoint when nil.
    public var http2Port: Int?
    /// A cleartext (prior-knowledge) HTTP/2 port beside it, token authentication only; needs `http2Port`.
    public var http2CleartextPort: Int?
    public var maximumTokens: Int = 12_000_000
    /// The one-way delay of every byte (milliseconds), over the plan's; nil keeps the plan's.
    public var latencyMilliseconds: Int?
    /// The seeded jitter on top of it (milliseconds), over the plan's; nil keeps the plan's.
    public var jitterMilliseconds: Int?
    /// The HTTP/2 endpoint's announced `SETTINGS_MAX_CONCURRENT_STREAMS`; nil for the default (1,000).
    public var http2MaximumStreams: Int?
    /// The channel management endpoint's port (0 = any free port), and with it broadcasts on the HTTP/2 port (which
    /// they need); neither when nil.
    public var channelPort: Int?
    /// The apps (bundle ids) with broadcast turned on; others are answered FeatureNotEnabled.
    public var broadcastApps: [String] = []
    /// Simulated devices subscribed to each new channel.
    public var subscribers: Int = 100
    /// Live channels per app (APNs: 10,000).
    public var channelLimit: Int = 10_000
    /// Broadcasts per channel per minute before 429 TooManyRequests: No Message Stored channels, Most Recent Message
    /// Stored channels; nil keeps the defaults (`BroadcastConfiguration.Budget`).
    public var broadcastBudget: Int?
    public var storedBroadcastBudget: Int?
    /// Where to write the broadcast verdict (JSON) on exit.
    public var broadcastVerdictPath: String?
    /// The channels expected to get one update each (a channel inventory CSV, `BroadcastExpectation`).
    public var broadcastExpectedPath: String?

    public init() {}
}
