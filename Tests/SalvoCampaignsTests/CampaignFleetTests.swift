import APNSWire
import Foundation
import Logging
import NIOConcurrencyHelpers
import SalvoCampaigns
import SalvoHTTP2
import SalvoPostgres
import SalvoRows
import SalvoService
import SalvoServiceStores
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Campaigns run by a fleet: runners, each a worker with a folder of its own, on one real PostgreSQL store, against
/// the simulator. Two runners finish one campaign with disjoint partitions and every row once; a worker cut off from
/// the database stops within its lease and the partition it held is taken over, the rows it may have written counted
/// uncertain (resent, or reported and never sent twice), every row when it never checkpointed; a pause, resume and cancel asked of one worker hold for both.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(5)))
struct CampaignFleetTests {
    @Test func twoRunnersFinishOneCampaignWithDisjointPartitionsAndEveryRowOnce() async throws {
        let setup = try await FleetSetup.start("fleet_two")
        let rows = 3_000
        // Leases long enough that a runner never loses one on a loaded machine: this test is about sharing the work.
        let a = try await setup.runner("worker-a", lease: 10_000)
        let id = try await a.create(rows: rows, settings: #"{"payload": {"aps": {"alert": "hi"}}, "rate": 1500}"#)
        let b = try await setup.runner("worker-b", lease: 10_000)
        try await a.waitFor(id, .finished)
        try await b.waitFor(id, .finished)

        let results = try await setup.results(id)
        #expect(results.count == rows / 100 && results.allSatisfy { $0.state == .done && $0.fence == 1 })
        let workers = Set(results.compactMap(\.worker))
        #expect(workers == ["worker-a", "worker-b"], "each worker ran partitions: \(workers)")
        let verdict = setup.verdict(rows)
        #expect(verdict.deliveredOnce == rows && verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
        // The campaign's report, the same from either worker: every row confirmed, as send --journal reports them.
        for runner in [a, b] {
            let report = try #require(await runner.report(id))
            #expect(
                report.validRows == rows && report.confirmed == rows && report.notSent == 0 && report.uncertain == 0
            )
        }
        await a.stop()
        await b.stop()
        await setup.reader.close()
    }

    @Test(arguments: [OnUncertain.resend, .report])
    func aPartitionWhoseHolderIsCutOffIsTakenOverWithItsUncertainRowsCounted(policy: OnUncertain) async throws {
        let setup = try await FleetSetup.start("fleet_takeover", onUncertain: policy)
        let rows = 600
        // One partition, paced, so that the worker cut off holds it midway.
        let a = try await setup.runner("worker-a", partitionRows: rows)
        let id = try await a.create(rows: rows, settings: #"{"payload": {"aps": {"alert": "hi"}}, "rate": 150}"#)
        try await eventually("worker a has sent some rows", timeout: .seconds(30)) {
            setup.simulator.simulator.ledger.snapshot().accepted >= 100
        }
        a.cut.withLockedValue { $0 = true }
        // Cut off, it stops sending while its lease still runs (CampaignPartitions.mustStop).
        try await eventually("worker a has stopped sending", timeout: .seconds(30)) {
            let before = setup.simulator.simulator.ledger.snapshot().accepted
            try await Task.sleep(for: .milliseconds(700))
            return setup.simulator.simulator.ledger.snapshot().accepted == before
        }
        // The taker's own lease long: a taker starved past a short one on a loaded machine loses the partition in
        // turn and takes it back (fence 3), which is not what this test is about.
        let b = try await setup.runner("worker-b", partitionRows: rows, lease: 10_000)
        try await b.waitFor(id, .finished)

        let results = try await setup.results(id)
        #expect(results.count == 1 && results[0].state == .done && results[0].worker == "worker-b")
        #expect(results[0].fence == 2, "the takeover raised the fence")
        let report = try #require(await b.report(id))
        let inherited = report.resumed?.inheritedUncertain ?? 0
        let verdict = setup.verdict(rows)
        #expect(
            inherited > 0 && verdict.deliveredMoreThanOnce <= inherited,
            "\(verdict.summary); inherited \(inherited)"
        )
        #expect(report.validRows == rows && report.notSent == 0)
        switch policy {
        case .resend:
            // Every row delivered; the repeats only among the rows counted uncertain.
            #expect(verdict.deliveredOnce + verdict.deliveredMoreThanOnce == rows, "\(verdict.summary)")
            #expect(report.confirmed == rows)
        case .report:
            // Nothing twice: the uncertain rows are reported, not sent again.
            #expect(verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")
            #expect(report.uncertain == inherited && report.confirmed + report.uncertain == rows)
            let unsettled = try await b.file(.unsettled, id)
            #expect(unsettled.split(separator: "\n").count == inherited + 1)
        }
        await b.stop()
        await a.stop()
        await setup.reader.close()
    }

    /// A holder that never checkpointed may have written any row of its partition: its taker counts every row
    /// uncertain (resent, or reported and never sent twice) and runs the partition to its end.
    @Test(arguments: [OnUncertain.resend, .report])
    func aPartitionWhoseHolderNeverCheckpointedIsTakenOverWithEveryRowUncertain(policy: OnUncertain) async throws {
        let setup = try await FleetSetup.start("fleet_no_checkpoint", onUncertain: policy)
        // More rows than a job reads before its first connection (`SendRequest.firstChunkRows`), so that the
        // partition's rows are validated as they are taken, and its journal sized by the file's line ends.
        let rows = 1_500
        let a = try await setup.runner("worker-a", partitionRows: rows, cutAfterClaim: true)
        let id = try await a.create(rows: rows, settings: #"{"payload": {"aps": {"alert": "hi"}}, "rate": 400}"#)
        try await eventually("worker a has sent some rows", timeout: .seconds(30)) {
            setup.simulator.simulator.ledger.snapshot().accepted >= 20
        }
        // Without a checkpoint, its lease as claimed runs out and it stops sending (CampaignPartitions.mustStop).
        try await eventually("worker a has stopped sending", timeout: .seconds(30)) {
            let before = setup.simulator.simulator.ledger.snapshot().accepted
            try await Task.sleep(for: .milliseconds(700))
            return setup.simulator.simulator.ledger.snapshot().accepted == before
        }
        let sentByA = setup.simulator.simulator.ledger.snapshot().accepted
        let b = try await setup.runner("worker-b", partitionRows: rows, lease: 10_000)
        try await b.waitFor(id, .finished)

        let results = try await setup.results(id)
        #expect(results.count == 1 && results[0].state == .done && results[0].worker == "worker-b")
        let report = try #require(await b.report(id))
        #expect(report.resumed?.inheritedUncertain == rows, "every row inherited uncertain")
        #expect(report.validRows == rows && report.notSent == 0)
        let verdict = setup.verdict(rows)
        switch policy {
        case .resend:
            #expect(verdict.deliveredOnce + verdict.deliveredMoreThanOnce == rows, "\(verdict.summary)")
            #expect(verdict.deliveredMoreThanOnce == sentByA, "\(verdict.summary); a sent \(sentByA)")
            #expect(report.confirmed == rows)
        case .report:
            // Nothing sent again: what a did not send is reported uncertain, never sent.
            #expect(verdict.deliveredMoreThanOnce == 0 && verdict.deliveredOnce == sentByA, "\(verdict.summary)")
            #expect(report.uncertain == rows && report.confirmed == 0)
        }
        await b.stop()
        await a.stop()
        await setup.reader.close()
    }

    @Test func aPauseResumeAndCancelAskedOfOneWorkerHoldForTheFleet() async throws {
        let setup = try await FleetSetup.start("fleet_pause")
        let rows = 2_000
        let a = try await setup.runner("worker-a", lease: 10_000)
        let b = try await setup.runner("worker-b", lease: 10_000)
        let id = try await a.create(rows: rows, settings: #"{"payload": {"aps": {"alert": "hi"}}, "rate": 800}"#)
        try await eventually("both workers send", timeout: .seconds(30)) {
            setup.simulator.simulator.ledger.snapshot().accepted >= 400
        }
        try await b.waitFor(id, .running)
        // Paused through worker b: both stop, and nothing more goes out.
        _ = try await b.apply(.pause, id)
        try await a.waitFor(id, .paused)
        try await b.waitFor(id, .paused)
        let atPause = setup.simulator.simulator.ledger.snapshot().accepted
        try await Task.sleep(for: .milliseconds(800))
        #expect(setup.simulator.simulator.ledger.snapshot().accepted == atPause)
        #expect(atPause < rows)
        // Resumed through worker a: both run it to its end, every row once.
        _ = try await a.apply(.resume, id)
        try await a.waitFor(id, .finished)
        try await b.waitFor(id, .finished)
        let verdict = setup.verdict(rows)
        #expect(verdict.deliveredOnce == rows && verdict.deliveredMoreThanOnce == 0, "\(verdict.summary)")

        // Cancelled through worker a midway: both stop, and every row no one sent is counted not sent once each
        // worker has closed the partitions it could.
        setup.simulator.simulator.ledger.reset()
        let second = try await a.create(
            rows: rows,
            first: rows,
            settings: #"{"payload": {"aps": {"alert": "again"}}, "rate": 800}"#
        )
        try await eventually("both workers send again", timeout: .seconds(30)) {
            setup.simulator.simulator.ledger.snapshot().accepted >= 300
        }
        _ = try await a.apply(.cancel, second)
        try await a.waitFor(second, .cancelled)
        try await b.waitFor(second, .cancelled)
        try await eventually("every partition is closed", timeout: .seconds(60)) {
            try await setup.results(second).allSatisfy { $0.state == .done }
        }
        let sent = setup.simulator.simulator.ledger.snapshot().accepted
        let report = try #require(await a.report(second))
        #expect(report.validRows == rows && report.confirmed == sent && report.notSent == rows - sent)
        #expect(report.notSent > 0)
        let unsettled = try await a.file(.unsettled, second)
        #expect(unsettled.split(separator: "\n").count == rows - sent + 1)
        await a.stop()
        await b.stop()
        await setup.reader.close()
    }
}

/// The simulator, a migrated database, and the runners made on it.
struct FleetSetup {
    let simulator: CampaignSimulator
    let location: PostgresLocation
    let onUncertain: OnUncertain
    /// A store of its own to read the partitions with.
    let reader: PostgresNotificationStore

    static func start(_ prefix: String, onUncertain: OnUncertain = .resend) async throws -> FleetSetup {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase(prefix)
        let location = try PostgresLocation(url: server.url(database: database), option: "--store")
        _ = try await PostgresNotificationStore.migrate(location: location)
        let reader = try await PostgresNotificationStore.open(
            location: location,
            options: PostgresNotificationStore.Options(workerID: "reader")
        )
        return FleetSetup(
            simulator: try await CampaignSimulator.start(),
            location: location,
            onUncertain: onUncertain,
            reader: reader
        )
    }

    /// A runner of its own store; `lease` in milliseconds (short by default, so that a takeover comes soon).
    func runner(
        _ worker: String,
        partitionRows: Int = 100,
        lease: Int64 = 1_500,
        cutAfterClaim: Bool = false
    ) async throws -> FleetRunner {
        let store = try await PostgresNotificationStore.open(
            location: self.location,
            options: PostgresNotificationStore.Options(workerID: worker)
        )
        let cut = NIOLockedValueBox(false)
        let folder = try campaignFolder("fleet-\(worker)")
        var job = self.simulator.job
        job.onUncertain = self.onUncertain
        var fleet = CampaignFleet()
        fleet.partitionRows = partitionRows
        fleet.lease = lease
        fleet.poll = 200
        let runner = CampaignRunner(
            store: CuttableCampaignStore(store: store, cut: cut, cutAfterClaim: cutAfterClaim),
            job: CampaignJob(
                base: job,
                defaultTopic: campaignTopic,
                folder: CampaignFolder(store: folder),
                allowedFiles: nil
            ),
            template: { _ in nil },
            now: { Int64(Date().timeIntervalSince1970 * 1000) },
            // With FLEET_LOG set, each worker's log goes to standard error, named by its worker id.
            logger: Logger(
                label: worker,
                factory: { label -> any LogHandler in
                    ProcessInfo.processInfo.environment["FLEET_LOG"] != nil
                        ? StreamLogHandler.standardError(label: label) : SwiftLogNoOpLogHandler()
                }
            ),
            fleet: fleet
        )
        try await runner.start()
        return FleetRunner(runner: runner, store: store, cut: cut)
    }

    func results(_ id: String) async throws -> [PartitionResult] {
        try await self.reader.partitionResults(campaign: id)
    }

    func verdict(_ rows: Int, first: Int = 0) -> Verdict {
        self.simulator.simulator.verdict(
            expected: ExpectedTokens((first..<first + rows).map { try! DeviceToken(hex: campaignToken($0)) })
        )
    }
}

struct CampaignFailed: Error, CustomStringConvertible {
    let message: String
    var description: String { "the campaign failed: \(self.message)" }
}

struct FleetRunner {
    let runner: CampaignRunner
    let store: PostgresNotificationStore
    /// True: every call of this worker to the store fails, as when it is cut off from the database.
    let cut: NIOLockedValueBox<Bool>

    func create(rows: Int, first: Int = 0, settings: String) async throws -> String {
        let upload = try await self.runner.beginUpload()
        try await upload.write(Array(audienceCSV(first..<first + rows).utf8))
        try await upload.finish()
        let read = try CampaignSettings.read(Array(settings.utf8), upload: true)
        switch await self.runner.create(settings: read, upload: upload, keyID: "k-1") {
        case .success(let status): return status.record.id
        case .failure(let problem): throw problem
        }
    }

    func apply(_ operation: CampaignMachine.Operation, _ id: String) async throws -> CampaignStatus {
        try await self.runner.apply(operation, to: id).get()
    }

    func waitFor(_ id: String, _ state: CampaignState) async throws {
        try await eventually("campaign \(id) is \(state.rawValue)", timeout: .seconds(120)) {
            let status = await self.runner.status(id)
            if state != .failed, let status, status.state == .failed {
                throw CampaignFailed(message: status.record.message ?? "")
            }
            return status?.state == state
        }
    }

    func report(_ id: String) async -> JobReport? {
        guard case .success(let bytes) = await self.runner.file(.report, of: id) else { return nil }
        return try? JSONDecoder().decode(JobReport.self, from: Data(bytes))
    }

    func file(_ file: CampaignRunner.ResultFile, _ id: String) async throws -> String {
        String(decoding: try await self.runner.file(file, of: id).get(), as: UTF8.self)
    }

    func stop() async {
        await self.runner.shutdown()
        await self.store.close()
    }
}

/// The campaigns' store of one worker that the test can cut off from the database: every call then fails.
struct CuttableCampaignStore: CampaignStore, CampaignPartitionStore {
    let store: PostgresNotificationStore
    let cut: NIOLockedValueBox<Bool>
    /// Cut off as soon as it has claimed a partition: a holder that never checkpoints.
    var cutAfterClaim = false

    private func check() throws(StoreFailure) {
        if self.cut.withLockedValue({ $0 }) {
            throw StoreFailure("the database cannot be reached (cut off by the test)")
        }
    }

    func campaigns() async throws(StoreFailure) -> [CampaignRecord] {
        try self.check()
        return try await self.store.campaigns()
    }

    func campaign(id: String) async throws(StoreFailure) -> CampaignRecord? {
        try self.check()
        return try await self.store.campaign(id: id)
    }

    func putCampaign(_ record: CampaignRecord, events: [WebhookEvent], routes: WebhookRoutes) async throws(StoreFailure)
    {
        try self.check()
        try await self.store.putCampaign(record, events: events, routes: routes)
    }

    func putPartitions(campaign: String, template: [UInt8]?, partitions: [CampaignPartition]) async throws(StoreFailure)
    {
        try self.check()
        try await self.store.putPartitions(campaign: campaign, template: template, partitions: partitions)
    }

    func deletePartitions(campaign: String) async throws(StoreFailure) {
        try self.check()
        try await self.store.deletePartitions(campaign: campaign)
    }

    func partitioned(campaign: String) async throws(StoreFailure) -> CampaignPartitionSet? {
        try self.check()
        return try await self.store.partitioned(campaign: campaign)
    }

    func claimPartition(
        campaign: String,
        rate: Int?,
        now: Int64,
        lease: Int64
    ) async throws(StoreFailure)
        -> PartitionClaimResult
    {
        try self.check()
        let result = try await self.store.claimPartition(campaign: campaign, rate: rate, now: now, lease: lease)
        if self.cutAfterClaim, case .claimed = result { self.cut.withLockedValue { $0 = true } }
        return result
    }

    func checkpointPartition(
        _ claim: PartitionClaim,
        checkpoint: PartitionCheckpoint,
        now: Int64,
        lease: Int64
    )
        async throws(StoreFailure) -> Bool
    {
        try self.check()
        return try await self.store.checkpointPartition(claim, checkpoint: checkpoint, now: now, lease: lease)
    }

    func releasePartition(
        _ claim: PartitionClaim,
        checkpoint: PartitionCheckpoint,
        files: PartitionFiles,
        done: Bool
    )
        async throws(StoreFailure) -> Bool
    {
        try self.check()
        return try await self.store.releasePartition(claim, checkpoint: checkpoint, files: files, done: done)
    }

    func partitionResults(campaign: String) async throws(StoreFailure) -> [PartitionResult] {
        try self.check()
        return try await self.store.partitionResults(campaign: campaign)
    }

    func partitionReports(campaign: String) async throws(StoreFailure) -> [[UInt8]] {
        try self.check()
        return try await self.store.partitionReports(campaign: campaign)
    }
}
