import SalvoService

/// How the webhooks are delivered: the batches, the retries, the bound on one attempt, the clock and the jitter's
/// randomness (injected: the tests' own).
public struct WebhookConfiguration: Sendable {
    public var batching = WebhookBatching()
    public var retry = WebhookRetry.Policy()
    /// The longest one attempt may take, connect to last byte of the answer (milliseconds).
    public var requestTimeout: Int64 = 10_000
    /// The longest an idle endpoint waits before it looks at the outbox again, though nothing woke it (milliseconds).
    public var idleCheck: Int64 = 5000
    /// How long delivered and dead events stay in the outbox (milliseconds; `serve --webhook-retention-days`): a
    /// receiver that drops repeats by id keeps its ids at least this long.
    public var retention: Int64 = 7 * 86_400_000
    /// How often each endpoint's loop removes the events past `retention` (milliseconds).
    public var pruneEvery: Int64 = 3_600_000
    /// Milliseconds since 1970.
    public var now: @Sendable () -> Int64 = { ServiceClock.milliseconds() }
    /// A delay drawn from `0...ceiling`.
    public var jitter: @Sendable (Int64) -> Int64 = { Int64.random(in: 0...max(0, $0)) }

    public init() {}
}
