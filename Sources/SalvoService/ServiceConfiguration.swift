import SalvoHTTP2
import SalvoRows

#if canImport(Glibc)
import Glibc
#endif

/// How a service runs: the sending job's client and defaults, its limits, and its clock.
public struct ServiceConfiguration: Sendable {
    /// The client, the default headers (a notification's own replace them), retries and `onUncertain`: the same
    /// configuration `salvo send` builds for an HTTP/2 job.
    public var job: HTTP2JobConfiguration
    /// What a notification may leave out (the topic).
    public var defaults: NotificationBatch.Defaults
    /// Notifications not final (queued or being sent) beyond which a request is answered 429.
    public var queueLimit = 1_000_000
    /// The longest `?wait=` a request may ask for.
    public var maximumWaitSeconds = 30.0
    /// How long after the sending job stopped (credentials refused, the gateway given up on) it starts again; doubled
    /// after each stop without an answer, up to `maximumRestartDelay`.
    public var restartDelay: Duration = .seconds(1)
    public var maximumRestartDelay: Duration = .seconds(30)
    /// How long the rows in flight may take to be answered when the service stops (SIGTERM).
    public var shutdownGrace: Duration = .seconds(10)
    /// How long an idempotency key is remembered.
    public var idempotencyRetention: Duration = .seconds(24 * 3600)
    /// Milliseconds since 1970 (injected: the tests' own clock).
    public var now: @Sendable () -> Int64 = { ServiceClock.milliseconds() }
    /// Rows the feed holds ready for the sending job, claimed from the store ahead of the connections' need.
    public var feedRows = Self.defaultFeedRows
    /// The feed's rows unless a configuration says otherwise: the most one cycle claims.
    public static let defaultFeedRows = 8192
    /// The webhooks that take events (`serve --webhook`): a cycle that makes a row final puts its events in the
    /// outbox in the same transaction.
    public var webhooks = WebhookRoutes()
    /// Called after a cycle that may have put events in the outbox (the webhooks' delivery looks at once).
    public var webhookEventsWritten: (@Sendable () -> Void)?

    public var onUncertain: OnUncertain { self.job.onUncertain }

    public init(job: HTTP2JobConfiguration, defaults: NotificationBatch.Defaults = .init()) {
        self.job = job
        self.defaults = defaults
    }
}

/// The wall clock in the units the store keeps.
public enum ServiceClock {
    public static func milliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
