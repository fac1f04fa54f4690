import APNSWire
import Foundation
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// Live Activity pushes sent by the HTTP/2 client over TLS (a provider token: a certificate does not cover the
/// `.push-type.liveactivity` topic), as the simulator's devices show them: the ledger records
/// every push, and each token shows the one with the latest timestamp, whatever order they were sent in; an ended
/// activity shows no later update.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct LiveActivityDeviceViewTests {
    @Test func devicesShowTheLatestTimestampAndNothingAfterTheEnd() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        let tokens = try TokenFile(count: 2, seed: 31, in: folder).tokens
        let (game, race) = (tokens[0], tokens[1])

        // One provider token for every send, as one process shares it: a new one signed within 20 minutes is answered
        // TooManyProviderTokenUpdates.
        let authentication = try setup.token()
        var sends = 0
        func send(_ to: [DeviceToken], timestamp: Int64, event: String, state: String?) async throws {
            sends += 1
            let path = folder.file("send-\(sends).csv")
            try (["token"] + to.map(\.hexString)).joined(separator: "\n").appending("\n")
                .write(toFile: path, atomically: true, encoding: .utf8)
            let source = TokenSource(files: [path])
            var configuration = setup.job(authentication: authentication, connections: 1)
            configuration.headers = try APNSRequestHeaders(
                pushType: .liveActivity,
                priority: .immediate,
                topic: testTopic + ".push-type.liveactivity"
            )
            let content = state.map { #","content-state":\#($0)"# } ?? ""
            configuration.payload = try Payload(
                json: #"{"aps":{"timestamp":\#(timestamp),"event":"\#(event)"\#(content)}}"#
            )
            let result = try await HTTP2Job.run(
                configuration: configuration,
                source: source,
                summary: try source.validate()
            )
            #expect(result.report.confirmed == to.count, "send \(sends): \(result.report)")
        }

        try await send([game, race], timestamp: 200, event: "update", state: #"{"score":2}"#)
        // Sent later with an older timestamp (a delayed worker, say): it arrives and replaces nothing.
        try await send([game], timestamp: 100, event: "update", state: #"{"score":1}"#)
        try await send([race], timestamp: 300, event: "end", state: #"{"lap":10}"#)
        // After the end nothing more is shown, however new.
        try await send([race], timestamp: 400, event: "update", state: #"{"lap":11}"#)
        try await send([game], timestamp: 250, event: "update", state: #"{"score":5}"#)

        let view = setup.simulator.liveActivities
        let shownGame = try #require(view.state(token: game))
        #expect(shownGame.timestamp == 250 && shownGame.contentState == #"{"score":5}"# && !shownGame.ended)
        #expect(shownGame.arrivals == 3 && shownGame.staleIgnored == 1)
        let shownRace = try #require(view.state(token: race))
        #expect(shownRace.ended && shownRace.timestamp == 300 && shownRace.contentState == #"{"lap":10}"#)
        #expect(shownRace.arrivals == 3 && shownRace.ignoredAfterEnd == 1)
        var counters = LiveActivityCounters()
        counters.arrivals = 6
        counters.shown = 4
        counters.staleIgnored = 1
        counters.ended = 1
        counters.ignoredAfterEnd = 1
        counters.activities = 2
        #expect(view.counters == counters)
        // The ledger holds every push that was accepted, shown or not.
        #expect(setup.simulator.ledger.record(for: Array(game.bytes))?.count == 3)
        #expect(setup.simulator.ledger.record(for: Array(race.bytes))?.count == 3)
        #expect(setup.simulator.liveActivities.view.activities[game.hexString] == shownGame)
        try await setup.simulator.shutdown()
    }
}
