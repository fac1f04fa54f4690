import Foundation

/// Everything `Simulator.start` needs: where to listen, which certificates (given, never made here), which
/// fault plan.
public struct SimulatorConfiguration: Sendable {
    /// PEM texts for the servers' TLS: their certificate and key, and the CA that client
    /// certificates must chain to (connections without one are refused at the handshake).
    public struct TLS: Sendable {
        public var certificatePEM: String
        public var privateKeyPEM: String
        public var clientCAPEM: String

        public init(certificatePEM: String, privateKeyPEM: String, clientCAPEM: String) {
            self.certificatePEM = certificatePEM
            self.privateKeyPEM = privateKeyPEM
            self.clientCAPEM = clientCAPEM
        }

        /// Reads the three PEM files: the server's certificate (chain), its key, and the CA for clients.
        public init(certificateFile: String, privateKeyFile: String, clientCAFile: String) throws(SimulatorError) {
            do {
                self.init(
                    certificatePEM: try String(contentsOfFile: certificateFile, encoding: .utf8),
                    privateKeyPEM: try String(contentsOfFile: privateKeyFile, encoding: .utf8),
                    clientCAPEM: try String(contentsOfFile: clientCAFile, encoding: .utf8)
                )
            } catch {
                throw SimulatorError(
                    .certificates,
                    "cannot read the certificates \(certificateFile), \(privateKeyFile), \(clientCAFile): \(error)"
                )
            }
        }
    }

    /// The address both services listen on (loopback by default).
    public var host: String = "127.0.0.1"
    /// The binary gateway's port; 0 picks a free one (read it back from `Simulator.gatewayPort`).
    public var gatewayPort: Int = 0
    /// The feedback service's port; 0 picks a free one.
    public var feedbackPort: Int = 0
    public var tls: TLS
    public var plan: FaultPlan = FaultPlan()
    /// The clock for expiries, feedback timestamps and the QoS model.
    public var clock: any SimulatorClock = SystemClock()
    /// The most distinct tokens the ledger records (memory: 64 bytes × the next power of two ≥ 4/3 of it).
    public var maximumTokens: Int = 12_000_000
    /// A sizing hint: the ledger's table starts with room for this many distinct tokens, so a large
    /// run never pauses to rehash it (memory: 64 bytes × the next power of two ≥ 4/3 of it, at once).
    public var expectedTokens: Int = 0
    /// Event loop threads serving connections.
    public var threads: Int = 1
    /// The HTTP/2 provider API endpoint; none when nil.
    public var http2: HTTP2EndpointConfiguration?
    /// Broadcasts: the channel management endpoint on its own port and the broadcast endpoint on the HTTP/2 port
    /// (which they need); none when nil.
    public var broadcast: BroadcastConfiguration?

    /// The one-way delay of every byte on every endpoint (the plan's `latencyMilliseconds`).
    public var latencyMilliseconds: Int {
        get { self.plan.latencyMilliseconds }
        set { self.plan.latencyMilliseconds = newValue }
    }

    /// The seeded jitter on top of it (the plan's `jitterMilliseconds`).
    public var jitterMilliseconds: Int {
        get { self.plan.jitterMilliseconds }
        set { self.plan.jitterMilliseconds = newValue }
    }

    public init(tls: TLS) {
        self.tls = tls
    }
}
