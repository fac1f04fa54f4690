import APNSWire
import Foundation
import NIOSSL
import SalvoBinary
import SalvoHTTP2
import SalvoPostgres
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Synchronization
import Testing

/// The tokens APNs reported gone, written back to a real PostgreSQL server after real sends over TLS to the
/// simulator: HTTP/2 410 (the simulator's uninstalled apps, with their time), HTTP/2 BadDeviceToken and binary status
/// 8 (its invalid tokens). Each is recorded once, a rerun writes nothing twice, and a write-back that fails leaves the
/// files whole, is reported, and is retried by the journaled job's next run.
@Suite(.tags(.network), .runs(.network)) struct WriteBackTests {
    /// When the simulator's uninstalled apps went (UNIX seconds): the 410's timestamp.
    static let goneAt: Int64 = 1_700_000_000

    @Test func theUnregisteredTokensOfAJobAreRecordedOnceAndMatchTheSimulator() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_once")
        try await server.run(WriteBackStatement.createTable(), database: database)
        let job = try await Job.start("wb-once", tokens: 400, gone: 30, invalid: 4, seed: 71)
        defer { job.stopSoon() }
        let recorder = try Self.recorder(server.url(database: database), table: "salvo_gone_tokens", job: "first")

        let first = try await job.send(writeBack: recorder, journal: true)
        let report = try #require(first.report.writeBack)
        #expect(report.tokens == 34)
        #expect(report.written == 34)
        #expect(report.alreadyRecorded == 0)
        #expect(report.isComplete)
        #expect(first.outputFailures.isEmpty)
        let rows = try await Self.rows(server, database)
        #expect(rows.count == 34)
        #expect(Set(rows.filter { $0.reason == "Unregistered" }.map(\.token)) == Set(job.gone))
        #expect(Set(rows.filter { $0.reason == "BadDeviceToken" }.map(\.token)) == Set(job.invalid))
        for row in rows where row.reason == "Unregistered" { #expect(row.reportedAt == Self.goneAt) }
        for row in rows where row.reason == "BadDeviceToken" { #expect(row.reportedAt == nil) }
        #expect(rows.allSatisfy { $0.job == "first" })
        // The simulator's ledger: every other token delivered once, none of the gone ones.
        let verdict = job.simulator.verdict(expected: ExpectedTokens(job.tokens))
        #expect(verdict.deliveredOnce == 400 - 34, "\(verdict.summary)")
        #expect(verdict.uninstalledNeverDelivered == 30)
        #expect(verdict.invalidNeverDelivered == 4)
        #expect(verdict.deliveredMoreThanOnce == 0)

        // The finished job again: nothing sent, nothing written; its report is the first run's.
        let again = try await job.send(writeBack: recorder, journal: true)
        #expect(again.report.writeBack == first.report.writeBack)
        #expect(try await Self.rows(server, database) == rows)
        // The same tokens sent anew (no journal): every gone token is refused again, and none is written twice.
        let rerun = try await job.send(writeBack: recorder, journal: false)
        #expect(rerun.report.writeBack?.written == 0)
        #expect(rerun.report.writeBack?.alreadyRecorded == 34)
        #expect(try await Self.rows(server, database) == rows)
        #expect(try await server.run("SELECT count(*) FROM salvo_gone_tokens", database: database) == "34\n")
    }

    @Test func aMissingTableIsReportedTheFilesAreWholeAndTheNextRunRetriesOnlyTheWriteBack() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_missing")
        let job = try await Job.start("wb-missing", tokens: 300, gone: 12, invalid: 3, seed: 72)
        defer { job.stopSoon() }
        let recorder = try Self.recorder(server.url(database: database), table: "crm_gone", job: "campaign 7")

        let first = try await job.send(writeBack: recorder, journal: true)
        let report = try #require(first.report.writeBack)
        #expect(report.written == 0)
        #expect(report.failed == 15)
        #expect(report.error?.contains("42P01") == true, "\(report.error ?? "")")
        #expect(report.error?.contains("crm_gone") == true)
        #expect(first.outputFailures.map(\.output) == [OutputFailure.writeBack])
        #expect(!first.isComplete)
        // Every file is whole: the rejects, the suppression file, and the report that names the failure.
        #expect(try job.lines("rejects.csv").count == 1 + 15)
        #expect(
            Set(try SuppressionList.load(path: job.path("gone.csv")).entries.keys.map(\.hexString)) == job.goneOrInvalid
        )
        let written = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: job.url("report.json")))
        #expect(written.writeBack == report)
        #expect(written.outputFailures?.map(\.output) == [OutputFailure.writeBack])
        #expect(try JobJournal.loadManifest(job.path("journal"))?.finish == nil)
        let delivered = job.simulator.verdict(expected: ExpectedTokens(job.tokens)).deliveredOnce
        #expect(delivered == 300 - 15)

        // The table made, the same command again: nothing is sent, the write-back is done, with Apple's times.
        try await server.run(WriteBackStatement.createTable("crm_gone"), database: database)
        let retry = try await job.send(writeBack: recorder, journal: true)
        #expect(retry.report.writeBack?.written == 15)
        #expect(retry.outputFailures.isEmpty)
        #expect(retry.report.resumed?.settledBefore == 300)
        let verdict = job.simulator.verdict(expected: ExpectedTokens(job.tokens))
        #expect(verdict.deliveredOnce == delivered)
        #expect(verdict.deliveredMoreThanOnce == 0)
        let rows = try await Self.rows(server, database, table: "crm_gone")
        #expect(Set(rows.map(\.token)) == job.goneOrInvalid)
        for row in rows where row.reason == "Unregistered" { #expect(row.reportedAt == Self.goneAt) }
        #expect(try JobJournal.loadManifest(job.path("journal"))?.finish != nil)
        #expect(!FileManager.default.fileExists(atPath: job.path("journal/write-back.pending.csv")))
    }

    @Test func aServerThatIsDownIsReportedAndBinaryStatus8IsRecordedOnceItIsUp() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_down")
        try await server.run(WriteBackStatement.createTable(), database: database)
        let job = try await Job.start("wb-down", tokens: 200, gone: 0, invalid: 5, seed: 73)
        defer { job.stopSoon() }
        let closed = try ClosedPort()
        defer { closed.close() }
        let down = try Self.recorder(
            "postgres://salvo@127.0.0.1:\(closed.port)/app?sslmode=disable",
            table: "salvo_gone_tokens",
            job: "binary"
        )

        let failed = try await job.sendBinary(writeBack: down)
        #expect(failed.report.rejected == ["InvalidToken": 5])
        let report = try #require(failed.report.writeBack)
        #expect(report.failed == 5)
        #expect(report.error?.contains("cannot connect") == true, "\(report.error ?? "")")
        #expect(failed.outputFailures.map(\.output) == [OutputFailure.writeBack])
        #expect(try job.lines("rejects.csv").count == 1 + 5)
        #expect(FileManager.default.fileExists(atPath: job.path("report.json")))

        let up = try Self.recorder(server.url(database: database), table: "salvo_gone_tokens", job: "binary")
        let recorded = try await job.sendBinary(writeBack: up)
        #expect(recorded.report.writeBack?.written == 5)
        let rows = try await Self.rows(server, database)
        #expect(Set(rows.map(\.token)) == Set(job.invalid))
        #expect(rows.allSatisfy { $0.reason == "InvalidToken" && $0.reportedAt == nil })
    }

    @Test func aStatementOfTheUsersOwnMarksTheirDevicesTable() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_sql")
        let job = try await Job.start("wb-sql", tokens: 150, gone: 9, invalid: 0, seed: 74)
        defer { job.stopSoon() }
        try await server.run(
            """
            CREATE TABLE devices (token text PRIMARY KEY, opted_in boolean NOT NULL DEFAULT true, gone_at timestamptz);
            INSERT INTO devices (token) SELECT unnest(string_to_array('\(job.tokens.map(\.hexString).joined(separator: ","))', ','));
            """,
            database: database
        )
        let statement = try WriteBackStatement(
            sql: """
                UPDATE devices SET opted_in = false, gone_at = g.at FROM UNNEST(:tokens, :reported_at) AS g(token, at)
                WHERE devices.token = g.token AND devices.opted_in
                """
        )
        let recorder = PostgresWriteBack(
            location: try PostgresLocation(url: server.url(database: database)),
            statement: statement,
            job: "sql"
        )
        let first = try await job.send(writeBack: recorder, journal: false)
        #expect(first.report.writeBack?.written == 9)
        let marked = try await server.run(
            "SELECT token, extract(epoch FROM gone_at)::bigint FROM devices WHERE NOT opted_in ORDER BY token",
            database: database
        )
        #expect(marked == job.gone.sorted().map { "\($0)|\(Self.goneAt)\n" }.joined())
        let second = try await job.send(writeBack: recorder, journal: false)
        #expect(second.report.writeBack?.written == 0)
        #expect(second.report.writeBack?.alreadyRecorded == 9)
    }

    /// `salvo feedback --into-postgres`: the feedback service's tuples recorded with their times, after the CSV. The
    /// login and the statement are tried (rolled back) before the service is read, which empties its list: a wrong
    /// password or a table that is not there exits 3 with the service not read, and a run once it is fixed records
    /// every tuple (before, the list was read, and emptied, first).
    @Test func feedbackTuplesGoIntoTheTable() async throws {
        guard let salvo = Self.executable else {
            Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
            return
        }
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_feedback")
        try await server.run(WriteBackStatement.createTable("feedback_gone"), database: database)
        let job = try await Job.start("wb-feedback", tokens: 60, gone: 20, invalid: 0, seed: 75)
        defer { job.stopSoon() }
        try Data((server.password + "\n").utf8).write(to: job.url("pw"))
        try Data("not-the-password\n".utf8).write(to: job.url("wrong-pw"))
        let paths = CertificateFactory.sharedFolder
        for (table, password) in [("feedback_gone", "wrong-pw"), ("nowhere", "pw"), ("feedback_gone", "pw")] {
            let (status, output) = try await TestProcess.run(
                salvo,
                [
                    "feedback", "--gateway", "127.0.0.1:\(job.simulator.feedbackPort)", "--cert", paths.client,
                    "--key", paths.clientKey, "--ca", paths.ca, "--output", job.path("feedback.csv"),
                    "--into-postgres", server.urlWithoutPassword(database: database), "--write-back", table,
                    "--postgres-password-file", job.path(password),
                ]
            )
            #expect(!output.contains(server.password))
            if password == "wrong-pw" || table == "nowhere" {
                #expect(status == 3, "\(output)")
                #expect(output.contains("the feedback service was not read"), "\(output)")
                #expect(table == "feedback_gone" || output.contains("nowhere"), "\(output)")
                #expect(!FileManager.default.fileExists(atPath: job.path("feedback.csv")))
                continue
            }
            #expect(try job.lines("feedback.csv").count == 1 + 20, "the service still held every tuple")
            #expect(status == 0, "\(output)")
            #expect(output.contains("20 written, 0 already recorded"), "\(output)")
            let rows = try await Self.rows(server, database, table: "feedback_gone")
            #expect(Set(rows.map(\.token)) == Set(job.gone))
            #expect(rows.allSatisfy { $0.reason == "Feedback" && $0.reportedAt == Self.goneAt })
        }
    }

    /// `salvo send --write-back`: the table filled from the command line (exit 1: the gone rows were refused); a table
    /// that is not there is named on standard error, with exit status 3, and the report says so.
    @Test func sendWritesBackFromTheCommandLine() async throws {
        guard let salvo = Self.executable else {
            Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
            return
        }
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_cli")
        try await server.run(WriteBackStatement.createTable(), database: database)
        let job = try await Job.start("wb-cli", tokens: 120, gone: 10, invalid: 2, seed: 76)
        defer { job.stopSoon() }
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: job.url("payload.json"))
        let paths = CertificateFactory.sharedFolder
        let send = [
            "send", job.path("tokens.csv"), "--payload", job.path("payload.json"), "--gateway",
            "127.0.0.1:\(try #require(job.simulator.http2Port))", "--protocol", "h2", "--server-name", "localhost",
            "--topic", CertificateFactory.sharedTopic, "--cert", paths.client, "--key", paths.clientKey, "--ca",
            paths.ca,
            "--report", job.path("report.json"), "--quiet", "--write-back-url", server.url(database: database),
        ]
        let missing = try await TestProcess.run(salvo, send + ["--write-back", "nowhere"])
        #expect(missing.status == 3, "\(missing.output)")
        #expect(missing.output.contains("the write-back to nowhere at"), "\(missing.output)")
        #expect(missing.output.contains("12 tokens not recorded"), "\(missing.output)")
        #expect(!missing.output.contains(server.password))
        let failed = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: job.url("report.json")))
        #expect(failed.writeBack?.failed == 12)

        let recorded = try await TestProcess.run(
            salvo,
            send + ["--write-back", "salvo_gone_tokens", "--write-back-job", "cli"]
        )
        #expect(recorded.status == 1, "\(recorded.output)")
        let report = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: job.url("report.json")))
        #expect(report.writeBack?.written == 12)
        #expect(report.outputFailures == nil)
        let rows = try await Self.rows(server, database)
        #expect(Set(rows.map(\.token)) == job.goneOrInvalid)
        #expect(rows.allSatisfy { $0.job == "cli" })
    }

    /// Batches commit whole: a batch the table refuses is not written at all, the ones before it stay, and those after
    /// it are not tried. A statement that never ends is left at the deadline.
    @Test func batchesCommitWholeAndAStuckStatementIsLeftAtTheDeadline() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_batches")
        try await server.run(
            WriteBackStatement.createTable() + ";ALTER TABLE salvo_gone_tokens ADD CHECK (token <> 'refused')",
            database: database
        )
        let names = ["t1", "t2", "t3", "refused", "t5", "t6", "t7"]
        let tokens = names.map { GoneToken(token: $0, reason: "Unregistered", reportedAt: 1_700_000_000_000) }
        var recorder = try Self.recorder(server.url(database: database), table: "salvo_gone_tokens", job: "batches")
        recorder.batchSize = 3
        let report = await recorder.record(tokens)
        #expect(report.written == 3)
        #expect(report.failed == 4)
        #expect(report.error?.contains("23514") == true, "\(report.error ?? "")")
        #expect(
            try await server.run(
                "SELECT string_agg(token, ',' ORDER BY token) FROM salvo_gone_tokens",
                database: database
            )
                == "t1,t2,t3\n"
        )

        var stuck = PostgresWriteBack(
            location: try PostgresLocation(url: server.url(database: database), environment: [:]),
            statement: try WriteBackStatement(sql: "SELECT pg_sleep(30) WHERE cardinality(:tokens) > 0"),
            job: "stuck"
        )
        stuck.timeout = .seconds(1)
        let started = ContinuousClock.now
        let left = await stuck.record(tokens)
        #expect(ContinuousClock.now - started < .seconds(10))
        #expect(left.failed == names.count)
        #expect(left.error == "the write-back did not finish within 1 s")
    }

    /// The deadline holds while every thread of the concurrency pool is busy (a caller's blocking work, other
    /// suites' synchronous tests): it is kept on the connection's event loop, and nothing after it waits for the pool.
    /// With a task's sleep as the watchdog, the write-back returned only once the pool was free again.
    @Test func theDeadlineHoldsWhileTheConcurrencyPoolIsHeld() async throws {
        let server = try PostgresTestServer.shared()
        let database = try await server.makeDatabase("wb_pool_held")
        var stuck = PostgresWriteBack(
            location: try PostgresLocation(url: server.url(database: database), environment: [:]),
            statement: try WriteBackStatement(sql: "SELECT pg_sleep(30) WHERE cardinality(:tokens) > 0"),
            job: "stuck"
        )
        stuck.timeout = .seconds(1)
        let tokens = ["a", "b"].map { GoneToken(token: $0, reason: "Unregistered", reportedAt: 1_700_000_000_000) }
        // Every thread of the pool (one when the tests hold it to one) is held by a task that blocks, on purpose,
        // until the write-back has returned (45 s at most, so that a failing test ends). This test's own task runs on
        // Dispatch threads meanwhile (`DispatchThreads`), or it could not see when the write-back returns: its
        // resumption would wait for the pool like the watchdog it checks.
        let held = CooperativePool.isHeldToOneThread ? 1 : ProcessInfo.processInfo.activeProcessorCount
        let holding = HeldThreads()
        let letGo = DispatchSemaphore(value: 0)
        try await withTaskExecutorPreference(DispatchThreads.shared) {
            for _ in 0..<held {
                Task.detached {
                    holding.count.withLock { $0 += 1 }
                    if letGo.wait(timeout: .now() + 45) == .timedOut { holding.boundPassed.withLock { $0 = true } }
                }
            }
            defer { for _ in 0..<held { letGo.signal() } }
            try await eventually("every thread of the pool is held", timeout: .seconds(30)) {
                holding.count.withLock { $0 } == held
            }
            let started = ContinuousClock.now
            let left = await stuck.record(tokens)
            let took = ContinuousClock.now - started
            // Returned while the pool was still held: a watchdog that waited for the pool returns only when the
            // holders give up, at 45 s. The bound is not the deadline's accuracy (1 s, on a loaded machine later):
            // it is well under the 30 s the query sleeps, which a write-back without a watchdog would wait for.
            #expect(!holding.boundPassed.withLock { $0 }, "returned only once the pool was free again, after \(took)")
            #expect(took < .seconds(15), "returned \(took) after it began")
            #expect(left.failed == 2)
            #expect(left.error == "the write-back did not finish within 1 s")
        }
    }

    // MARK: Helpers

    /// How many of the tasks that hold the pool have begun.
    final class HeldThreads: Sendable {
        let count = Mutex(0)
        /// A holder's wait reached its bound before the test let it go.
        let boundPassed = Mutex(false)
    }

    /// A task executor on Dispatch's global queue, for the one test that holds the cooperative pool on purpose.
    final class DispatchThreads: TaskExecutor {
        /// One for the process: a task started under the preference may outlive the test, and a task does not keep
        /// its preferred executor alive.
        static let shared = DispatchThreads()

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }

    static func recorder(_ url: String, table: String, job: String) throws -> PostgresWriteBack {
        PostgresWriteBack(
            location: try PostgresLocation(url: url, environment: [:]),
            statement: try WriteBackStatement(table: table),
            job: job
        )
    }

    struct Row: Hashable {
        var token: String
        var reason: String
        var reportedAt: Int64?
        var job: String
        var writtenAt: String
    }

    static func rows(
        _ server: PostgresTestServer,
        _ database: String,
        table: String = "salvo_gone_tokens"
    ) async throws
        -> [Row]
    {
        let text = try await server.run(
            "SELECT token, reason, extract(epoch FROM reported_at)::bigint, job, written_at FROM \(table) ORDER BY token",
            database: database
        )
        return text.split(separator: "\n").map { line in
            let fields = line.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
            return Row(
                token: fields[0],
                reason: fields[1],
                reportedAt: Int64(fields[2]),
                job: fields[3],
                writtenAt: fields[4]
            )
        }
    }

    /// `salvo`, built next to the test bundle (`TestProcess.salvoPath`).
    static var executable: String? { TestProcess.salvoPath }
}

/// A simulator whose plan makes `gone` of the tokens uninstalled (HTTP/2 410 since `WriteBackTests.goneAt`, listed
/// by the feedback service) and `invalid` of them invalid (HTTP/2 BadDeviceToken, binary status 8), and a folder with
/// the token file; sends to it with the outputs in that folder.
struct Job: Sendable {
    let simulator: Simulator
    let folder: URL
    let tokens: [DeviceToken]
    let gone: [String]
    let invalid: [String]

    var goneOrInvalid: Set<String> { Set(self.gone + self.invalid) }

    static func start(_ prefix: String, tokens count: Int, gone: Int, invalid: Int, seed: UInt64) async throws -> Job {
        precondition(count >= gone * 3 + invalid, "every third of the first tokens is gone, the last ones invalid")
        var generator = TokenGenerator(seed: seed)
        let tokens = (0..<count).map { _ in generator.next() }
        let goneTokens = tokens.prefix(gone * 3).enumerated().filter { $0.offset % 3 == 1 }.map(\.element.hexString)
        let invalidTokens = Array(tokens.suffix(invalid).map(\.hexString))
        var plan = FaultPlan()
        plan.uninstalled = [
            FaultPlan.Uninstalled(
                topic: CertificateFactory.sharedTopic,
                tokens: goneTokens,
                timestamp: UInt32(WriteBackTests.goneAt)
            )
        ]
        plan.invalidTokens = invalidTokens
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared, plan: plan)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("tokens.csv"))
        return Job(simulator: simulator, folder: folder, tokens: tokens, gone: goneTokens, invalid: invalidTokens)
    }

    func url(_ name: String) -> URL { self.folder.appendingPathComponent(name) }
    func path(_ name: String) -> String { self.url(name).path }

    func lines(_ name: String) throws -> [Substring] {
        try String(contentsOf: self.url(name), encoding: .utf8).split(separator: "\n")
    }

    var outputs: SendOutputs {
        SendOutputs(
            report: self.path("report.json"),
            rejects: self.path("rejects.csv"),
            unregistered: self.path("gone.csv")
        )
    }

    /// An HTTP/2 send of the token file, with the client certificate of the shared test CA.
    func send(writeBack: any GoneTokenRecorder, journal: Bool) async throws -> SendResult {
        let paths = CertificateFactory.sharedFolder
        var client = HTTP2ClientConfiguration(
            host: "127.0.0.1",
            port: try #require(self.simulator.http2Port),
            authentication: try .certificate(pemFile: paths.client, keyFile: paths.clientKey)
        )
        client.serverName = "localhost"
        client.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(paths.ca))
        let configuration = HTTP2JobConfiguration(
            client: client,
            headers: try APNSRequestHeaders(pushType: .alert, topic: CertificateFactory.sharedTopic),
            payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)
        )
        var request = SendRequest(
            files: [self.path("tokens.csv")],
            interface: .http2(configuration),
            outputs: self.outputs,
            journal: journal ? SendJournal(directory: self.path("journal")) : nil
        )
        request.writeBack = writeBack
        return try await BulkSend.prepare(request).run()
    }

    /// A binary (command 2) send of the token file.
    func sendBinary(writeBack: any GoneTokenRecorder) async throws -> SendResult {
        let paths = CertificateFactory.sharedFolder
        var configuration = BinaryJobConfiguration(
            host: "127.0.0.1",
            port: self.simulator.gatewayPort,
            credentials: GatewayCredentials(
                identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
                trustedCAFile: paths.ca
            ),
            template: try FrameTemplate(command: .framed, payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)),
            connections: 1
        )
        configuration.settle = .milliseconds(200)
        configuration.reconnect.minimumInterval = .zero
        var request = SendRequest(
            files: [self.path("tokens.csv")],
            interface: .binary(configuration),
            outputs: self.outputs
        )
        request.writeBack = writeBack
        return try await BulkSend.prepare(request).run()
    }

    /// Shuts the simulator down in the background (a `defer` cannot wait).
    func stopSoon() {
        let simulator = self.simulator
        Task { try? await simulator.shutdown() }
    }
}
