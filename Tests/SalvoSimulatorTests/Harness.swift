import NIOCore
import SalvoSimulator
import SalvoTestSupport

/// Starts a simulator on free loopback ports with fresh certificates, runs `body`, and always shuts
/// the simulator down.
struct Harness {
    static let topic = "com.example.app"
    let certificates: CertificateFactory
    let simulator: Simulator
    let client: CertificateFactory.Identity

    static func run<R>(
        plan: FaultPlan = FaultPlan(),
        clock: (any SimulatorClock)? = nil,
        http2: HTTP2EndpointConfiguration? = nil,
        _ body: (Harness) async throws -> R
    ) async throws -> R {
        let certificates = try CertificateFactory()
        var configuration = SimulatorConfiguration.testing(certificates, plan: plan)
        if let clock { configuration.clock = clock }
        configuration.http2 = http2
        let simulator = try await Simulator.start(configuration)
        let harness = Harness(
            certificates: certificates,
            simulator: simulator,
            client: try certificates.client(topic: Self.topic)
        )
        do {
            let result = try await body(harness)
            try await simulator.shutdown()
            return result
        } catch {
            try? await simulator.shutdown()
            throw error
        }
    }

    /// Sends `frames` on a new gateway connection and returns what came back.
    func send(
        _ frames: [ByteBuffer],
        identity: CertificateFactory.Identity? = nil,
        withoutCertificate: Bool = false
    ) async throws -> TestClient.Outcome {
        try await TestClient.exchange(
            port: self.simulator.gatewayPort,
            identity: withoutCertificate ? nil : (identity ?? self.client),
            trusting: self.certificates.ca.certificatePEM,
            send: Frames.joined(frames)
        )
    }

    /// Reads the feedback service once with `identity` (default: the topic's client).
    func readFeedback(identity: CertificateFactory.Identity? = nil) async throws -> TestClient.Outcome {
        try await TestClient.exchange(
            port: self.simulator.feedbackPort,
            identity: identity ?? self.client,
            trusting: self.certificates.ca.certificatePEM,
            send: ByteBuffer()
        )
    }
}
