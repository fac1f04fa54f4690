import Foundation
import SalvoProxy
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

#if canImport(Glibc)
import Glibc
#endif

/// HTTP/2 jobs through real proxies to the simulator: Debian's tinyproxy (CONNECT, Basic authentication) and danted
/// (SOCKS5 with a system user, `SALVO_TEST_SOCKS_USER`), each started on a free loopback port with a throwaway
/// configuration. Every token is in the ledger once; every failure names the proxy.
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
struct ProxyJobTests {
    static let user = (name: "salvo", password: "pr0xy-Secret-41")

    private func run(_ configuration: HTTP2JobConfiguration, _ file: TokenFile) async throws -> HTTP2JobResult {
        try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
    }

    private func proxied(_ configuration: HTTP2JobConfiguration, _ url: String) throws -> HTTP2JobConfiguration {
        var configuration = configuration
        configuration.client.proxy = try ProxyConfiguration(url: url)
        return configuration
    }

    private func expectStoppedAtOnce(_ result: HTTP2JobResult, saying causes: [String], rows: Int) {
        let message = result.stopped?.message ?? "not stopped"
        for cause in causes { #expect(message.contains(cause), "\(message)") }
        #expect(message.contains("stopped rather than retry"), "\(message)")
        #expect(result.report.reconnects == 0, "not retried: \(result.connectionErrors)")
        #expect(result.notSent == rows)
        #expect(!message.contains(Self.user.password))
    }

    @Test(arguments: HTTP2Engine.allCases) func throughTinyproxyWithBasicAuthentication(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let proxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { proxy.remove() }
        let setup = try await SimulatorEndpointTests.start()
        let byCertificate = try TokenFile(count: 300, seed: 4101, in: folder)
        let certificate = setup.job(engine: engine, authentication: try setup.certificate(topic: testTopic))
        let first = try await self.run(try self.proxied(certificate, proxy.url()), byCertificate)
        #expect(first.report.confirmed == 300, "\(first.connectionErrors)")
        #expect(first.stopped == nil)
        let byToken = try TokenFile(count: 200, seed: 4102, in: folder)
        let second = try await self.run(
            try self.proxied(setup.job(engine: engine, authentication: try setup.token()), proxy.url()),
            byToken
        )
        #expect(second.report.confirmed == 200, "\(second.connectionErrors)")
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(byCertificate.tokens + byToken.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        // The connections went through the proxy: it opened their tunnels.
        #expect(proxy.log.contains("CONNECT"), "\(proxy.log)")
        try await setup.simulator.shutdown()
    }

    @Test func throughDanteWithUsernameAndPassword() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        // Dante's username method checks a system user: without one (`.ci/run` makes it) the proxy asks for none.
        let user = ProxyServer.socksUser
        let proxy = try await ProxyServer.dante(user: user)
        defer { proxy.remove() }
        let setup = try await SimulatorEndpointTests.start()
        let byToken = try TokenFile(count: 300, seed: 4103, in: folder)
        let first = try await self.run(
            try self.proxied(setup.job(authentication: try setup.token()), proxy.url()),
            byToken
        )
        #expect(first.report.confirmed == 300, "\(first.connectionErrors)")
        let byCertificate = try TokenFile(count: 100, seed: 4104, in: folder)
        let second = try await self.run(
            try self.proxied(
                setup.job(engine: .nio, authentication: try setup.certificate(topic: testTopic)),
                proxy.url()
            ),
            byCertificate
        )
        #expect(second.report.confirmed == 100, "\(second.connectionErrors)")
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(byToken.tokens + byCertificate.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        if user == nil {
            print("ProxyJobTests: SALVO_TEST_SOCKS_USER unset, danted asked for no user (.ci/run sets one)")
        }
        try await setup.simulator.shutdown()
    }

    @Test func aWrongPasswordStopsTheJobAtOnceNamingTheProxy() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        // A source is read once: a file for each job.
        var seed: UInt64 = 4150
        func file() throws -> TokenFile {
            seed += 1
            return try TokenFile(count: 20, seed: seed, in: folder)
        }
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let wrong = (name: Self.user.name, password: "not-the-password")
        let refused = try await self.run(
            try self.proxied(setup.job(authentication: try setup.token()), tinyproxy.url(user: wrong)),
            try file()
        )
        self.expectStoppedAtOnce(
            refused,
            saying: ["the proxy http://salvo@127.0.0.1", "refused the user and password"],
            rows: 20
        )
        let anonymous = try await self.run(
            try self.proxied(setup.job(authentication: try setup.token()), "http://127.0.0.1:\(tinyproxy.port)"),
            try file()
        )
        self.expectStoppedAtOnce(anonymous, saying: ["asks for a user and password", "407"], rows: 20)
        if let user = ProxyServer.socksUser {
            let dante = try await ProxyServer.dante(user: user)
            defer { dante.remove() }
            let socks = try await self.run(
                try self.proxied(
                    setup.job(authentication: try setup.token()),
                    dante.url(user: (user.name, "not-the-password"))
                ),
                try file()
            )
            self.expectStoppedAtOnce(socks, saying: ["the proxy socks5://", "refused the user and password"], rows: 20)
            let none = try await self.run(
                try self.proxied(setup.job(authentication: try setup.token()), "socks5://127.0.0.1:\(dante.port)"),
                try file()
            )
            self.expectStoppedAtOnce(none, saying: ["accepts none of the SOCKS5 methods"], rows: 20)
        }
        #expect(setup.simulator.ledger.snapshot().accepted == 0)
        try await setup.simulator.shutdown()
    }

    @Test func aPortTheProxyRefusesAndAProxyThatIsNotThere() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        var seed: UInt64 = 4160
        func file() throws -> TokenFile {
            seed += 1
            return try TokenFile(count: 20, seed: seed, in: folder)
        }
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user, connectPorts: [443])
        defer { tinyproxy.remove() }
        let forbidden = try await self.run(
            try self.proxied(setup.job(authentication: try setup.token()), tinyproxy.url()),
            try file()
        )
        self.expectStoppedAtOnce(forbidden, saying: ["refused the tunnel", "403 Access violation"], rows: 20)
        let dante = try await ProxyServer.dante(user: nil, refusedPorts: [setup.simulator.http2Port!])
        defer { dante.remove() }
        let blocked = try await self.run(
            try self.proxied(setup.job(authentication: try setup.token()), dante.url()),
            try file()
        )
        self.expectStoppedAtOnce(blocked, saying: ["refused the tunnel", "not allowed by ruleset"], rows: 20)
        let closed = try ClosedPort()
        defer { closed.close() }
        let absent = try await self.run(
            try self.proxied(setup.job(authentication: try setup.token()), "http://127.0.0.1:\(closed.port)"),
            try file()
        )
        self.expectStoppedAtOnce(
            absent,
            saying: ["the proxy http://127.0.0.1:\(closed.port) cannot be reached"],
            rows: 20
        )
        #expect(setup.simulator.ledger.snapshot().accepted == 0)
        try await setup.simulator.shutdown()
    }

    @Test func aProxyThatAcceptsAndFallsSilentIsGivenUpOn() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let silent = try SilentPort()
        defer { silent.close() }
        let file = try TokenFile(count: 20, seed: 4107, in: folder)
        var configuration = jobConfigurationForTests(port: 443, authentication: clientCertificate)
        configuration.client.proxy = try ProxyConfiguration(url: "socks5://127.0.0.1:\(silent.port)")
        configuration.client.connectTimeout = .milliseconds(500)
        configuration.client.reconnect.giveUpAfter = .seconds(2)
        let started = ContinuousClock.now
        let result = try await self.run(configuration, file)
        let message = result.stopped?.message ?? "not stopped"
        #expect(message.contains("--give-up-seconds"), "\(message)")
        #expect(message.contains("did not open the tunnel"), "\(message)")
        #expect(result.notSent == 20)
        #expect(ContinuousClock.now - started < .seconds(15))
    }

    @Test func aProxyKilledMidJobLosesNothing() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let proxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { proxy.remove() }
        let setup = try await SimulatorEndpointTests.start()
        let rows = 3000
        let file = try TokenFile(count: rows, seed: 4108, in: folder)
        var configuration = try self.proxied(setup.job(authentication: try setup.token()), proxy.url())
        configuration.client.rate = 600
        configuration.client.reconnect = ReconnectPolicy(
            initialDelay: .milliseconds(20),
            maximumDelay: .milliseconds(200),
            minimumInterval: .milliseconds(5),
            maximumAttempts: 3,
            giveUpAfter: .seconds(30)
        )
        let job = Task { try await self.run(configuration, file) }
        // The proxy goes away with the job under way, and comes back on the same port.
        try await eventually("500 rows accepted", timeout: .seconds(30), every: .milliseconds(10)) {
            setup.simulator.ledger.snapshot().accepted >= 500
        }
        let before = setup.simulator.ledger.snapshot().accepted
        #expect(before >= 500)
        #expect(before < rows, "the job ended before the proxy was stopped")
        proxy.kill()
        try await proxy.start()
        let result = try await job.value
        #expect(result.stopped == nil, "\(result.stopped?.message ?? "")")
        #expect(result.report.reconnects >= 1)
        #expect(result.report.confirmed + result.report.uncertain == rows)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.neverDelivered == 0, "\(verdict.summary)")
        #expect(verdict.unexpected == 0, "\(verdict.summary)")
        // A row in flight when the tunnel closed may have arrived and is sent again (at least once): no more than those.
        #expect(verdict.deliveredMoreThanOnce <= result.report.uncertainEvents, "\(verdict.summary)")
        try await setup.simulator.shutdown()
    }
}
