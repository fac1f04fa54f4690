/// When a webhook's receiver is tried again after a failed delivery, and when its events are given up on: a value
/// with the time and the randomness given, so that its decisions are tested without a clock or a socket.
///
/// Exponential backoff with full jitter: after the n-th failure in a row the next attempt comes after a delay drawn
/// from 0 up to `min(cap, base × 2^(n-1))`. The backoff is the endpoint's (a receiver that is down gets one attempt
/// at a time, not one per event); an event is given up on (dead) when an attempt fails once it is older than
/// `maximumAge`. A delivery that succeeds starts the count again.
public struct WebhookRetry: Sendable, Hashable {
    public struct Policy: Sendable, Hashable {
        /// Milliseconds.
        public var base: Int64
        public var cap: Int64
        /// How long an event is tried for, from its creation.
        public var maximumAge: Int64

        /// 1 s, doubled up to 5 minutes, for 72 hours.
        public init(base: Int64 = 1000, cap: Int64 = 300_000, maximumAge: Int64 = 72 * 3_600_000) {
            self.base = base
            self.cap = cap
            self.maximumAge = maximumAge
        }
    }

    public let policy: Policy
    /// Failures since the last success.
    public private(set) var failures = 0
    /// No attempt before this time (milliseconds since 1970); nil: at once.
    public private(set) var nextAttemptAt: Int64?

    public init(policy: Policy = Policy()) { self.policy = policy }

    /// The longest delay after the `failures`-th failure in a row.
    public func ceiling(afterFailures failures: Int) -> Int64 {
        guard failures > 0 else { return 0 }
        let shift = min(failures - 1, 40)
        let grown = self.policy.base.multipliedReportingOverflow(by: Int64(1) << shift)
        return grown.overflow ? self.policy.cap : min(self.policy.cap, grown.partialValue)
    }

    /// Whether an attempt may go at `now`.
    public func mayAttempt(now: Int64) -> Bool {
        self.nextAttemptAt.map { now >= $0 } ?? true
    }

    /// An attempt failed at `now`; `jitter(ceiling)` draws the delay from `0...ceiling`.
    /// - Returns: when the next attempt may go.
    @discardableResult
    public mutating func failed(now: Int64, jitter: (Int64) -> Int64) -> Int64 {
        self.failures += 1
        let ceiling = self.ceiling(afterFailures: self.failures)
        let delay = min(max(0, jitter(ceiling)), ceiling)
        let next = now + delay
        self.nextAttemptAt = next
        return next
    }

    /// An attempt succeeded: the next goes at once.
    public mutating func succeeded() {
        self.failures = 0
        self.nextAttemptAt = nil
    }

    /// Whether an event made at `createdAt` is given up on when an attempt with it fails at `now`.
    public func isDead(createdAt: Int64, now: Int64) -> Bool {
        now - createdAt >= self.policy.maximumAge
    }
}
