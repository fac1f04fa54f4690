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

/// The real `salvo send --journal`, killed with SIGKILL at several points and run again with the same command, one
/// simulator kept running across both runs: every valid token is delivered, no row settled before the kill is
/// delivered twice, and a token delivered twice is one the journal held as uncertain. Then a third run finds the
/// job finished, and a changed input is refused.
@Suite(.tags(.process), .runs(.process), .serialized) struct JournalResumeTests {
    enum Moment: String, CaseIterable, Sendable {
        /// At once: the process is still reading its input.
        case validation
        /// With part of the rows accepted by the simulator.
        case midFlight
        /// Once the simulator has accepted every row: the job is waiting for its barrier or its last answers.
        case end
    }

    enum Wire: String, CaseIterable, Sendable {
        case binary
        case h2
    }

    static let count = 6000
    static let refusedIndexes = [300, 700, 1900, 3100, 4300, 5500]

    @Test(arguments: Wire.allCases, Moment.allCases)
    func killedAndRunAgainDeliversEveryRowOnce(wire: Wire, moment: Moment) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        // Slow enough that a kill lands mid-flight: a binary gateway that reads 4 KiB per 5 ms, an HTTP/2 client
        // capped at 2,000 requests a second.
        if wire == .binary {
            configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 20)
        } else {
            configuration.http2 = HTTP2EndpointConfiguration()
        }
        var generator = TokenGenerator(seed: 31)
        let tokens = (0..<Self.count).map { _ in generator.next().hexString }
        // Tokens the simulator refuses: their answers settle rows on both interfaces (binary: an error response
        // confirms every row before it), and their reasons must outlive the kill.
        let refused = Set(Self.refusedIndexes)
        configuration.plan.invalidTokens = Self.refusedIndexes.map { tokens[$0] }
        let simulator = try await Simulator.start(configuration)
        let folder = TestScratch.root.appendingPathComponent("salvo-jr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // Two bad rows: refused before sending, in every run's report.
        let rows = ["token"] + tokens.prefix(10) + ["nothex", "abc"] + tokens.dropFirst(10)
        try Data((rows.joined(separator: "\n") + "\n").utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        var arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--connections", "2", "--report", "report.json", "--journal", "journal", "--quiet",
        ]
        if wire == .binary {
            arguments += ["--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--settle-milliseconds", "300"]
        } else {
            arguments += [
                "--protocol", "h2", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--server-name",
                "localhost", "--topic", CertificateFactory.sharedTopic, "--rate", "2000",
            ]
        }

        // The first run, killed.
        let first = try TestProcess(salvo, arguments, in: folder)
        switch moment {
        case .validation:
            break
        case .midFlight:
            try await eventually("a quarter of the rows accepted", timeout: .seconds(30), every: .milliseconds(5)) {
                simulator.ledger.snapshot().accepted >= Self.count / 4
            }
        case .end:
            let valid = Self.count - refused.count
            try await eventually("every valid row accepted", timeout: .seconds(60), every: .milliseconds(2)) {
                simulator.ledger.snapshot().accepted >= valid
            }
        }
        try await first.kill()
        let acceptedAtKill = simulator.ledger.snapshot().accepted
        if moment == .midFlight {
            #expect(acceptedAtKill > 0 && acceptedAtKill < Self.count, "killed mid-flight: \(acceptedAtKill)")
        }
        if moment == .end { #expect(acceptedAtKill == Self.count - refused.count) }
        // At the end the kill may come after the last answer: then the first run finished the job itself.
        let firstFinished = first.reason == .exit
        if moment == .midFlight { #expect(!firstFinished, "killed mid-flight") }

        // What the journal held when the process died.
        var settledLines: [Int] = []
        var uncertainLines: Set<Int> = []
        let journalFolder = folder.appendingPathComponent("journal").path
        if let manifest = try JobJournal.loadManifest(journalFolder) {
            let rowsJournal = try RowJournal(
                statePath: JobJournal.statePath(journalFolder),
                logPath: JobJournal.logPath(journalFolder),
                lineCounts: manifest.lineCounts
            )
            for (line, state) in rowsJournal.states(file: 0).enumerated() {
                if state.isSettled { settledLines.append(line) }
                if state == .written { uncertainLines.insert(line) }
            }
        }

        // The same command again: it resumes and finishes.
        let second = try TestProcess(salvo, arguments, in: folder)
        let status = try await second.wait(seconds: 120)
        let output = second.output
        #expect(status == 1, "two bad rows: exit 1\n\(output)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.validRows == Self.count)
        #expect(report.invalidInput == 2)
        #expect(report.delivered == Self.count - refused.count, "every valid row delivered or refused: \(report)")
        #expect(report.rejectedTotal == refused.count, "\(report.rejected)")
        #expect(report.rejected[wire == .binary ? "InvalidToken" : "BadDeviceToken"] == refused.count)
        #expect(report.expired + report.uncertain + report.notSent == 0)
        if moment != .validation {
            #expect(!settledLines.isEmpty || !uncertainLines.isEmpty, "the journal held the first run's rows")
        }
        if firstFinished {
            #expect(output.contains("finished before"), "\(output)")
        } else if !settledLines.isEmpty || !uncertainLines.isEmpty {
            #expect(report.resumed?.run == 2)
            #expect(report.resumed?.settledBefore == settledLines.count)
            #expect(report.resumed?.inheritedUncertain == uncertainLines.count)
            #expect(output.contains("resuming the job"), "\(output)")
        }

        // The ledger: every token at least once; twice only among the rows the journal held as uncertain.
        func line(ofToken index: Int) -> Int { index < 10 ? index + 2 : index + 4 }
        var twice: [Int] = []
        for (index, token) in tokens.enumerated() {
            let record = simulator.ledger.record(for: try DeviceToken(hex: token).bytes)
            let count = Int(record?.count ?? 0)
            if refused.contains(index) {
                #expect(count == 0, "a refused token is never delivered")
                continue
            }
            #expect(count >= 1, "token \(index) never delivered")
            if count > 1 { twice.append(line(ofToken: index)) }
        }
        // A row twice is one the journal held as uncertain, or one this run found uncertain (a connection that
        // ended without its answer, counted in uncertainEvents) and sent again: at least once.
        let inherited = twice.filter { uncertainLines.contains($0) }
        #expect(twice.count - inherited.count <= report.uncertainEvents, "twice but not uncertain: \(twice.count)")
        let settled = Set(settledLines)
        #expect(!twice.contains { settled.contains($0) }, "a row settled before the kill was sent again")
        #expect(inherited.count <= report.resumed?.inheritedUncertain ?? 0)

        // A third run: the job is finished; nothing is sent, and the exit status is the job's.
        let acceptedBefore = simulator.ledger.snapshot().accepted
        let third = try TestProcess(salvo, arguments, in: folder)
        #expect(try await third.wait(seconds: 60) == 1)
        #expect(third.output.contains("finished before"), "\(third.output)")
        #expect(simulator.ledger.snapshot().accepted == acceptedBefore, "a finished job sends nothing")

        // A changed input is refused, naming it.
        let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("tokens.csv"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((generator.next().hexString + "\n").utf8))
        try handle.close()
        let fourth = try TestProcess(salvo, arguments, in: folder)
        #expect(try await fourth.wait(seconds: 60) == 3)
        #expect(fourth.output.contains("tokens.csv changed"), "\(fourth.output)")
        #expect(simulator.ledger.snapshot().accepted == acceptedBefore)
        try await simulator.shutdown()
    }

    @Test func reportPolicyNeverSendsAnUncertainRowTwice() async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 20)
        let simulator = try await Simulator.start(configuration)
        let folder = TestScratch.root.appendingPathComponent("salvo-jr-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var generator = TokenGenerator(seed: 32)
        let tokens = (0..<Self.count).map { _ in generator.next().hexString }
        try Data((["token"] + tokens).joined(separator: "\n").utf8).write(to: folder.appendingPathComponent("t.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        let arguments = [
            "send", "t.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--connections", "2", "--report", "report.json", "--journal", "journal", "--quiet",
            "--gateway", "127.0.0.1:\(simulator.gatewayPort)", "--on-uncertain", "report",
        ]
        let first = try TestProcess(salvo, arguments, in: folder)
        try await eventually("a third of the rows accepted", timeout: .seconds(30), every: .milliseconds(5)) {
            simulator.ledger.snapshot().accepted >= Self.count / 3
        }
        try await first.kill()
        let second = try TestProcess(salvo, arguments, in: folder)
        #expect(try await second.wait(seconds: 120) == 1, "uncertain rows: exit 1")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.delivered + report.uncertain == Self.count, "\(report)")
        #expect(report.uncertain == report.resumed?.inheritedUncertain)
        let unsettled = try String(contentsOf: folder.appendingPathComponent("report.unsettled.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst().map { String($0.split(separator: ",")[0]) }
        #expect(unsettled.count == report.uncertain)
        let uncertain = Set(unsettled)
        for token in tokens {
            let count = Int(simulator.ledger.record(for: try DeviceToken(hex: token).bytes)?.count ?? 0)
            #expect(count <= 1, "at most once")
            if count == 0 { #expect(uncertain.contains(token), "a row never delivered is reported uncertain") }
        }
        try await simulator.shutdown()
    }
}
