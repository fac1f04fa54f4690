import Foundation
import Logging
import NIOConcurrencyHelpers
import SalvoService
import SalvoTestSupport
import SalvoTestTraits
import SalvoWebhooks
import Testing

/// A receiver's loop removes its delivered events from the outbox once they are older than the retention, by the
/// delivery's own clock (injected: moved by the test), and leaves the younger ones.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(2)))
struct WebhookRetentionTests {
    static let secret = Array("a secret of the retention test".utf8)

    @Test func deliveredEventsLeaveTheOutboxOnceOlderThanTheRetention() async throws {
        let store = try await SQLiteNotificationStore.open(directory: try campaignFolder("webhook-retention"))
        let receiver = try WebhookReceiver(secret: Self.secret)
        try await receiver.listen()
        receiver.answer(200)
        // From the real time: the receiver refuses a signature more than five minutes off.
        let start = ServiceClock.milliseconds()
        let now = NIOLockedValueBox<Int64>(start)
        var configuration = WebhookConfiguration()
        configuration.batching = WebhookBatching(maximumEvents: 10, maximumWait: 0)
        configuration.retention = 10_000
        configuration.pruneEvery = 1000
        configuration.now = { now.withLockedValue { $0 } }
        let endpoint = WebhookEndpoint(url: receiver.url)
        let dispatcher = WebhookDispatcher.start(
            endpoints: [endpoint],
            secret: WebhookSecret(bytes: Self.secret),
            outbox: store,
            configuration: configuration,
            logger: .init(label: "tests", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        func events(_ range: Range<Int>, at time: Int64) -> [WebhookEvent] {
            range.map { WebhookEvent(id: "r:\($0):gone", kind: .gone, createdAt: time, data: .object([])) }
        }
        func counts() async throws -> OutboxCounts { try await store.outboxCounts()[receiver.url] ?? OutboxCounts() }

        _ = try await store.enqueue(events(0..<3, at: start), routes: dispatcher.routes, source: nil)
        dispatcher.wake()
        try await eventually("the first three delivered", timeout: .seconds(30)) {
            try await counts() == OutboxCounts(delivered: 3)
        }
        // 6 s on: three more, delivered; nothing is old enough to go.
        now.withLockedValue { $0 += 6000 }
        _ = try await store.enqueue(events(3..<6, at: start + 6000), routes: dispatcher.routes, source: nil)
        dispatcher.wake()
        try await eventually("the next three delivered", timeout: .seconds(30)) {
            try await counts() == OutboxCounts(delivered: 6)
        }
        // 11 s after the first were delivered: they go, the later three stay.
        now.withLockedValue { $0 += 5000 }
        dispatcher.wake()
        try await eventually("the first three removed", timeout: .seconds(30)) {
            try await counts() == OutboxCounts(delivered: 3)
        }
        let ids = Set(receiver.accepted.map(\.id))
        #expect(ids == Set((0..<6).map { "r:\($0):gone" }))
        await dispatcher.shutdown()
        await receiver.stop()
        await store.close()
    }
}
