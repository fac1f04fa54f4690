import Foundation
import SalvoBroadcast
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `channels`, `broadcast` and `check --channel-inventory` commands as a person runs them: messages and exit
/// codes, against the simulator over TLS.
@Suite(.tags(.network), .runs(.network), .takesATurn, .serialized, .timeLimit(.minutes(2)))
struct BroadcastCommandLineTests {
    @Test func channelsAreCreatedListedReadAndCheckedFromTheCommandLine() async throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let service = try await BroadcastService.start()
        defer { Task { try? await service.simulator.shutdown() } }
        let paths = CertificateFactory.sharedFolder
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-cli"))
        let management = [
            "--bundle-id", BroadcastService.app, "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca,
            "--server-name", "localhost", "--host", "127.0.0.1:\(service.simulator.channelManagementPort!)",
        ]
        let (created, createLog) = try runToEnd(
            salvo,
            ["channels", "create", "--count", "2", "--storage-policy", "most-recent", "--inventory", "inv.csv"]
                + management,
            in: folder
        )
        #expect(created == 0, "\(createLog)")
        #expect(createLog.contains("2 created"))
        let inventory = try ChannelInventory.read(folder.appendingPathComponent("inv.csv").path)
        #expect(inventory.entries.map(\.name) == ["channel-1", "channel-2"])
        #expect(inventory.entries.allSatisfy { $0.policy == .mostRecent && $0.environment == .development })

        let (listed, list) = try runToEnd(salvo, ["channels", "list"] + management, in: folder)
        #expect(listed == 0)
        for entry in inventory.entries { #expect(list.contains(entry.channelID)) }
        #expect(list.contains("2 channels in development; 9998 of 10000 left"))

        let (read, get) = try runToEnd(salvo, ["channels", "get", "--inventory", "inv.csv"] + management, in: folder)
        #expect(read == 0)
        #expect(get.contains("\(inventory.entries[0].channelID) most-recent"))
        let (unknown, refused) = try runToEnd(salvo, ["channels", "get", "dW5rbm93bg=="] + management, in: folder)
        #expect(unknown == 1)
        #expect(refused.contains("dW5rbm93bg==: 400 ChannelNotRegistered"))

        // A CSV without a policy column cannot tell a no-storage channel: a nonzero expiration is refused first.
        try Data("channel_id\n\(inventory.entries[0].channelID)\n".utf8).write(
            to: folder.appendingPathComponent("ids.csv")
        )
        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        let push = management.dropLast(2) + ["--host", "127.0.0.1:\(service.simulator.http2Port!)"]
        let (expiring, message) = try runToEnd(
            salvo,
            ["broadcast", "ids.csv", "--payload-template", "update.json", "--expiration", "+600"] + push,
            in: folder
        )
        #expect(expiring == 3)
        #expect(message.contains("has no policy column"))
        #expect(service.registry.records().isEmpty)

        let (bad, usage) = try runToEnd(
            salvo,
            ["channels", "create", "--count", "1", "--storage-policy", "sometimes", "--inventory", "x.csv"]
                + management,
            in: folder
        )
        #expect(bad == 64)
        #expect(usage.contains("--storage-policy is none or most-recent"))
    }

    @Test func checkValidatesAChannelInventory() throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let paths = CertificateFactory.sharedFolder
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-check"))
        try Data(
            "name,channel_id,policy,environment,created_at\na,YQ==,none,development,t\nb,%%%,always,development,t\n"
                .utf8
        ).write(to: folder.appendingPathComponent("bad.csv"))
        try Data("name,channel_id,policy,environment,created_at\na,YQ==,none,development,t\n".utf8)
            .write(to: folder.appendingPathComponent("good.csv"))
        let check = [
            "check", "--gateway", "127.0.0.1:9", "--cert", paths.client, "--key", paths.clientKey, "--no-handshake",
            "--channel-inventory",
        ]
        let (failed, text) = try runToEnd(salvo, check + ["bad.csv"], in: folder)
        #expect(failed == 3, "\(text)")
        #expect(text.contains("bad.csv:3: channel_id '%%%' is not base64"))
        #expect(text.contains("bad.csv:3: policy 'always' is not none or most-recent"))
        let (passed, ok) = try runToEnd(salvo, check + ["good.csv"], in: folder)
        #expect(passed == 0, "\(ok)")
        #expect(ok.contains("good.csv: 1 channels (development)"))
    }

    @Test func theBroadcastDemoShowsTheFanOutAndDeletesItsChannels() throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let (status, output) = try runToEnd(salvo, ["demo", "--broadcast", "--channels", "30"])
        #expect(status == 0, "\(output)")
        #expect(output.contains("broadcast verdict: PASS — 30 channels"))
        #expect(output.contains("fan-out: 750 at once"))
        #expect(output.contains("deleted: 30 channels; 0 left"))
    }

    @Test func aSignalMidBroadcastWritesTheReportAndTheUnsettledRows() async throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let service = try await BroadcastService.start()
        defer { Task { try? await service.simulator.shutdown() } }
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-signal"))
        let client = try await service.channels()
        var creation = ChannelCreation(
            bundleID: BroadcastService.app,
            environment: .development,
            policy: .none,
            names: (1...200).map { "race-\($0)" },
            inventoryPath: folder.appendingPathComponent("inv.csv").path
        )
        creation.concurrency = 16
        #expect(try await creation.run(client: client).created == 200)
        await client.exchanger.close()
        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        let paths = CertificateFactory.sharedFolder
        let process = try BroadcastKillTests.start(
            salvo,
            [
                "broadcast", "inv.csv", "--payload-template", "update.json", "--bundle-id", BroadcastService.app,
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--server-name", "localhost",
                "--host", "127.0.0.1:\(service.simulator.http2Port!)", "--rate", "40", "--report", "report.json",
                "--quiet",
            ],
            in: folder
        )
        let started = try await BroadcastKillTests.wait(for: process) { service.registry.records().count >= 20 }
        #expect(started)
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        let report =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: folder.appendingPathComponent("report.json"))
            ) as? [String: Any]
        let confirmed = report?["confirmed"] as? Int ?? -1
        #expect(report?["stopped"] as? String == "interrupted by SIGINT")
        #expect(confirmed == service.registry.records().count)
        let unsettled = try String(
            contentsOf: folder.appendingPathComponent("report.json.unsettled.csv"),
            encoding: .utf8
        )
        #expect(unsettled.split(separator: "\n").count - 1 == 200 - confirmed)
    }

    @Test func anUnreachableEndpointStopsTheBroadcastWithExit3AndARecord() throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let closed = try ClosedPort()
        defer { closed.close() }
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-unreachable"))
        try Data("name,channel_id\na,YQ==\nb,Yg==\n".utf8).write(to: folder.appendingPathComponent("ids.csv"))
        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        let paths = CertificateFactory.sharedFolder
        let (status, output) = try runToEnd(
            salvo,
            [
                "broadcast", "ids.csv", "--payload-template", "update.json", "--bundle-id", BroadcastService.app,
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--timeout", "2",
                "--host", "127.0.0.1:\(closed.port)", "--report", "report.json",
            ],
            in: folder
        )
        #expect(status == 3, "\(output)")
        #expect(output.contains("the broadcast endpoint cannot be reached"))
        let unsettled = try String(
            contentsOf: folder.appendingPathComponent("report.json.unsettled.csv"),
            encoding: .utf8
        )
        let lines = unsettled.split(separator: "\n").dropFirst()
        #expect(lines.count == 2, "\(unsettled)")
        #expect(lines.first?.hasPrefix("2,YQ==,") == true && lines.last?.hasPrefix("3,Yg==,") == true)
        #expect(lines.allSatisfy { $0.contains("not sent") }, "\(unsettled)")
    }
}
