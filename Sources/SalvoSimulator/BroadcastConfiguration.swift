/// The broadcast side of the simulator: the channel management endpoint (its own port, as APNs serves it on its own
/// hosts), the broadcast endpoint on the HTTP/2 push port, and the channels' simulated subscribers and publishing
/// budget. Needs the HTTP/2 endpoint (`SimulatorConfiguration.http2`): both endpoints take its provider keys.
public struct BroadcastConfiguration: Sendable {
    /// How many broadcasts one channel may publish per window before it is answered 429 TooManyRequests. APNs
    /// documents a budget, higher for No Message Stored channels, and gives no number: these are the simulator's.
    public struct Budget: Sendable, Hashable, Codable {
        /// Broadcasts per window on a `message-storage-policy` 0 (No Message Stored) channel.
        public var noMessageStored: Int
        /// Broadcasts per window on a policy 1 (Most Recent Message Stored) channel.
        public var mostRecentMessageStored: Int
        /// The window, in seconds of the simulator's clock (fixed windows: second 0 ..< windowSeconds, …).
        public var windowSeconds: Int

        public init(noMessageStored: Int = 120, mostRecentMessageStored: Int = 30, windowSeconds: Int = 60) {
            self.noMessageStored = noMessageStored
            self.mostRecentMessageStored = mostRecentMessageStored
            self.windowSeconds = windowSeconds
        }

        /// The budget of a channel with `policy`.
        public func limit(for policy: ChannelStoragePolicy) -> Int {
            policy == .noMessageStored ? self.noMessageStored : self.mostRecentMessageStored
        }
    }

    /// The channel management endpoint's port (TLS, HTTP/2); 0 picks a free one (read it back from
    /// `Simulator.channelManagementPort`).
    public var channelManagementPort: Int = 0
    /// The apps (bundle ids) with broadcast turned on; every other app is answered 400 FeatureNotEnabled.
    public var enabledApps: Set<String>
    /// The most live channels one app may have (APNs: 10,000 per app and environment); one more is answered
    /// 400 CannotCreateChannelConfig. A deleted channel frees its place.
    public var channelLimit: Int = 10_000
    /// Simulated devices subscribed to each new channel (`ChannelRegistry.setSubscribers` changes one channel's).
    public var subscribers: Int = 100
    public var budget = Budget()
    /// Refusals, losses and repeats on purpose; a plan's `broadcast` object takes their place when it has one.
    public var faults = BroadcastFaults()

    public init(enabledApps: Set<String>) {
        self.enabledApps = enabledApps
    }
}

/// A channel's `message-storage-policy`, fixed when it is created.
public enum ChannelStoragePolicy: Int, Sendable, Hashable, Codable, CaseIterable {
    /// No Message Stored: a broadcast reaches the subscribers online at the time, and only them.
    case noMessageStored = 0
    /// Most Recent Message Stored: the newest broadcast waits (8 hours at most) for a subscriber that is offline.
    case mostRecentMessageStored = 1
}
