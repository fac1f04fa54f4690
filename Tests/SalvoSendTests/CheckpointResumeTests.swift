import APNSWire
import Foundation
import SalvoEngine
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The real `salvo send --journal`, killed with SIGKILL once its journal's checkpoint has passed thousands of rows,
/// then the same command again, against one simulator's ledger: the second run starts reading at the checkpoint
/// the first left on the disk, no row before it is delivered again, every row after it is delivered, and twice only
/// when the journal held it as written (uncertain) at the kill.
@Suite(.serialized) struct CheckpointResumeTests {
    static let count = 12_000
    static let killAfter = 3000
    /// Tokens the simulator refuses. Over the binary interface rows are presumed only once the gateway has read
    /// past its receive buffer (more than a job this small writes), so these errors are what settle rows
    /// mid-flight there: each confirms every row before it on its connection.
    static let refusedIndexes: Set<Int> = [1500, 2600, 3300, 4500, 6000, 7000, 9000, 10500]

    @Test(arguments: JournalResumeTests.Wire.allCases)
    func aResumedRunStartsAtTheCheckpointAndSendsNothingBeforeIt(wire: JournalResumeTests.Wire) async throws {
        guard let salvo = InterruptionTests.executable else {
            Issue.record("salvo is not built next to the tests (\(CommandLine.arguments[0]))")
            return
        }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        if wire == .binary {
            configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 20)
        } else {
            configuration.http2 = HTTP2EndpointConfiguration()
        }
        var generator = TokenGenerator(seed: 77)
        let tokens = (0..<Self.count).map { _ in generator.next() }
        configuration.plan.invalidTokens = Self.refusedIndexes.sorted().map { tokens[$0].hexString }
        let simulator = try await Simulator.start(configuration)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-cpr-\(UUID().uuidString)")
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
                "localhost", "--topic", CertificateFactory.sharedTopic, "--rate", "2000",
            ]
        }
        let journal = folder.appendingPathComponent("journal").path

        // The first run, killed once a checkpoint past `killAfter` rows is on the disk.
        let first = try JournalResumeTests.start(salvo, arguments, in: folder)
        let clock = ContinuousClock()
        let started = clock.now
        while clock.now - started < .seconds(60) && first.process.isRunning {
            if let manifest = try? JobJournal.loadManifest(journal),
                let point = JobJournal.loadCheckpoint(journal, manifest: manifest), point.rows >= Self.killAfter
            {
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(first.process.processIdentifier, SIGKILL)
        first.process.waitUntilExit()
        let manifest = try #require(try JobJournal.loadManifest(journal))
        let checkpoint = try #require(JobJournal.loadCheckpoint(journal, manifest: manifest), "\(first.output())")
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
        let second = try JournalResumeTests.start(salvo, arguments, in: folder)
        let status = try await JournalResumeTests.wait(second.process, seconds: 120)
        let output = second.output()
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
}
