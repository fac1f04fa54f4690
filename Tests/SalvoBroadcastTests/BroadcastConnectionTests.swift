import Foundation
import SalvoBroadcast
import SalvoHTTP2
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// A broadcast job's connection to the push host over real TLS: every row in flight asks for it at once, at the
/// start and after the connection is lost, and they share one connect, so a job holds one connection and a reset
/// costs one reconnect (not one per row that noticed it).
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(2)))
struct BroadcastConnectionTests {
    @Test func aJobHoldsOneConnectionAndALostOneIsOneReconnect() async throws {
        var plan = FaultPlan()
        plan.seed = 11
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.resetRate = 0.006
        plan.http2 = faults
        let service = try await BroadcastService.start(plan: plan)
        let folder = try scratchFolder("broadcast-connection")
        let client = try await service.channels()
        var creation = ChannelCreation(
            bundleID: BroadcastService.app,
            environment: .development,
            policy: .none,
            names: (1...400).map { "race-\($0)" },
            inventoryPath: folder + "/inventory.csv"
        )
        creation.concurrency = 16
        #expect(try await creation.run(client: client).created == 400)
        try Data(BroadcastServiceTests.template.utf8).write(to: URL(fileURLWithPath: folder + "/update.json"))
        var options = BroadcastJob.Options(
            inputPath: folder + "/inventory.csv",
            templateFile: folder + "/update.json",
            bundleID: BroadcastService.app
        )
        options.window = 32
        let endpoint = try service.endpoint(push: true)
        let result = try await BroadcastJob(options: options).run { try await HTTP2Exchanger.connect(endpoint) }

        let ledger = service.simulator.ledger.snapshot()
        let resets = ledger.resets
        try #require(resets >= 1 && resets <= 5, "the plan's seed should reset the connection a few times: \(resets)")
        // One connection, and one more per reset at most (none after a reset that came with the last rows).
        #expect(
            (resets...(resets + 1)).contains(ledger.connectionsAccepted),
            "\(ledger.connectionsAccepted) connections"
        )
        #expect(result.report.stopped == nil, "\(result.report.stopped ?? "")")
        // The rows in flight at a reset are unsettled (sent at most once); every other row's update arrived once.
        #expect(!result.unsettled.isEmpty && result.report.confirmed + result.unsettled.count == 400)
        let ids = try ChannelInventory.read(folder + "/inventory.csv").entries.map(\.channelID)
        let verdict = service.registry.verdict(expected: Dictionary(ids.map { ($0, 1) }, uniquingKeysWith: +))
        #expect(verdict.duplicates == 0 && verdict.channelsMissingUpdates <= result.unsettled.count)
        await client.exchanger.close()
        try await service.simulator.shutdown()
    }
}
