import SalvoRows

/// When a request the service could not take (429 TooManyRequests, 500, 503, a refused stream) is sent again:
/// exponential backoff with full jitter, capped, never sooner than the server's `Retry-After`, and at most
/// `maximumAttempts` sends per row before the row is left unsent and listed as unsettled (the service never took
/// it; the token may be good).
///
/// Pure: the caller passes the random value, so tests check the delays exactly.
public struct HTTP2RetryPolicy: Hashable, Sendable {
    /// The backoff ceiling after the first failure.
    public var initialDelay: Duration {
        get { .nanoseconds(self.initialNanoseconds) }
        set { self.initialNanoseconds = newValue.nanoseconds }
    }
    /// The largest backoff; `Retry-After` may ask for more and is honoured.
    public var maximumDelay: Duration {
        get { .nanoseconds(self.maximumNanoseconds) }
        set { self.maximumNanoseconds = newValue.nanoseconds }
    }
    /// Sends per row, the first included, before a row answered only with retryable answers is left unsent.
    public var maximumAttempts: Int
    /// The largest `Retry-After` honoured, so a hostile or broken header cannot park a job.
    public var maximumRetryAfter: Duration {
        get { .nanoseconds(self.retryAfterCapNanoseconds) }
        set { self.retryAfterCapNanoseconds = newValue.nanoseconds }
    }

    // Nanoseconds of the monotonic clock the connections read, so that `delay` does no conversion.
    private var initialNanoseconds: UInt64
    private var maximumNanoseconds: UInt64
    private var retryAfterCapNanoseconds: UInt64

    public static let `default` = HTTP2RetryPolicy(
        initialDelay: .milliseconds(50),
        maximumDelay: .seconds(10),
        maximumAttempts: 8,
        maximumRetryAfter: .seconds(60)
    )

    public init(initialDelay: Duration, maximumDelay: Duration, maximumAttempts: Int, maximumRetryAfter: Duration) {
        self.initialNanoseconds = initialDelay.nanoseconds
        self.maximumNanoseconds = maximumDelay.nanoseconds
        self.maximumAttempts = maximumAttempts
        self.retryAfterCapNanoseconds = maximumRetryAfter.nanoseconds
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
            initialDelay: self.initialNanoseconds,
            maximumDelay: self.maximumNanoseconds,
            attempt: attempts,
            random: random
        )
        guard let retryAfter, retryAfter > 0 else { return backoff }
        let asked = UInt64(retryAfter).multipliedReportingOverflow(by: 1_000_000_000)
        let floor =
            asked.overflow ? self.retryAfterCapNanoseconds : min(asked.partialValue, self.retryAfterCapNanoseconds)
        return max(backoff, floor)
    }
}
