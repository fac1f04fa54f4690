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
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(2)))
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
        let (created, createLog) = try await TestProcess.run(
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

        let (listed, list) = try await TestProcess.run(salvo, ["channels", "list"] + management, in: folder)
        #expect(listed == 0)
        for entry in inventory.entries { #expect(list.contains(entry.channelID)) }
        #expect(list.contains("2 channels in development; 9998 of 10000 left"))

        let (read, get) = try await TestProcess.run(
            salvo,
            ["channels", "get", "--inventory", "inv.csv"] + management,
            in: folder
        )
        #expect(read == 0)
        #expect(get.contains("\(inventory.entries[0].channelID) most-recent"))
        let (unknown, refused) = try await TestProcess.run(
            salvo,
            ["channels", "get", "dW5rbm93bg=="] + management,
            in: folder
        )
        #expect(unknown == 1)
        #expect(refused.contains("dW5rbm93bg==: 400 ChannelNotRegistered"))

        // A CSV without a policy column cannot tell a no-storage channel: a nonzero expiration is refused first.
        try Data("channel_id\n\(inventory.entries[0].channelID)\n".utf8).write(
            to: folder.appendingPathComponent("ids.csv")
        )
        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        let push = management.dropLast(2) + ["--host", "127.0.0.1:\(service.simulator.http2Port!)"]
        let (expiring, message) = try await TestProcess.run(
            salvo,
            ["broadcast", "ids.csv", "--payload-template", "update.json", "--expiration", "+600"] + push,
            in: folder
        )
        #expect(expiring == 3)
        #expect(message.contains("has no policy column"))
        #expect(service.registry.records().isEmpty)

        let (bad, usage) = try await TestProcess.run(
            salvo,
            ["channels", "create", "--count", "1", "--storage-policy", "sometimes", "--inventory", "x.csv"]
                + management,
            in: folder
        )
        #expect(bad == 64)
        #expect(usage.contains("--storage-policy is none or most-recent"))
    }

    @Test func checkValidatesAChannelInventory() async throws {
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
        let (failed, text) = try await TestProcess.run(salvo, check + ["bad.csv"], in: folder)
        #expect(failed == 3, "\(text)")
        #expect(text.contains("bad.csv:3: channel_id '%%%' is not base64"))
        #expect(text.contains("bad.csv:3: policy 'always' is not none or most-recent"))
        let (passed, ok) = try await TestProcess.run(salvo, check + ["good.csv"], in: folder)
        #expect(passed == 0, "\(ok)")
        #expect(ok.contains("good.csv: 1 channels (development)"))
    }

    @Test func theBroadcastDemoShowsTheFanOutAndDeletesItsChannels() async throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let (status, output) = try await TestProcess.run(salvo, ["demo", "--broadcast", "--channels", "30"])
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
        let run = try TestProcess(
            salvo,
            [
                "broadcast", "inv.csv", "--payload-template", "update.json", "--bundle-id", BroadcastService.app,
                "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--server-name", "localhost",
                "--host", "127.0.0.1:\(service.simulator.http2Port!)", "--rate", "40", "--report", "report.json",
                "--quiet",
            ],
            in: folder,
            output: .nothing
        )
        var started = false
        try await eventually("20 updates, or the broadcast's end", timeout: .seconds(60)) {
            started = service.registry.records().count >= 20
            return started || !run.isRunning
        }
        #expect(started)
        run.signal(SIGINT)
        #expect(try await run.wait(seconds: 60) == 130)
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

    /// An inventory is its app's, environment's and policy's: a create, get or broadcast for another is refused
    /// naming both (before, `create --environment production` on a development inventory printed "0 created" and
    /// exited 0). An app-wide refusal (a certificate for another app: 403 TopicMismatch) stops a broadcast with exit
    /// 3 and leaves its rows unsent, and a rerun of a finished journal exits with its job's status (it exited 0).
    @Test func inventoriesAreNotReusedAcrossAppsAndAppWideRefusalsStopTheBroadcast() async throws {
        guard let salvo = BroadcastKillTests.executable else {
            Issue.record("salvo is not built next to the tests")
            return
        }
        let service = try await BroadcastService.start()
        defer { Task { try? await service.simulator.shutdown() } }
        let paths = CertificateFactory.sharedFolder
        let folder = URL(fileURLWithPath: try scratchFolder("broadcast-identity"))
        let credentials = [
            "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--server-name", "localhost",
        ]
        let management = credentials + ["--host", "127.0.0.1:\(service.simulator.channelManagementPort!)"]
        let push = credentials + ["--host", "127.0.0.1:\(service.simulator.http2Port!)"]
        let app = ["--bundle-id", BroadcastService.app]
        let create = [
            "channels", "create", "--count", "3", "--storage-policy", "most-recent", "--inventory", "inv.csv",
        ]
        let (created, createLog) = try await TestProcess.run(salvo, create + app + management, in: folder)
        #expect(created == 0, "\(createLog)")
        #expect(createLog.contains("the app has 3 channels in development"), "counted after creating: \(createLog)")
        let inventory = try ChannelInventory.read(folder.appendingPathComponent("inv.csv").path)
        #expect(inventory.entries.allSatisfy { $0.bundleID == BroadcastService.app })

        for (other, named) in [
            (["--environment", "production"], "in production"),
            (["--storage-policy", "none"], "with policy none"),
        ] {
            var arguments = create + app + management
            if other[0] == "--storage-policy" { arguments[5] = "none" } else { arguments += other }
            let (status, output) = try await TestProcess.run(salvo, arguments, in: folder)
            #expect(status == 3, "\(other): \(output)")
            #expect(output.contains(named) && output.contains("give another --inventory"), "\(output)")
        }
        let (got, getLog) = try await TestProcess.run(
            salvo,
            ["channels", "get", "--inventory", "inv.csv", "--bundle-id", "com.example.other"] + management,
            in: folder
        )
        #expect(got == 3 && getLog.contains("com.example.other"), "\(getLog)")
        #expect(service.registry.snapshot().channelsCreated == 3, "nothing created for another environment or policy")

        try Data(BroadcastServiceTests.template.utf8).write(to: folder.appendingPathComponent("update.json"))
        let broadcast = ["broadcast", "--payload-template", "update.json"]
        let (wrongApp, wrongLog) = try await TestProcess.run(
            salvo,
            broadcast + ["inv.csv", "--bundle-id", "com.example.other"] + push,
            in: folder
        )
        #expect(wrongApp == 3 && wrongLog.contains("bundle_id \(BroadcastService.app)"), "\(wrongLog)")

        // A plain list of ids for another app, with the app's certificate: TopicMismatch stops the job.
        let ids = inventory.entries.map(\.channelID)
        try Data(("channel_id,name\n" + ids.map { "\($0),game" }.joined(separator: "\n") + "\n").utf8)
            .write(to: folder.appendingPathComponent("ids.csv"))
        let (mismatch, mismatchLog) = try await TestProcess.run(
            salvo,
            broadcast + ["ids.csv", "--bundle-id", "com.example.other", "--window", "1", "--report", "r.json"] + push,
            in: folder
        )
        #expect(mismatch == 3 && mismatchLog.contains("TopicMismatch"), "\(mismatchLog)")
        #expect(mismatchLog.contains("0 refused") && mismatchLog.contains("3 not sent"), "\(mismatchLog)")
        #expect((service.registry.snapshot().broadcastRefusals["TopicMismatch"] ?? 0) == 1, "one request, not three")

        // A finished journal's rerun: the job's status again (a refused row: 1).
        try Data(("channel_id,name\n" + ids[0] + ",a\nZ2hvc3Q=,b\n").utf8)
            .write(to: folder.appendingPathComponent("two.csv"))
        let journaled = broadcast + ["two.csv", "--journal", "journal"] + app + push
        let (firstRun, firstLog) = try await TestProcess.run(salvo, journaled, in: folder)
        #expect(firstRun == 1 && firstLog.contains("ChannelNotRegistered"), "\(firstLog)")
        let (rerun, rerunLog) = try await TestProcess.run(salvo, journaled, in: folder)
        #expect(rerun == 1, "the finished job's status: \(rerunLog)")
        #expect(rerunLog.contains("1 refused"), "\(rerunLog)")
    }

    @Test func anUnreachableEndpointStopsTheBroadcastWithExit3AndARecord() async throws {
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
        let (status, output) = try await TestProcess.run(
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
