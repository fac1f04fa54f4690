import AsyncHTTPClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SalvoService

/// The webhooks of a service (`serve --webhook`): a delivery loop per endpoint over the outbox, one HTTP client
/// shared by them (bounded connect and read timeouts, no redirects followed). The service and the campaigns put
/// events in the outbox and `wake()` it; `shutdown()` stops the loops, and what is pending stays for the next start.
public final class WebhookDispatcher: Sendable {
    public let endpoints: [WebhookEndpoint]
    /// Which endpoint takes which kind: what the store and the campaigns write events for.
    public let routes: WebhookRoutes
    private let outbox: any WebhookOutbox
    private let deliveries: [WebhookDelivery]
    private let client: HTTPClient
    private let tasks = NIOLockedValueBox<[Task<Void, Never>]>([])

    private init(
        endpoints: [WebhookEndpoint],
        outbox: any WebhookOutbox,
        deliveries: [WebhookDelivery],
        client: HTTPClient
    ) {
        self.endpoints = endpoints
        self.routes = WebhookEndpoint.routes(endpoints)
        self.outbox = outbox
        self.deliveries = deliveries
        self.client = client
    }

    /// Starts a delivery loop for each endpoint.
    public static func start(
        endpoints: [WebhookEndpoint],
        secret: WebhookSecret,
        outbox: any WebhookOutbox,
        configuration: WebhookConfiguration = WebhookConfiguration(),
        logger: Logger
    ) -> WebhookDispatcher {
        var clientConfiguration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: .milliseconds(min(5000, configuration.requestTimeout)),
                read: .milliseconds(configuration.requestTimeout)
            ),
            connectionPool: .init()
        )
        clientConfiguration.httpVersion = .automatic
        // A connection that cannot be made fails the attempt at once: the retries and their pace are
        // `WebhookRetry`'s, not the client's own until its connect timeout.
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let deliveries = endpoints.map {
            WebhookDelivery(
                endpoint: $0,
                outbox: outbox,
                secret: secret,
                configuration: configuration,
                client: client,
                loop: loop,
                logger: logger
            )
        }
        let dispatcher = WebhookDispatcher(
            endpoints: endpoints,
            outbox: outbox,
            deliveries: deliveries,
            client: client
        )
        dispatcher.tasks.withLockedValue { tasks in
            for delivery in deliveries { tasks.append(Task { await delivery.run() }) }
        }
        return dispatcher
    }

    /// Events were put in the outbox: every loop looks.
    public func wake() {
        for delivery in self.deliveries { delivery.wake() }
    }

    /// Stops the loops (an attempt under way is cut; its events stay pending) and the client.
    public func shutdown() async {
        for delivery in self.deliveries { delivery.stop() }
        let tasks = self.tasks.withLockedValue { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        try? await self.client.shutdown()
    }

    /// Each endpoint's state: its events by state in the outbox, its failures, its last error.
    public func status() async throws(StoreFailure) -> [WebhookStatus] {
        let counts = try await self.outbox.outboxCounts()
        return self.deliveries.map { delivery in
            let snapshot = delivery.snapshot
            return WebhookStatus(
                webhook: delivery.endpoint.label,
                events: delivery.endpoint.kinds.sorted(),
                counts: counts[delivery.endpoint.url] ?? OutboxCounts(),
                failures: snapshot.failures,
                failedAttempts: snapshot.failedAttempts,
                lastError: snapshot.lastError,
                nextAttemptAt: snapshot.nextAttemptAt
            )
        }
    }
}

/// What `GET /v1/webhooks` shows of one endpoint.
public struct WebhookStatus: Sendable, Hashable {
    /// The endpoint's URL without user, password or query.
    public var webhook: String
    public var events: [WebhookKind]
    public var counts: OutboxCounts
    /// Failed attempts since the last success.
    public var failures: Int
    /// Failed attempts since the service started.
    public var failedAttempts: Int
    public var lastError: String?
    /// When the next attempt may go, after failures (milliseconds since 1970).
    public var nextAttemptAt: Int64?
}
