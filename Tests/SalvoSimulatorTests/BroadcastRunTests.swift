import Foundation
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoSimulator

/// `salvo simulate` with broadcasts, below the command line: the options become the configuration, the banner names
/// the channel management port, and `finish()` writes the broadcast verdict judged against an inventory CSV.
@Suite(.tags(.network), .runs(.network), .timeLimit(.minutes(1))) struct BroadcastRunTests {
    @Test func theRunServesChannelsAndWritesTheBroadcastVerdictAgainstAnInventory() async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-broadcast-run-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var options = SimulateOptions()
        options.gatewayPort = 0
        options.feedbackPort = 0
        options.http2Port = 0
        options.channelPort = 0
        options.broadcastApps = [BroadcastHarness.app]
        options.subscribers = 7
        options.broadcastVerdictPath = folder + "/broadcast-verdict.json"
        options.broadcastExpectedPath = folder + "/inventory.csv"
        let certificates = try CertificateFactory()
        let run = try await SimulationRun.start(options, tls: SimulatorConfiguration.TLS(certificates))
        let port = try #require(run.simulator.channelManagementPort)
        #expect(run.banner().contains("channels  127.0.0.1:\(port)"))
        let client = try certificates.client(topic: BroadcastHarness.app)
        let management = try await BroadcastTestConnection.connect(
            port: port,
            identity: client,
            trusting: certificates.ca.certificatePEM
        )
        let sent = try await BroadcastHarness.createChannel(on: management)
        let unsent = try await BroadcastHarness.createChannel(on: management)
        try "name,channel id,policy\nfinal,\(sent),0\nsemi,\(unsent),0\n"
            .write(toFile: folder + "/inventory.csv", atomically: true, encoding: .utf8)
        let push = try await BroadcastTestConnection.connect(
            port: try #require(run.simulator.http2Port),
            identity: client,
            trusting: certificates.ca.certificatePEM
        )
        let response = try await push.request(
            "POST",
            BroadcastHarness.broadcastPath,
            headers: BroadcastHarness.broadcastHeaders(sent),
            body: BroadcastHarness.update(1_700_000_000, score: "1-0")
        )
        #expect(response.status == 200)
        let summary = try await run.finish()
        #expect(summary.contains("broadcast verdict: FAIL"))
        let verdict = try JSONDecoder().decode(
            BroadcastVerdict.self,
            from: Data(contentsOf: URL(fileURLWithPath: folder + "/broadcast-verdict.json"))
        )
        #expect(verdict.missingChannelIDs == [unsent] && verdict.channelsMissingUpdates == 1)
        #expect(verdict.ledger.deliveredNow == 7 && verdict.broadcastsAccepted == 1)
    }

    @Test func channelsNeedTheHTTP2Port() async throws {
        var options = SimulateOptions()
        options.gatewayPort = 0
        options.feedbackPort = 0
        options.channelPort = 0
        let tls = SimulatorConfiguration.TLS(try CertificateFactory())
        await #expect(throws: SimulatorError.self) { _ = try await SimulationRun.start(options, tls: tls) }
    }

    @Test func anInventoryIsReadByItsChannelIdColumnOrAsBareIds() throws {
        let a = ChannelBook.channelID(serial: 1, seed: 0)
        let b = ChannelBook.channelID(serial: 2, seed: 0)
        #expect(
            try BroadcastExpectation.parse("Name,Channel_ID\nx,\(a)\n\ny,\(b)\n", path: "i", updatesPerChannel: 1) == [
                a: 1, b: 1,
            ]
        )
        #expect(
            try BroadcastExpectation.parse("apns-channel-id,updates\n\(a),3\n", path: "i", updatesPerChannel: 1) == [
                a: 3
            ]
        )
        #expect(try BroadcastExpectation.parse("\(a)\n\(b)\n\(a)\n", path: "i", updatesPerChannel: 1) == [a: 2, b: 1])
        #expect(throws: SimulatorError.self) {
            try BroadcastExpectation.parse("name,id\nx,\(a)\n", path: "i", updatesPerChannel: 1)
        }
        #expect(throws: SimulatorError.self) {
            try BroadcastExpectation.parse("channel id\nnot an id!\n", path: "i", updatesPerChannel: 1)
        }
    }
}
