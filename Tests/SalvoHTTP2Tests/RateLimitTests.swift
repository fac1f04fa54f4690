import NIOCore
import SalvoEngine
import Testing

@testable import SalvoHTTP2

/// `--rate`: the token bucket with a fake clock, and a real job over TLS to the simulator whose measured rate stays
/// under the cap + 10 %.
@Suite(.serialized, .timeLimit(.minutes(1))) struct RateLimitTests {
    static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)

    @Test func theBucketStartsEmptyRefillsAtTheRateAndHoldsAtMost50Milliseconds() {
        var bucket = HTTP2RateLimiter(perSecond: 1000, now: Self.start)
        #expect(bucket.take(upTo: 10, now: Self.start) == 0, "no burst at the start")
        #expect(bucket.nextAvailable(now: Self.start) == Self.start + .milliseconds(1))
        #expect(bucket.take(upTo: 100, now: Self.start + .milliseconds(10)) == 10)
        // A long pause earns at most 50 ms worth.
        #expect(bucket.take(upTo: 1000, now: Self.start + .seconds(5)) == 50)
        bucket.giveBack(20)
        #expect(bucket.take(upTo: 1000, now: Self.start + .seconds(5)) == 20)
        #expect(bucket.nextAvailable(now: Self.start + .seconds(5)) == Self.start + .seconds(5) + .milliseconds(1))
    }

    /// Two jobs of 200 and 1,200 rows at the same rate: the difference of their times is 1,000 rows at the rate,
    /// without the fixed cost of starting a job (connect, TLS, the first answer).
    @Test func aJobOverTLSKeepsToItsRate() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        var configuration = setup.job(authentication: try setup.certificate(topic: testTopic), connections: 2)
        configuration.client.rate = 1000
        var seconds: [Double] = []
        for (count, seed) in [(200, UInt64(71)), (1200, 72)] {
            let file = try TokenFile(count: count, seed: seed, in: folder)
            let started = ContinuousClock.now
            let result = try await HTTP2Job.run(
                configuration: configuration,
                source: file.source,
                summary: file.summary
            )
            let elapsed = ContinuousClock.now - started
            seconds.append(Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            #expect(result.report.confirmed == count)
        }
        let measured = 1000 / (seconds[1] - seconds[0])
        // Never above the cap (+10 %). Alone it also stays above 900/s; beside the rest of the suite on two cores
        // the client may be starved below the cap, which says nothing about the cap.
        #expect(measured < 1100, "measured \(measured)/s for --rate 1000 (\(seconds) s)")
        try await setup.simulator.shutdown()
    }
}
