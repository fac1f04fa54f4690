import APNSWire
import SalvoRows
import SalvoService
import SalvoServiceStores
import SalvoTestTraits
import Testing

/// The store's write cycles, idempotency keys and restart rule, the same for each store: the SQLite file in a scratch
/// folder (`.pure`) and PostgreSQL (`.network`), each case a store (`StoreKind.selected`).
@Suite(.tags(.pure, .network)) struct NotificationStoreTests {
    static func accept(_ notifications: [ServiceNotification], key: String? = nil, hash: UInt8 = 1) -> PendingAccept {
        PendingAccept(
            keyID: "key_1",
            idempotencyKey: key,
            bodyHash: [hash],
            batch: "10000000-0000-4000-8000-000000000000",
            notifications: notifications,
            answer: StoredAnswer(status: 202, body: Array("first".utf8))
        )
    }

    @Test(arguments: StoreKind.selected) func aCycleStoresClaimsAndRecordsOutcomes(kind: StoreKind) async throws {
        let store = try await StorePlace.make(kind, "store").open()
        var cycle = StoreCycle(now: 1_000)
        cycle.accepts = [Self.accept((0..<3).map { notification($0) })]
        cycle.claim = 2
        let first = try await store.write(cycle)
        #expect(first.accepts == [.stored])
        #expect(first.claimed.map(\.notification.id) == [notification(0).id, notification(1).id])
        #expect(first.claimed.first?.notification.headers.topic == serviceTopic)
        var answered = StoreCycle(now: 2_000)
        var delivered = OutcomeUpdate(seq: first.claimed[0].seq, state: .delivered, at: 2_000)
        delivered.status = 200
        delivered.apnsID = "apns"
        var refused = OutcomeUpdate(seq: first.claimed[1].seq, state: .refused, at: 2_000)
        refused.status = 410
        refused.reason = "Unregistered"
        refused.unregisteredAt = 1_500
        answered.outcomes = [delivered, refused]
        answered.claim = 10
        let second = try await store.write(answered)
        #expect(second.claimed.map(\.notification.id) == [notification(2).id])
        let records = try await store.batch("10000000-0000-4000-8000-000000000000")
        #expect(records.map(\.state) == [.delivered, .refused, .sending])
        #expect(records[0].apnsID == "apns")
        #expect(records[1].reason == "Unregistered" && records[1].status == 410 && records[1].unregisteredAt == 1_500)
        #expect(records[0].answeredAt == 2_000 && records[0].sentAt == 1_000)
        await store.close()
    }

    @Test(arguments: StoreKind.selected) func queuedRowsGoBeforeNewOnesAndNewOnesTakeTheRoomLeft(
        kind: StoreKind
    ) async throws {
        let place = try await StorePlace.make(kind, "store")
        let store = try await place.open()
        var first = StoreCycle(now: 1_000)
        first.accepts = [Self.accept((0..<3).map { notification($0) })]
        // No room: all three wait.
        let queued = try await store.write(first)
        #expect(queued.claimed.isEmpty)
        var second = StoreCycle(now: 2_000)
        second.accepts = [Self.accept((3..<6).map { notification($0) })]
        second.claim = 4
        let result = try await store.write(second)
        #expect(result.claimed.map(\.notification.id) == (0..<4).map { notification($0).id })
        #expect(result.claimed.map(\.seq) == [1, 2, 3, 4])
        #expect(result.claimed.map(\.acceptedAt) == [1_000, 1_000, 1_000, 2_000])
        await store.close()
        // Reopened, the numbering goes on after the last row.
        let reopened = try await place.open()
        var third = StoreCycle(now: 3_000)
        third.accepts = [Self.accept([notification(6)])]
        third.claim = 10
        let later = try await reopened.write(third)
        #expect(later.claimed.map(\.seq) == [5, 6, 7])
        let records = try await reopened.batch("10000000-0000-4000-8000-000000000000")
        #expect(records.map(\.state) == Array(repeating: .sending, count: 7))
        #expect(records.map(\.sentAt) == [2_000, 2_000, 2_000, 2_000, 3_000, 3_000, 3_000])
        await reopened.close()
    }

    @Test(arguments: StoreKind.selected) func anIdempotencyKeyReplaysTheFirstAnswerOrConflicts(
        kind: StoreKind
    ) async throws {
        let store = try await StorePlace.make(kind, "store").open()
        var cycle = StoreCycle(now: 1)
        // Two requests with one key in the same cycle: the second is a replay, not a second insert.
        cycle.accepts = [Self.accept([notification(0)], key: "k"), Self.accept([notification(1)], key: "k")]
        let first = try await store.write(cycle)
        #expect(first.accepts == [.stored, .replay(StoredAnswer(status: 202, body: Array("first".utf8)))])
        #expect(first.stored == 1)
        var later = StoreCycle(now: 2)
        later.accepts = [
            Self.accept([notification(2)], key: "k", hash: 2), Self.accept([notification(3)], key: "other"),
        ]
        let second = try await store.write(later)
        #expect(second.accepts == [.conflict, .stored])
        #expect(try await store.notifications(ids: (0..<4).map { notification($0).id }).count == 2)
        await store.close()
    }

    @Test(arguments: StoreKind.selected, [OnUncertain.resend, .report])
    func rowsBeingSentWhenTheServiceStoppedFollowThePolicy(kind: StoreKind, policy: OnUncertain) async throws {
        let place = try await StorePlace.make(kind, "store")
        let store = try await place.open()
        var cycle = StoreCycle(now: 1)
        cycle.accepts = [Self.accept((0..<4).map { notification($0) })]
        cycle.claim = 3
        _ = try await store.write(cycle)
        await store.close()
        // As after a kill: three rows were handed to the job and never reported.
        let reopened = try await place.open()
        // Marks: the first row was never written, the second answered 410 before the store heard, the rest written.
        let recovery = try await reopened.recover(onUncertain: policy, now: 5) { seq in
            switch seq {
            case 1: RowMark(state: .none)
            case 2: RowMark(state: .rejected, status: 410, reason: "Unregistered")
            default: RowMark(state: .written)
            }
        }
        #expect(recovery.uncertain == 1 && recovery.neverWritten == 1 && recovery.answered == 1)
        let records = try await reopened.batch("10000000-0000-4000-8000-000000000000")
        #expect(records[1].state == .refused && records[1].status == 410 && records[1].reason == "Unregistered")
        switch policy {
        case .resend:
            #expect(recovery.depth == 3)
            #expect(records.map(\.state) == [.queued, .refused, .queued, .queued])
            #expect(records.map(\.uncertainResends) == [0, 0, 1, 0])
        case .report:
            #expect(recovery.depth == 2)
            #expect(records.map(\.state) == [.queued, .refused, .uncertain, .queued])
            #expect(records[2].reason == "UncertainAfterRestart")
        }
        await reopened.close()
    }

    @Test(arguments: StoreKind.selected) func aRowPastItsExpirationIsExpiredWhenClaimed(kind: StoreKind) async throws {
        let store = try await StorePlace.make(kind, "store").open()
        var old = notification(0)
        old.headers.expiration = 100
        var cycle = StoreCycle(now: 200_000)
        cycle.accepts = [Self.accept([old, notification(1)])]
        cycle.claim = 5
        let result = try await store.write(cycle)
        #expect(result.expired.map(\.id) == [old.id])
        #expect(result.claimed.map(\.notification.id) == [notification(1).id])
        #expect(try await store.notifications(ids: [old.id]).first?.state == .expired)
        await store.close()
    }

    @Test(arguments: StoreKind.selected) func templatesAndKeysAreKept(kind: StoreKind) async throws {
        let place = try await StorePlace.make(kind, "store")
        let store = try await place.open()
        let template = try ServiceTemplate(name: "t", text: Array(#"{"aps":{"alert":"{{a}}"}}"#.utf8))
        try await store.putTemplate(template, now: 1)
        let (key, record) = APIKeys.make(name: "backend", now: 1)
        try await store.addAPIKey(record)
        #expect(key.hasPrefix("salvo_"))
        #expect(try await store.revokeAPIKey(id: record.id, now: 2))
        #expect(try await !store.revokeAPIKey(id: record.id, now: 3))
        await store.close()
        let reopened = try await place.open()
        #expect(try await reopened.template(named: "t")?.fields == ["a"])
        let keys = try await reopened.apiKeys()
        #expect(keys.map(\.hash) == [APIKeys.hash(key)] && keys[0].revokedAt == 2)
        #expect(try await reopened.deleteTemplate(named: "t"))
        #expect(try await !reopened.deleteTemplate(named: "t"))
        await reopened.close()
    }

    @Test(arguments: StoreKind.selected) func campaignRecordsAreKeptInOrderAndReplacedByTheirID(
        kind: StoreKind
    ) async throws {
        let place = try await StorePlace.make(kind, "store")
        let store = try await place.open()
        let first = CampaignRecord(
            id: "c-1",
            state: "scheduled",
            settings: Array(#"{"payload":{"aps":{}}}"#.utf8),
            createdBy: "key_1",
            createdAt: 1_000,
            sendAt: 5_000
        )
        var second = first
        second.id = "c-2"
        second.createdAt = 2_000
        try await store.putCampaign(first)
        try await store.putCampaign(second)
        var changed = first
        changed.state = "failed"
        changed.startedAt = 5_000
        changed.endedAt = 6_000
        changed.message = "the credentials were refused"
        try await store.putCampaign(changed)
        await store.close()
        let reopened = try await place.open()
        #expect(try await reopened.campaigns() == [changed, second])
        #expect(try await reopened.campaign(id: "c-2") == second)
        #expect(try await reopened.campaign(id: "c-3") == nil)
        await reopened.close()
    }
}
