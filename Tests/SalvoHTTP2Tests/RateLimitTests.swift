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

    /// A job of 1,200 rows over TLS at `--rate 1000` never goes faster than the cap (+10 %).
    @Test func aJobOverTLSKeepsToItsRate() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        var configuration = setup.job(authentication: try setup.certificate(topic: testTopic), connections: 2)
        configuration.client.rate = 1000
        // One job, timed start to end: set-up and a loaded machine only lengthen it, so the rate measured can only
        // fall below what the limiter allowed (a bucket that starts empty, with 50 ms of burst: 1,200 rows take at
        // least 1.15 s, at most 1,043/s). Without the cap they take a fraction of that.
        let count = 1200
        let file = try TokenFile(count: count, seed: 72, in: folder)
        let started = ContinuousClock.now
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(result.report.confirmed == count)
        let measured = Double(count) / seconds
        #expect(measured < 1100, "measured \(measured)/s for --rate 1000 (\(seconds) s)")
        try await setup.simulator.shutdown()
    }
}
