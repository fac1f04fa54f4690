import Logging
import NIOCore
import NIOSSL
import SalvoProxy
import SalvoRows

/// Where and how to connect: the server, credentials, trust, connection count and the timing of requests,
/// health checks and reconnects.
public struct HTTP2ClientConfiguration: Sendable {
    /// The server's host name or address (`GatewayAddress.production(.http2)`, `.sandbox(.http2)`, or a
    /// simulator's address).
    public var host: String
    /// 443 for APNs (2197 also works).
    public var port: Int
    /// The name the server's certificate is checked against and sent in SNI and `:authority`; the host when nil.
    public var serverName: String?
    /// A client certificate or a provider token.
    public var authentication: APNSAuthentication
    /// The roots that verify the server; the system's by default.
    public var trustRoots: NIOSSLTrustRoots = .default
    /// Connections to open; each multiplexes many requests. With `maximumConnections`, the connections opened at
    /// the start.
    public var connections = 1
    /// Nil: `connections` is a fixed count. Set (`--connections auto`): the job opens `connections`, then more while
    /// the measured round trip × the rate of answers fills the streams it has and the rate still rises, up to this
    /// many (`HTTP2ConnectionSizer`).
    public var maximumConnections: Int?
    /// Our own cap on streams in flight per connection, below the server's `SETTINGS_MAX_CONCURRENT_STREAMS`; nil
    /// (the default) follows the server's limit as it changes.
    ///
    /// One connection delivers at most (streams in flight) / (round trip): APNs announces 500–1,500 streams, and at
    /// a real distance (20–150 ms) every one of them is needed. A cap is for a server that announces more than a
    /// job should use.
    public var maximumStreamsPerConnection: Int?
    /// At most this many requests per second across every connection (a token bucket that starts empty, with a
    /// burst of 50 ms worth); nil for as fast as the server answers.
    public var rate: Int?
    /// How long a request may wait for its answer before its stream is cancelled and its row is uncertain.
    public var requestTimeout: Duration = .seconds(10)
    /// How long a TCP connect may take (and, through a proxy, the tunnel after it).
    public var connectTimeout: Duration = .seconds(10)
    /// The proxy every connection goes through (`HTTP2ConnectionFactory`); nil for a direct connection.
    public var proxy: ProxyConfiguration?
    /// An idle connection is checked with PING this often …
    public var pingInterval: Duration = .seconds(60)
    /// … and closed when the answer takes longer than this.
    public var pingTimeout: Duration = .seconds(10)
    /// When to connect again after a connection failed or was closed.
    public var reconnect: ReconnectPolicy = .default
    /// HTTP/2 with prior knowledge over plain TCP: no TLS, no ALPN, `:scheme http`. For testing a server on this
    /// machine (APNs speaks only TLS): the host must be a loopback address (127.0.0.0/8 or ::1), and the
    /// authentication a provider token, since a client certificate needs TLS.
    public var cleartext = false
    /// Whether the TLS handshake offers `h2` with ALPN, as APNs requires. Off only to test a server that speaks
    /// HTTP/2 over TLS without ALPN: the client then speaks HTTP/2 by prior knowledge and does not ask the
    /// server to have chosen it.
    public var offersALPN = true
    /// The code that speaks HTTP/2 (`HTTP2Engine`).
    public var engine = Self.defaultEngine
    /// The engine a job uses unless told otherwise.
    public static let defaultEngine = HTTP2Engine.wire
    /// The seed of the job's jitter (retry backoff, reconnect delays): each connection slot gets a `SplitMix64`
    /// seeded from it and its index, and each connection one seeded from its slot's. Random by default; a fixed
    /// seed makes the delays of a run repeatable.
    public var randomSeed = UInt64.random(in: .min ... .max)
    /// Where the job reads the time for its decisions: request and PING timeouts, retry and reconnect backoff, the
    /// rate, the give-up, the bounded wait for the servers' goodbyes. The system's by default; a test moves a
    /// `ManualJobClock` instead of waiting. The event loops' timers only say when to look again.
    public var clock: any JobClock = SystemJobClock()
    /// Connection events (connect, close, GOAWAY, reconnect after N ms) at info, failed connects at warning;
    /// nothing per request above trace. Silent by default.
    public var logger = Logger(label: "salvo.h2", factory: { _ in SwiftLogNoOpLogHandler() })
    /// The id of each connection's first stream: odd, 1 in HTTP/2. Tests start near 2^31 − 1 to reach the end of
    /// the id space in a few requests.
    var firstStreamID: Int32 = 1

    public init(host: String, port: Int = 443, authentication: APNSAuthentication) {
        self.host = host
        self.port = port
        self.authentication = authentication
    }

    /// The `:authority` and TLS name.
    var authority: String { self.serverName ?? self.host }

    /// Checks the values a person can get wrong.
    func validate() throws(HTTP2ClientError) {
        guard (1...65535).contains(self.port) else {
            throw HTTP2ClientError(.configuration, "the port must be 1–65535 (got \(self.port))")
        }
        guard (1...256).contains(self.connections) else {
            throw HTTP2ClientError(.configuration, "connections must be 1–256 (got \(self.connections))")
        }
        if let maximum = self.maximumConnections, !(self.connections...256).contains(maximum) {
            throw HTTP2ClientError(
                .configuration,
                "maximumConnections must be \(self.connections)–256, at least connections (got \(maximum))"
            )
        }
        guard (self.rate ?? 1) >= 1 else {
            throw HTTP2ClientError(.configuration, "the rate must be at least 1 request per second")
        }
        guard (self.maximumStreamsPerConnection ?? 1) >= 1 else {
            throw HTTP2ClientError(.configuration, "maximumStreamsPerConnection must be at least 1")
        }
        guard self.requestTimeout > .zero, self.pingInterval > .zero, self.pingTimeout > .zero else {
            throw HTTP2ClientError(.configuration, "timeouts and the ping interval must be positive")
        }
        if self.cleartext {
            guard self.proxy == nil else {
                throw HTTP2ClientError(.configuration, "cleartext HTTP/2 is for a loopback server: it takes no proxy")
            }
            guard Self.isLoopbackAddress(self.host) else {
                throw HTTP2ClientError(
                    .configuration,
                    "cleartext HTTP/2 is only for a server on this machine: the host must be a loopback address "
                        + "(127.0.0.0/8 or ::1), not \(self.host)"
                )
            }
            guard self.authentication.providerToken != nil else {
                throw HTTP2ClientError(
                    .configuration,
                    "a client certificate needs TLS: use a provider token with cleartext HTTP/2"
                )
            }
        }
        guard self.firstStreamID > 0, self.firstStreamID % 2 == 1 else {
            throw HTTP2ClientError(
                .configuration,
                "a client's stream ids are odd and positive (got \(self.firstStreamID))"
            )
        }
    }

    /// The `:scheme` of every request.
    var scheme: String { self.cleartext ? "http" : "https" }

    /// Whether `host` is an IPv4 loopback address (127.0.0.0/8) or the IPv6 one (::1). Names are not resolved:
    /// `localhost` could be anything.
    static func isLoopbackAddress(_ host: String) -> Bool {
        switch try? SocketAddress(ipAddress: host, port: 0) {
        case .v4(let address):
            return UInt32(bigEndian: address.address.sin_addr.s_addr) >> 24 == 127
        case .v6(let address):
            return withUnsafeBytes(of: address.address.sin6_addr) {
                $0.elementsEqual([UInt8](repeating: 0, count: 15) + [1])
            }
        default:
            return false
        }
    }

    /// The TLS context every connection of a job shares: TLS 1.2 or later, ALPN `h2` (unless `offersALPN` is
    /// off), the client certificate when there is one. Nil in cleartext mode.
    package func makeSSLContext() throws(HTTP2ClientError) -> NIOSSLContext? {
        guard !self.cleartext else { return nil }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = self.offersALPN ? ["h2"] : []
        tls.trustRoots = self.trustRoots
        // Closing waits this long at most for the server's close_notify: a connection is closed only when nothing
        // is left on it, and a server that has gone silent must not hold a stopping job (NIOSSL's default is 5 s).
        tls.shutdownTimeout = .milliseconds(250)
        if case .certificate(let chain, let key) = self.authentication.storage {
            tls.certificateChain = chain.map { .certificate($0) }
            tls.privateKey = .privateKey(key)
        }
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw HTTP2ClientError(.credentials, "cannot set up TLS with these credentials and roots: \(error)")
        }
    }
}
