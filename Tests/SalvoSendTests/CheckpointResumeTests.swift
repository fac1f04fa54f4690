import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// The real `salvo send --journal`, killed with SIGKILL once its journal's checkpoint has passed thousands of rows,
/// then the same command again, against one simulator's ledger: the second run starts reading at the checkpoint
/// the first left on the disk, no row before it is delivered again, every row after it is delivered, and twice only
/// when the journal held it as written (uncertain) at the kill.
@Suite(.tags(.network), .runs(.network), .serialized) struct CheckpointResumeTests {
    static let count = 12_000
    static let killAfter = 3000
    /// Tokens the simulator refuses. Over the binary interface rows are presumed only once the gateway has read
    /// past its receive buffer (more than a job this small writes), so these errors are what settle rows
    /// mid-flight there: each confirms every row before it on its connection.
    static let refusedIndexes: Set<Int> = [1500, 2600, 3300, 4500, 6000, 7000, 9000, 10500]

    @Test(arguments: JournalResumeTests.Wire.allCases)
    func aResumedRunStartsAtTheCheckpointAndSendsNothingBeforeIt(wire: JournalResumeTests.Wire) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        if wire == .binary {
            configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 40)
        } else {
            configuration.http2 = HTTP2EndpointConfiguration()
        }
        var generator = TokenGenerator(seed: 77)
        let tokens = (0..<Self.count).map { _ in generator.next() }
        configuration.plan.invalidTokens = Self.refusedIndexes.sorted().map { tokens[$0].hexString }
        let simulator = try await Simulator.start(configuration)
        let folder = TestScratch.root.appendingPathComponent("salvo-cpr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // Row i is on line i + 2.
        let text = "token\n" + tokens.map { $0.hexString + "\n" }.joined()
        try Data(text.utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        var arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--connections", "2", "--report", "report.json", "--journal", "journal",
        ]
        if wire == .binary {
            arguments += ["--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--settle-milliseconds", "300"]
        } else {
            arguments += [
                "--protocol", "h2", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--server-name",
                "localhost", "--topic", CertificateFactory.sharedTopic,
            ]
        }
        // Over HTTP/2 the first run is paced at 1,000 a second, so that the kill lands mid-run (about 3 s in, 9 s
        // before its end) however late a loaded machine lets the test look; the second at 2,000 (the rate is no
        // setting of the journal's).
        let pace = { (rate: Int) in wire == .binary ? [] : ["--rate", String(rate)] }
        let journal = folder.appendingPathComponent("journal").path

        // The first run, killed once a checkpoint past `killAfter` rows is on the disk.
        let first = try TestProcess(salvo, arguments + pace(1000), in: folder)
        try await eventually("a checkpoint past \(Self.killAfter) rows, or the run's end", timeout: .seconds(60)) {
            guard first.isRunning else { return true }
            guard let manifest = try? JobJournal.loadManifest(journal),
                let point = JobJournal.loadCheckpoint(journal, manifest: manifest)
            else { return false }
            return point.rows >= Self.killAfter
        }
        try await first.kill()
        let manifest = try #require(try JobJournal.loadManifest(journal))
        let checkpoint = try #require(JobJournal.loadCheckpoint(journal, manifest: manifest), "\(first.output)")
        #expect(checkpoint.rows >= Self.killAfter && checkpoint.rows < Self.count, "\(checkpoint)")
        #expect(checkpoint.file == 0 && checkpoint.line == checkpoint.rows + 2)
        #expect(checkpoint.offset == "token\n".utf8.count + checkpoint.rows * 65)

        // What the ledger and the journal held at the kill.
        let states = try RowJournal(
            statePath: JobJournal.statePath(journal),
            logPath: JobJournal.logPath(journal),
            lineCounts: manifest.lineCounts
        ).states(file: 0)
        func delivered(_ index: Int) -> Int { Int(simulator.ledger.record(for: tokens[index].bytes)?.count ?? 0) }
        let atKill = (0..<Self.count).map(delivered)
        for index in 0..<checkpoint.rows {
            #expect(states[index + 2].isSettled, "row \(index), before the checkpoint")
            #expect(Self.refusedIndexes.contains(index) || atKill[index] >= 1, "row \(index) before the checkpoint")
        }

        // The same command again: it starts at the checkpoint and finishes the job.
        let second = try TestProcess(salvo, arguments + pace(2000), in: folder)
        let status = try await second.wait(seconds: 120)
        let output = second.output
        #expect(status == 1, "the refused rows: exit 1\n\(output)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.resumed?.startedAt == checkpoint, "\(output)")
        #expect(output.contains("checkpoint reading began at line \(checkpoint.line)"), "\(output)")
        #expect(report.firstRowSeconds != nil)
        let refused = Self.refusedIndexes.count
        #expect(report.validRows == Self.count && report.delivered == Self.count - refused, "\(report)")
        #expect(report.rejectedTotal == refused, "\(report.rejected)")
        #expect(report.resumed?.settledBefore == states.filter(\.isSettled).count)

        var twice = 0
        for index in 0..<Self.count {
            let now = delivered(index)
            if index < checkpoint.rows {
                #expect(now == atKill[index], "row \(index), before the checkpoint, was sent again")
                continue
            }
            if Self.refusedIndexes.contains(index) {
                #expect(now == 0, "a refused token is never delivered")
                continue
            }
            #expect(now >= 1, "row \(index) never delivered")
            if states[index + 2].isSettled { #expect(now == atKill[index], "row \(index) settled, sent again") }
            if now > 1 {
                twice += 1
                #expect(states[index + 2] == .written, "row \(index) twice, not uncertain at the kill")
            }
        }
        #expect(twice <= report.resumed?.inheritedUncertain ?? 0)
        try await simulator.shutdown()
    }

    /// A job resumed with a suppression list that grew since its first run (`--suppress s.csv --unregistered s.csv`
    /// adds the tokens a run is refused): a row the first run settled and this run suppresses is no stand-in for a
    /// row of the same segment this run sends, so no checkpoint on the disk passes that row before it settles.
    @Test func aSuppressionListThatGrewDoesNotLetTheCheckpointPassAnUnsettledRow() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        // Rows stay written (unsettled) for a while after they are sent: several syncs see them so.
        configuration.plan.latencyMilliseconds = 150
        let simulator = try await Simulator.start(configuration)
        var generator = TokenGenerator(seed: 78)
        let tokens = (0..<3000).map { _ in generator.next() }
        let folder = TestScratch.root.appendingPathComponent("salvo-cps-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // Row i is on line i + 2.
        let text = "token\n" + tokens.map { $0.hexString + "\n" }.joined()
        try Data(text.utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        let suppress = folder.appendingPathComponent("suppress.csv")
        try Data((SuppressionList.csvHeader + "\n").utf8).write(to: suppress)
        let arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--connections", "1", "--gateway", "127.0.0.1:\(simulator.gatewayPort)",
            "--settle-milliseconds", "300", "--suppress", "suppress.csv", "--journal", "journal",
        ]
        let journal = folder.appendingPathComponent("journal").path

        let first = try TestProcess(salvo, arguments, in: folder)
        #expect(try await first.wait(seconds: 60) == 0, "\(first.output)")
        // As if the first run had stopped with row 5 never sent (the rest settled), and row 2's token had since
        // joined the suppression list.
        var manifest = try #require(try JobJournal.loadManifest(journal))
        manifest.finish = nil
        try JSONEncoder().encode(manifest).write(to: URL(fileURLWithPath: JobJournal.manifestPath(journal)))
        unlink(JobJournal.checkpointPath(journal))
        let statePath = URL(fileURLWithPath: JobJournal.statePath(journal))
        // Line L's state is the byte after the header at L.
        let header = RowJournalHeader.size
        var states = try Data(contentsOf: statePath)
        #expect((2..<3002).allSatisfy { states[header + $0] >= RowState.confirmed.rawValue }, "every row settled")
        states[header + 5 + 2] = RowState.none.rawValue
        try states.write(to: statePath)
        let entry = SuppressionList.Entry(token: tokens[2], timestamp: 1_700_000_000, reason: "InvalidToken")
        let handle = try FileHandle(forWritingTo: suppress)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((entry.csvLine + "\n").utf8))
        try handle.close()

        // The same command again, its checkpoint watched as it runs: whatever it passes is settled on the disk.
        let second = try TestProcess(salvo, arguments, in: folder)
        var seen: Set<InputCheckpoint> = []
        // Watched every 5 ms until the run ends (bounded: 120 s).
        try await eventually("the second run's end", timeout: .seconds(120), every: .milliseconds(5)) {
            guard second.isRunning else { return true }
            if let point = JobJournal.loadCheckpoint(journal, manifest: manifest), seen.insert(point).inserted {
                let now = try Data(contentsOf: statePath)
                let passed = point.file > 0 ? tokens.count : max(0, point.line - 2)
                let unsettled = (0..<passed).filter { now[header + $0 + 2] < RowState.confirmed.rawValue }
                #expect(unsettled.isEmpty, "\(point) passes the unsettled rows \(unsettled)")
            }
            return false
        }
        #expect(try await second.wait(seconds: 10) == 0, "\(second.output)")
        #expect(!seen.isEmpty, "the run syncs its checkpoint")
        let last = try #require(JobJournal.loadCheckpoint(journal, manifest: manifest))
        #expect(last.file == 1 && last.rows == tokens.count && last.validRows == tokens.count - 1)
        #expect(simulator.ledger.record(for: tokens[5].bytes)?.count == 2, "row 5 sent again")
        #expect(simulator.ledger.record(for: tokens[2].bytes)?.count == 1, "the suppressed row not sent again")
        try await simulator.shutdown()
    }
}
