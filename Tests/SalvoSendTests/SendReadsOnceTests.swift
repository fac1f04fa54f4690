import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo send` reads its input once, validating rows as the sender takes them: over either interface, a file
/// longer than its first chunk with bad and repeated rows further down sends every good row once (with
/// `--dedupe`, a repeated token never twice), and names the bad rows in the rejects file and the report; a file
/// whose first chunk holds no token is refused before any connection. Through the real executable.
@Suite(.tags(.process), .runs(.process)) struct SendReadsOnceTests {
    private static func run(
        _ salvo: String,
        in folder: URL,
        port: Int,
        wire: String,
        extra: [String]
    ) async throws -> (status: Int32, output: String) {
        let paths = CertificateFactory.sharedFolder
        var arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(port)",
            "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "2",
        ]
        if wire == "h2" {
            arguments += h2SendArguments
        }
        return try await TestProcess.run(salvo, arguments + extra, in: folder)
    }

    private static func folder(_ csv: String) throws -> URL {
        let folder = TestScratch.root.appendingPathComponent("salvo-once-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(csv.utf8).write(to: folder.appendingPathComponent("tokens.csv"))
        try Data(#"{"aps":{"alert":"once"}}"#.utf8).write(to: folder.appendingPathComponent("payload.json"))
        return folder
    }

    @Test(arguments: ["binary", "h2"])
    func badAndRepeatedRowsPastTheFirstChunkAreNamedAndNoTokenGoesTwice(wire: String) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        var generator = TokenGenerator(seed: 77)
        let tokens = (0..<3000).map { _ in generator.next() }
        // Lines 2...3001 are the tokens; past the first chunk, every 500th row is bad and every 300th a repeat.
        var lines = ["token"]
        var bad: [Int] = []
        var repeated: [Int] = []
        for (index, token) in tokens.enumerated() {
            lines.append(token.hexString)
            if index >= 1500 && index % 500 == 0 {
                lines.append("not-a-token-\(index)")
                bad.append(lines.count)
            }
            if index >= 1200 && index % 300 == 0 {
                lines.append(tokens[index - 1000].hexString.uppercased())
                repeated.append(lines.count)
            }
        }
        let folder = try Self.folder(lines.joined(separator: "\n") + "\n")
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let port = wire == "h2" ? simulator.http2Port ?? 0 : simulator.gatewayPort
        let result: (status: Int32, output: String)
        do {
            result = try await Self.run(
                salvo,
                in: folder,
                port: port,
                wire: wire,
                extra: ["--dedupe", "--report", "report.json", "--rejects", "rejects.csv"]
            )
        } catch {
            try await simulator.shutdown()
            throw error
        }
        let verdict = simulator.verdict(expected: ExpectedTokens(tokens))
        try await simulator.shutdown()
        #expect(result.status == 1, "bad rows: exit 1\n\(result.output)")
        #expect(verdict.deliveredOnce == tokens.count, "\(verdict.summary)")
        #expect(verdict.deliveredMoreThanOnce == 0)
        #expect(verdict.unexpected == 0)

        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: folder.appendingPathComponent("report.json"))
        )
        #expect(report.validRows == tokens.count)
        #expect(report.invalidInput == bad.count + repeated.count)
        #expect(report.inputRows == lines.count - 1)
        #expect(report.delivered == tokens.count)
        let rejects = try String(contentsOf: folder.appendingPathComponent("rejects.csv"), encoding: .utf8)
            .split(separator: "\n").dropFirst()
        let rejectedLines = rejects.map { Int($0.split(separator: ",")[1])! }
        #expect(rejectedLines == (bad + repeated).sorted())
        for line in repeated {
            #expect(rejects.contains { $0.contains(",\(line),") && $0.contains("duplicate of the token on line") })
        }
        #expect(result.output.contains("tokens.csv: line \(bad[0]): "), "named on the terminal: \(result.output)")
    }

    @Test(arguments: ["binary", "h2"])
    func aFileWhoseFirstChunkHoldsNoTokenIsRefusedBeforeAnyConnection(wire: String) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        var generator = TokenGenerator(seed: 78)
        // The wrong column: `token` holds names, the tokens are in `device`.
        let rows = (0..<5000).map { "\(generator.next().hexString),name\($0)" }
        let folder = try Self.folder("device,token\n" + rows.joined(separator: "\n") + "\n")
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let port = wire == "h2" ? simulator.http2Port ?? 0 : simulator.gatewayPort
        let result: (status: Int32, output: String)
        do {
            result = try await Self.run(salvo, in: folder, port: port, wire: wire, extra: ["--report", "report.json"])
        } catch {
            try await simulator.shutdown()
            throw error
        }
        let ledger = simulator.ledger.snapshot()
        try await simulator.shutdown()
        #expect(result.status == 3, "\(result.output)")
        #expect(result.output.contains("tokens.csv: no valid token in its first 1000 row(s) (line 2: "))
        #expect(result.output.contains("value 'name0'"))
        #expect(ledger.accepted == 0)
    }
}
