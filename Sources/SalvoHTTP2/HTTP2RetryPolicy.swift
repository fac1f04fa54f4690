import SalvoEngine

/// When a request the service could not take (429 TooManyRequests, 500, 503, a refused stream) is sent again:
/// exponential backoff with full jitter, capped, never sooner than the server's `Retry-After`, and at most
/// `maximumAttempts` sends per row before the row is reported rejected with the last reason.
///
/// Pure: the caller passes the random value, so tests check the delays exactly.
public struct HTTP2RetryPolicy: Hashable, Sendable {
    /// The backoff ceiling after the first failure (nanoseconds).
    public var initialDelay: UInt64
    /// The largest backoff (nanoseconds); `Retry-After` may ask for more and is honoured.
    public var maximumDelay: UInt64
    /// Sends per row, the first included, before a retryable answer becomes a rejection.
    public var maximumAttempts: Int
    /// The largest `Retry-After` honoured (nanoseconds), so a hostile or broken header cannot park a job.
    public var maximumRetryAfter: UInt64

    public static let `default` = HTTP2RetryPolicy(
        initialDelay: 50_000_000,
        maximumDelay: 10_000_000_000,
        maximumAttempts: 8,
        maximumRetryAfter: 60_000_000_000
    )

    public init(initialDelay: UInt64, maximumDelay: UInt64, maximumAttempts: Int, maximumRetryAfter: UInt64) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.maximumAttempts = maximumAttempts
        self.maximumRetryAfter = maximumRetryAfter
    }

    /// Whether a row that has been sent `attempts` times may be sent again.
    public func allowsRetry(after attempts: Int) -> Bool {
        attempts < self.maximumAttempts
    }

    /// The wait (nanoseconds) before the next send of a row that failed `attempts` times in a row.
    ///
    /// - Parameters:
    ///   - attempts: sends so far (≥ 1).
    ///   - retryAfter: the server's `Retry-After`, in seconds, if it sent one.
    ///   - random: a value in [0, 1) (full jitter).
    public func delay(attempts: Int, retryAfter: Int64?, random: Double) -> UInt64 {
        let backoff = fullJitterBackoff(
            initialDelay: self.initialDelay,
            maximumDelay: self.maximumDelay,
            attempt: attempts,
            random: random
        )
        guard let retryAfter, retryAfter > 0 else { return backoff }
        let asked = UInt64(retryAfter).multipliedReportingOverflow(by: 1_000_000_000)
        let floor = asked.overflow ? self.maximumRetryAfter : min(asked.partialValue, self.maximumRetryAfter)
        return max(backoff, floor)
    }
}
