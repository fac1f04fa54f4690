import APNSWire
import Foundation
import NIOConcurrencyHelpers
import SalvoRows
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The service without its HTTP shell, against the simulator over TLS: requests' notifications stored, sent once,
/// answered (with either store); keys replayed; a restart sends what was left; the queue's limit.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(2)))
struct NotificationServiceTests {
    static func body(_ range: Range<Int>) -> [UInt8] {
        let items = range.map { index in
            #"{"token":"\#(notification(index).token.hexString)","payload":{"aps":{"alert":"n\#(index)"}}}"#
        }
        return Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8)
    }

    static func ids(_ answer: NotificationService.Answer) throws -> (batch: String, ids: [String]) {
        let value = try JSONValue.parse(answer.body).value
        guard case .string(let batch)? = value["batch"], case .array(let items)? = value["notifications"] else {
            throw ServiceProblem(.badRequest, detail: "not an accepted answer: \(answer.status)")
        }
        return (batch, items.compactMap { if case .string(let id)? = $0["id"] { id } else { nil } })
    }

    /// With each store: the embedded one and PostgreSQL.
    @Test(arguments: StoreKind.allCases) func notificationsAreSentOnceAndTheirOutcomesAnswered(
        kind: StoreKind
    ) async throws {
        var plan = FaultPlan()
        plan.uninstalled = [.init(topic: serviceTopic, tokens: (0..<5).map { notification($0 * 7).token.hexString })]
        plan.invalidTokens = [notification(3).token.hexString]
        let setup = try await ServiceSimulator.start(plan: plan)
        let store = try await StorePlace.make(kind, "service").open()
        let service = try await NotificationService.start(configuration: setup.configuration, store: store)
        var batches: [String] = []
        for start in stride(from: 0, to: 300, by: 100) {
            let answer = await service.submit(keyID: "k", idempotencyKey: nil, body: Self.body(start..<start + 100))
            #expect(answer.status == 202)
            batches.append(try Self.ids(answer).batch)
        }
        var records: [NotificationRecord] = []
        for batch in batches {
            guard case .success(let got) = await service.batch(id: batch, wait: 20) else {
                Issue.record("no batch \(batch)")
                continue
            }
            records += got
        }
        #expect(records.count == 300)
        #expect(records.allSatisfy { $0.state.isFinal })
        let refused = records.filter { $0.state == .refused }
        #expect(refused.filter { $0.status == 410 && $0.reason == "Unregistered" }.count == 5)
        #expect(refused.filter { $0.status == 400 && $0.reason == "BadDeviceToken" }.count == 1)
        #expect(records.filter { $0.state == .delivered }.count == 294)
        #expect(records.filter { $0.state == .delivered }.allSatisfy { $0.apnsID == $0.id && $0.answeredAt != nil })
        let verdict = setup.simulator.verdict(expected: ExpectedTokens((0..<300).map { notification($0).token }))
        #expect(verdict.deliveredMoreThanOnce == 0)
        #expect(verdict.deliveredOnce == 294)
        #expect(service.depth == 0)
        await service.shutdown()
        try await setup.simulator.shutdown()
    }

    /// A key revoked in the store (as `salvo serve keys revoke` does beside a running service) is refused once the
    /// keys held in memory are a second old, by the service's own clock; a key made meanwhile is taken at once.
    @Test func aKeyRevokedWhileTheServiceRunsIsRefusedWithinASecond() async throws {
        let setup = try await ServiceSimulator.start()
        let store = try await SQLiteNotificationStore.open(directory: try scratchFolder("service"))
        let clock = NIOLockedValueBox<Int64>(1_000_000)
        var configuration = setup.configuration
        configuration.now = { clock.withLockedValue { $0 } }
        let (key, record) = APIKeys.make(name: "backend", now: 1)
        try await store.addAPIKey(record)
        let service = try await NotificationService.start(configuration: configuration, store: store)
        #expect(await service.keyID(bearer: key) == record.id)
        #expect(try await store.revokeAPIKey(id: record.id, now: 2))
        clock.withLockedValue { $0 += NotificationService.keysFreshFor }
        #expect(await service.keyID(bearer: key) == nil)
        let (other, otherRecord) = APIKeys.make(name: "other", now: 3)
        try await store.addAPIKey(otherRecord)
        #expect(await service.keyID(bearer: other) == otherRecord.id)
        #expect(await service.keyID(bearer: key) == nil)
        await service.shutdown()
        try await setup.simulator.shutdown()
    }

    /// With each store: the embedded one and PostgreSQL.
    @Test(arguments: StoreKind.allCases) func aRepeatedKeyIsAnsweredWithTheFirstAnswerAndSendsNothingAgain(
        kind: StoreKind
    ) async throws {
        let setup = try await ServiceSimulator.start()
        let store = try await StorePlace.make(kind, "service").open()
        let service = try await NotificationService.start(configuration: setup.configuration, store: store)
        let body = Self.body(0..<10)
        let first = await service.submit(keyID: "k", idempotencyKey: "order-1", body: body)
        let again = await service.submit(keyID: "k", idempotencyKey: "order-1", body: body)
        #expect(first.status == 202 && again.status == 202 && again.replayed)
        #expect(first.body == again.body)
        let other = await service.submit(keyID: "k", idempotencyKey: "order-1", body: Self.body(10..<11))
        #expect(other.status == 422 && other.isProblem)
        // Another API key has keys of its own.
        let otherKey = await service.submit(keyID: "k2", idempotencyKey: "order-1", body: Self.body(20..<21))
        #expect(otherKey.status == 202 && !otherKey.replayed)
        _ = await service.batch(id: try Self.ids(first).batch, wait: 20)
        _ = await service.batch(id: try Self.ids(otherKey).batch, wait: 20)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens((0..<10).map { notification($0).token }))
        #expect(verdict.deliveredOnce == 10 && verdict.deliveredMoreThanOnce == 0)
        #expect(setup.simulator.ledger.snapshot().accepted == 11)
        await service.shutdown()
        try await setup.simulator.shutdown()
    }

    @Test func whatAStoppedServiceHeldIsSentByTheNextOne() async throws {
        let folder = try scratchFolder("service")
        // No gateway answers: the rows are claimed, given back at the stop, and stay queued.
        let closed = try ClosedPort()
        let setup = try await ServiceSimulator.start()
        var offline = setup.configuration
        offline.job.client.port = closed.port
        offline.job.client.reconnect.giveUpAfter = .seconds(60)
        offline.shutdownGrace = .milliseconds(200)
        let first = try await NotificationService.start(
            configuration: offline,
            store: try await SQLiteNotificationStore.open(directory: folder)
        )
        let answer = await first.submit(keyID: "k", idempotencyKey: nil, body: Self.body(0..<50))
        #expect(answer.status == 202)
        let (batch, ids) = try Self.ids(answer)
        guard case .success(let waited) = await first.notification(id: ids[0], wait: 0.3) else {
            Issue.record("no notification \(ids[0])")
            return
        }
        #expect(!waited.state.isFinal)
        await first.shutdown()
        closed.close()
        let second = try await NotificationService.start(
            configuration: setup.configuration,
            store: try await SQLiteNotificationStore.open(directory: folder)
        )
        #expect(second.recovery.depth == 50)
        guard case .success(let records) = await second.batch(id: batch, wait: 20) else {
            Issue.record("no batch \(batch)")
            return
        }
        #expect(records.allSatisfy { $0.state == .delivered })
        let verdict = setup.simulator.verdict(expected: ExpectedTokens((0..<50).map { notification($0).token }))
        #expect(verdict.deliveredOnce == 50 && verdict.deliveredMoreThanOnce == 0)
        await second.shutdown()
        try await setup.simulator.shutdown()
    }

    @Test func beyondTheQueuesLimitARequestIsAnswered429() async throws {
        let closed = try ClosedPort()
        defer { closed.close() }
        let setup = try await ServiceSimulator.start()
        var configuration = setup.configuration
        configuration.job.client.port = closed.port
        configuration.queueLimit = 15
        configuration.shutdownGrace = .milliseconds(200)
        let service = try await NotificationService.start(
            configuration: configuration,
            store: try await SQLiteNotificationStore.open(directory: try scratchFolder("service"))
        )
        #expect(await service.submit(keyID: "k", idempotencyKey: nil, body: Self.body(0..<10)).status == 202)
        let full = await service.submit(keyID: "k", idempotencyKey: nil, body: Self.body(10..<20))
        #expect(full.status == 429 && full.retryAfter == 1)
        #expect(await service.submit(keyID: "k", idempotencyKey: nil, body: Self.body(20..<25)).status == 202)
        #expect(service.depth == 15)
        await service.shutdown()
        try await setup.simulator.shutdown()
    }
}
