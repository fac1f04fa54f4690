import APNSWire
import Foundation
import SalvoBenchmarkSupport
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// The gateway under a blast of command-2 frames with a 100-byte payload: every one validated and
/// recorded, in order. Short here (a debug build measures nothing); the throughput figure comes from
/// `swift run -c release salvo-bench gateway`, which runs the same `GatewayBlast`.
/// `SALVO_BLAST_COUNT` and `SALVO_BLAST_DISTINCT` make this test send more.
@Suite(.tags(.network), .runs(.network)) struct BlastTests {
    @Test func blastIsValidatedCompletelyAndInOrder() async throws {
        let count = ProcessInfo.processInfo.environment["SALVO_BLAST_COUNT"].flatMap(Int.init) ?? 20_000
        let distinct = ProcessInfo.processInfo.environment["SALVO_BLAST_DISTINCT"].flatMap(Int.init) ?? count
        let payload = try Payload(
            json:
                #"{"aps":{"alert":"Benchmark notification","badge":1,"sound":"default"},"campaign":"c-0001","p":"xxx"}"#
        )
        #expect(payload.byteCount == 100)
        let certificates = try CertificateFactory()
        var configuration = SimulatorConfiguration(tls: .init(certificates))
        configuration.threads = 1
        configuration.maximumTokens = max(distinct, 1024)
        let simulator = try await Simulator.start(configuration)
        let result: GatewayBlast.Result
        do {
            result = try await GatewayBlast.run(
                port: simulator.gatewayPort,
                identity: try certificates.client(topic: "com.example.app"),
                caPEM: certificates.ca.certificatePEM,
                count: count,
                distinctTokens: distinct,
                payload: payload
            )
        } catch {
            try await simulator.shutdown()
            throw error
        }
        let snapshot = simulator.ledger.snapshot()
        try await simulator.shutdown()
        #expect(result.response == [8, 2] + withUnsafeBytes(of: UInt32(count + 1).bigEndian, Array.init))
        #expect(snapshot.accepted == count)
        #expect(snapshot.distinctTokens == min(count, distinct))
        #expect(snapshot.tokensAcceptedMoreThanOnce == (distinct < count ? distinct : 0))
        print(
            "blast: \(count) notifications (\(distinct) tokens), \(result.bytes) bytes in "
                + "\(String(format: "%.3f", result.seconds)) s = "
                + "\(String(format: "%.2f", result.notificationsPerSecond / 1e6)) M notifications/s validated; "
                + "\(snapshot.reads) reads, max \(snapshot.maxNotificationsPerRead) per read"
        )
    }
}
