import Foundation

/// What the simulator does wrong on purpose, and how often: a Codable value read from JSON files
/// (`data/faults/*.json`) or built from command-line style options (`FaultPlan+Options.swift`).
///
/// Every random choice is drawn from a `SeededGenerator` seeded with `seed` (and a connection's
/// serial number), or from a keyed hash of the token (`TokenHash.isInFraction`) for per-token
/// choices, so a plan with a seed is repeatable. Missing JSON keys take the defaults below, which
/// together are the clean plan: no faults.
public struct FaultPlan: Codable, Sendable, Equatable {
    /// Which APNs environment the gateway plays, for "token of the other environment" errors.
    ///
    /// The model: a token whose first byte is odd is a production token, even is a sandbox token.
    /// `.any` accepts both (the default, so random test tokens are never rejected for it).
    public enum Environment: String, Codable, Sendable {
        case any
        case sandbox
        case production
    }

    /// Status 10 shutdowns: the error names the last accepted notification (on a command-0
    /// connection, which has no identifiers, the gateway just closes).
    public struct Shutdown: Codable, Sendable, Equatable {
        /// Shut a connection down right after its N-th accepted notification (0 = never).
        public var everyAccepted: Int
        /// Shut down after any accepted notification with this probability.
        public var probability: Double

        public init(everyAccepted: Int = 0, probability: Double = 0) {
            self.everyAccepted = everyAccepted
            self.probability = probability
        }
    }

    /// TCP resets with no error response (SO_LINGER 0 close, no TLS close_notify).
    public struct Reset: Codable, Sendable, Equatable {
        /// `.notification`: each notification, before it is checked, resets with `probability` and is
        /// not accepted. `.connection`: each connection is doomed with `probability` and resets at a
        /// notification index drawn uniformly from 1...`withinNotifications`.
        public enum Scope: String, Codable, Sendable {
            case notification
            case connection
        }

        public var probability: Double
        public var scope: Scope
        public var withinNotifications: Int

        public init(probability: Double = 0, scope: Scope = .notification, withinNotifications: Int = 1000) {
            self.probability = probability
            self.scope = scope
            self.withinNotifications = withinNotifications
        }
    }

    /// A slow reader: each socket read takes at most `chunkSize` bytes and waits `delayMilliseconds` first.
    public struct SlowReader: Codable, Sendable, Equatable {
        public var chunkSize: Int
        public var delayMilliseconds: Int
        /// The share of connections that read slowly (1 = all).
        public var probability: Double

        public init(chunkSize: Int = 4096, delayMilliseconds: Int = 10, probability: Double = 1) {
            self.chunkSize = chunkSize
            self.delayMilliseconds = delayMilliseconds
            self.probability = probability
        }
    }

    /// Connection limits; a connection over any of them is closed right after accept, before TLS,
    /// as APNs treats a reconnect storm. 0 means no limit.
    public struct ConnectionLimits: Codable, Sendable, Equatable {
        public var maxOpen: Int
        /// Minimum time between two connects from one client IP address.
        public var minIntervalPerClientMilliseconds: Int
        /// Connects accepted per second over all clients (a one-second sliding window).
        public var maxConnectsPerSecond: Int

        public init(maxOpen: Int = 0, minIntervalPerClientMilliseconds: Int = 0, maxConnectsPerSecond: Int = 0) {
            self.maxOpen = maxOpen
            self.minIntervalPerClientMilliseconds = minIntervalPerClientMilliseconds
            self.maxConnectsPerSecond = maxConnectsPerSecond
        }
    }

    /// Devices that are offline, for the quality-of-service model (store-and-forward, coalescing).
    public struct Devices: Codable, Sendable, Equatable {
        public var offlineTokens: [String]
        public var offlineFraction: Double
        /// Seconds after the simulator starts when offline devices come back; nil = never in this run.
        public var onlineAfterSeconds: UInt32?
        /// Seconds APNs keeps a notification for an offline device ("for a limited period"); nil = no limit.
        public var storageLimitSeconds: UInt32?

        public init(
            offlineTokens: [String] = [],
            offlineFraction: Double = 0,
            onlineAfterSeconds: UInt32? = nil,
            storageLimitSeconds: UInt32? = nil
        ) {
            self.offlineTokens = offlineTokens
            self.offlineFraction = offlineFraction
            self.onlineAfterSeconds = onlineAfterSeconds
            self.storageLimitSeconds = storageLimitSeconds
        }
    }

    /// Tokens whose app is gone, reported by the feedback service to connections of `topic`.
    ///
    /// With `reregisteredAt`, the app was installed again and registered the same tokens at that time, after
    /// the feedback timestamp: the feedback service still lists them (with `timestamp`, as APNs does until it
    /// has read it), but the gateways deliver to them again (no HTTP/2 410), and the verdict counts such a token
    /// that never arrived as wrongly dropped — a provider must compare the list's time with the device's last
    /// registration (Apple's rule, `salvo prune --registered-at`).
    public struct Uninstalled: Codable, Sendable, Equatable {
        public var topic: String
        public var tokens: [String]
        /// The feedback timestamp (UNIX seconds); nil = the simulator's start time.
        public var timestamp: UInt32?
        /// When the devices registered these tokens again (UNIX seconds); nil: they did not.
        public var reregisteredAt: UInt32?

        public init(topic: String, tokens: [String], timestamp: UInt32? = nil, reregisteredAt: UInt32? = nil) {
            self.topic = topic
            self.tokens = tokens
            self.timestamp = timestamp
            self.reregisteredAt = reregisteredAt
        }
    }

    public var name: String = "clean"
    public var seed: UInt64 = 1
    public var environment: Environment = .any
    /// Tokens (hex) answered with status 8.
    public var invalidTokens: [String] = []
    /// A seeded fraction of all tokens answered with status 8 (stable per token).
    public var invalidTokenFraction: Double = 0
    /// Tokens (hex) registered for another app: the HTTP/2 endpoint answers them 400 DeviceTokenNotForTopic.
    /// HTTP/2 only: the binary protocol has no such status, and the binary gateway accepts them.
    public var foreignTokens: [String] = []
    /// A seeded fraction of all tokens registered for another app (stable per token, drawn independently of
    /// `invalidTokenFraction`); HTTP/2 only, as `foreignTokens`.
    public var foreignTokenFraction: Double = 0
    /// Tokens (hex) that are no longer valid, as a Live Activity's token is once its activity ended: the HTTP/2
    /// endpoint answers them 410 ExpiredToken (a token gone, as Unregistered). HTTP/2 only, as `foreignTokens`.
    public var expiredTokens: [String] = []
    public var shutdown: Shutdown = Shutdown()
    public var reset: Reset = Reset()
    public var slowReader: SlowReader?
    public var connectionLimits: ConnectionLimits = ConnectionLimits()
    /// The delay before an error response is written (notifications keep being discarded meanwhile).
    public var errorDelayMilliseconds: Int = 0
    public var devices: Devices = Devices()
    public var uninstalled: [Uninstalled] = []
    /// Every byte of every endpoint (gateway, feedback, HTTP/2) is held this long in each direction, as over a
    /// network this far away (a round trip is twice this) …
    public var latencyMilliseconds: Int = 0
    /// … plus up to this much more, drawn per batch of bytes from the seeded generator (order is kept).
    public var jitterMilliseconds: Int = 0
    /// A seeded fraction of accepted notifications that the simulator never records, as a broken gateway that
    /// loses what it accepted: no error, no ledger entry. Only for proving that a check (the verdict, `salvo soak`)
    /// catches a loss; no real gateway is modelled by it.
    public var lostFraction: Double = 0
    /// The HTTP/2 endpoint's faults; nil leaves the endpoint's own (`HTTP2EndpointConfiguration.faults`).
    public var http2: HTTP2EndpointConfiguration.Faults?
    /// The broadcast endpoint's faults; nil leaves the simulator's own (`BroadcastConfiguration.faults`).
    public var broadcast: BroadcastFaults?

    /// The clean plan: everything valid is accepted.
    public init() {}

    /// Reads a plan from a JSON file.
    public static func load(contentsOf path: String) throws(SimulatorError) -> FaultPlan {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw SimulatorError(.invalidFaultPlan, "cannot read fault plan \(path): \(error)")
        }
        do {
            return try FaultPlan.decode(data)
        } catch {
            throw SimulatorError(.invalidFaultPlan, "fault plan \(path) is not valid: \(error.reason)")
        }
    }

    private enum CodingKeys: String, CodingKey {
        case name, seed, environment, invalidTokens, invalidTokenFraction, foreignTokens, foreignTokenFraction
        case expiredTokens
        case shutdown, reset, slowReader
        case connectionLimits, errorDelayMilliseconds, devices, uninstalled
        case latencyMilliseconds, jitterMilliseconds, http2, lostFraction, broadcast
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = FaultPlan()
        self.name = try c.decodeIfPresent(String.self, forKey: .name) ?? d.name
        self.seed = try c.decodeIfPresent(UInt64.self, forKey: .seed) ?? d.seed
        self.environment = try c.decodeIfPresent(Environment.self, forKey: .environment) ?? d.environment
        self.invalidTokens = try c.decodeIfPresent([String].self, forKey: .invalidTokens) ?? d.invalidTokens
        self.invalidTokenFraction =
            try c.decodeIfPresent(Double.self, forKey: .invalidTokenFraction) ?? d.invalidTokenFraction
        self.foreignTokens = try c.decodeIfPresent([String].self, forKey: .foreignTokens) ?? d.foreignTokens
        self.foreignTokenFraction =
            try c.decodeIfPresent(Double.self, forKey: .foreignTokenFraction) ?? d.foreignTokenFraction
        self.expiredTokens = try c.decodeIfPresent([String].self, forKey: .expiredTokens) ?? d.expiredTokens
        self.shutdown = try c.decodeIfPresent(Shutdown.self, forKey: .shutdown) ?? d.shutdown
        self.reset = try c.decodeIfPresent(Reset.self, forKey: .reset) ?? d.reset
        self.slowReader = try c.decodeIfPresent(SlowReader.self, forKey: .slowReader)
        self.connectionLimits =
            try c.decodeIfPresent(ConnectionLimits.self, forKey: .connectionLimits) ?? d.connectionLimits
        self.errorDelayMilliseconds =
            try c.decodeIfPresent(Int.self, forKey: .errorDelayMilliseconds) ?? d.errorDelayMilliseconds
        self.devices = try c.decodeIfPresent(Devices.self, forKey: .devices) ?? d.devices
        self.uninstalled = try c.decodeIfPresent([Uninstalled].self, forKey: .uninstalled) ?? d.uninstalled
        self.latencyMilliseconds = try c.decodeIfPresent(Int.self, forKey: .latencyMilliseconds) ?? 0
        self.jitterMilliseconds = try c.decodeIfPresent(Int.self, forKey: .jitterMilliseconds) ?? 0
        self.http2 = try c.decodeIfPresent(HTTP2EndpointConfiguration.Faults.self, forKey: .http2)
        self.lostFraction = try c.decodeIfPresent(Double.self, forKey: .lostFraction) ?? 0
        self.broadcast = try c.decodeIfPresent(BroadcastFaults.self, forKey: .broadcast)
    }
}

// Plans are written by hand: every key of a nested object is optional and takes its default.
extension FaultPlan.Shutdown {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            everyAccepted: try c.decodeIfPresent(Int.self, forKey: .everyAccepted) ?? 0,
            probability: try c.decodeIfPresent(Double.self, forKey: .probability) ?? 0
        )
    }
}

extension FaultPlan.Reset {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            probability: try c.decodeIfPresent(Double.self, forKey: .probability) ?? 0,
            scope: try c.decodeIfPresent(Scope.self, forKey: .scope) ?? .notification,
            withinNotifications: try c.decodeIfPresent(Int.self, forKey: .withinNotifications) ?? 1000
        )
    }
}

extension FaultPlan.SlowReader {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            chunkSize: try c.decodeIfPresent(Int.self, forKey: .chunkSize) ?? 4096,
            delayMilliseconds: try c.decodeIfPresent(Int.self, forKey: .delayMilliseconds) ?? 10,
            probability: try c.decodeIfPresent(Double.self, forKey: .probability) ?? 1
        )
    }
}

extension FaultPlan.ConnectionLimits {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            maxOpen: try c.decodeIfPresent(Int.self, forKey: .maxOpen) ?? 0,
            minIntervalPerClientMilliseconds: try c.decodeIfPresent(Int.self, forKey: .minIntervalPerClientMilliseconds)
                ?? 0,
            maxConnectsPerSecond: try c.decodeIfPresent(Int.self, forKey: .maxConnectsPerSecond) ?? 0
        )
    }
}

extension FaultPlan.Devices {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            offlineTokens: try c.decodeIfPresent([String].self, forKey: .offlineTokens) ?? [],
            offlineFraction: try c.decodeIfPresent(Double.self, forKey: .offlineFraction) ?? 0,
            onlineAfterSeconds: try c.decodeIfPresent(UInt32.self, forKey: .onlineAfterSeconds),
            storageLimitSeconds: try c.decodeIfPresent(UInt32.self, forKey: .storageLimitSeconds)
        )
    }
}
