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
    let token: TokenSimulator
    let configuration: ServiceConfiguration
    var simulator: Simulator { self.token.simulator }

    static func start(plan: FaultPlan = FaultPlan(), maximumTokens: Int = 1 << 16) async throws -> ServiceSimulator {
        let token = try await TokenSimulator.start(
            topic: serviceTopic,
            keyID: "SERVKEY123",
            teamID: "DEF123GHIJ",
            plan: plan,
            maximumTokens: maximumTokens
        )
        return ServiceSimulator(
            token: token,
            configuration: ServiceConfiguration(job: token.job, defaults: .init(topic: serviceTopic))
        )
    }
}
