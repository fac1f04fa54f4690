/// When a shard may connect again: exponential backoff with full jitter, and a floor between any two
/// connects, because the push service treats rapid connect and disconnect as an attack.
///
/// Pure: the random source and the clock come from the caller, so tests run without sleeping.
public struct ReconnectPolicy: Hashable, Sendable {
    /// The first backoff after a failure (nanoseconds).
    public var initialDelay: UInt64
    /// The largest backoff (nanoseconds).
    public var maximumDelay: UInt64
    /// The least time between two connects of one shard, failure or not (nanoseconds).
    public var minimumInterval: UInt64
    /// Give up after this many failures in a row (a connect that succeeds resets the count).
    public var maximumAttempts: Int

    public static let `default` = ReconnectPolicy(
        initialDelay: 100_000_000,
        maximumDelay: 30_000_000_000,
        minimumInterval: 50_000_000,
        maximumAttempts: 12
    )

    public init(initialDelay: UInt64, maximumDelay: UInt64, minimumInterval: UInt64, maximumAttempts: Int) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.minimumInterval = minimumInterval
        self.maximumAttempts = maximumAttempts
    }

    /// How long to wait before the next connect.
    ///
    /// - Parameters:
    ///   - failures: failures in a row so far (0: the connection ended normally, for example after an
    ///     error response, and only the floor applies).
    ///   - sinceLastConnect: time since the previous connect started.
    ///   - random: a value in [0, 1) from the caller's generator (full jitter).
    public func delay(failures: Int, sinceLastConnect: UInt64, random: Double) -> UInt64 {
        let backoff =
            failures > 0
            ? fullJitterBackoff(
                initialDelay: self.initialDelay,
                maximumDelay: self.maximumDelay,
                attempt: failures,
                random: random
            ) : 0
        let floor = sinceLastConnect >= self.minimumInterval ? 0 : self.minimumInterval - sinceLastConnect
        return max(backoff, floor)
    }

    /// Whether to stop trying.
    public func givesUp(after failures: Int) -> Bool {
        failures >= self.maximumAttempts
    }
}

/// Exponential backoff with full jitter: a wait drawn from [0, ceiling), the ceiling doubling from
/// `initialDelay` with each `attempt` (1 is the first) up to `maximumDelay`. Shared by reconnects and by
/// HTTP/2 retries.
///
/// - Parameter random: a value in [0, 1) from the caller's generator, so tests check delays exactly.
public func fullJitterBackoff(initialDelay: UInt64, maximumDelay: UInt64, attempt: Int, random: Double) -> UInt64 {
    let exponent = min(max(attempt - 1, 0), 40)
    let (scaled, overflow) = initialDelay.multipliedReportingOverflow(by: 1 << exponent)
    let ceiling = overflow ? maximumDelay : min(maximumDelay, scaled)
    return UInt64(Double(ceiling) * min(max(random, 0), 1))
}
