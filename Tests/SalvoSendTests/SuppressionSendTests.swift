import APNSWire
import Foundation
import SalvoEngine
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import Testing

@Suite struct SuppressionSendTests {
    /// The first send meets every invalid token (one reconnect each) and lists them; the second, with that list as
    /// `--suppress`, sends none of them and reconnects for none.
    @Test func aSecondSendWithTheSuppressionListHasNoInvalidTokenReconnects() async throws {
        let here = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-sup-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: here, withIntermediateDirectories: true)
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: here + "/certs", topic: "com.example.salvo")
        var generator = TokenGenerator(seed: 21)
        let tokens = (0..<2000).map { _ in generator.next() }
        let invalid = [3, 400, 700, 1200, 1500].map { tokens[$0] }
        var plan = FaultPlan()
        plan.invalidTokens = invalid.map(\.hexString)
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(certificates, plan: plan))
        let input = here + "/tokens.csv"
        try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
            .write(to: URL(fileURLWithPath: input))
        var job = BinaryJobConfiguration(
            host: "127.0.0.1",
            port: simulator.gatewayPort,
            credentials: GatewayCredentials(
                identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
                trustedCAFile: paths.ca
            ),
            template: try FrameTemplate(command: .framed, payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)),
            connections: 1
        )
        job.settle = .milliseconds(200)
        job.reconnect.minimumInterval = .zero
        let suppression = here + "/suppress.csv"

        let first: SendResult
        let second: SendResult
        do {
            first = try await BulkSend.prepare(
                SendRequest(files: [input], interface: .binary(job), outputs: SendOutputs(unregistered: suppression))
            ).run()
            second = try await BulkSend.prepare(
                SendRequest(files: [input], interface: .binary(job), suppress: suppression)
            ).run()
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()

        #expect(first.report.rejected == ["InvalidToken": invalid.count])
        #expect(first.report.reconnects >= invalid.count)
        let list = try SuppressionList.load(path: suppression)
        #expect(Set(list.entries.keys) == Set(invalid))
        #expect(list.entries.values.allSatisfy { $0.reason == "InvalidToken" })

        #expect(second.report.suppressed == invalid.count)
        #expect(second.report.rejected.isEmpty)
        #expect(second.report.reconnects == 0)
        #expect(second.report.delivered == tokens.count - invalid.count)
        #expect(second.report.inputRows == tokens.count)
        #expect(second.isComplete)
    }
}
