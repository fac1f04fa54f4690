import APNSWire
import Foundation
import SalvoBinary
import SalvoIO
import SalvoRows
import SalvoSimulator
import SalvoTestSupport

/// A simulator with fresh development certificates, the client credentials for it, and a token file.
struct BulkSendHarness {
    static let topic = "com.example.salvo"

    let simulator: Simulator
    let credentials: GatewayCredentials
    let tokens: [DeviceToken]
    let tokenFile: String

    static func start(
        tokens count: Int,
        plan: FaultPlan = FaultPlan(),
        seed: UInt64 = 1
    ) async throws -> BulkSendHarness {
        let folder = TestScratch.root.appendingPathComponent("salvo-job-\(UUID().uuidString)")
            .path
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: folder, topic: Self.topic)
        let configuration = SimulatorConfiguration.testing(
            certificates,
            plan: plan,
            maximumTokens: max(1024, 2 * count)
        )
        let simulator = try await Simulator.start(configuration)
        let credentials = GatewayCredentials(
            identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
            trustedCAFile: paths.ca
        )
        var generator = TokenGenerator(seed: seed)
        let tokens = (0..<count).map { _ in generator.next() }
        let file = folder + "/tokens.csv"
        try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
            .write(to: URL(fileURLWithPath: file))
        return BulkSendHarness(simulator: simulator, credentials: credentials, tokens: tokens, tokenFile: file)
    }

    /// A job configuration for tests: quick settling, no politeness delay between reconnects.
    func configuration(
        command: FrameCommand = .framed,
        connections: Int = 2,
        onUncertain: OnUncertain = .resend,
        transport: BinaryTransport? = nil,
        flushBytes: Int = 16 * 1024
    ) throws -> BinaryJobConfiguration {
        let payload = try Payload(json: #"{"aps":{"alert":"Hello from the test"},"n":1}"#)
        return BinaryJobConfiguration(
            host: "127.0.0.1",
            port: self.simulator.gatewayPort,
            credentials: self.credentials,
            template: try FrameTemplate(command: command, payload: payload),
            connections: connections,
            flush: FlushPolicy(bytes: flushBytes, delay: .microseconds(200)),
            reconnect: ReconnectPolicy(
                initialDelay: .milliseconds(1),
                maximumDelay: .milliseconds(50),
                minimumInterval: .zero,
                maximumAttempts: 50
            ),
            settle: .milliseconds(300),
            windowRows: 200_000,
            chunkRows: 1024,
            onUncertain: onUncertain,
            transport: transport
        )
    }

    func run(_ configuration: BinaryJobConfiguration) async throws -> JobResult {
        let source = TokenSource(files: [self.tokenFile])
        let summary = try source.validate()
        let result = try await BinaryJob.run(
            configuration: configuration,
            source: source,
            summary: summary,
            inputRows: summary.validRows + summary.rejects.count
        )
        if let error = result.error { throw error }
        return result
    }

    func verdict() -> Verdict {
        self.simulator.verdict(expected: ExpectedTokens(self.tokens))
    }

    /// The job's report checked against the simulator's verdict, as `salvo demo` checks it.
    func reconcile(_ result: JobResult) -> Reconciliation {
        Reconciliation(report: result.report, verdict: self.verdict())
    }

    func stop() async throws {
        try await self.simulator.shutdown()
    }
}
