import APNSWire
import Logging
import SalvoProxy
import SalvoRows

/// Everything a binary-interface job needs besides its rows.
public struct BinaryJobConfiguration: Sendable {
    /// The gateway: `gateway.push.apple.com:2195`, or a simulator.
    public var host: String
    public var port: Int
    /// The name the gateway's certificate must carry (default: `host`).
    public var serverName: String?
    /// The proxy every connection goes through (its tunnel opened before TLS); nil for a direct connection.
    public var proxy: ProxyConfiguration?
    /// The client certificate and the CAs to trust, loaded once when the job starts.
    public var credentials: GatewayCredentials
    /// The frame of this job: command, payload, expiry, priority.
    public var template: FrameTemplate
    /// Gateway connections, one shard each.
    public var connections: Int
    public var flush: FlushPolicy
    public var reconnect: ReconnectPolicy
    /// How long a written notification waits for an error before it is presumed accepted. The gateway answers
    /// a failure within about a second.
    public var settle: Duration
    /// The most a gateway's TCP receive buffer may hold: acknowledged bytes within this much of the end
    /// are not counted as read by the gateway (Linux grows a receive buffer to 6 MiB by default).
    public var peerReceiveBufferBytes: Int
    /// Unsettled rows the whole job may hold (split over the shards): memory is 16 bytes a row. At the
    /// settle time this bounds the rate: rows in flight / settle time (no barrier closes a healthy connection to
    /// settle a full window sooner). Only the rows in flight are resident (`ReleasingRing`), rate × settle time.
    public var windowRows: Int

    /// 16 M rows (256 MB when full): 16 M/s at a 1 s settle time, above what two cores' TLS link carries (7–14 M/s
    /// of 161-byte frames here). At 6 M, the default before, a 10 M-row send to a fast receiver stalled 0.4 s with
    /// a full window, waiting for its first rows to settle: 5.5 M/s where 8.2 M/s were possible (`measure-send.sh`).
    public static let defaultWindowRows = 16_000_000
    /// Rows a shard takes from the source at a time.
    public var chunkRows: Int
    /// Tries of a row that ends in a processing error (status 1) before it is reported rejected.
    public var processingErrorRetries: Int
    public var onUncertain: OnUncertain
    /// nil: io_uring where the kernel allows it (a probe decides), else sockets.
    public var transport: BinaryTransport?
    /// The most a TCP connect may take.
    public var connectTimeout: Duration
    /// The most a TLS handshake may take.
    public var handshakeTimeout: Duration
    /// How long a connection waits for the barrier's answer, or for the gateway to read what was written, after
    /// the gateway last showed life: then the connection is left (rows read the settle time before are presumed,
    /// the report counts the unanswered barrier).
    public var answerTimeout: Duration
    /// Connection events (connect, error response with status and identifier, close or reset, reconnect after N ms)
    /// at info, failed connects at warning; nothing per row above trace. Silent by default.
    public var logger = Logger(label: "salvo.binary", factory: { _ in SwiftLogNoOpLogHandler() })
    /// Where the rows a stopped job never took go (spilled to a file, or counted); nil: listed in the result's
    /// `unsettledRows`.
    public var unsettledTail: UnsettledTail?
    /// Where the job marks each row it writes and settles (`send --journal`); nil: no journal. The token source
    /// reads the same journal to skip what an earlier run settled.
    public var journal: RowJournal?
    /// Where the job reads the time and sets its timers: the settle and answer timeouts, the flush delay, the
    /// reconnect backoff, the connect spacing and the give-up deadline, and the drain's grace all run on it. A test
    /// drives a `ManualJobClock`.
    public var clock: any JobClock = SystemJobClock()

    public init(
        host: String,
        port: Int,
        serverName: String? = nil,
        credentials: GatewayCredentials,
        template: FrameTemplate,
        connections: Int = 2,
        flush: FlushPolicy = .default,
        reconnect: ReconnectPolicy = .default,
        settle: Duration = .seconds(1),
        peerReceiveBufferBytes: Int = 8 << 20,
        windowRows: Int = Self.defaultWindowRows,
        chunkRows: Int = 8192,
        processingErrorRetries: Int = 3,
        onUncertain: OnUncertain = .resend,
        transport: BinaryTransport? = nil,
        connectTimeout: Duration = .seconds(10),
        handshakeTimeout: Duration = .seconds(10),
        answerTimeout: Duration = .seconds(10)
    ) {
        self.host = host
        self.port = port
        self.serverName = serverName
        self.credentials = credentials
        self.template = template
        self.connections = connections
        self.flush = flush
        self.reconnect = reconnect
        self.settle = settle
        self.peerReceiveBufferBytes = peerReceiveBufferBytes
        self.windowRows = windowRows
        self.chunkRows = chunkRows
        self.processingErrorRetries = processingErrorRetries
        self.onUncertain = onUncertain
        self.transport = transport
        self.connectTimeout = connectTimeout
        self.handshakeTimeout = handshakeTimeout
        self.answerTimeout = answerTimeout
    }

    /// "binary command 2", for reports.
    var modeName: String { "binary command \(self.template.command.rawValue)" }
}
