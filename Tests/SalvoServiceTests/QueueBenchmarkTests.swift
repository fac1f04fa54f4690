import APNSWire
import SalvoBenchmarkSupport
import SalvoPostgres
import SalvoService
import SalvoServiceStores
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo-bench queue`'s core on the embedded store: a small run takes every notification to its outcome through the
/// service's cycles (the count of each kind of work exact: one worker's run is the same every time), its check finds
/// a row left without one, and its stores are fresh. No timing is asserted: speed lives in the benchmark.
@Suite(.tags(.pure), .runs(.pure)) struct QueueBenchmarkTests {
    static func settings(rows: Int) -> QueueBenchmark.Settings {
        var settings = QueueBenchmark.Settings()
        settings.rows = rows
        settings.batch = 100
        settings.requestsPerCycle = 16
        settings.claim = 1024
        settings.maximumSeconds = 120
        return settings
    }

    @Test func everyNotificationOfASmallRunReachesItsOutcome() async throws {
        let folder = try scratchFolder("queue-bench") + "/store"
        let stores = try await QueueBenchmarkStores.open(.folder(folder), workers: 1)
        let run = try await QueueBenchmark.run(stores: stores, settings: Self.settings(rows: 3_000))
        let check = try await QueueBenchmark.check(ids: run.ids, expected: 3_000, in: stores[0])
        await stores[0].close()
        #expect(check == QueueBenchmark.Check(expected: 3_000, found: 3_000, delivered: 3_000))
        #expect(check.passed)
        #expect(!run.timedOut)
        #expect(run.claimedTwice == 0)
        #expect(Set(run.ids).count == 3_000)
        // Cycle 1 stores 1,600 and hands out 1,024 of them (576 queued); cycle 2 stores the last 1,400, answers
        // 1,024, claims the 576 queued and hands out 448 new ones (952 queued); cycle 3 answers those and claims
        // the 952; cycle 4 answers them and finds the queue empty.
        var expected = QueueBenchmark.Tally()
        expected.cycles = 4
        expected.requests = 30
        expected.accepted = 3_000
        expected.claimStatements = 4
        expected.claimed = 3_000
        expected.claimedFromQueue = 576 + 952
        expected.outcomes = 3_000
        #expect(run.total == expected)
        #expect(run.workers == [expected])
        #expect(run.acceptSeconds != nil)
    }

    @Test func theCheckFindsARowWithoutItsOutcome() async throws {
        let store = try await SQLiteNotificationStore.open(directory: try scratchFolder("queue-bench-check"))
        var requests = QueueRequests(stream: 0)
        var cycle = StoreCycle(now: 1_000)
        let accept = requests.next(10, now: 1_000)
        cycle.accepts = [accept]
        cycle.claim = 10
        let claimed = try await store.write(cycle).claimed
        var answers = StoreCycle(now: 2_000)
        answers.outcomes = claimed.dropLast().map { row in
            var update = OutcomeUpdate(seq: row.seq, state: .delivered, at: 2_000)
            update.status = 200
            update.apnsID = row.notification.id
            return update
        }
        _ = try await store.write(answers)
        let ids = accept.notifications.map(\.id)
        let missing = "01900000-0000-7000-8000-000000000000"
        let check = try await QueueBenchmark.check(ids: ids + [missing], expected: 11, in: store)
        await store.close()
        #expect(check == QueueBenchmark.Check(expected: 11, found: 10, delivered: 9))
        #expect(!check.passed)
    }

    @Test func aRunPastItsBoundStopsAndItsCheckFails() async throws {
        let folder = try scratchFolder("queue-bench-bound") + "/store"
        let stores = try await QueueBenchmarkStores.open(.folder(folder), workers: 1)
        var settings = Self.settings(rows: 1_000)
        settings.maximumSeconds = 0
        let run = try await QueueBenchmark.run(stores: stores, settings: settings)
        let check = try await QueueBenchmark.check(ids: run.ids, expected: 1_000, in: stores[0])
        await stores[0].close()
        #expect(run.timedOut)
        #expect(run.total.cycles == 0)
        #expect(run.acceptSeconds == nil)
        #expect(!check.passed)
    }

    @Test func theEmbeddedStoreIsANewFolderWithOneWorker() async throws {
        let folder = try scratchFolder("queue-bench-fresh")
        try await #require(throws: StoreFailure.self) {
            _ = try await QueueBenchmarkStores.open(.folder(folder), workers: 2)
        }
        let stores = try await QueueBenchmarkStores.open(.folder(folder), workers: 1)
        for store in stores { await store.close() }
        let again = await #expect(throws: StoreFailure.self) {
            _ = try await QueueBenchmarkStores.open(.folder(folder), workers: 1)
        }
        #expect(again?.message == "--store \(folder): the folder is not empty; the benchmark takes a new folder")
    }

    /// The benchmark's notifications are those the service makes of a request's JSON.
    @Test func aRequestsNotificationsAreTheServicesOwn() throws {
        var requests = QueueRequests(stream: 3)
        let accept = requests.next(2, now: 1_700_000_000_000)
        let payload = String(decoding: QueueRequests.benchmarkPayload, as: UTF8.self)
        let items = accept.notifications.map { #"{"token":"\#($0.token.hexString)","payload":\#(payload)}"# }
        var ids = accept.notifications.map(\.id).makeIterator()
        let batch = try NotificationBatch.read(
            Array(#"{"notifications":[\#(items.joined(separator: ","))]}"#.utf8),
            defaults: NotificationBatch.Defaults(topic: QueueRequests.benchmarkTopic),
            templates: { _ in nil },
            makeID: { ids.next() ?? "" }
        )
        #expect(batch.accepted == accept.notifications)
        #expect(accept.notifications.allSatisfy { $0.payload.count == 100 })
        #expect(accept.notifications[0].token != accept.notifications[1].token)
        #expect(accept.idempotencyKey == nil)
    }

    @Test func aProcessStatLineIsRead() {
        // The command name may hold spaces and parentheses: fields count from the last `)`.
        let line =
            "4242 (postgres: salvo bench 127.0.0.1(5432) idle) S 900 4242 4242 0 -1 4194304 120 0 0 0 "
            + "37 12 5 3 20 0 1 0 100 0 0"
        #expect(
            ProcessTreeCPU.parse(stat: line)
                == ProcessTreeCPU.Stat(parent: 900, user: 37, system: 12, childrenUser: 5, childrenSystem: 3)
        )
        #expect(ProcessTreeCPU.parse(stat: "4242 (cut short) S 1 2") == nil)
        // The root with its reaped children, and its living children; not their own children's.
        let stats: [Int32: ProcessTreeCPU.Stat] = [
            900: .init(parent: 1, user: 100, system: 50, childrenUser: 7, childrenSystem: 3),
            901: .init(parent: 900, user: 10, system: 5, childrenUser: 0, childrenSystem: 0),
            902: .init(parent: 900, user: 20, system: 1, childrenUser: 0, childrenSystem: 0),
            950: .init(parent: 901, user: 1000, system: 0, childrenUser: 0, childrenSystem: 0),
            1: .init(parent: 0, user: 5000, system: 0, childrenUser: 0, childrenSystem: 0),
        ]
        let tree: Int64 = 100 + 50 + 7 + 3 + 10 + 5 + 20 + 1
        #expect(ProcessTreeCPU.ticks(root: 900, in: stats) == tree)
        #expect(ProcessTreeCPU.ticks(root: 77, in: stats) == nil)
    }
}

/// `salvo-bench queue`'s core on PostgreSQL (`PostgresTestServer`: `SALVO_TEST_POSTGRES_URL`, else a cluster of its
/// own): two workers, each a store with its own loop on one database, share the queue with `SKIP LOCKED` claims, and
/// every notification reaches its outcome; the server's samples move with the run; a store that is not empty is
/// refused.
@Suite(.tags(.network), .runs(.network)) struct PostgresQueueBenchmarkTests {
    @Test func twoWorkersShareTheQueueAndEveryNotificationReachesItsOutcome() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("queue_bench")
        let location = try ServiceStoreLocation(server.url(database: database))
        guard case .postgres(let postgres) = location else {
            Issue.record("\(location) is not a PostgreSQL store")
            return
        }
        let stores = try await QueueBenchmarkStores.open(location, workers: 2)
        let probe = PostgresServerProbe(location: postgres)
        let before = try await probe.sample()
        let run = try await QueueBenchmark.run(stores: stores, settings: QueueBenchmarkTests.settings(rows: 4_000))
        let after = try await probe.sample()
        let check = try await QueueBenchmark.check(ids: run.ids, expected: 4_000, in: stores[1])
        for store in stores { await store.close() }
        #expect(check == QueueBenchmark.Check(expected: 4_000, found: 4_000, delivered: 4_000))
        #expect(!run.timedOut)
        #expect(run.claimedTwice == 0)
        #expect(run.total.accepted == 4_000)
        #expect(run.total.claimed == 4_000)
        #expect(run.total.outcomes == 4_000)
        #expect(run.total.fenced == 0)
        #expect(run.workers.map(\.accepted) == [2_000, 2_000])
        #expect(run.workers.allSatisfy { $0.claimed > 0 }, "\(run.workers)")
        // 4,000 rows wrote log, and the server (on this machine: the tests' own cluster, or .ci/run's) spent CPU:
        // each sample finds the postmaster while its own session lives.
        #expect(after.walPosition > before.walPosition)
        let cpu = try #require(before.cpuSeconds.flatMap { first in after.cpuSeconds.map { $0 - first } })
        #expect(cpu > 0)

        let again = await #expect(throws: StoreFailure.self) {
            _ = try await QueueBenchmarkStores.open(location, workers: 1)
        }
        #expect(again?.message.contains("the store holds 4000 notifications") == true, "\(String(describing: again))")
        #expect(again?.message.contains(server.password) == false)
    }
}
