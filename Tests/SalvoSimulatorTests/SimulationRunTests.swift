import APNSWire
import Foundation
import NIOCore
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

@Suite(.tags(.network), .runs(.network)) struct SimulationRunTests {
    @Test func servesTheGivenCertificatesAndWritesLedgerAndVerdictOnFinish() async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-run-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let expectedPath = folder + "/expected.csv"
        let tokens = [TestTokens.token(1), TestTokens.token(2)]
        try ("token,name\n" + tokens.map { TestTokens.hex($0) + ",x\n" }.joined())
            .write(toFile: expectedPath, atomically: true, encoding: .utf8)
        var options = SimulateOptions()
        options.gatewayPort = 0
        options.feedbackPort = 0
        options.faultOptions = ["seed=3"]
        options.ledgerPath = folder + "/ledger.json"
        options.expectedPath = expectedPath
        options.verdictPath = folder + "/verdict.json"
        // As `salvo simulate` does: the certificates are made outside the simulator, which reads the files.
        let certificates = try CertificateFactory.ensure(in: folder + "/certs", topic: "com.example.app")
        let run = try await SimulationRun.start(options, tls: try .init(paths: certificates))
        #expect(run.banner(credentials: "  client    \(certificates.client)\n").contains(certificates.client))
        #expect(run.simulator.plan.seed == 3)
        // Connect with the client certificate from the folder, as a user would.
        let client = CertificateFactory.Identity(
            certificatePEM: try String(contentsOfFile: certificates.client, encoding: .utf8),
            privateKeyPEM: try String(contentsOfFile: certificates.clientKey, encoding: .utf8)
        )
        let outcome = try await TestClient.exchange(
            port: run.simulator.gatewayPort,
            identity: client,
            trusting: try String(contentsOfFile: certificates.ca, encoding: .utf8),
            send: Frames.joined([
                Frames.valid(tokens[0], identifier: 1),
                Frames.framed(token: nil, payload: Frames.payload, identifier: 2),
            ])
        )
        #expect(outcome.received == Frames.errorResponse(2, 2))
        let summary = try await run.finish()
        #expect(summary.contains("never delivered:                     1"))
        let verdict = try JSONDecoder().decode(
            Verdict.self,
            from: Data(contentsOf: URL(fileURLWithPath: folder + "/verdict.json"))
        )
        #expect(verdict.deliveredOnce == 1 && verdict.neverDelivered == 1 && verdict.expected == 2)
        let ledger = try JSONDecoder().decode(
            LedgerSnapshot.self,
            from: Data(contentsOf: URL(fileURLWithPath: folder + "/ledger.json"))
        )
        #expect(ledger.accepted == 1 && ledger.errors(2) == 1)
    }

    @Test func aVerdictWithoutExpectedTokensIsRefused() async throws {
        var options = SimulateOptions()
        options.verdictPath = "verdict.json"
        let tls = SimulatorConfiguration.TLS(try CertificateFactory())
        await #expect(throws: SimulatorError.self) { _ = try await SimulationRun.start(options, tls: tls) }
    }
}
