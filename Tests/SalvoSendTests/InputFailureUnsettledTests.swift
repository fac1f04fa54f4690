import APNSWire
import Foundation
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// An input that fails midway (an unclosed quote deep in a file or a pipe) ends the job with exit 3, and the rows it
/// read but did not send are each in the unsettled file: the report's `notSent` equals the file's rows, and sending
/// that file delivers exactly the tokens that were missing, each once (the simulator's ledger over both runs). Before,
/// the rows read in the failing chunk were counted `notSent` and listed nowhere. Through the real executable.
@Suite(.tags(.process), .runs(.process)) struct InputFailureUnsettledTests {
    static let tokens = 20_000

    @Test(arguments: ["binary", "h2"], [false, true])
    func rowsReadBeforeTheInputFailedAreInTheUnsettledFile(wire: String, throughAPipe: Bool) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let (folder, tokens) = try sendFolder("input-fails", tokens: Self.tokens, seed: 4040)
        let handle = try FileHandle(forWritingTo: folder.appendingPathComponent("tokens.csv"))
        handle.seekToEndOfFile()
        handle.write(Data("\"unclosed\n".utf8))
        try handle.close()
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        defer { Task { try? await simulator.shutdown() } }
        let port = wire == "h2" ? simulator.http2Port! : simulator.gatewayPort
        let paths = CertificateFactory.sharedFolder
        func send(_ input: String, report: String) -> [String] {
            [
                "send", input, "--payload", "payload.json", "--gateway", "127.0.0.1:\(port)", "--cert", paths.client,
                "--key", paths.clientKey, "--ca", paths.ca, "--connections", "2", "--report", report,
                "--progress", "none",
            ] + (wire == "h2" ? h2SendArguments : [])
        }
        let first: (status: Int32, output: String)
        if throughAPipe {
            let command = ([salvo] + send("-", report: "first.json")).map { "'\($0)'" }.joined(separator: " ")
            first = try await TestProcess.run("/bin/sh", ["-c", "cat tokens.csv | \(command)"], in: folder)
        } else {
            first = try await TestProcess.run(salvo, send("tokens.csv", report: "first.json"), in: folder)
        }
        #expect(first.status == 3, "the input failed: exit 3\n\(first.output)")
        #expect(first.output.contains("line \(Self.tokens + 2)"), "the failure names its line\n\(first.output)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("first.json"))
        )
        let unsettled = try String(contentsOf: folder.appendingPathComponent("first.unsettled.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst()
        #expect(report.validRows == Self.tokens, "every row before the bad line is counted")
        #expect(report.notSent == unsettled.count, "notSent \(report.notSent), listed \(unsettled.count)")
        #expect(report.delivered + report.notSent == Self.tokens, "\(report)")

        // The unsettled file sent again: the missing tokens, each once; nothing delivered twice over both runs.
        if !unsettled.isEmpty {
            let again = try await TestProcess.run(salvo, send("first.unsettled.csv", report: "again.json"), in: folder)
            #expect(again.status == 0, "\(again.output)")
        }
        let verdict = simulator.verdict(expected: ExpectedTokens(tokens.map { try! DeviceToken(hex: $0) }))
        #expect(verdict.deliveredOnce == Self.tokens, "\(verdict.summary)")
        #expect(verdict.deliveredMoreThanOnce == 0 && verdict.unexpected == 0, "\(verdict.summary)")
    }
}
