import NIOCore
import SalvoRows
import SalvoSimulator
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// `--connections auto`: the sizer's decisions with a fake clock, and a job over TLS to the simulator held 25 ms
/// away in each direction, which opens more than one connection.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct HTTP2ConnectionSizerTests {
    typealias Sizer = HTTP2ConnectionSizer

    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ milliseconds: Int64) -> NIODeadline { Self.start + .milliseconds(milliseconds) }

    @Test func connectionsDoubleWhileTheFlightFillsTheStreamsAndTheRateRisesThenSettle() {
        var sizer = Sizer(configuration: .init(initial: 1, maximum: 32), now: Self.start)
        sizer.observe(roundTrip: .milliseconds(80))
        sizer.observe(roundTrip: .milliseconds(50))
        sizer.observe(roundTrip: .milliseconds(70))
        #expect(sizer.roundTrip == .milliseconds(50), "the shortest round trip is kept")
        // Before an interval has passed nothing is measured.
        #expect(sizer.evaluate(now: Self.at(100), answered: 2000, streamsAvailable: 1000, flightCuts: 0).open == 0)
        // 20,000/s × 50 ms = 1,000 streams needed, 1,000 available: the connections are the limit.
        var decision = sizer.evaluate(now: Self.at(200), answered: 4000, streamsAvailable: 1000, flightCuts: 0)
        #expect(decision == Sizer.Decision(open: 1, rate: 20_000))
        #expect(sizer.connections == 2)
        #expect(sizer.why == "doubled to 2: 20000/s filled half the streams or more", "the summary's reason")
        // The interval after a growth holds its connects: it is not judged.
        #expect(sizer.evaluate(now: Self.at(400), answered: 6000, streamsAvailable: 2000, flightCuts: 0).open == 0)
        // 40,000/s: the growth paid, and the flight fills 2,000 streams again.
        decision = sizer.evaluate(now: Self.at(600), answered: 14000, streamsAvailable: 2000, flightCuts: 0)
        #expect(decision == Sizer.Decision(open: 2, rate: 40_000))
        #expect(sizer.connections == 4)
        _ = sizer.evaluate(now: Self.at(800), answered: 22000, streamsAvailable: 4000, flightCuts: 0)
        // 42,000/s is less than 10 % more: the cores or the server are the limit now, and it stays at 4.
        decision = sizer.evaluate(now: Self.at(1000), answered: 30400, streamsAvailable: 4000, flightCuts: 0)
        #expect(decision == Sizer.Decision(open: 0, rate: 42_000))
        #expect(sizer.settled)
        #expect(sizer.why.hasPrefix("growing stopped: 4 connections answered 42000/s against 40000/s"), "\(sizer.why)")
        #expect(sizer.evaluate(now: Self.at(1200), answered: 60000, streamsAvailable: 4000, flightCuts: 0).open == 0)
        #expect(sizer.connections == 4)
    }

    @Test func theFirstStepOpensForTheTargetRatesFlightAndTheWarmUpLastsUntilTheNewConnectionsAreFull() {
        var configuration = Sizer.Configuration(initial: 2, maximum: 32)
        configuration.targetRate = 200_000
        var sizer = Sizer(configuration: configuration, now: Self.start)
        #expect(
            sizer.evaluate(now: Self.at(5), answered: 0, streamsAvailable: 0, flightCuts: 0).open == 0,
            "the distance is not known yet"
        )
        // The first TLS handshake took 100 ms: the distance, before any answer. The connections still have one stream
        // each (token authentication before the first answer), so they count for the streams APNs announces.
        sizer.observe(handshake: .milliseconds(120))
        sizer.observe(handshake: .milliseconds(100))
        #expect(sizer.handshake == .milliseconds(100))
        // 200,000/s × 100 ms = 20,000 streams: 20 connections of 1,000, at once, with no rate measured yet.
        #expect(
            sizer.evaluate(now: Self.at(10), answered: 0, streamsAvailable: 2, flightCuts: 0, streamsPerConnection: 1)
                == Sizer.Decision(open: 18, rate: nil)
        )
        #expect(sizer.why == "20 at once carry 200000/s in flight (1000 streams each, round trip 100 ms)")
        sizer.observe(roundTrip: .milliseconds(100))
        #expect(
            sizer.evaluate(
                now: Self.at(20),
                answered: 4,
                streamsAvailable: 2000,
                flightCuts: 0,
                streamsPerConnection: 1000
            ).open == 0,
            "the first step is taken once"
        )
        #expect(sizer.connections == 20 && !sizer.settled)
        // Rates over two round trips; the warm-up lasts until the 20 connections have their streams.
        #expect(sizer.measuringInterval == .milliseconds(200))
        #expect(
            sizer.evaluate(now: Self.at(100), answered: 9000, streamsAvailable: 5000, flightCuts: 0).rate == nil
        )
        #expect(
            sizer.evaluate(
                now: Self.at(220),
                answered: 20000,
                streamsAvailable: 5000,
                flightCuts: 0,
                streamsPerConnection: 1000
            )
            .open == 0
        )
        #expect(
            sizer.evaluate(
                now: Self.at(420),
                answered: 40000,
                streamsAvailable: 20000,
                flightCuts: 0,
                streamsPerConnection: 1000
            )
            .open == 0
        )
        // Judged again: 80,000/s × 100 ms fills 8,000 of 20,000 streams, so the connections are not the limit.
        #expect(
            sizer.evaluate(
                now: Self.at(620),
                answered: 56000,
                streamsAvailable: 20000,
                flightCuts: 0,
                streamsPerConnection: 1000
            )
                == Sizer.Decision(open: 0, rate: 80_000)
        )
        #expect(sizer.connections == 20 && !sizer.settled)

        // Nearby, the target's flight fits the open connections: no step.
        var near = Sizer(configuration: configuration, now: Self.start)
        near.observe(roundTrip: .milliseconds(1))
        #expect(
            near.evaluate(
                now: Self.at(10),
                answered: 4,
                streamsAvailable: 2000,
                flightCuts: 0,
                streamsPerConnection: 1000
            )
            .open == 0
        )
        // A job of 9,000 rows needs no more than the 3 connections that carry it in three round trips, however far.
        var few = configuration
        few.rows = 9_000
        var small = Sizer(configuration: few, now: Self.start)
        small.observe(roundTrip: .milliseconds(100))
        #expect(
            small.evaluate(
                now: Self.at(10),
                answered: 4,
                streamsAvailable: 2000,
                flightCuts: 0,
                streamsPerConnection: 1000
            )
            .open == 1
        )
    }

    @Test func noGrowthWhenTheStreamsAreNotTheLimitAfter429sWithoutARoundTripOrAtTheMaximum() {
        // Nearby (1 ms): 100,000/s needs 100 of 2,000 streams; the streams are not what holds the job back.
        var near = Sizer(configuration: .init(initial: 2, maximum: 32), now: Self.start)
        near.observe(roundTrip: .milliseconds(1))
        #expect(near.evaluate(now: Self.at(200), answered: 20000, streamsAvailable: 2000, flightCuts: 0).open == 0)
        #expect(!near.settled && near.connections == 2)

        // The shortest round trip understates a loaded one, so half the streams count as full: 40 % is not, 60 % is.
        var half = Sizer(configuration: .init(initial: 1, maximum: 32), now: Self.start)
        half.observe(roundTrip: .milliseconds(50))
        #expect(half.evaluate(now: Self.at(200), answered: 1600, streamsAvailable: 1000, flightCuts: 0).open == 0)
        #expect(half.evaluate(now: Self.at(400), answered: 4000, streamsAvailable: 1000, flightCuts: 0).open == 1)

        // Far, but 429s cut a flight in this interval: the server asked for less.
        var cut = Sizer(configuration: .init(initial: 1, maximum: 32), now: Self.start)
        cut.observe(roundTrip: .milliseconds(50))
        #expect(cut.evaluate(now: Self.at(200), answered: 4000, streamsAvailable: 1000, flightCuts: 3).open == 0)
        #expect(cut.evaluate(now: Self.at(400), answered: 8000, streamsAvailable: 1000, flightCuts: 0).open == 1)

        // No answer yet, so no round trip: nothing to size from.
        var blind = Sizer(configuration: .init(initial: 1, maximum: 32), now: Self.start)
        #expect(blind.evaluate(now: Self.at(200), answered: 4000, streamsAvailable: 1000, flightCuts: 0).open == 0)

        // Growth stops at the maximum: 2 of at most 3 open one more, not 2.
        var capped = Sizer(configuration: .init(initial: 2, maximum: 3), now: Self.start)
        capped.observe(roundTrip: .milliseconds(50))
        #expect(capped.evaluate(now: Self.at(200), answered: 8000, streamsAvailable: 2000, flightCuts: 0).open == 1)
        #expect(capped.connections == 3 && capped.settled)
        #expect(Sizer(configuration: .init(initial: 4, maximum: 4), now: Self.start).settled)
    }

    /// 20 streams per connection at a 50 ms round trip carry 400 notifications/s: the distance, not the cores, is
    /// the limit even in a debug build beside other tests, so auto-sizing must open more connections.
    @Test func autoSizingOverTLSOpensMoreThanOneConnectionAtA50MillisecondRoundTrip() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 2000, seed: 31, in: folder)
        var plan = FaultPlan()
        plan.seed = 5
        plan.latencyMilliseconds = 25
        let setup = try await SimulatorEndpointTests.start(plan: plan)
        var configuration = setup.job(authentication: try setup.token(), connections: 1)
        configuration.client.maximumConnections = 8
        configuration.client.maximumStreamsPerConnection = 20
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        try await setup.simulator.shutdown()

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 2000)
        #expect(result.report.connections > 1, "auto-sizing stayed at \(result.report.connections) connection")
        #expect(result.report.maximumConnections == 8)
        #expect(
            (result.report.roundTripMilliseconds ?? 0) >= 50,
            "\(String(describing: result.report.roundTripMilliseconds))"
        )
        #expect(result.report.summary.contains("connections auto: chose \(result.report.connections) (at most 8)"))
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == 2000)
    }
}
