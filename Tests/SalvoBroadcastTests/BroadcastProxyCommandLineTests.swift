import Foundation
import SalvoBroadcast
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// `salvo channels` and `salvo broadcast` through real proxies to the simulator's channel management and broadcast
/// endpoints: tinyproxy by `--proxy` (Basic authentication) and by `HTTPS_PROXY` with `--proxy-password-file`, and a
/// danted that refuses the gateway's ports by `ALL_PROXY`, which must stop both commands naming the proxy.
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
struct BroadcastProxyCommandLineTests {
    static let user = (name: "salvo", password: "Br0adcast-Pr0xy-Pw")

    private func run(
        _ salvo: String,
        _ arguments: [String],
        in folder: URL,
        environment: [String: String] = [:]
    ) async throws -> (status: Int32, output: String) {
        // No proxy of the machine's own leaks in: each run says what it uses.
        let process = try TestProcess(
            salvo,
            arguments,
            in: folder,
            environment: ProxyServer.cleanEnvironment(environment)
        )
        let status = try await process.wait(seconds: 60)
        let output = process.output
        let basic = Data("\(Self.user.name):\(Self.user.password)".utf8).base64EncodedString()
        #expect(!output.contains(Self.user.password) && !output.contains(basic), "the password was printed: \(output)")
        return (status, output)
    }

    @Test func channelsAndBroadcastGoThroughTheProxyAndARefusingOneStopsThemNamingIt() async throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let service = try await BroadcastService.start()
        defer { Task { try? await service.simulator.shutdown() } }
        let managementPort = service.simulator.channelManagementPort!
        let pushPort = service.simulator.http2Port!
        let tinyproxy = try await ProxyServer.tinyproxy(user: Self.user)
        defer { tinyproxy.remove() }
        let paths = CertificateFactory.sharedFolder
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-proxy"))
        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        try Data("\(Self.user.password)\n".utf8).write(to: folder.appendingPathComponent("proxy-password"))
        let credentials = [
            "--bundle-id", BroadcastService.app, "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca,
            "--server-name", "localhost",
        ]
        let management = credentials + ["--host", "127.0.0.1:\(managementPort)"]
        let push = credentials + ["--host", "127.0.0.1:\(pushPort)", "--log-level", "debug"]
        func tunnels(to port: Int) -> Int {
            tinyproxy.log.components(separatedBy: "CONNECT 127.0.0.1:\(port)").count - 1
        }

        // By --proxy: the channels are made and every one gets the update once, each connection a tunnel.
        let (created, createLog) = try await self.run(
            salvo,
            ["channels", "create", "--count", "3", "--storage-policy", "most-recent", "--inventory", "inv.csv"]
                + management + ["--proxy", tinyproxy.url()],
            in: folder
        )
        #expect(created == 0, "\(createLog)")
        #expect(tunnels(to: managementPort) >= 1, "channels create did not go through the proxy: \(tinyproxy.log)")
        let inventory = try ChannelInventory.read(folder.appendingPathComponent("inv.csv").path)
        #expect(inventory.entries.count == 3)
        let (sent, sendLog) = try await self.run(
            salvo,
            ["broadcast", "inv.csv", "--payload-template", "update.json", "--report", "report.json"] + push
                + ["--proxy", tinyproxy.url()],
            in: folder
        )
        #expect(sent == 0, "\(sendLog)")
        #expect(tunnels(to: pushPort) >= 1, "broadcast did not go through the proxy: \(tinyproxy.log)")
        var perChannel: [String: Int] = [:]
        for record in service.registry.records() { perChannel[record.channelID, default: 0] += 1 }
        #expect(perChannel == Dictionary(uniqueKeysWithValues: inventory.entries.map { ($0.channelID, 1) }))
        let report = try String(contentsOf: folder.appendingPathComponent("report.json"), encoding: .utf8)
        #expect(!report.contains(Self.user.password))

        // By the environment, the password from a file.
        let before = tunnels(to: managementPort)
        let (listed, list) = try await self.run(
            salvo,
            ["channels", "list", "--proxy-password-file", "proxy-password"] + management,
            in: folder,
            environment: ["HTTPS_PROXY": tinyproxy.url(password: false)]
        )
        #expect(listed == 0, "\(list)")
        for entry in inventory.entries { #expect(list.contains(entry.channelID), "\(list)") }
        #expect(tunnels(to: managementPort) > before, "HTTPS_PROXY was not used: \(tinyproxy.log)")

        // A SOCKS5 proxy from ALL_PROXY that refuses both endpoints: exit 3, the proxy named, nothing sent.
        let dante = try await ProxyServer.dante(user: nil, refusedPorts: [managementPort, pushPort])
        defer { dante.remove() }
        let refusing = ["ALL_PROXY": dante.url()]
        let (unlisted, refusedList) = try await self.run(
            salvo,
            ["channels", "list"] + management,
            in: folder,
            environment: refusing
        )
        #expect(unlisted == 3, "\(refusedList)")
        #expect(refusedList.contains("the proxy \(dante.url())"), "\(refusedList)")
        #expect(refusedList.contains("not allowed by ruleset"), "\(refusedList)")
        let records = service.registry.records().count
        let (stopped, stoppedLog) = try await self.run(
            salvo,
            ["broadcast", "inv.csv", "--payload-template", "update.json", "--report", "refused.json"] + push,
            in: folder,
            environment: refusing
        )
        #expect(stopped == 3, "\(stoppedLog)")
        #expect(stoppedLog.contains("the proxy \(dante.url())"), "\(stoppedLog)")
        #expect(service.registry.records().count == records)
    }
}
