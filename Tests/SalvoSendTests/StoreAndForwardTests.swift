import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo send` stores by default: a device that is offline (the simulator's quality-of-service model) keeps the
/// notification of a send without `--expiry`, and nothing of one with `--expiry 0` ("now or never"). Both
/// interfaces, through the real executable.
@Suite(.tags(.process), .runs(.process)) struct StoreAndForwardTests {
    @Test(arguments: [
        ("binary", [String](), Verdict.Display.State.stored),
        ("binary", ["--expiry", "0"], .nothing),
        ("h2", [], .stored),
        ("h2", ["--expiry", "0"], .nothing),
    ])
    func aDefaultSendIsStoredForAnOfflineDeviceAndExpiryZeroIsNot(
        wire: String,
        extra: [String],
        state: Verdict.Display.State
    ) async throws {
        guard let salvo = InterruptionTests.builtExecutable else { return }
        let paths = CertificateFactory.sharedFolder
        var generator = TokenGenerator(seed: 31)
        let tokens = (0..<20).map { _ in generator.next() }
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        // Every device is offline for the whole run.
        configuration.plan.devices = FaultPlan.Devices(offlineTokens: tokens.map(\.hexString))
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let folder = TestScratch.root.appendingPathComponent("salvo-saf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("tokens.csv"))
        let payload = Array(#"{"aps":{"alert":"kept for later"}}"#.utf8)
        try Data(payload).write(to: folder.appendingPathComponent("payload.json"))
        let port = wire == "h2" ? simulator.http2Port ?? 0 : simulator.gatewayPort
        var arguments = [
            "send", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(port)",
            "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--connections", "1", "--quiet",
        ]
        if wire == "h2" {
            arguments += h2SendArguments
        }
        let run = try TestProcess(salvo, arguments + extra, in: folder, output: .standardErrorOnly)
        let status = try await run.wait(seconds: 120)
        let text = run.standardError
        let verdict = simulator.verdict(expected: ExpectedTokens(tokens))
        try await simulator.shutdown()
        #expect(status == 0, "\(text)")
        #expect(verdict.deliveredOnce == tokens.count, "\(verdict.summary)")
        let digest = Verdict.digestHex(payload.withUnsafeBytes { TokenHash.digest($0) })
        #expect(verdict.displays.count == tokens.count)
        for display in verdict.displays {
            #expect(display.state == state, "\(display.token)")
            #expect(display.payloadDigest == (state == .stored ? digest : nil))
        }
        #expect(verdict.ledger.stored == (state == .stored ? tokens.count : 0))
        #expect(verdict.ledger.notStored == (state == .stored ? 0 : tokens.count))
    }
}
