import APNSWire
import AsyncHTTPClient
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import SalvoRows
import SalvoService
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A fleet as its users run it, with its failures: three `salvo serve` workers on one PostgreSQL (a throwaway cluster
/// of the test's own, since the test restarts it), each sending to a simulator of its own (TLS on 127.0.0.1), so that
/// the ledgers tell which worker sent what. A stream of transactional pushes is posted through the API to all three,
/// each batch under an Idempotency-Key, moved to the next worker when one does not answer. Meanwhile one worker is
/// `kill -9`ed and started again, another `SIGSTOP`ped past its lease and `SIGCONT`ed, and the database restarted
/// (`pg_ctl restart -m fast`). Then the ledgers show every accepted notification delivered, more than once only among
/// the rows the service declared uncertain, and the stopped worker sent none of the rows taken from it after it woke.
///
/// Beside the stream, a campaign of 300,000 rows (`FleetCampaign`) is uploaded to one worker and run by all three in
/// partitions through the same faults: every row is delivered, more than once no more often than the campaign's
/// report declares rows uncertain, and the stopped worker sends none of the rows of the partitions taken from it.
///
/// `Benchmarks/chaos.sh` runs the same scenario for longer (`SALVO_CHAOS_SECONDS`, a kill every
/// `SALVO_CHAOS_KILL_EVERY` seconds; `SALVO_CHAOS_CAMPAIGN_ROWS` rows in the campaign).
@Suite(
    .tags(.process, .network),
    .runs(.process),
    .runs(.network),
    .serialized,
    .timeLimit(.minutes(30))
)
struct FleetChaosTests {
    @Test func killedStalledAndARestartedDatabaseLoseNothingAndSendNothingTwiceUndeclared() async throws {
        guard let salvo = TestProcess.salvoPath else {
            Issue.record("\(TestProcess.salvoMissing)")
            return
        }
        // Its campaign's 300,000 tokens are made off the cooperative pool (held to one thread in CI: a second of
        // work there would stall every other test of the process), as are the tallies over them at the end.
        let scenario = await BlockingWork.run { FleetChaos.fromEnvironment() }
        let fleet = try await Fleet.start(salvo: salvo, workers: scenario.workers, leaseSeconds: scenario.leaseSeconds)
        do {
            let report = try await scenario.run(on: fleet)
            print(report.summary)
            #expect(report.neverDelivered == 0, "\(report.summary)")
            #expect(
                report.undeclaredDuplicates.count == 0,
                "delivered twice, never declared uncertain: \(report.undeclaredDuplicates.prefix(5)); \(report.summary)"
            )
            #expect(
                report.sentAfterWaking.count == 0,
                "the stopped worker sent rows taken from it: \(report.sentAfterWaking.prefix(5)); \(report.summary)"
            )
            #expect(report.takenUnwritten > 0, "no unwritten row was taken from the stopped worker: \(report.summary)")
            #expect(!report.loads.isEmpty, "the campaign ran beside the stream")
            #expect(report.issues.isEmpty, "\(report.issues)")
        } catch {
            Issue.record("\(error)\n\(fleet.outputs())")
        }
        for (index, status) in try await fleet.stop().enumerated() {
            #expect(status == 0, "worker \(index) exit \(status)\n\(fleet.outputs())")
        }
    }
}

/// Something a chaos run puts on the fleet beside the transactional stream, and checks at its end against the same
/// ledgers: the place where a campaign joins the scenario (a `FleetLoad` that posts it and follows it to its end).
protocol FleetLoad: Sendable {
    var name: String { get }
    /// Puts the load on the fleet; runs while the faults happen, and returns when the load was handed over whole.
    func run(on fleet: Fleet) async throws
    /// Whether the load is well under way, so that the faults come in its middle: they wait for it.
    func isUnderWay(on fleet: Fleet) async -> Bool
    /// Once every worker has settled: what the load came to (a line for the run's summary) and what went wrong, as
    /// messages (none when the load arrived as it should). `stall` is what the stopped worker held and had sent.
    func check(
        _ fleet: Fleet,
        ledger: FleetLedger,
        stall: Fleet.Stall?
    ) async throws -> (
        summary: String, issues: [String]
    )
}

/// What a chaos run does: its fleet, its stream, its faults, and the loads beside the stream.
struct FleetChaos: Sendable {
    var workers = 3
    var leaseSeconds = 4
    /// The transactional stream: batches of `batchSize` notifications, posted by `clients` clients, each pausing
    /// `pace` between its posts.
    var batches = 360
    var batchSize = 20
    var clients = 3
    var pace = Duration.milliseconds(100)
    /// The longer run: the stream goes on for this long (its batches numbered as they come), with a `kill -9` every
    /// `killEvery`, in turn (nil: `batches`, and one kill).
    var duration: Duration?
    var killEvery = Duration.seconds(30)
    /// Loads run beside the stream, on the same fleet and faults (a campaign, for one).
    var loads: [any FleetLoad] = []

    /// The default run, or the longer one `Benchmarks/chaos.sh` asks for (`SALVO_CHAOS_SECONDS`,
    /// `SALVO_CHAOS_KILL_EVERY`, `SALVO_CHAOS_CAMPAIGN_ROWS`), with its campaign: 300,000 rows by default, paced to
    /// last about 60 s (the default run's faults come within its first 30 to 60), or most of the longer run.
    static func fromEnvironment() -> FleetChaos {
        var chaos = FleetChaos()
        let environment = ProcessInfo.processInfo.environment
        if let seconds = environment["SALVO_CHAOS_SECONDS"].flatMap(Int.init), seconds > 0 {
            chaos.duration = .seconds(seconds)
        }
        if let seconds = environment["SALVO_CHAOS_KILL_EVERY"].flatMap(Int.init), seconds > 0 {
            chaos.killEvery = .seconds(seconds)
        }
        let rows = environment["SALVO_CHAOS_CAMPAIGN_ROWS"].flatMap(Int.init).map { max(1_000, $0) } ?? 300_000
        let seconds = chaos.duration.map { Int($0.components.seconds) * 4 / 5 } ?? 60
        chaos.loads = [FleetCampaign(rows: rows, rate: max(100, rows / max(1, seconds)))]
        return chaos
    }

    /// What the run saw.
    struct Report: Sendable {
        var accepted = 0
        var deliveredOnce = 0
        var deliveredMoreThanOnce = 0
        var neverDelivered = 0
        var declaredUncertain = 0
        var undeclaredDuplicates: [String] = []
        var kills = 0
        var databaseRestarts = 0
        var heldByStopped = 0
        var takenFromStopped = 0
        /// Of those, the rows it had not written when it was stopped.
        var takenUnwritten = 0
        var sentAfterWaking: [String] = []
        var workerWarnings = 0
        var seconds = 0.0
        /// Each load's line.
        var loads: [String] = []
        var issues: [String] = []

        var summary: String {
            "chaos: \(self.accepted) accepted, \(self.deliveredOnce) delivered once, \(self.deliveredMoreThanOnce) more "
                + "than once (\(self.undeclaredDuplicates.count) of them never declared uncertain), "
                + "\(self.neverDelivered) never; \(self.declaredUncertain) declared uncertain; \(self.kills) kill -9, "
                + "\(self.databaseRestarts) database restart(s); the stopped worker held \(self.heldByStopped) rows, "
                + "\(self.takenFromStopped) taken from it (\(self.takenUnwritten) never written by it), "
                + "\(self.sentAfterWaking.count) of them sent by it after it woke; \(self.workerWarnings) lease or fence warnings in the workers' logs; "
                + String(format: "%.1f s", self.seconds)
                + self.loads.map { "\n\($0)" }.joined()
        }
    }

    func run(on fleet: Fleet) async throws -> Report {
        let started = ContinuousClock.now
        var report = Report()
        let answers = NIOLockedValueBox([Int: String]())
        let posted = NIOLockedValueBox(0)
        let stall = NIOLockedValueBox<Fleet.Stall?>(nil)
        let counts = NIOLockedValueBox((kills: 0, restarts: 0))
        let end = self.duration.map { started + $0 }
        let batches = self.batches
        // The stream goes on past its batches until the faults are over, so that each finds rows in flight.
        let faulted = NIOLockedValueBox(false)
        let loads = self.loads
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0..<self.clients {
                group.addTask {
                    var batch = client
                    while end.map({ ContinuousClock.now < $0 })
                        ?? (batch < batches || !faulted.withLockedValue { $0 })
                    {
                        let id = try await fleet.post(batch, size: self.batchSize, first: batch)
                        answers.withLockedValue { $0[batch] = id }
                        posted.withLockedValue { $0 += 1 }
                        batch += self.clients
                        try await Task.sleep(for: self.pace)
                    }
                }
            }
            for load in self.loads { group.addTask { try await load.run(on: fleet) } }
            group.addTask {
                // The faults, each once the stream is well under way: a kill -9 (in the longer run, the kills' own
                // loop below), a stall past the lease, a database restart.
                let share = { (part: Double) async throws in
                    if let end {
                        let at = started + (end - started) * part
                        try await eventually("\(part) of the run", timeout: .seconds(7200), every: .milliseconds(100)) {
                            ContinuousClock.now >= at
                        }
                    } else {
                        try await eventually("\(part) of the batches", timeout: .seconds(600)) {
                            posted.withLockedValue { $0 } >= Int(Double(batches) * part)
                        }
                    }
                }
                try await eventually("the loads are under way", timeout: .seconds(600), every: .milliseconds(500)) {
                    for load in loads where await !load.isUnderWay(on: fleet) { return false }
                    return true
                }
                if end == nil {
                    try await share(0.2)
                    try await fleet.killAndRestart(0)
                    counts.withLockedValue { $0.kills += 1 }
                }
                try await share(0.4)
                let stalled = try await fleet.stallPastLease(Fleet.stalled, holdingAPartition: !loads.isEmpty)
                stall.withLockedValue { $0 = stalled }
                try await share(0.6)
                try await fleet.restartDatabase()
                counts.withLockedValue { $0.restarts += 1 }
                faulted.withLockedValue { $0 = true }
            }
            if let end {
                group.addTask {
                    // The longer run: a kill -9 every `killEvery`, each worker in turn but the one the stall stops
                    // (its first connections, the slow ones, must stay the ones it started with), until its end.
                    let killed = fleet.workers.indices.filter { $0 != Fleet.stalled }
                    var next = 0
                    while ContinuousClock.now + self.killEvery < end {
                        let at = ContinuousClock.now + self.killEvery
                        try await eventually("the next kill", timeout: self.killEvery * 2, every: .milliseconds(100)) {
                            ContinuousClock.now >= at
                        }
                        let index = killed[next % killed.count]
                        try await fleet.killAndRestart(index)
                        counts.withLockedValue { $0.kills += 1 }
                        next += 1
                    }
                }
            }
            try await group.waitForAll()
        }
        let accepted = answers.withLockedValue { $0 }
        report.kills = counts.withLockedValue { $0.kills }
        report.databaseRestarts = counts.withLockedValue { $0.restarts }

        // Every batch to its end, as the service tells it: the rows it declared uncertain.
        var uncertain: Set<String> = []
        var tokens: [DeviceToken] = []
        for (batch, id) in accepted.sorted(by: { $0.key < $1.key }) {
            let records = try await fleet.finalBatch(id)
            if records.count != self.batchSize || !records.allSatisfy(\.state.isFinal) {
                report.issues.append("batch \(batch) (\(id)): \(records.count) rows, not all final")
            }
            for record in records where record.uncertainResends > 0 || record.state == .uncertain {
                uncertain.insert(record.token)
            }
            tokens += (0..<self.batchSize).map { Fleet.token(batch: batch, index: $0) }
        }
        report.accepted = tokens.count
        report.declaredUncertain = uncertain.count

        let ledger = fleet.ledger()
        for token in tokens {
            let count = ledger.total(token)
            if count == 0 { report.neverDelivered += 1 }
            if count == 1 { report.deliveredOnce += 1 }
            if count > 1 {
                report.deliveredMoreThanOnce += 1
                if !uncertain.contains(token.hexString) { report.undeclaredDuplicates.append(token.hexString) }
            }
        }
        if let stall = stall.withLockedValue({ $0 }) {
            report.heldByStopped = stall.held.count
            for token in stall.held {
                // Taken from it: another worker sent it. The stopped worker's own ledger must not have grown since it
                // woke.
                guard ledger.total(token, except: stall.worker) > 0 else { continue }
                report.takenFromStopped += 1
                if stall.countsAtWake[token.hexString, default: 0] == 0 { report.takenUnwritten += 1 }
                if ledger.count(token, worker: stall.worker) > stall.countsAtWake[token.hexString, default: 0] {
                    report.sentAfterWaking.append(token.hexString)
                }
            }
        }
        for load in self.loads {
            let (summary, issues) = try await load.check(fleet, ledger: ledger, stall: stall.withLockedValue { $0 })
            report.loads.append("\(load.name): \(summary)")
            report.issues += issues.map { "\(load.name): \($0)" }
        }
        report.workerWarnings = fleet.outputs().components(separatedBy: "taken over by another worker").count - 1
        report.seconds = Double((ContinuousClock.now - started).components.seconds)
        return report
    }
}

/// What the simulators accepted, by worker: each worker sends to a simulator of its own.
struct FleetLedger: Sendable {
    let simulators: [Simulator]

    /// How many times the simulator of `worker` accepted a notification for `token`.
    func count(_ token: DeviceToken, worker: Int) -> Int {
        Int(self.simulators[worker].ledger.record(for: token.bytes)?.count ?? 0)
    }

    /// How many times any simulator (but `except`'s) accepted one for `token`.
    func total(_ token: DeviceToken, except: Int? = nil) -> Int {
        self.simulators.indices.filter { $0 != except }.reduce(0) { $0 + self.count(token, worker: $1) }
    }
}

/// Three (or more) `salvo serve` workers on a PostgreSQL cluster of their own, each with its simulator.
final class Fleet: Sendable {
    let cluster: PostgresCluster
    let salvo: String
    let key: String
    let workers: [Worker]
    let simulators: [Simulator]
    let client: HTTPClient
    let leaseSeconds: Int

    /// A worker: `salvo serve` on a fixed port, started again after a kill with the same id and local folder.
    final class Worker: Sendable {
        let index: Int
        let port: Int
        let arguments: [String]
        private let current = NIOLockedValueBox<TestProcess?>(nil)
        /// Everything every process of this worker printed.
        private let printed = NIOLockedValueBox("")

        init(index: Int, port: Int, arguments: [String]) {
            self.index = index
            self.port = port
            self.arguments = arguments
        }

        func start(_ salvo: String) throws {
            let process = try TestProcess(salvo, self.arguments, input: .nothing, output: .together)
            self.current.withLockedValue { $0 = process }
        }

        var process: TestProcess? { self.current.withLockedValue { $0 } }

        /// Keeps what the process printed (before it is replaced).
        func keepOutput() {
            let text = self.process?.output ?? ""
            self.printed.withLockedValue { $0 += text }
        }

        var output: String { self.printed.withLockedValue { $0 } + (self.process?.output ?? "") }
    }

    private init(
        cluster: PostgresCluster,
        salvo: String,
        key: String,
        workers: [Worker],
        simulators: [Simulator],
        leaseSeconds: Int
    ) {
        self.cluster = cluster
        self.salvo = salvo
        self.key = key
        self.workers = workers
        self.simulators = simulators
        self.client = HTTPClient(eventLoopGroupProvider: .singleton)
        self.leaseSeconds = leaseSeconds
    }

    static func start(salvo: String, workers count: Int, leaseSeconds: Int) async throws -> Fleet {
        let cluster = try await BlockingWork.run { () throws(PostgresCluster.Failure) -> PostgresCluster in
            do {
                return try PostgresCluster.start()
            } catch let failure as PostgresCluster.Failure {
                throw failure
            } catch {
                throw PostgresCluster.Failure("\(error)")
            }
        }
        let url = cluster.url(database: "postgres")
        let folder = try scratchFolder("fleet")
        let (migrated, migration) = try await TestProcess.run(salvo, ["serve", "migrate", "--store", url])
        guard migrated == 0 else { throw PostgresCluster.Failure("salvo serve migrate: \(migration)") }
        let (created, creation) = try await TestProcess.run(
            salvo,
            ["serve", "keys", "create", "--store", url, "--name", "chaos"]
        )
        guard created == 0,
            let key = creation.split(separator: "\n").first(where: { $0.hasPrefix("key: ") }).map({
                String($0.dropFirst(5))
            })
        else { throw PostgresCluster.Failure("salvo serve keys create: \(creation)") }
        var simulators: [Simulator] = []
        var workers: [Worker] = []
        for index in 0..<count {
            // Answers that take a while: every worker holds rows in flight when a fault comes. The worker the stall
            // stops (1) may have only 4 streams a connection: rows wait in it unwritten, as behind a slow gateway,
            // so that the rows taken from it include rows it never wrote.
            var faults = HTTP2EndpointConfiguration.Faults()
            faults.responseDelayMilliseconds = 150
            if index == Fleet.stalled {
                faults.shrinkAfterStreams = 2
                faults.shrinkTo = 4
                // Only the transactional job's two connections, opened at the worker's start: a campaign
                // partition's job opens connections of its own, which keep the full limit.
                faults.shrinkConnections = 2
            }
            var plan = FaultPlan()
            plan.http2 = faults
            let simulator = try await ServiceSimulator.start(plan: plan, maximumTokens: 1 << 20)
            simulators.append(simulator.simulator)
            let own = folder + "/w\(index)"
            try FileManager.default.createDirectory(atPath: own, withIntermediateDirectories: true)
            let gateway = try simulator.token.commandLineOptions(in: own)
            let free = try ClosedPort()
            let port = free.port
            free.close()
            workers.append(
                Worker(
                    index: index,
                    port: port,
                    arguments: [
                        "serve", "--listen", "127.0.0.1:\(port)", "--store", url, "--worker-id", "w\(index)",
                        "--local-folder", own + "/local", "--lease-seconds", "\(leaseSeconds)",
                        "--campaign-lease-seconds", "\(leaseSeconds)", "--log-level",
                        "warning", "--shutdown-grace", "2",
                    ] + gateway
                )
            )
        }
        let fleet = Fleet(
            cluster: cluster,
            salvo: salvo,
            key: key,
            workers: workers,
            simulators: simulators,
            leaseSeconds: leaseSeconds
        )
        for worker in workers { try worker.start(salvo) }
        for worker in workers { try await fleet.waitReady(worker) }
        return fleet
    }

    /// The worker the scenario stops past its lease.
    static let stalled = 1

    /// The token of notification `index` of batch `batch`, spread over all 32 bytes.
    static func token(batch: Int, index: Int) -> DeviceToken {
        notification(batch * 1000 + index).token
    }

    func ledger() -> FleetLedger { FleetLedger(simulators: self.simulators) }

    func outputs() -> String {
        self.workers.map { "--- worker \($0.index)\n\($0.output.suffix(3000))" }.joined(separator: "\n")
    }

    // MARK: The API

    private func request(_ worker: Worker, _ path: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(worker.port)\(path)")
        request.headers.add(name: "Authorization", value: "Bearer \(self.key)")
        return request
    }

    /// Waits until `worker` answers `/readyz` 200 (at most 60 s).
    func waitReady(_ worker: Worker) async throws {
        try await eventually("worker \(worker.index) is ready", timeout: .seconds(60), every: .milliseconds(100)) {
            let response = try? await self.client.execute(self.request(worker, "/readyz"), timeout: .seconds(5))
            return response?.status == .ok
        }
    }

    /// Posts batch `batch` to its worker (`first` chooses it), and to the next one whenever a worker does not answer
    /// it (refused, cut, stopped, 503 or 429): always with the same Idempotency-Key. The batch's id.
    func post(_ batch: Int, size: Int, first: Int) async throws -> String {
        let items = (0..<size).map { index in
            #"{"token":"\#(Self.token(batch: batch, index: index).hexString)","payload":{"aps":{"alert":"b\#(batch)"}}}"#
        }
        let body = ByteBuffer(string: #"{"notifications":[\#(items.joined(separator: ","))]}"#)
        return try await self.create(
            "batch \(batch)",
            path: "/v1/notifications",
            body: body,
            headers: [("Content-Type", "application/json"), ("Idempotency-Key", "chaos-\(batch)")],
            field: "batch",
            first: first,
            patience: .seconds(300),
            every: .milliseconds(20),
            timeout: .seconds(3)
        )
    }

    /// Posts `body` to `path` on worker `first`, and to the next one whenever a worker does not answer it (refused,
    /// cut, stopped, 503 or 429), until one accepts it (201 or 202) within `patience`: the answer's `field`.
    func create(
        _ what: String,
        path: String,
        body: ByteBuffer,
        headers: [(String, String)],
        field: String,
        first: Int,
        patience: Duration,
        every: Duration,
        timeout: TimeAmount
    ) async throws -> String {
        var attempt = first
        var made: String?
        try await eventually("\(what) is accepted", timeout: patience, every: every) {
            defer { attempt += 1 }
            guard
                let (status, answer) = await self.call(
                    attempt,
                    post: true,
                    path,
                    body: body,
                    headers: headers,
                    timeout: timeout
                )
            else { return false }
            guard status == 201 || status == 202 else {
                if status == 503 || status == 429 { return false }
                throw PostgresCluster.Failure("\(what): \(status) \(String(buffer: answer))")
            }
            guard case .string(let id)? = try JSONValue.parse(Array(answer.readableBytesView)).value[field] else {
                throw PostgresCluster.Failure("\(what): no \(field) in \(String(buffer: answer))")
            }
            made = id
            return true
        }
        guard let made else { throw PostgresCluster.Failure("\(what) was never accepted") }
        return made
    }

    /// A batch's rows once all are final, asked of any worker that answers (waits of 30 s, for at most 5 minutes).
    func finalBatch(_ id: String) async throws -> [(token: String, state: NotificationState, uncertainResends: Int)] {
        var records: [(token: String, state: NotificationState, uncertainResends: Int)] = []
        var attempt = 0
        try await eventually("batch \(id) is final", timeout: .seconds(300), every: .milliseconds(100)) {
            defer { attempt += 1 }
            guard let (status, bytes) = await self.call(attempt, "/v1/batches/\(id)?wait=30", timeout: .seconds(40)),
                status == 200
            else { return false }
            let value = try JSONValue.parse(Array(bytes.readableBytesView)).value
            guard case .array(let items)? = value["notifications"] else { return false }
            records = items.compactMap { item in
                guard case .string(let token)? = item["token"], case .string(let state)? = item["state"],
                    case .number(let resends)? = item["uncertain_resends"]
                else { return nil }
                let known = NotificationState.allCases.first { $0.description == state } ?? .queued
                return (token, known, Int(resends) ?? 0)
            }
            return value["final"] == .bool(true)
        }
        return records
    }

    // MARK: Faults

    /// `kill -9` of worker `index`, then the same worker started again (same id, same local folder), ready.
    func killAndRestart(_ index: Int) async throws {
        let worker = self.workers[index]
        try await worker.process?.kill()
        worker.keepOutput()
        try worker.start(self.salvo)
        try await self.waitReady(worker)
    }

    /// A stall: which worker, the rows it held when stopped (by token), the rows of the campaign partitions it held,
    /// and what its simulator had accepted for each when it was woken and a lease later.
    struct Stall: Sendable {
        var worker: Int
        var held: [DeviceToken]
        var partitionRows: [DeviceToken] = []
        var countsAtWake: [String: Int]
        var countsALeaseLater: [String: Int] = [:]
    }

    /// `SIGSTOP` of worker `index` until its lease has run out and the rows and campaign partitions it held are held
    /// by it no more (the others took them over), then `SIGCONT`; the ledger read again a lease after (a partition
    /// taken from it is held by its taker at least that long, so what the woken worker sent of its rows by then it
    /// sent after they were taken).
    ///
    /// With `holdingAPartition`, the stop waits (up to a minute) for a moment the worker holds a campaign partition:
    /// between two partitions it holds none, and the stall would then test nothing of the campaign's.
    func stallPastLease(_ index: Int, holdingAPartition: Bool = false) async throws -> Stall {
        let worker = self.workers[index]
        guard let process = worker.process else { throw PostgresCluster.Failure("worker \(index) is not running") }
        if holdingAPartition {
            try await eventually("worker \(index) holds a campaign partition", timeout: .seconds(60)) {
                let held = try await self.cluster.query(
                    "SELECT count(*) FROM salvo.campaign_partitions WHERE state = 1 AND worker = 'w\(index)'"
                )
                return held.trimmingCharacters(in: .whitespacesAndNewlines) != "0"
            }
        }
        process.signal(SIGSTOP)
        let stoppedAt = ContinuousClock.now
        let held = try await self.cluster.query(
            "SELECT encode(token, 'hex') FROM salvo.notifications WHERE state = 1 AND worker = 'w\(index)'"
        ).split(separator: "\n").compactMap { try? DeviceToken(hex: String($0)) }
        // The partitions' CSVs: a header, then a token a line.
        let partitionRows = try await self.cluster.query(
            "SELECT convert_from(audience, 'UTF8') FROM salvo.campaign_partitions WHERE state = 1 AND worker = 'w\(index)'"
        ).split(whereSeparator: \.isNewline).compactMap { try? DeviceToken(hex: String($0)) }
        let lease = Duration.seconds(self.leaseSeconds)
        try await eventually(
            "worker \(index) is past its lease and holds nothing",
            timeout: .seconds(120),
            every: .milliseconds(200)
        ) {
            guard ContinuousClock.now - stoppedAt > lease + .seconds(1) else { return false }
            let still = try await self.cluster.query(
                """
                SELECT (SELECT count(*) FROM salvo.notifications WHERE state = 1 AND worker = 'w\(index)')
                    + (SELECT count(*) FROM salvo.campaign_partitions WHERE state = 1 AND worker = 'w\(index)')
                """
            )
            return still.trimmingCharacters(in: .whitespacesAndNewlines) == "0"
        }
        var stall = Stall(worker: index, held: held, partitionRows: partitionRows, countsAtWake: [:])
        let counts = { [self] () -> [String: Int] in
            let ledger = self.ledger()
            var counts: [String: Int] = [:]
            for token in held + partitionRows { counts[token.hexString] = ledger.count(token, worker: index) }
            return counts
        }
        stall.countsAtWake = counts()
        process.signal(SIGCONT)
        let woke = ContinuousClock.now
        try await eventually("a lease after the wake", timeout: lease * 2, every: .milliseconds(100)) {
            ContinuousClock.now - woke >= lease
        }
        stall.countsALeaseLater = counts()
        return stall
    }

    /// A call of the API on worker `index`: its status and body, nil when the worker did not answer (refused, cut,
    /// stopped, or no answer within `timeout`).
    func call(
        _ index: Int,
        post: Bool = false,
        _ path: String,
        body: ByteBuffer? = nil,
        headers: [(String, String)] = [],
        timeout: TimeAmount = .seconds(30)
    ) async -> (status: Int, body: ByteBuffer)? {
        var request = self.request(self.workers[index % self.workers.count], path)
        request.method = post ? .POST : .GET
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(body) }
        guard let response = try? await self.client.execute(request, timeout: timeout),
            let bytes = try? await response.body.collect(upTo: 64 << 20)
        else { return nil }
        return (Int(response.status.code), bytes)
    }

    /// `pg_ctl restart -m fast`: every worker's sessions cut, the server back on the same port.
    func restartDatabase() async throws {
        let cluster = self.cluster
        try await BlockingWork.run { () throws(PostgresCluster.Failure) in
            do {
                try cluster.restart()
            } catch let failure as PostgresCluster.Failure {
                throw failure
            } catch {
                throw PostgresCluster.Failure("\(error)")
            }
        }
    }

    /// Stops every worker (SIGTERM, each given 30 s), the client, the simulators and the cluster; the workers' exit
    /// statuses.
    func stop() async throws -> [Int32] {
        var statuses: [Int32] = []
        for worker in self.workers {
            guard let process = worker.process else { continue }
            process.signal(SIGCONT)
            process.signal(SIGTERM)
            statuses.append(try await process.wait(seconds: 30))
        }
        try await self.client.shutdown()
        for simulator in self.simulators { try await simulator.shutdown() }
        self.cluster.stop()
        return statuses
    }
}
