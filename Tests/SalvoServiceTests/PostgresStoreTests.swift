import APNSWire
import SalvoPostgres
import SalvoRows
import SalvoService
import SalvoServiceStores
import SalvoTestSupport
import SalvoTestTraits
import Synchronization
import Testing

/// What a PostgreSQL store adds to the store's rules, on a real server: workers sharing one database claim disjoint
/// rows, a lease that expired lets another worker take its row over and fences the first one's outcome, and the
/// schema is versioned (migrations idempotent, a newer or missing schema refused, the password never shown).
@Suite(.tags(.network), .runs(.network)) struct PostgresStoreTests {
    static let batch = "10000000-0000-4000-8000-000000000000"

    @Test func twoWorkersClaimingAtOnceTakeDisjointRows() async throws {
        let place = try await StorePlace.make(.postgres, "pg_disjoint")
        let a = try await place.open(worker: "a")
        let b = try await place.open(worker: "b")
        var queue = StoreCycle(now: 1_000)
        queue.accepts = [NotificationStoreTests.accept((0..<40).map { notification($0) })]
        _ = try await a.write(queue)
        var claim = StoreCycle(now: 2_000)
        claim.claim = 25
        async let first = a.write(claim)
        async let second = b.write(claim)
        let (byA, byB) = try await (first.claimed.map(\.seq), second.claimed.map(\.seq))
        #expect(Set(byA).isDisjoint(with: byB), "a: \(byA), b: \(byB)")
        #expect(byA.count + byB.count == 40)
        #expect(Set(byA + byB) == Set(1...40))
        #expect(byA == byA.sorted() && byB == byB.sorted(), "each worker's rows oldest first")
        // The rows are stamped with their worker: each one's outcome is taken, the other's refused.
        var mine = StoreCycle(now: 3_000)
        mine.outcomes = byA.map { OutcomeUpdate(seq: $0, state: .delivered, at: 3_000) }
        let applied = try await a.write(mine)
        #expect(applied.fenced.isEmpty)
        var theirs = StoreCycle(now: 3_000)
        theirs.outcomes = byB.prefix(3).map { OutcomeUpdate(seq: $0, state: .refused, at: 3_000) }
        let refused = try await a.write(theirs)
        #expect(refused.fenced == Array(byB.prefix(3)))
        let states = try await a.batch(Self.batch).map(\.state)
        #expect(states.filter { $0 == .delivered }.count == byA.count)
        #expect(states.filter { $0 == .sending }.count == byB.count)
        await a.close()
        await b.close()
    }

    @Test(arguments: [OnUncertain.resend, .report])
    func aRowWhoseLeaseExpiredIsTakenOverAndTheFirstWorkersOutcomeIsFenced(policy: OnUncertain) async throws {
        let place = try await StorePlace.make(.postgres, "pg_lease")
        let a = try await place.open(worker: "a", lease: .seconds(60))
        let b = try await place.open(worker: "b", lease: .seconds(60))
        var cycle = StoreCycle(now: 1_000)
        cycle.accepts = [NotificationStoreTests.accept([notification(0), notification(1)])]
        cycle.claim = 2
        let claimed = try await a.write(cycle).claimed.map(\.seq)
        #expect(claimed.count == 2)
        // Within the lease: nothing for another worker.
        var early = StoreCycle(now: 60_000)
        early.claim = 10
        early.onUncertain = policy
        #expect(try await b.write(early).claimed.isEmpty)
        // A answers the first row in time; the second's lease runs out, and b's claim takes it.
        var answered = StoreCycle(now: 30_000)
        answered.outcomes = [OutcomeUpdate(seq: claimed[0], state: .delivered, at: 30_000)]
        #expect(try await a.write(answered).fenced.isEmpty)
        var late = StoreCycle(now: 61_001)
        late.claim = 10
        late.onUncertain = policy
        let takeover = try await b.write(late)
        // A's answer for the row it lost comes after: refused, counted, and the row is b's (or ended uncertain).
        var stale = StoreCycle(now: 62_000)
        var delivered = OutcomeUpdate(seq: claimed[1], state: .delivered, at: 62_000)
        delivered.status = 200
        stale.outcomes = [delivered]
        let refused = try await a.write(stale)
        #expect(refused.fenced == [claimed[1]])
        let id = notification(1).id
        switch policy {
        case .resend:
            #expect(takeover.claimed.map(\.seq) == [claimed[1]])
            #expect(try await a.notifications(ids: [id]).first?.state == .sending)
            var own = StoreCycle(now: 63_000)
            own.outcomes = [delivered]
            #expect(try await b.write(own).fenced.isEmpty)
            let record = try #require(try await b.notifications(ids: [id]).first)
            #expect(record.state == .delivered && record.uncertainResends == 1)
        case .report:
            #expect(takeover.claimed.isEmpty)
            #expect(takeover.uncertain.map(\.id) == [id])
            let record = try #require(try await b.notifications(ids: [id]).first)
            #expect(record.state == .uncertain && record.reason == "UncertainLeaseExpired")
        }
        #expect(try await a.notifications(ids: [notification(0).id]).first?.state == .delivered)
        await a.close()
        await b.close()
    }

    /// A worker that renews its leases keeps its rows past the first lease's end: another worker's claim then takes
    /// nothing, and the first worker's answers are not fenced; a renewal touches no row another worker holds.
    @Test func renewedLeasesKeepTheRowsFromAnotherWorker() async throws {
        let place = try await StorePlace.make(.postgres, "pg_renew")
        let a = try await place.open(worker: "a", lease: .seconds(60))
        let b = try await place.open(worker: "b", lease: .seconds(60))
        #expect(a.leaseRenewal == .seconds(20))
        var cycle = StoreCycle(now: 1_000)
        cycle.accepts = [NotificationStoreTests.accept([notification(0), notification(1)])]
        cycle.claim = 1
        let claimed = try await a.write(cycle).claimed.map(\.seq)
        #expect(claimed.count == 1)
        var other = StoreCycle(now: 2_000)
        other.claim = 1
        let claimedByB = try await b.write(other).claimed.map(\.seq)
        #expect(claimedByB.count == 1)
        let renewal = try await a.renewLeases(Set(claimed + claimedByB), now: 50_000)
        #expect(renewal.held == Set(claimed) && renewal.until == 110_000)
        var late = StoreCycle(now: 62_000)
        late.claim = 10
        #expect(try await b.write(late).claimed.isEmpty, "a's renewed row stays a's")
        var answer = StoreCycle(now: 100_000)
        answer.outcomes = [OutcomeUpdate(seq: claimed[0], state: .delivered, at: 100_000)]
        #expect(try await a.write(answer).fenced.isEmpty)
        // b's row was not renewed by a: past b's lease, a's claim takes it over.
        var takeover = StoreCycle(now: 100_000)
        takeover.claim = 10
        #expect(try await a.write(takeover).claimed.map(\.seq) == claimedByB)
        // b's renewal finds the row it lost no longer held.
        #expect(try await b.renewLeases(Set(claimedByB), now: 101_000).held.isEmpty)
        #expect(try await a.renewLeases(Set(claimedByB), now: 101_000).held == Set(claimedByB))
        // Only the rows named are renewed: a row a worker holds without knowing it is left to run out.
        #expect(try await a.renewLeases([], now: 101_000).held.isEmpty)
        await a.close()
        await b.close()
    }

    /// A cycle that leaves rows queued wakes the other workers listening (`watchQueue`, LISTEN/NOTIFY), and not the
    /// worker that wrote it; each listener is woken once when it starts to listen too.
    @Test func rowsQueuedByOneWorkerWakeTheOthers() async throws {
        let place = try await StorePlace.make(.postgres, "pg_notify")
        let a = try await place.open(worker: "a")
        let b = try await place.open(worker: "b")
        let wakes = Mutex((a: 0, b: 0))
        a.watchQueue { wakes.withLock { $0.a += 1 } }
        b.watchQueue { wakes.withLock { $0.b += 1 } }
        try await eventually("both listen", timeout: .seconds(20)) { wakes.withLock { $0.a >= 1 && $0.b >= 1 } }
        var queue = StoreCycle(now: 1_000)
        queue.accepts = [NotificationStoreTests.accept([notification(0), notification(1)])]
        _ = try await a.write(queue)
        try await eventually("b is woken by a's rows", timeout: .seconds(20)) { wakes.withLock { $0.b >= 2 } }
        // A cycle that queues nothing notifies nobody; b's queued rows wake a. A notification reaches a listener in
        // the order of the commits, so a's own, had it not been ignored, would have come first.
        var claim = StoreCycle(now: 2_000)
        claim.claim = 2
        #expect(try await b.write(claim).claimed.count == 2)
        var again = StoreCycle(now: 3_000)
        again.accepts = [NotificationStoreTests.accept([notification(2)], key: "second")]
        _ = try await b.write(again)
        try await eventually("a is woken by b's rows", timeout: .seconds(20)) { wakes.withLock { $0.a >= 2 } }
        #expect(wakes.withLock { $0.a } == 2)
        #expect(wakes.withLock { $0.b } == 2)
        await a.close()
        await b.close()
    }

    @Test func migratingTwiceOrAtOnceChangesNothingTheSecondTime() async throws {
        let location = try await StorePlace.database("pg_migrate")
        async let first = PostgresNotificationStore.migrate(location: location)
        async let second = PostgresNotificationStore.migrate(location: location)
        let both = try await [first, second].sorted { $0.from < $1.from }
        #expect(both.map(\.from) == [0, PostgresStoreSchema.version])
        #expect(both.allSatisfy { $0.to == PostgresStoreSchema.version })
        let again = try await PostgresNotificationStore.migrate(location: location)
        #expect(again.from == PostgresStoreSchema.version && again.to == PostgresStoreSchema.version)
        let store = try await PostgresNotificationStore.open(location: location, options: .init(workerID: "a"))
        try await store.checkWritable()
        await store.close()
    }

    @Test func aNewerOrMissingSchemaIsRefusedAndThePasswordIsNeverShown() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("pg_versions")
        let location = try PostgresLocation(url: server.url(database: database), option: "--store")
        let options = PostgresNotificationStore.Options(workerID: "a")
        let missing = await #expect(throws: StoreFailure.self) {
            try await PostgresNotificationStore.open(location: location, options: options)
        }
        #expect(missing?.message.contains("run `salvo serve migrate --store URL` first") == true, "\(missing!)")
        #expect(missing?.message.contains(location.redacted) == true)
        _ = try await PostgresNotificationStore.migrate(location: location)
        try await server.run("INSERT INTO salvo.schema_version (version) VALUES (99)", database: database)
        let newer = await #expect(throws: StoreFailure.self) {
            try await PostgresNotificationStore.open(location: location, options: options)
        }
        #expect(newer?.message.contains("version 99, newer than this salvo's") == true, "\(newer!)")
        let refusedMigration = await #expect(throws: StoreFailure.self) {
            try await PostgresNotificationStore.migrate(location: location)
        }
        #expect(refusedMigration?.message.contains("newer") == true)
        // A wrong password: the login refused, named by the URL without it.
        let wrong = try PostgresLocation(
            url: server.url(database: database, password: "not-the-password-4711"),
            option: "--store"
        )
        let login = await #expect(throws: StoreFailure.self) {
            try await PostgresNotificationStore.open(location: wrong, options: options)
        }
        let message = login?.message ?? ""
        #expect(message.contains("refused the login") && message.contains("--store"), "\(message)")
        for failure in [missing, newer, refusedMigration, login] {
            let text = failure?.message ?? ""
            #expect(!text.contains(server.password) && !text.contains("not-the-password-4711"), "\(text)")
        }
    }

    @Test func theStoreIsChosenByItsLocation() throws {
        guard case .folder("salvo-store") = try ServiceStoreLocation("salvo-store") else {
            Issue.record("a path is a folder")
            return
        }
        guard case .postgres(let location) = try ServiceStoreLocation("postgresql://u:secret@db.example:6432/salvo")
        else {
            Issue.record("a URL is PostgreSQL")
            return
        }
        #expect(location.description == "postgres://u@db.example:6432/salvo?sslmode=prefer")
        let bad = #expect(throws: StoreFailure.self) {
            try ServiceStoreLocation("postgres://u:secret@db.example/salvo?sslmode=sometimes")
        }
        #expect(bad?.message.hasPrefix("--store: sslmode=sometimes") == true, "\(bad!)")
        #expect(bad?.message.contains("secret") == false)
        #expect(WorkerID.isValid(WorkerID.make()) && WorkerID.make() != WorkerID.make())
    }
}
