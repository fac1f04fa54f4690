import Foundation
import SalvoBroadcast
import SalvoHTTP2
import SalvoProxy
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The channel and broadcast clients connect as a bulk send does (`HTTP2ConnectionFactory`): the server's certificate
/// is held to `--server-name` alone (a certificate that names only the address connected to is refused), and a
/// proxy's tunnel carries them.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(2)))
struct BroadcastServerNameTests {
    @Test func aCertificateThatDoesNotNameTheServerNameIsRefused() async throws {
        let service = try await BroadcastService.start()
        for push in [false, true] {
            var endpoint = try service.endpoint(push: push)
            // The simulator's certificate names localhost and 127.0.0.1, the address connected to.
            endpoint.serverName = "api.push.apple.com"
            do {
                let exchanger = try await HTTP2Exchanger.connect(endpoint)
                await exchanger.close()
                Issue.record("push \(push): connected although the certificate does not name api.push.apple.com")
            } catch {
                #expect(error.reason.contains("does not name api.push.apple.com"), "\(error.reason)")
            }
            // With the name it carries, the same endpoint connects.
            endpoint.serverName = "localhost"
            let exchanger = try await HTTP2Exchanger.connect(endpoint)
            await exchanger.close()
        }
        try await service.simulator.shutdown()
    }

    @Test(
        .enabled(
            if: ProxyServer.isAvailable,
            "tinyproxy is not installed (apt-get install tinyproxy; .ci/run installs it)"
        )
    )
    func channelsThroughAProxy() async throws {
        let service = try await BroadcastService.start()
        let user = (name: "salvo", password: "pr0xy-Pw-41")
        let proxy = try await ProxyServer.tinyproxy(user: user)
        defer { proxy.remove() }
        var endpoint = try service.endpoint(push: false)
        endpoint.proxy = try ProxyConfiguration(url: proxy.url())
        let client = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(endpoint),
            bundleID: BroadcastService.app
        )
        var creation = ChannelCreation(
            bundleID: BroadcastService.app,
            environment: .development,
            policy: .none,
            names: (1...20).map { "proxied-\($0)" },
            inventoryPath: try scratchFolder("broadcast-proxy") + "/inventory.csv"
        )
        creation.concurrency = 4
        #expect(try await creation.run(client: client).created == 20)
        #expect(proxy.log.contains("CONNECT 127.0.0.1:\(endpoint.port)"), "\(proxy.log)")
        await client.exchanger.close()
        var wrong = try service.endpoint(push: true)
        wrong.proxy = try ProxyConfiguration(url: proxy.url(user: (user.name, "wrong")))
        do {
            _ = try await HTTP2Exchanger.connect(wrong)
            Issue.record("connected through a proxy that refused the password")
        } catch {
            #expect(error.reason.contains("the proxy http://salvo@127.0.0.1:\(proxy.port)"), "\(error.reason)")
            #expect(error.reason.contains("refused the user and password"), "\(error.reason)")
        }
        try await service.simulator.shutdown()
    }
}
