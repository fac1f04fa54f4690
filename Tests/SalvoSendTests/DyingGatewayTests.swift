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

/// The real `salvo` executable against a simulator that goes away mid-send: the job gives up the stated time after
/// its last progress (`--give-up-seconds`), exits 3, and writes a report in which every row is in one field, with
/// every row it did not settle in the unsettled file.
@Suite(.tags(.process), .runs(.process)) struct DyingGatewayTests {
    enum Interface: String, CaseIterable, Sendable {
        case binary, h2
    }

    @Test(arguments: Interface.allCases)
    func aGatewayThatDiesMidSendEndsTheJobWithTheRecord(interface: Interface) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        switch interface {
        case .binary:
            // A slow reader keeps rows on their way when the gateway goes.
            configuration.plan.slowReader = .init(chunkSize: 1024, delayMilliseconds: 10, probability: 1)
        case .h2:
            // Answers come 200 ms late: streams are in flight when the gateway goes.
            var http2 = HTTP2EndpointConfiguration()
            http2.faults.responseDelayMilliseconds = 200
            configuration.http2 = http2
        }
        let simulator = try await Simulator.start(configuration)
        var stopped = false
        defer { if !stopped { Task { try? await simulator.shutdown() } } }
        let count = 20_000
        let (folder, _) = try sendFolder("salvo-dying", tokens: count, seed: 21)
        let report = folder.appendingPathComponent("report.json")
        var arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--connections", "1", "--give-up-seconds", "2", "--report", report.path, "--quiet",
        ]
        switch interface {
        case .binary:
            arguments += ["--gateway", "127.0.0.1:\(simulator.gatewayPort)"]
        case .h2:
            arguments += [
                "--protocol", "h2", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--server-name", "localhost",
                "--topic", CertificateFactory.sharedTopic, "--push-type", "alert",
            ]
        }
        let run = try TestProcess(salvo, arguments, in: folder, output: .standardErrorOnly)
        let clock = ContinuousClock()
        try await eventually("200 rows accepted, or the job's end", timeout: .seconds(20)) {
            simulator.ledger.snapshot().accepted >= 200 || !run.isRunning
        }
        let acceptedBeforeDeath = simulator.ledger.snapshot().accepted
        #expect(acceptedBeforeDeath >= 200 && acceptedBeforeDeath < count, "the gateway dies mid-send")
        let died = clock.now
        try await simulator.shutdown()
        stopped = true
        // Past 30 s of the gateway's death it is killed, and the wait throws.
        let status = try await run.wait(seconds: 30)
        let message = run.standardError
        // 2 s without progress and at least 4 failed connects; the backoff is cut at the deadline.
        #expect(clock.now - died < .seconds(15), "given up \(clock.now - died) after the gateway died")
        #expect(status == 3, "\(message)")
        let said = message.split(separator: "\n").filter { !$0.contains(" warning ") && !$0.contains(" info ") }
        #expect(said.contains { $0.contains("cannot") }, "\(said)")
        let decoded = try JSONDecoder().decode(JobReport.self, from: Data(contentsOf: report))
        #expect(decoded.validRows == count)
        let accounted =
            decoded.confirmed + decoded.presumed + decoded.rejectedTotal + decoded.expired + decoded.uncertain
            + decoded.notSent
        #expect(accounted == count, "every row in exactly one field: \(decoded)")
        #expect(decoded.notSent > 0, "rows were left when the gateway died")
        #expect(decoded.stopped != nil)
        let unsettled = try String(
            contentsOf: folder.appendingPathComponent("report.unsettled.csv"),
            encoding: .utf8
        )
        .split(separator: "\n")
        let rows = unsettled.dropFirst().map { $0.split(separator: ",") }
        #expect(rows.count == decoded.uncertain + decoded.notSent)
        #expect(Set(rows.map { String($0[0]) }).count == rows.count, "each row once")
        // What the report settled reached the gateway: the ledger holds at least the delivered rows.
        #expect(acceptedBeforeDeath <= count)
        #expect(simulator.ledger.snapshot().accepted >= decoded.confirmed)
    }

    /// Nothing listens from the start: no row is ever taken by a connection, and the rest of the input goes to the
    /// unsettled file straight from the file (spilled beside it as it is read, not held in memory), in input order,
    /// with nothing left behind in the folder.
    @Test(arguments: Interface.allCases)
    func aGatewayGoneFromTheStartLeavesEveryRowInTheUnsettledFile(interface: Interface) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        let closed = try ClosedPort()
        defer { closed.close() }
        let count = 30_000
        let (folder, tokens) = try sendFolder("salvo-gone", tokens: count, seed: 22)
        var arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
            "--ca", paths.ca, "--give-up-seconds", "1", "--report", "report.json", "--quiet",
            "--gateway", "127.0.0.1:\(closed.port)",
        ]
        if interface == .h2 {
            arguments += h2SendArguments
        }
        // Standard error outside the folder, whose contents are checked below.
        let clock = ContinuousClock()
        let start = clock.now
        let run = try TestProcess(salvo, arguments, in: folder, output: .standardErrorOnly)
        // Past 60 s it is killed, and the wait throws.
        let status = try await run.wait(seconds: 60)
        // 1 s without progress and at least 4 failed connects: neither the backoff nor the job's connect spacing
        // may push a try past that deadline by much.
        #expect(clock.now - start < .seconds(20), "given up after \(clock.now - start)")
        let message = run.standardError
        #expect(status == 3, "\(message)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.validRows == count && report.notSent == count && report.delivered == 0)
        #expect(report.firstRowSeconds == nil, "no row went out")
        let lines = try String(contentsOf: folder.appendingPathComponent("report.unsettled.csv"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "token,file,line,outcome")
        #expect(lines.last == "", "the file ends with a line end")
        let rows = lines.dropFirst().dropLast()
        #expect(rows.count == count)
        let expected = tokens.enumerated().map { "\($1),tokens.csv,\($0 + 2),unsent" }
        #expect(Array(rows.map(String.init)) == expected, "every row once, in input order, as the input wrote it")
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(left == ["payload.json", "report.json", "report.unsettled.csv", "tokens.csv"], "\(left)")
    }
}
