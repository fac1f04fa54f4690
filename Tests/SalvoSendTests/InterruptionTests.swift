import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// The real `salvo` executable, interrupted mid-send: it exits 130 (SIGINT) or 143 (SIGTERM) and writes a report
/// that accounts for every row.
@Suite(.tags(.process), .runs(.process)) struct InterruptionTests {
    /// `salvo`, built next to the test bundle (`TestProcess.salvoPath`).
    static var executable: String? { TestProcess.salvoPath }

    /// `salvo`, or nil with an issue recorded.
    static var builtExecutable: String? {
        guard let path = TestProcess.salvoPath else {
            Issue.record(Comment(rawValue: TestProcess.salvoMissing))
            return nil
        }
        return path
    }

    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func aSignalMidSendWritesTheReportAndExits(signal: Int32, status: Int32) async throws {
        guard let salvo = Self.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        // A gateway that reads and never answers: the job waits for its barrier when the signal comes.
        let gateway = try MisbehavingGateway(.silent, paths: paths)
        defer { gateway.stop() }
        let count = 3000
        let (folder, tokens) = try sendFolder("salvo-int", tokens: count, seed: 9)
        let report = folder.appendingPathComponent("report.json")

        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(gateway.port)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1",
                "--report", report.path, "--quiet",
            ],
            in: folder,
            output: .nothing
        )
        // Let it connect and write (the barrier then waits 10 s for an answer that never comes).
        try await eventually("the job writes to the gateway", timeout: .seconds(10)) {
            gateway.plaintextBytesRead > 0
        }
        // The fixed pause is the behaviour: a signal mid-send, with rows written and unanswered.
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        run.signal(signal)
        let signalled = clock.now
        // Past 10 s of the signal it is killed, and the wait throws.
        let ended = try await run.wait(seconds: 10)
        #expect(clock.now - signalled < .seconds(8), "the grace is 2 s (and a loaded machine is slow to exit)")
        #expect(ended == status)
        let decoded = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: report))
        #expect(decoded.validRows == count)
        let accounted =
            decoded.confirmed + decoded.presumed + decoded.rejectedTotal + decoded.expired + decoded.uncertain
            + decoded.notSent
        #expect(accounted == count, "every row in exactly one field: \(decoded)")
        #expect(decoded.stopped?.contains(signal == SIGINT ? "SIGINT" : "SIGTERM") == true)
        // Written by default next to the report: every row not settled, with its line, to be sent again.
        let unsettled = try String(
            contentsOf: folder.appendingPathComponent("report.unsettled.csv"),
            encoding: .utf8
        )
        .split(separator: "\n")
        #expect(unsettled.first == "token,file,line,outcome")
        let rows = unsettled.dropFirst().map { $0.split(separator: ",") }
        #expect(rows.count == decoded.uncertain + decoded.notSent)
        #expect(decoded.notSent > 0, "the silent gateway answered nothing")
        for row in rows {
            let line = row.count == 4 ? Int(row[2]) ?? 0 : 0
            #expect(line >= 2 && line <= count + 1 && tokens[line - 2] == row[0])
            #expect(row.count == 4 && ["uncertain", "unanswered", "unsent"].contains(row[3]))
        }
        #expect(Set(rows.map { $0[0] }).count == rows.count, "each row once")
    }

    @Test(arguments: [(SIGINT, Int32(130)), (SIGTERM, Int32(143))])
    func aSignalMidHTTP2SendWaitsBrieflyForTheStreamsAndWritesTheRecord(signal: Int32, status: Int32) async throws {
        guard let salvo = Self.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        // The endpoint answers each request a minute late: the streams are in flight when the signal comes.
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        var http2 = HTTP2EndpointConfiguration()
        http2.faults.responseDelayMilliseconds = 60_000
        configuration.http2 = http2
        let simulator = try await Simulator.start(configuration)
        let count = 500
        let (folder, tokens) = try sendFolder("salvo-int", tokens: count, seed: 10)
        let report = folder.appendingPathComponent("report.json")

        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--protocol", "h2", "--payload", "payload.json",
                "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--server-name", "localhost",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1",
                "--topic", CertificateFactory.sharedTopic, "--push-type", "alert", "--report", report.path, "--quiet",
            ],
            in: folder,
            output: .nothing
        )
        try await eventually("the endpoint accepts a request", timeout: .seconds(10)) {
            simulator.ledger.snapshot().accepted > 0
        }
        // The fixed pause is the behaviour: a signal with streams in flight.
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        run.signal(signal)
        let signalled = clock.now
        // Past 10 s of the signal it is killed, and the wait throws.
        let ended: Int32
        do {
            ended = try await run.wait(seconds: 10)
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()
        #expect(clock.now - signalled < .seconds(8), "the grace is 2 s (and a loaded machine is slow to exit)")
        #expect(ended == status)
        let decoded = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: report))
        #expect(decoded.validRows == count)
        #expect(decoded.confirmed == 0, "nothing was answered")
        #expect(decoded.confirmed + decoded.rejectedTotal + decoded.uncertain + decoded.notSent == count)
        #expect(decoded.stopped?.contains(signal == SIGINT ? "SIGINT" : "SIGTERM") == true)
        let unsettled = try String(
            contentsOf: folder.appendingPathComponent("report.unsettled.csv"),
            encoding: .utf8
        )
        .split(separator: "\n")
        let rows = unsettled.dropFirst().map { $0.split(separator: ",") }
        #expect(rows.count == decoded.uncertain + decoded.notSent)
        #expect(Set(rows.map { String($0[0]) }) == Set(tokens), "every row is listed, once")
        // One stream was in flight (a connection takes one until the credentials pass): sent, never answered.
        #expect(rows.filter { $0.count == 4 && $0[3] == "unanswered" }.count == 1)
        #expect(rows.filter { $0.count == 4 && $0[3] == "unsent" }.count == count - 1)
    }

    @Test func standardOutputIsLineBufferedIntoAPipe() async throws {
        guard let salvo = Self.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let gateway = try MisbehavingGateway(.silent, paths: paths)
        defer { gateway.stop() }
        let folder = TestScratch.root.appendingPathComponent("salvo-buf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var generator = TokenGenerator(seed: 12)
        let tokens = (0..<100).map { _ in generator.next().hexString }
        try Data(("token\n" + tokens.joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("tokens.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        // Its output into a pipe (standard error too, which the claim below does not read).
        let run = try TestProcess(
            salvo,
            [
                "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(gateway.port)",
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1", "--quiet",
            ],
            in: folder,
            output: .pipe
        )
        try await eventually("the job writes to the gateway", timeout: .seconds(10)) {
            gateway.plaintextBytesRead > 0
        }
        // Killed outright: only what reached the pipe survives.
        try await run.kill()
        let printed = run.output
        #expect(printed.contains("sending 100 notifications"), "printed before the kill: \(printed)")
    }
}
