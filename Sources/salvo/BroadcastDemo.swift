import Foundation
import SalvoBroadcast
import SalvoConsole
import SalvoDevelopment
import SalvoHTTP2
import SalvoRows
import SalvoSimulator

/// `salvo demo --broadcast`: channels made on the embedded simulator, one score update broadcast to each, the
/// fan-out to the channels' simulated subscribers from the simulator's ledger, and the channels deleted.
enum BroadcastDemo {
    static let topic = "com.example.salvo.demo"

    /// Runs the demo with `channels` channels of `subscribers` devices each; true when the ledger shows every
    /// channel got its update exactly once and every channel was deleted.
    static func run(channels: Int, subscribers: Int) async throws -> Bool {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-broadcast-demo-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }

        let certificates = try CertificateFactory()
        var configuration = SimulatorConfiguration(tls: .init(certificates))
        configuration.http2 = HTTP2EndpointConfiguration()
        var broadcast = BroadcastConfiguration(enabledApps: [Self.topic])
        broadcast.subscribers = subscribers
        configuration.broadcast = broadcast
        let simulator = try await Simulator.start(configuration)
        defer { Task { try? await simulator.shutdown() } }
        let identity = try certificates.client(topic: Self.topic)
        func endpoint(_ port: Int) throws -> HTTP2Endpoint {
            var endpoint = HTTP2Endpoint(
                host: "127.0.0.1",
                port: port,
                serverName: "localhost",
                authentication: .certificate(chain: [try identity.certificate], key: try identity.key)
            )
            endpoint.trustRoots = certificates.trustRoots
            return endpoint
        }
        print(
            "simulator: channel management 127.0.0.1:\(simulator.channelManagementPort!), broadcasts "
                + "127.0.0.1:\(simulator.http2Port!), \(subscribers) subscribers per channel"
        )

        // 1. Channels, one per game.
        let client = ChannelClient(
            exchanger: try await HTTP2Exchanger.connect(try endpoint(simulator.channelManagementPort!)),
            bundleID: Self.topic
        )
        let inventoryPath = folder.appendingPathComponent("channels.csv").path
        var creation = ChannelCreation(
            bundleID: Self.topic,
            environment: .development,
            policy: .none,
            names: (1...channels).map { "game-\($0)" },
            inventoryPath: inventoryPath
        )
        creation.journalDirectory = folder.appendingPathComponent("create-journal").path
        let created = try await creation.run(client: client)
        print("channels: \(created.created) created (policy none), inventory \(inventoryPath)")

        // 2. One score update per channel: the inventory with each game's score, and a template that reads it.
        let inventory = try ChannelInventory.read(inventoryPath)
        var generator = SystemRandomNumberGenerator()
        var rows = "name,channel_id,policy,home,away\n"
        for entry in inventory.entries {
            let home = Int.random(in: 0...4, using: &generator)
            let away = Int.random(in: 0...4, using: &generator)
            rows += "\(entry.name),\(entry.channelID),\(entry.policy.name),\(home),\(away)\n"
        }
        let scores = folder.appendingPathComponent("scores.csv").path
        try Data(rows.utf8).write(to: URL(fileURLWithPath: scores))
        let template = folder.appendingPathComponent("score.json").path
        let update = #"""
            {"aps":{"timestamp":"{{$now}}","event":"update",
              "content-state":{"game":"{{name}}","home":"{{home:int}}","away":"{{away:int}}"},
              "alert":{"title":"{{name}}","body":"Score update"}}}
            """#
        try Data(update.utf8).write(to: URL(fileURLWithPath: template))
        var options = BroadcastJob.Options(inputPath: scores, templateFile: template, bundleID: Self.topic)
        options.journalDirectory = folder.appendingPathComponent("broadcast-journal").path
        let push = try endpoint(simulator.http2Port!)
        let sent = try await BroadcastJob(options: options).run { try await HTTP2Exchanger.connect(push) }
        print(
            "broadcast: \(sent.report.confirmed) of \(sent.report.inputRows) updates accepted, "
                + "\(sent.rejects.count) refused, \(sent.unsettled.count) unsettled"
        )

        // 3. The fan-out, from the simulator's ledger.
        let registry = simulator.channelRegistry!
        let expected = Dictionary(uniqueKeysWithValues: inventory.entries.map { ($0.channelID, 1) })
        let verdict = registry.verdict(expected: expected)
        print(verdict.summary)

        // 4. The channels deleted.
        var deleted = 0
        for entry in inventory.entries {
            switch await client.delete(entry.channelID) {
            case .success: deleted += 1
            case .failure(let failure): printError("\(entry.channelID): \(failure)", prefix: "refused: ")
            }
        }
        await client.exchanger.close()
        let left = registry.channels(app: Self.topic).count
        print("deleted: \(deleted) channels; \(left) left")
        return verdict.passed && created.isComplete && left == 0 && sent.report.confirmed == inventory.entries.count
    }
}
