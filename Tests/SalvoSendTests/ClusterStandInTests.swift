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

/// A Kubernetes Indexed Job on one machine: the simulator and N real `salvo send` workers with
/// `JOB_COMPLETION_INDEX=0…N-1`, `--partition-from-env JOB_COMPLETION_INDEX --partitions N` and a journal per index.
/// One worker is killed with SIGKILL mid-run and its same command run again (it resumes); the reports are merged
/// with `salvo report merge`, and the ledger shows every valid token delivered, twice only among the rows the
/// killed worker's journal held as uncertain, and (HTTP/2) one provider token for the whole fleet.
///
/// `SALVO_STANDIN_WORKERS` (default 4) and `SALVO_STANDIN_ROWS` (default 8000) change the size;
/// `SALVO_STANDIN_FAST=1` removes the slowing that lets the kill land mid-run, to measure throughput (printed).
@Suite(.tags(.network), .runs(.network), .serialized) struct ClusterStandInTests {
    enum Wire: String, CaseIterable, Sendable {
        case binary
        case h2
    }

    static let environment = ProcessInfo.processInfo.environment
    static let workers = Int(environment["SALVO_STANDIN_WORKERS"] ?? "") ?? 4
    static let rows = Int(environment["SALVO_STANDIN_ROWS"] ?? "") ?? 8000
    static let fast = environment["SALVO_STANDIN_FAST"] == "1"

    @Test(arguments: Wire.allCases)
    func workersWithOneKilledAndResumedSendEveryTokenOnce(wire: Wire) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let workers = Self.workers
        let count = Self.rows
        let paths = CertificateFactory.sharedFolder
        let folder = TestScratch.root.appendingPathComponent("salvo-standin-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var generator = TokenGenerator(seed: 1600)
        let tokens = (0..<count).map { _ in generator.next().hexString }
        let refused = Set([count / 7, count / 3, count / 2, count - 5])
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.maximumTokens = count + count / 4 + 1024
        configuration.plan.invalidTokens = refused.map { tokens[$0] }
        let signingKey = try DevelopmentSigningKey.ensure(in: folder.path)
        if wire == .binary {
            if !Self.fast {
                // About 25 KB/s per connection: a worker's share takes about 5 s, so the kill lands mid-run on an
                // idle machine and on one whose load delays the test's look by seconds.
                configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 1024, delayMilliseconds: 40)
            }
        } else {
            var providerKey = signingKey.providerKey
            providerKey.topics = [CertificateFactory.sharedTopic]
            configuration.http2 = HTTP2EndpointConfiguration(providerKeys: [providerKey])
        }
        let simulator = try await Simulator.start(configuration)
        try Data((["token"] + tokens).joined(separator: "\n").utf8).write(to: folder.appendingPathComponent("t.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))

        var common = [
            "send", "t.csv", "--payload", "payload.json", "--ca", paths.ca, "--connections", "1", "--quiet",
            "--partition-from-env", "JOB_COMPLETION_INDEX", "--partitions", String(workers),
        ]
        if wire == .binary {
            common += [
                "--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--cert", paths.client, "--key", paths.clientKey,
                "--settle-milliseconds", "300",
            ]
        } else {
            let mint = try TestProcess(
                salvo,
                [
                    "token", "mint", "--auth-key", signingKey.path, "--key-id", DevelopmentSigningKey.keyID,
                    "--team-id", DevelopmentSigningKey.teamID, "--out", "token.json",
                ],
                in: folder
            )
            #expect(try await mint.wait(seconds: 30) == 0, "\(mint.output)")
            common += [
                "--protocol", "h2", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--server-name",
                "localhost", "--topic", CertificateFactory.sharedTopic, "--provider-token-file", "token.json",
            ]
            if !Self.fast { common += ["--rate", String(max(1, 1500 / workers))] }
        }
        func arguments(_ index: Int) -> [String] {
            common + ["--journal", "journal/\(index)", "--report", "report-\(index).json"]
        }

        let clock = ContinuousClock()
        let started = clock.now
        var runs = try (0..<workers).map { index in
            try TestProcess(
                salvo,
                arguments(index),
                in: folder,
                environment: ["JOB_COMPLETION_INDEX": "\(index)"]
            )
        }
        // The last worker is killed once it has started its journal (it validated its input) and the simulator has a
        // share of the rows.
        let victim = workers - 1
        let manifestPath = JobJournal.manifestPath(folder.appendingPathComponent("journal/\(victim)").path)
        // One bound of 30 s for both waits.
        try await eventually(
            "the victim's journal, or its end",
            timeout: max(.zero, .seconds(30) - (clock.now - started)),
            every: .milliseconds(5)
        ) { FileManager.default.fileExists(atPath: manifestPath) || !runs[victim].isRunning }
        try await eventually(
            "a share of the rows accepted",
            timeout: max(.zero, .seconds(30) - (clock.now - started)),
            every: .milliseconds(5)
        ) { simulator.ledger.snapshot().accepted >= count / (4 * workers) }
        try await runs[victim].kill()
        let victimFinished = runs[victim].reason == .exit
        if !Self.fast { #expect(!victimFinished, "killed mid-run") }
        var uncertainLines: Set<Int> = []
        var settledLines: Set<Int> = []
        let journalFolder = folder.appendingPathComponent("journal/\(victim)").path
        if let manifest = try JobJournal.loadManifest(journalFolder) {
            let journal = try RowJournal(
                statePath: JobJournal.statePath(journalFolder),
                logPath: JobJournal.logPath(journalFolder),
                lineCounts: manifest.lineCounts
            )
            for (line, state) in journal.states(file: 0).enumerated() {
                if state == .written { uncertainLines.insert(line) }
                if state.isSettled { settledLines.insert(line) }
            }
        }
        // Its retry: the same command.
        runs[victim] = try TestProcess(
            salvo,
            arguments(victim),
            in: folder,
            environment: ["JOB_COMPLETION_INDEX": "\(victim)"]
        )
        for (index, run) in runs.enumerated() {
            let status = try await run.wait(seconds: 120)
            // Partitions with a refused token exit 1; the others 0.
            #expect(status == 0 || status == 1, "worker \(index): \(run.output)")
        }
        let elapsed = clock.now - started
        if victimFinished {
            #expect(runs[victim].output.contains("finished before"))
        } else {
            #expect(runs[victim].output.contains("resuming the job"), "\(runs[victim].output)")
        }

        let merge = try TestProcess(
            salvo,
            ["report", "merge"] + (0..<workers).map { "report-\($0).json" } + ["--output", "merged.json"],
            in: folder
        )
        // Exit 1: the merged job has refused rows.
        #expect(try await merge.wait(seconds: 30) == 1, "\(merge.output)")
        let merged = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("merged.json"))
        )
        #expect(merged.mergedPartitions == workers)
        #expect(merged.validRows == count)
        #expect(merged.delivered == count - refused.count, "\(merged)")
        #expect(merged.rejectedTotal == refused.count)
        #expect(merged.uncertain + merged.expired + merged.notSent == 0)

        var twice = 0
        // Twice and not held as uncertain by the killed worker's journal: a row some run found uncertain and sent
        // again (counted in uncertainEvents).
        var twiceElsewhere = 0
        for (index, token) in tokens.enumerated() {
            let delivered = Int(simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0)
            if refused.contains(index) {
                #expect(delivered == 0, "a refused token is never delivered")
            } else {
                #expect(delivered >= 1, "token \(index) never delivered")
                if delivered > 1 {
                    twice += 1
                    if !uncertainLines.contains(index + 2) { twiceElsewhere += 1 }
                    #expect(!settledLines.contains(index + 2), "token \(index) settled before the kill, sent again")
                }
            }
        }
        #expect(twiceElsewhere <= merged.uncertainEvents, "twice but not uncertain: \(twiceElsewhere)")
        #expect(twice - twiceElsewhere <= merged.resumed?.inheritedUncertain ?? 0)
        if wire == .h2 { #expect(simulator.acceptedProviderTokens == 1, "one provider token for the fleet") }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        print(
            "stand-in \(wire.rawValue), \(workers) worker(s), \(count) rows: \(String(format: "%.2f", seconds)) s, "
                + "\(Int(Double(count) / seconds)) rows/s (start to last exit, one worker killed and resumed), "
                + "\(twice) delivered twice of \(uncertainLines.count) uncertain"
        )
        try await simulator.shutdown()
    }
}
