import NIOCore
import SalvoRows
import SalvoSimulator
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// A job's start and end as a user's clock sees them: the connections the first step opens at once, sized from the
/// first handshake and the job's rows; each connection closing as soon as no row is left for it; every connection
/// closed together at the end, the wait for the server's goodbyes bounded. Decisions with a fake clock, then a job
/// over TLS to the simulator held 50 ms away in each direction.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(2))) struct JobStartAndEndTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    static func at(_ milliseconds: Int64) -> NIODeadline { Self.start + .milliseconds(milliseconds) }

    // MARK: The end

    @Test func theWaitForGoodbyesIsOneRoundTripWithin100MillisecondsAndOneSecond() {
        #expect(HTTP2JobEnding.goodbyeWait(roundTrip: nil) == .milliseconds(100))
        #expect(HTTP2JobEnding.goodbyeWait(roundTrip: .microseconds(300)) == .milliseconds(100))
        #expect(HTTP2JobEnding.goodbyeWait(roundTrip: .milliseconds(100)) == .milliseconds(100))
        #expect(HTTP2JobEnding.goodbyeWait(roundTrip: .milliseconds(230)) == .milliseconds(230))
        #expect(HTTP2JobEnding.goodbyeWait(roundTrip: .seconds(3)) == .seconds(1))
    }

    @Test func sixteenConnectionsCloseTogetherAndTheJobReturnsWithinOneRoundTripWhateverThePeersDo() {
        // 16 connections 100 ms away: closed one after another, each waiting for its peer, they took 1.6 s.
        var ending = HTTP2JobEnding(places: 16, roundTrip: .milliseconds(100), now: Self.start)
        let first = ending.start
        #expect(first.close == Array(0..<16), "every connection is closed at once")
        #expect(first.wakeUpAt == Self.at(100))
        #expect(!first.done)
        // 14 peers answer with their goodbyes within the round trip; two stay silent.
        for place in 0..<14 {
            #expect(ending.closed(place) == HTTP2JobEnding.Actions())
        }
        #expect(ending.tick(now: Self.at(60)) == HTTP2JobEnding.Actions(wakeUpAt: Self.at(100)), "not yet")
        // One round trip after the end: the silent ones are cut, not waited for.
        let last = Self.at(100) + HTTP2JobEnding.maximumWait
        #expect(ending.tick(now: Self.at(100)) == HTTP2JobEnding.Actions(cut: [14, 15], wakeUpAt: last))
        #expect(ending.tick(now: Self.at(150)) == HTTP2JobEnding.Actions(), "cut once")
        #expect(ending.tick(now: last) == HTTP2JobEnding.Actions(done: true), "a cut that never ends is not waited for")
        #expect(!ending.closed(14).done)
        // A place reported twice (its close, then its cut) counts once.
        #expect(!ending.closed(14).done)
        #expect(ending.closed(15).done)
        #expect(ending.open.isEmpty)
    }

    @Test func aJobWhoseConnectionsAllCloseInTimeIsDoneWithoutACutAndOneWithoutConnectionsAtOnce() {
        var ending = HTTP2JobEnding(places: 3, roundTrip: .milliseconds(10), now: Self.start)
        #expect(ending.start.wakeUpAt == Self.at(100), "at least 100 ms for the goodbyes nearby")
        #expect(!ending.closed(2).done)
        #expect(!ending.closed(0).done)
        #expect(ending.closed(1).done)
        #expect(ending.tick(now: Self.at(100)) == HTTP2JobEnding.Actions(done: true), "nothing left to cut")
        #expect(HTTP2JobEnding(places: 0, roundTrip: nil, now: Self.start).start == HTTP2JobEnding.Actions(done: true))
    }

    @Test func aConnectionClosesWhenNoRowIsLeftAndItsLastStreamIsAnsweredNotBefore() {
        typealias Tests = HTTP2ConnectionMachineTests
        var machine = Tests.openMachine()
        let (id, _) = machine.writing(Tests.items(1...2), bearer: nil, now: Self.start)
        // No row left for the job, but two streams in flight here: the connection stays for their answers.
        #expect(machine.noRowsLeft(now: Self.at(1)) == HTTP2ConnectionMachine.Actions())
        #expect(machine.state != .closed)
        _ = machine.headersReceived(
            streamID: id,
            status: 200,
            apnsID: nil,
            retryAfter: nil,
            endStream: true,
            now: Self.at(2)
        )
        #expect(machine.noRowsLeft(now: Self.at(2)) == HTTP2ConnectionMachine.Actions(), "one still in flight")
        _ = machine.headersReceived(
            streamID: id + 2,
            status: 200,
            apnsID: nil,
            retryAfter: nil,
            endStream: true,
            now: Self.at(3)
        )
        let actions = machine.noRowsLeft(now: Self.at(3))
        #expect(actions.close)
        #expect(machine.state == .closed)
        #expect(machine.finished, "closed for want of rows: its slot does not replace it")
        #expect(machine.noRowsLeft(now: Self.at(4)) == HTTP2ConnectionMachine.Actions(), "closed once")

        // A connection still waiting for SETTINGS when the rows run out closes too, without writing anything.
        var early = Tests.machine()
        #expect(early.noRowsLeft(now: Self.start).close)
        #expect(early.finished)

        // One that fails is not `finished`: its slot replaces it while the job has rows.
        var failed = Tests.openMachine()
        _ = failed.failed("reset", now: Self.start)
        #expect(!failed.finished)
    }

    // MARK: The start

    @Test func theFirstStepOpensAtTheFirstHandshakeTheConnectionsThatCarryTheRowsInAFewRoundTrips() {
        var configuration = HTTP2ConnectionSizer.Configuration(initial: 2, maximum: 32)
        configuration.targetRate = Double(HTTP2ConnectionSizer.nearbyRate)
        configuration.rows = 50_000
        // 100 ms away: the target's flight (200,000/s × 100 ms) would fill 20 connections of 1,000 streams, but
        // 17 carry 50,000 rows in three round trips.
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: configuration,
                roundTrip: .milliseconds(100),
                streamsPerConnection: nil
            ) == 17
        )
        // 50 ms away: the target's flight is 10 connections.
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: configuration,
                roundTrip: .milliseconds(50),
                streamsPerConnection: 1
            ) == 10
        )
        // 10 M rows 100 ms away: as many as the rate asks; 200 ms away, the maximum.
        var large = configuration
        large.rows = 10_000_000
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: large,
                roundTrip: .milliseconds(100),
                streamsPerConnection: nil
            )
                == 20
        )
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: large,
                roundTrip: .milliseconds(200),
                streamsPerConnection: nil
            )
                == 32
        )
        // A server of 100 streams, or our own cap of 100: ten times the connections, within the maximum.
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: configuration,
                roundTrip: .milliseconds(10),
                streamsPerConnection: 100
            )
                == 20
        )
        var capped = configuration
        capped.streamCap = 100
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: capped,
                roundTrip: .milliseconds(10),
                streamsPerConnection: nil
            )
                == 20
        )
        // A few rows: one connection.
        var few = configuration
        few.rows = 200
        #expect(
            HTTP2ConnectionSizer.firstStepConnections(
                configuration: few,
                roundTrip: .milliseconds(100),
                streamsPerConnection: nil
            )
                == 1
        )

        // In time: the decision is taken the moment the handshake is known, with no answer and no rate yet, and
        // every connection of the step is opened in that one decision (in parallel), not one per tick.
        var sizer = HTTP2ConnectionSizer(configuration: configuration, now: Self.start)
        #expect(sizer.evaluate(now: Self.at(1), answered: 0, streamsAvailable: 0, flightCuts: 0).open == 0)
        sizer.observe(handshake: .milliseconds(100))
        #expect(
            sizer.evaluate(now: Self.at(101), answered: 0, streamsAvailable: 0, flightCuts: 0)
                == HTTP2ConnectionSizer.Decision(open: 15, rate: nil)
        )
        #expect(sizer.connections == 17)

        // A job that reads its input while it sends has no count at the start: the estimate from what was read so
        // far sizes the step (0: nothing read yet, no estimate). Without one, the rows would cap nothing.
        var streaming = configuration
        streaming.rows = Int.max
        var reading = HTTP2ConnectionSizer(configuration: streaming, now: Self.start)
        reading.estimate(rows: 0)
        reading.estimate(rows: 50_000)
        reading.observe(handshake: .milliseconds(100))
        #expect(reading.evaluate(now: Self.at(101), answered: 0, streamsAvailable: 0, flightCuts: 0).open == 15)
    }

    // MARK: Over TLS, 100 ms away

    /// 8 connections to the simulator 50 ms away in each direction: every connection closes together at the end,
    /// and the job returns within two round trips and 500 ms of its last answer (a bound for a loaded two-core
    /// machine, not a speed target; one after another, they took a round trip each). The first request on every
    /// connection comes within two round trips and 500 ms of the first handshake.
    @Test func theJobReturnsSoonAfterItsLastAnswerAndStartsEveryConnectionSoonAfterTheFirstHandshake()
        async throws
    {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 6000, seed: 47, in: folder)
        var plan = FaultPlan()
        plan.seed = 9
        plan.latencyMilliseconds = 50
        let setup = try await SimulatorEndpointTests.start(plan: plan)
        let configuration = setup.job(authentication: try setup.token(), connections: 8)
        let before = ContinuousClock.now
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        let whole = ContinuousClock.now - before
        try await setup.simulator.shutdown()

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 6000)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        let roundTrip = (result.report.roundTripMilliseconds ?? 0) / 1000
        #expect(roundTrip >= 0.1, "the simulator held the answers a round trip: \(roundTrip) s")
        let bound = 2 * roundTrip + 0.5
        // From the last answer to the return, as the job timed it, and as this test's clock sees it (the whole
        // call less the job's own time, which ends with the last answer).
        #expect(result.closingSeconds < bound, "\(result.closingSeconds) s from the last answer to the return")
        let wholeSeconds = Double(whole.components.seconds) + Double(whole.components.attoseconds) * 1e-18
        #expect(wholeSeconds - result.report.seconds < bound, "\(wholeSeconds) s whole, \(result.report.seconds) s job")
        // The start: each of the 8 connections wrote its first request soon after the first handshake.
        #expect(result.firstRequestSeconds.count == 8)
        let handshake = try #require(result.firstHandshakeSeconds)
        let lastFirst = try #require(result.firstRequestSeconds.last)
        #expect(lastFirst - handshake < bound, "last first request \(lastFirst) s, first handshake \(handshake) s")
    }

    /// `--connections auto` from one connection: the first step opens its connections together when the first
    /// handshake ends, and they write their first requests together, within about two round trips of it.
    @Test func autoSizingOpensItsFirstStepAtTheFirstHandshake() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 12000, seed: 53, in: folder)
        var plan = FaultPlan()
        plan.seed = 11
        plan.latencyMilliseconds = 50
        let setup = try await SimulatorEndpointTests.start(plan: plan)
        var configuration = setup.job(authentication: try setup.token(), connections: 1)
        configuration.client.maximumConnections = 8
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        try await setup.simulator.shutdown()

        #expect(result.stopped == nil)
        #expect(result.report.confirmed == 12000)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        // 12,000 rows in three round trips of 1,000 streams: 4 connections at once.
        #expect(result.report.connections >= 4, "\(result.report.connections) connections")
        let roundTrip = (result.report.roundTripMilliseconds ?? 0) / 1000
        let handshake = try #require(result.firstHandshakeSeconds)
        let firstStep = result.firstRequestSeconds.prefix(4)
        #expect(firstStep.count == 4)
        // The step's connections are opened in one decision (`HTTP2ConnectionSizerTests`: the first step opens them
        // all at once); here its first requests come within about two round trips of the first handshake, with a
        // second of slack for a loaded machine.
        #expect(
            (firstStep.last ?? .infinity) - handshake < 2 * roundTrip + 1,
            "first requests \(result.firstRequestSeconds), first handshake \(handshake) s, round trip \(roundTrip) s"
        )
        #expect(result.closingSeconds < 2 * roundTrip + 0.5, "\(result.closingSeconds) s to close")
    }
}
