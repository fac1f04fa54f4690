import APNSWire
import SalvoRows
import SalvoService
import SalvoTestTraits
import Testing

/// The webhooks' outbox in the store: events written in the cycle that makes a notification final (once, however
/// often the outcome is reported), kept per endpoint by id, pending until acknowledged or given up on, and across a
/// reopening of the store; the same for each store (`StoreKind.selected`).
@Suite(.tags(.pure, .network)) struct WebhookOutboxTests {
    static let routes = WebhookRoutes([
        (endpoint: "https://a.example/hook", kinds: [.gone, .refused, .outcome, .campaign]),
        (endpoint: "https://b.example/hook", kinds: [.gone]),
    ])

    @Test(arguments: StoreKind.selected) func aFinalOutcomeWritesItsEventsInItsOwnCycleOnce(
        kind: StoreKind
    ) async throws {
        let place = try await StorePlace.make(kind, "outbox")
        let store = try await place.open()
        var asked = notification(1)
        asked.webhook = true
        var cycle = StoreCycle(now: 1_000)
        cycle.accepts = [NotificationStoreTests.accept([notification(0), asked, notification(2)])]
        cycle.claim = 3
        cycle.webhooks = Self.routes
        let claimed = try await store.write(cycle).claimed
        #expect(claimed.map(\.notification.webhook) == [false, true, false])
        #expect(try await store.pendingCount(endpoint: "https://a.example/hook") == 0)

        var gone = OutcomeUpdate(seq: claimed[0].seq, state: .refused, at: 2_000)
        gone.status = 410
        gone.reason = "Unregistered"
        var delivered = OutcomeUpdate(seq: claimed[1].seq, state: .delivered, at: 2_000)
        delivered.status = 200
        var refused = OutcomeUpdate(seq: claimed[2].seq, state: .refused, at: 2_000)
        refused.status = 400
        refused.reason = "BadDeviceToken"
        var answered = StoreCycle(now: 2_000)
        answered.outcomes = [gone, delivered, refused]
        answered.webhooks = Self.routes
        _ = try await store.write(answered)
        // The same answers reported again (a row already final keeps its outcome): no event more.
        _ = try await store.write(answered)

        let a = try await store.pendingEvents(endpoint: "https://a.example/hook", limit: 10)
        #expect(
            a.map(\.id) == [
                "n:\(notification(0).id):gone", "n:\(notification(1).id):outcome", "n:\(notification(2).id):refused",
            ]
        )
        #expect(a.map(\.type) == ["token.gone", "notification.outcome", "push.refused"])
        let data = try JSONValue.parse(a[0].data).value
        #expect(data["token"] == .string(notification(0).token.hexString) && data["status"] == .int(410))
        let b = try await store.pendingEvents(endpoint: "https://b.example/hook", limit: 10)
        #expect(b.map(\.id) == ["n:\(notification(0).id):gone"], "b takes gone tokens only")
        await store.close()
    }

    @Test(arguments: StoreKind.selected) func eventsArePendingUntilAcknowledgedOrDeadAndSurviveAReopening(
        kind: StoreKind
    ) async throws {
        let place = try await StorePlace.make(kind, "outbox")
        let store = try await place.open()
        let events = (0..<5).map {
            WebhookEvent(id: "c:x:\($0):gone", kind: .gone, createdAt: Int64($0), data: .object([]))
        }
        #expect(try await store.derivedSignature(of: "campaign:x:rejects") == nil)
        let added = try await store.enqueue(events, routes: Self.routes, source: ("campaign:x:rejects", "10:1"))
        #expect(added == 10, "five events for each of two endpoints")
        // Derived again (a restart): nothing new.
        #expect(try await store.enqueue(events, routes: Self.routes, source: ("campaign:x:rejects", "12:2")) == 0)
        #expect(try await store.derivedSignature(of: "campaign:x:rejects") == "12:2")

        let endpoint = "https://a.example/hook"
        let first = try await store.pendingEvents(endpoint: endpoint, limit: 3)
        #expect(first.map(\.id) == ["c:x:0:gone", "c:x:1:gone", "c:x:2:gone"])
        try await store.failed(endpoint: endpoint, ids: first.map(\.id), dead: ["c:x:0:gone"], now: 50)
        try await store.acknowledge(endpoint: endpoint, ids: ["c:x:1:gone"], now: 60)
        await store.close()

        let reopened = try await place.open()
        let left = try await reopened.pendingEvents(endpoint: endpoint, limit: 10)
        #expect(left.map(\.id) == ["c:x:2:gone", "c:x:3:gone", "c:x:4:gone"])
        #expect(left.map(\.attempts) == [1, 0, 0])
        let counts = try await reopened.outboxCounts()
        #expect(counts[endpoint] == OutboxCounts(pending: 3, delivered: 1, dead: 1))
        #expect(counts["https://b.example/hook"] == OutboxCounts(pending: 5))
        // An acknowledged event derived again stays delivered: it is not sent twice.
        #expect(try await reopened.enqueue(events, routes: Self.routes, source: nil) == 0)
        #expect(try await reopened.pendingCount(endpoint: endpoint) == 3)
        await reopened.close()
    }

    @Test(arguments: StoreKind.selected) func pruningRemovesOnlyTheEndpointsEndedEventsPastTheCutoff(
        kind: StoreKind
    ) async throws {
        let place = try await StorePlace.make(kind, "outbox-prune")
        let store = try await place.open()
        let events = (0..<6).map {
            WebhookEvent(id: "c:y:\($0):gone", kind: .gone, createdAt: Int64($0), data: .object([]))
        }
        _ = try await store.enqueue(events, routes: Self.routes, source: nil)
        let endpoint = "https://a.example/hook"
        // 0 delivered at 100, 1 dead at 100, 2 delivered at 300, 3 dead at 300; 4 and 5 pending.
        try await store.acknowledge(endpoint: endpoint, ids: ["c:y:0:gone"], now: 100)
        try await store.failed(endpoint: endpoint, ids: ["c:y:1:gone"], dead: ["c:y:1:gone"], now: 100)
        try await store.acknowledge(endpoint: endpoint, ids: ["c:y:2:gone"], now: 300)
        try await store.failed(endpoint: endpoint, ids: ["c:y:3:gone"], dead: ["c:y:3:gone"], now: 300)
        #expect(try await store.prune(endpoint: endpoint, endedBefore: 100) == 0, "ended at the cutoff: kept")
        #expect(try await store.prune(endpoint: endpoint, endedBefore: 200) == 2)
        #expect(try await store.outboxCounts()[endpoint] == OutboxCounts(pending: 2, delivered: 1, dead: 1))
        // Far past every end: the pending stay, and the other endpoint's events are untouched.
        #expect(try await store.prune(endpoint: endpoint, endedBefore: .max) == 2)
        #expect(try await store.pendingEvents(endpoint: endpoint, limit: 10).map(\.id) == ["c:y:4:gone", "c:y:5:gone"])
        #expect(try await store.outboxCounts()["https://b.example/hook"] == OutboxCounts(pending: 6))
        await store.close()
    }
}
