import Foundation
import SalvoBinary
import SalvoObservability
import SalvoRows
import SalvoSimulator

/// What a soak runs: rounds of bulk sends over one interface to the embedded simulator under one fault plan, until
/// `duration` has passed (a round that has started finishes) or `maximumRounds` have run.
public struct SoakConfiguration: Sendable {
    public enum Interface: String, Sendable, CaseIterable, Codable {
        case binary
        case h2
        /// Broadcast channels: each round creates channels, broadcasts one update to each and deletes them
        /// (`BroadcastSoakTarget`); embedded simulator only.
        case broadcast

        /// The interfaces that send to device tokens.
        public static let devicePush: [Interface] = [.binary, .h2]
    }

    public var interface: Interface
    public var duration: Duration
    /// At most this many rounds, whatever the duration (nil: no bound but the duration).
    public var maximumRounds: Int?
    /// The simulator's plan, and the name to show for it.
    public var plan: FaultPlan
    public var planName: String
    /// Tokens per round (fresh ones each round), or with `.broadcast` channels per round (at most 10,000, an app's
    /// limit); nil: `defaultTokens` for the gateway's plan.
    public var tokens: Int?
    public var connections: Int
    public var onUncertain: OnUncertain
    /// Seeds each round's tokens (round N uses `seed + N`).
    public var seed: UInt64
    /// The process is sampled this often during a round (and once after it).
    public var sampleInterval: Duration
    /// A running `salvo simulate` to send to instead of an embedded simulator per round.
    public var external: External?

    /// A running simulator, reached by address.
    public struct External: Sendable {
        /// The binary gateway (or, for HTTP/2, the HTTP/2 endpoint) and the name its certificate holds.
        public var host: String
        public var port: Int
        public var serverName: String
        /// Its control endpoint (`salvo simulate --control-port`), e.g. `http://127.0.0.1:2198`.
        public var control: URL
        /// Its certificate folder (`salvo simulate --certificates`): `ca.pem`, `client.pem`, `client-key.pem` and
        /// the development signing key.
        public var certificates: String
        /// The topic its client certificate names (`salvo simulate --topic`).
        public var topic: String
        /// The bearer token its control endpoint asks for (`salvo simulate` writes it to `control-token` in its
        /// certificate folder).
        public var controlToken: ControlToken

        public init(
            host: String,
            port: Int,
            serverName: String = "localhost",
            control: URL,
            controlToken: ControlToken,
            certificates: String,
            topic: String = "com.example.app"
        ) {
            self.host = host
            self.port = port
            self.serverName = serverName
            self.control = control
            self.controlToken = controlToken
            self.certificates = certificates
            self.topic = topic
        }
    }

    public init(
        interface: Interface,
        duration: Duration,
        maximumRounds: Int? = nil,
        plan: FaultPlan = FaultPlan(),
        planName: String? = nil,
        tokens: Int? = nil,
        connections: Int = 2,
        onUncertain: OnUncertain = .resend,
        seed: UInt64 = 0x50A4,
        sampleInterval: Duration = .milliseconds(500),
        external: External? = nil
    ) {
        self.interface = interface
        self.duration = duration
        self.maximumRounds = maximumRounds
        self.plan = plan
        self.planName = planName ?? plan.name
        self.tokens = tokens
        self.connections = connections
        self.onUncertain = onUncertain
        self.seed = seed
        self.sampleInterval = sampleInterval
        self.external = external
    }

    /// Tokens per round when not given: 100,000 over the binary interface and 20,000 over HTTP/2, fewer where the
    /// plan makes each invalid token cost a reconnect that the gateway paces (binary), so that a round's
    /// reconnects take a few seconds: invalid tokens ≈ 4 × connects per second. Broadcast rounds take 1,000
    /// channels (each created, broadcast to and deleted: three requests, a round of a few seconds).
    public static func defaultTokens(interface: Interface, plan: FaultPlan) -> Int {
        if interface == .broadcast { return 1000 }
        let base = interface == .binary ? 100_000 : 20_000
        let invalid = plan.invalidTokenFraction
        let pace = plan.connectionLimits.maxConnectsPerSecond
        guard interface == .binary, invalid > 0, pace > 0 else { return base }
        return max(1000, min(base, Int(4 * Double(pace) / invalid)))
    }
}
