import APNSWire
import Crypto
import Foundation
import NIOSSL
import SalvoHTTP2
import SalvoRows
import SalvoService
import SalvoSimulator
import SalvoTestSupport

/// A fresh folder under the test scratch root.
func scratchFolder(_ prefix: String) throws -> String {
    let folder = TestScratch.root.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder.path
}

let serviceTopic = "com.example.service"

/// A notification for a store or a service, with a token of its own.
func notification(_ index: Int, id: String? = nil) -> ServiceNotification {
    // Spread over all 32 bytes, as real tokens are (the simulator's table hashes them).
    let bytes = Array(SHA256.hash(data: Array("service-token-\(index)".utf8)))
    let id = id ?? String(format: "00000000-0000-4000-8000-%012x", index)
    return ServiceNotification(
        id: id,
        token: try! DeviceToken(bytes: bytes),
        payload: Array(#"{"aps":{"alert":"n\#(index)"}}"#.utf8),
        headers: try! APNSRequestHeaders(pushType: .alert, id: id, topic: serviceTopic)
    )
}

/// The simulator's HTTP/2 endpoint over TLS with a signing key, and a service configuration that sends to it.
struct ServiceSimulator {
    static let keyID = "SERVKEY123"
    static let teamID = "DEF123GHIJ"

    let simulator: Simulator
    let configuration: ServiceConfiguration
    /// The signing key the simulator trusts (a child `salvo serve` reads it from a .p8 file).
    let signingKey: P256.Signing.PrivateKey
    /// The CA of the simulator's certificate (PEM).
    let caPEM: String

    static func start(plan: FaultPlan = FaultPlan(), maximumTokens: Int = 1 << 16) async throws -> ServiceSimulator {
        let certificates = try CertificateFactory()
        let key = P256.Signing.PrivateKey()
        var simulatorConfiguration = SimulatorConfiguration(tls: .init(certificates))
        simulatorConfiguration.plan = plan
        simulatorConfiguration.maximumTokens = maximumTokens
        simulatorConfiguration.http2 = HTTP2EndpointConfiguration(
            providerKeys: [
                .init(
                    keyID: keyID,
                    teamID: teamID,
                    publicKey: Array(key.publicKey.rawRepresentation),
                    topics: [serviceTopic],
                    environment: .any
                )
            ]
        )
        let simulator = try await Simulator.start(simulatorConfiguration)
        var client = HTTP2ClientConfiguration(
            host: "127.0.0.1",
            port: simulator.http2Port!,
            authentication: .token(try ProviderToken(signer: JWTSigner(privateKey: key, keyID: keyID, teamID: teamID)))
        )
        client.serverName = "localhost"
        client.connections = 2
        client.trustRoots = .certificates([
            try NIOSSLCertificate(bytes: Array(certificates.ca.certificatePEM.utf8), format: .pem)
        ])
        let job = HTTP2JobConfiguration(
            client: client,
            headers: try APNSRequestHeaders(topic: serviceTopic),
            payload: try Payload(json: #"{"aps":{}}"#)
        )
        return ServiceSimulator(
            simulator: simulator,
            configuration: ServiceConfiguration(job: job, defaults: .init(topic: serviceTopic)),
            signingKey: key,
            caPEM: certificates.ca.certificatePEM
        )
    }
}
