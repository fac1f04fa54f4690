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
    try TestScratch.newFolder(prefix)
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
        let started = try await TokenSimulator.start(
            topic: serviceTopic,
            keyID: keyID,
            teamID: teamID,
            plan: plan,
            maximumTokens: maximumTokens
        )
        return ServiceSimulator(
            simulator: started.simulator,
            configuration: ServiceConfiguration(job: started.job, defaults: .init(topic: serviceTopic)),
            signingKey: started.signingKey,
            caPEM: started.caPEM
        )
    }
}
