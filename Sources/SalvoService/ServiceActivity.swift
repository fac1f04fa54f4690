/// What the service's transactional traffic did, as the console shows it: notifications accepted and refused when
/// posted, final outcomes by state, refusals by reason with the last time each was seen, counts per second over the
/// last hour (`RateRing`), and the end-to-end latency of the last deliveries. Kept by `NotificationService` at the
/// points where it records its metrics, from the same values; times are given (milliseconds since 1970).
public struct ServiceActivity: Sendable {
    /// Refusals with one reason: APNs' (`BadDeviceToken`, `Unregistered`, …) or the service's own.
    public struct Refusal: Hashable, Sendable {
        public var reason: String
        /// The last one's HTTP status, when it had one.
        public var status: Int?
        public var count: Int
        public var lastAt: Int64
    }

    /// Notifications accepted (on disk).
    public private(set) var accepted = 0
    /// Notifications refused in the requests that posted them (each with its field).
    public private(set) var refusedWhenPosted = 0
    /// Final outcomes by state.
    public private(set) var finals: [NotificationState: Int] = [:]
    /// Final refusals by reason (at most `maximumReasons`; the one seen longest ago makes room).
    public private(set) var refusals: [String: Refusal] = [:]
    public private(set) var acceptedPerSecond = RateRing()
    public private(set) var deliveredPerSecond = RateRing()
    public private(set) var refusedPerSecond = RateRing()
    /// The last `latencyWindow` end-to-end latencies (acceptance to APNs' 200), in milliseconds, in a ring.
    private var latencies: [Int64] = []
    private var nextLatency = 0

    public static let latencyWindow = 4096
    public static let maximumReasons = 64

    public init() {}

    mutating func accept(_ count: Int, at milliseconds: Int64) {
        self.accepted += count
        self.acceptedPerSecond.add(count, at: milliseconds)
    }

    mutating func refuseWhenPosted(_ count: Int) {
        self.refusedWhenPosted += count
    }

    /// A notification's final state; `latency` for a delivered one.
    mutating func settle(
        _ state: NotificationState,
        status: Int? = nil,
        reason: String? = nil,
        latency: Int64? = nil,
        at milliseconds: Int64
    ) {
        guard state.isFinal else { return }
        self.finals[state, default: 0] += 1
        switch state {
        case .delivered:
            self.deliveredPerSecond.add(1, at: milliseconds)
        case .refused:
            self.refusedPerSecond.add(1, at: milliseconds)
            let reason = reason ?? "unknown"
            if self.refusals[reason] == nil, self.refusals.count >= Self.maximumReasons,
                let oldest = self.refusals.values.min(by: { $0.lastAt < $1.lastAt })
            {
                self.refusals[oldest.reason] = nil
            }
            var refusal = self.refusals[reason] ?? Refusal(reason: reason, status: nil, count: 0, lastAt: milliseconds)
            refusal.count += 1
            refusal.status = status ?? refusal.status
            refusal.lastAt = max(refusal.lastAt, milliseconds)
            self.refusals[reason] = refusal
        default:
            break
        }
        if let latency {
            if self.latencies.count < Self.latencyWindow {
                self.latencies.append(max(0, latency))
            } else {
                self.latencies[self.nextLatency] = max(0, latency)
            }
            self.nextLatency = (self.nextLatency + 1) % Self.latencyWindow
        }
    }

    /// The end-to-end latency at quantile `q` (0 to 1) of the last deliveries, by nearest rank; nil before any.
    public func latency(quantile q: Double) -> Int64? {
        guard !self.latencies.isEmpty else { return nil }
        let sorted = self.latencies.sorted()
        let rank = Int((q * Double(sorted.count)).rounded(.up))
        return sorted[min(max(rank, 1), sorted.count) - 1]
    }

    /// How many latencies the quantiles are taken over.
    public var latencySamples: Int { self.latencies.count }

    /// The refusals by reason, the latest seen first.
    public var latestRefusals: [Refusal] {
        self.refusals.values.sorted {
            if $0.lastAt != $1.lastAt { return $0.lastAt > $1.lastAt }
            if $0.count != $1.count { return $0.count > $1.count }
            return $0.reason < $1.reason
        }
    }
}
