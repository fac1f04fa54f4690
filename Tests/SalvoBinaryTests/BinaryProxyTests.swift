import APNSWire
import Foundation
import SalvoBinary
import SalvoProxy
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The binary interface's connections through real proxies (tinyproxy for CONNECT, danted for SOCKS5), the tunnel
/// opened on the raw socket before TLS: a job over either transport, a job whose proxy is killed mid-way, the feedback
/// service and the gateway handshake of `check`.
@Suite(
    .tags(.network),
    .runs(.network),
    .serialized,
    .timeLimit(.minutes(2)),
    .enabled(
        if: ProxyServer.isAvailable,
        "tinyproxy and danted are not installed (apt-get install tinyproxy dante-server; .ci/run installs them)"
    )
)
struct BinaryProxyTests {
    static let user = (name: "salvo", password: "pr0xy-Binary-41")

    @Test(arguments: [BinaryTransport.socket, nil]) func aJobThroughEachProxy(transport: BinaryTransport?) async throws
    {
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let dante = try await ProxyServer.dante(user: ProxyServer.socksUser)
        defer { dante.remove() }
        for (proxy, seed) in [(tinyproxy, UInt64(41_100)), (dante, 41_200)] {
            let harness = try await BulkSendHarness.start(tokens: 3000, seed: seed)
            var configuration = try harness.configuration(transport: transport)
            configuration.proxy = try ProxyConfiguration(url: proxy.url())
            let result = try await harness.run(configuration)
            let reconciliation = harness.reconcile(result)
            #expect(result.report.delivered == 3000, "\(proxy.kind): \(result.report)")
            #expect(harness.verdict().passed, "\(proxy.kind): \(harness.verdict().summary)")
            #expect(reconciliation.agrees, "\(reconciliation)")
            try await harness.stop()
        }
        #expect(tinyproxy.log.contains("CONNECT 127.0.0.1:"), "\(tinyproxy.log)")
    }

    @Test func aProxyKilledMidJobLosesNothing() async throws {
        let proxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { proxy.remove() }
        var plan = FaultPlan()
        // The gateway reads slowly, so that the job is still under way when the proxy dies.
        plan.slowReader = FaultPlan.SlowReader(chunkSize: 4096, delayMilliseconds: 20)
        let rows = 20_000
        let harness = try await BulkSendHarness.start(tokens: rows, plan: plan, seed: 41_300)
        var configuration = try harness.configuration()
        configuration.proxy = try ProxyConfiguration(url: proxy.url())
        let job = Task { try await harness.run(configuration) }
        try await eventually("2,000 rows accepted", timeout: .seconds(30), every: .milliseconds(10)) {
            harness.simulator.ledger.snapshot().accepted >= 2000
        }
        let before = harness.simulator.ledger.snapshot().accepted
        #expect(before >= 2000 && before < rows, "\(before) accepted when the proxy was killed")
        proxy.kill()
        try await proxy.start()
        let result = try await job.value
        #expect(result.report.reconnects >= 1, "\(result.report)")
        let verdict = harness.verdict()
        #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
        #expect(verdict.unexpected == 0, "\(verdict.summary)")
        #expect(harness.reconcile(result).agrees, "\(harness.reconcile(result))")
        // Rows the kernel had taken when the tunnel closed are uncertain and sent again (at least once): no others.
        #expect(verdict.deliveredMoreThanOnce <= result.report.uncertainEvents, "\(verdict.summary)")
        try await harness.stop()
    }

    @Test func feedbackAndTheHandshakeThroughTheProxy() async throws {
        let proxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { proxy.remove() }
        var generator = TokenGenerator(seed: 41_400)
        let gone = (0..<200).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.uninstalled = [
            FaultPlan.Uninstalled(topic: BulkSendHarness.topic, tokens: gone.map(\.hexString), timestamp: 1_700_000_000)
        ]
        let harness = try await BulkSendHarness.start(tokens: 1, plan: plan)
        var feedback = FeedbackClient.Configuration(
            gateway: GatewayAddress(host: "127.0.0.1", port: harness.simulator.feedbackPort),
            credentials: harness.credentials,
            timeout: .seconds(20)
        )
        feedback.proxy = try ProxyConfiguration(url: proxy.url())
        let read = try await FeedbackClient.read(feedback)
        #expect(Set(read.entries.map(\.token)) == Set(gone))
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(harness.simulator.feedbackPort)"), "\(proxy.log)")

        let gateway = GatewayAddress(host: "127.0.0.1", port: harness.simulator.gatewayPort)
        let text = try await GatewayHandshake.binary(
            gateway: gateway,
            credentials: harness.credentials,
            proxy: try ProxyConfiguration(url: proxy.url())
        )
        #expect(text.contains("through the proxy http://salvo@127.0.0.1:\(proxy.port)"), "\(text)")
        #expect(!text.contains(Self.user.password))
        let refused = await #expect(throws: JobError.self) {
            try await GatewayHandshake.binary(
                gateway: gateway,
                credentials: harness.credentials,
                proxy: try ProxyConfiguration(url: proxy.url(user: (Self.user.name, "wrong")))
            )
        }
        #expect(refused?.message.contains("refused the user and password") == true, "\(refused?.message ?? "")")
        try await harness.stop()
    }
}
