/// When a shard may connect again: exponential backoff with full jitter, and a floor between any two
/// connects, because the push service treats rapid connect and disconnect as an attack.
///
/// Pure: the random source and the clock come from the caller, so tests run without sleeping.
public struct ReconnectPolicy: Hashable, Sendable {
    /// The first backoff after a failure.
    public var initialDelay: Duration {
        get { .nanoseconds(self.initialNanoseconds) }
        set { self.initialNanoseconds = newValue.nanoseconds }
    }
    /// The largest backoff.
    public var maximumDelay: Duration {
        get { .nanoseconds(self.maximumNanoseconds) }
        set { self.maximumNanoseconds = newValue.nanoseconds }
    }
    /// The least time between two connects of one shard, failure or not.
    public var minimumInterval: Duration {
        get { .nanoseconds(self.floorNanoseconds) }
        set { self.floorNanoseconds = newValue.nanoseconds }
    }
    /// Failures in a row (a connect that succeeds resets the count) before giving up is considered at all.
    public var maximumAttempts: Int
    /// Give up only when, besides `maximumAttempts` failures in a row, the job has settled no row for this long:
    /// a gateway that refuses some connects (pacing them) while the job makes progress is backed off from, never
    /// abandoned, and one that is gone is given up on this long after the last row settled, not later (backoffs
    /// are cut to end at this deadline: `delay(failures:sinceLastConnect:sinceProgress:random:)`).
    public var giveUpAfter: Duration

    // Kept in nanoseconds of the monotonic clock the callers read, so that `delay` does no conversion.
    private var initialNanoseconds: UInt64
    private var maximumNanoseconds: UInt64
    private var floorNanoseconds: UInt64

    public static let `default` = ReconnectPolicy(
        initialDelay: .milliseconds(100),
        maximumDelay: .seconds(30),
        minimumInterval: .milliseconds(50),
        maximumAttempts: 4,
        giveUpAfter: .seconds(30)
    )

    public init(
        initialDelay: Duration,
        maximumDelay: Duration,
        minimumInterval: Duration,
        maximumAttempts: Int,
        giveUpAfter: Duration = .zero
    ) {
        self.initialNanoseconds = initialDelay.nanoseconds
        self.maximumNanoseconds = maximumDelay.nanoseconds
        self.floorNanoseconds = minimumInterval.nanoseconds
        self.maximumAttempts = maximumAttempts
        self.giveUpAfter = giveUpAfter
    }

    /// How long to wait before the next connect.
    ///
    /// - Parameters:
    ///   - failures: failures in a row so far (0: the connection ended normally, for example after an
    ///     error response, and only the floor applies).
    ///   - sinceLastConnect: time since the previous connect started (nanoseconds).
    ///   - random: a value in [0, 1) from the caller's generator (full jitter).
    /// - Returns: nanoseconds.
    public func delay(failures: Int, sinceLastConnect: UInt64, random: Double) -> UInt64 {
        let backoff =
            failures > 0
            ? fullJitterBackoff(
                initialDelay: self.initialNanoseconds,
                maximumDelay: self.maximumNanoseconds,
                attempt: failures,
                random: random
            ) : 0
        let floor = sinceLastConnect >= self.floorNanoseconds ? 0 : self.floorNanoseconds - sinceLastConnect
        return max(backoff, floor)
    }

    /// `delay(failures:sinceLastConnect:random:)`, cut so that the try after it comes no later than the give-up
    /// deadline (`giveUpAfter` after the last progress): a job whose gateway is gone ends at that deadline, not a
    /// whole backoff (up to `maximumDelay`) after it.
    ///
    /// - Parameter sinceProgress: nanoseconds since the job last settled a row (or started).
    public func delay(failures: Int, sinceLastConnect: UInt64, sinceProgress: UInt64, random: Double) -> UInt64 {
        let delay = self.delay(failures: failures, sinceLastConnect: sinceLastConnect, random: random)
        let deadline = self.giveUpAfter.nanoseconds
        guard sinceProgress < deadline else { return delay }
        let floor = sinceLastConnect >= self.floorNanoseconds ? 0 : self.floorNanoseconds - sinceLastConnect
        return min(delay, max(deadline - sinceProgress, floor))
    }

    /// Whether to stop trying: `maximumAttempts` failures in a row and no progress for `giveUpAfter`.
    ///
    /// - Parameter sinceProgress: nanoseconds since the job last settled a row (or started).
    public func givesUp(after failures: Int, sinceProgress: UInt64) -> Bool {
        failures >= self.maximumAttempts && sinceProgress >= self.giveUpAfter.nanoseconds
    }
}

/// Exponential backoff with full jitter: a wait drawn from [0, ceiling), the ceiling doubling from
/// `initialDelay` with each `attempt` (1 is the first) up to `maximumDelay`. Shared by reconnects and by
/// HTTP/2 retries.
///
/// - Parameter random: a value in [0, 1) from the caller's generator, so tests check delays exactly.
public func fullJitterBackoff(initialDelay: UInt64, maximumDelay: UInt64, attempt: Int, random: Double) -> UInt64 {
    let ceiling = backoffCeiling(initial: initialDelay, maximum: maximumDelay, attempt: attempt)
    return UInt64(Double(ceiling) * min(max(random, 0), 1))
}

/// The ceiling of an exponential backoff: `initial` doubled with each `attempt` after the first (1 is the first, and
/// anything below 1 counts as 1), never above `maximum`, saturating rather than overflowing.
public func backoffCeiling(initial: UInt64, maximum: UInt64, attempt: Int) -> UInt64 {
    let exponent = min(max(attempt - 1, 0), 40)
    let (scaled, overflow) = initial.multipliedReportingOverflow(by: 1 << exponent)
    return overflow ? maximum : min(maximum, scaled)
}

extension Duration {
    /// This duration in whole nanoseconds (negative durations are 0; saturates at the top).
    package var nanoseconds: UInt64 {
        let (seconds, attoseconds) = self.components
        guard seconds >= 0, attoseconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .max }
        return whole &+ UInt64(attoseconds / 1_000_000_000)
    }
}
