/// When a shard writes what it has encoded: Nagle-style, once enough bytes wait or the oldest has waited
/// long enough.
///
/// A large write amortises the TLS record and the system call over many notifications; a deadline keeps
/// a trickle of notifications (retries, the tail of a job) from waiting forever. Pure: the shard asks it
/// with the time on its own clock.
public struct FlushPolicy: Hashable, Sendable {
    /// Write once this many plaintext bytes wait.
    public var bytes: Int
    /// Write once the oldest waiting byte has waited this long.
    public var delay: Duration {
        get { .nanoseconds(self.delayNanoseconds) }
        set { self.delayNanoseconds = newValue.nanoseconds }
    }
    /// `delay` on the monotonic clock the shard reads, so that a decision does no conversion.
    private(set) var delayNanoseconds: UInt64

    /// 64 KiB or 1 ms: 64 KiB fills a few TLS records and makes one large send; 1 ms keeps a trickle of
    /// retries timely.
    public static let `default` = FlushPolicy(bytes: 64 * 1024, delay: .milliseconds(1))

    public init(bytes: Int, delay: Duration) {
        precondition(bytes > 0, "a flush threshold is at least one byte")
        self.bytes = bytes
        self.delayNanoseconds = delay.nanoseconds
    }

    /// Whether to write now.
    ///
    /// - Parameters:
    ///   - pendingBytes: encoded and not yet written.
    ///   - oldestPendingAt: when the oldest of them was encoded (nanoseconds); nil when none wait.
    public func shouldFlush(pendingBytes: Int, oldestPendingAt: UInt64?, now: UInt64) -> Bool {
        guard pendingBytes > 0, let oldest = oldestPendingAt else { return false }
        return pendingBytes >= self.bytes || now &- oldest >= self.delayNanoseconds
    }

    /// How long (nanoseconds) until `shouldFlush` turns true by age alone; nil when nothing waits.
    public func delayUntilDue(oldestPendingAt: UInt64?, now: UInt64) -> UInt64? {
        guard let oldest = oldestPendingAt else { return nil }
        let age = now &- oldest
        return age >= self.delayNanoseconds ? 0 : self.delayNanoseconds - age
    }
}
