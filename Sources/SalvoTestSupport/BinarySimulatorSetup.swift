import APNSWire
import Foundation
import SalvoBinary
import SalvoSimulator

/// A binary send against the simulator as the network tests set it up: a fresh folder, fresh certificates
/// written into it (`certs`), a simulator with `plan`, and the job to its gateway (framed, settled after 200 ms, no
/// pause between reconnects).
public struct BinarySimulatorSetup: Sendable {
    public static let topic = "com.example.salvo"

    /// The folder to send from (its path).
    public let folder: String
    public let certificates: CertificateFactory
    public let paths: CertificateFactory.Paths
    public let simulator: Simulator

    /// A folder named from `prefix`, certificates for `topic` and a simulator started with `plan`.
    public static func start(_ prefix: String, plan: FaultPlan = FaultPlan()) async throws -> BinarySimulatorSetup {
        let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: folder + "/certs", topic: Self.topic)
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(certificates, plan: plan))
        return BinarySimulatorSetup(folder: folder, certificates: certificates, paths: paths, simulator: simulator)
    }

    /// The client's certificate and key, and the CA that signed the simulator's.
    public var credentials: GatewayCredentials {
        GatewayCredentials(
            identity: .pem(certificateChainFile: self.paths.client, privateKeyFile: self.paths.clientKey),
            trustedCAFile: self.paths.ca
        )
    }

    /// Writes `text` as `name` in the folder; its path.
    public func write(_ text: String, as name: String = "tokens.csv") throws -> String {
        let path = self.folder + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A token file of `tokens` (header `token`, one a line, then `extra`) as `tokens.csv`; its path.
    public func tokenFile(_ tokens: [DeviceToken], extra: String = "") throws -> String {
        try self.write("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n" + extra)
    }

    /// The binary job to the simulator's gateway (or to `port`, another simulator with these certificates) with
    /// `connections`: framed `{"aps":{"alert":"hi"}}`, settled after 200 ms, no pause between reconnects.
    public func job(connections: Int = 2, port: Int? = nil) throws -> BinaryJobConfiguration {
        var job = BinaryJobConfiguration(
            host: "127.0.0.1",
            port: port ?? self.simulator.gatewayPort,
            credentials: self.credentials,
            template: try FrameTemplate(command: .framed, payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)),
            connections: connections
        )
        job.settle = .milliseconds(200)
        job.reconnect.minimumInterval = .zero
        return job
    }
}
