import NIOCore
import SalvoEngine
import Testing

@testable import SalvoHTTP2

/// `--rate`: the token bucket with a fake clock, and real jobs over TLS with either engine whose rate measured at the
/// server is within 10 % of the cap.
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

    /// Runs `count` rows at `--rate` over TLS and returns two rates measured at the server: over the whole job
    /// (rows / time from the start of the job to the last arrival) and over its steady part (the arrivals between
    /// the 10th and the 90th percentile, over the time between them), which leaves out the connects, the
    /// handshakes and the first answer each connection waits for at one stream.
    static func measure(
        engine: HTTP2Engine,
        rate: Int,
        count: Int,
        seed: UInt64
    ) async throws -> (
        total: Double, steady: Double
    ) {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: count, seed: seed, in: folder)
        let ledger = ServerLedger()
        let server = try await startServer { request in
            _ = ledger.request(request)
            ledger.delivered(request)
            return .ok(apnsID: nil)
        }
        var configuration = jobConfigurationForTests(
            engine: engine,
            port: server.port,
            authentication: clientCertificate,
            connections: 2
        )
        configuration.client.rate = rate
        // Answers on loaded cores may be late: no deadline may cut a request and send it again.
        configuration.client.requestTimeout = .seconds(30)
        let started = ContinuousClock.now
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        await server.stop()
        #expect(result.report.confirmed == count)
        let snapshot = ledger.snapshot
        #expect(snapshot.delivered.count == count && snapshot.delivered.values.allSatisfy { $0 == 1 })
        let arrivals = snapshot.times.values.flatMap { $0 }.sorted()
        guard arrivals.count == count else { return (0, 0) }
        func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
        let first = count / 10
        let last = count * 9 / 10
        return (
            Double(count) / seconds(arrivals[count - 1] - started),
            Double(last - first) / seconds(arrivals[last] - arrivals[first])
        )
    }

    /// `--rate` over two connections for 2.5 s: the rate measured at the server is within 10 % of it.
    ///
    /// The upper bound holds whatever the load: the bucket starts empty when the job starts, so the last row cannot
    /// be sent before rows / rate has passed since, and load only lengthens that; in the steady part the bucket's
    /// burst (50 ms worth, only after a stall) and a late first arrival together add at most a few per cent.
    /// The lower bound is what load can break (a client or a server without the CPU for the rate falls behind, and
    /// the bucket gives back at most 50 ms of a stall), so the rate is well below what a debug build manages on two
    /// cores shared with the rest of the test suite and other builds: there, 2,000/s with the wire engine came out
    /// at 1,250/s (the NIOHTTP2 test server's CPU), and `nio` (NIOHTTP2 at both ends) manages about 800/s alone;
    /// at 600/s (wire) and 300/s (nio) it measured within 1 %. Load can only slow a run, so the best of at most
    /// three runs must reach 90 % of the rate; every run must keep under 110 %.
    @Test(arguments: HTTP2Engine.allCases) func aJobOverTLSKeepsToItsRate(engine: HTTP2Engine) async throws {
        let rate = engine == .wire ? 600 : 300
        var steadyRates: [Double] = []
        for attempt in 0..<3 {
            let measured = try await Self.measure(
                engine: engine,
                rate: rate,
                count: rate * 5 / 2,
                seed: 72 + UInt64(attempt)
            )
            #expect(measured.total < 1.1 * Double(rate), "whole job: \(measured.total)/s for --rate \(rate)")
            #expect(measured.steady < 1.1 * Double(rate), "steady part: \(measured.steady)/s for --rate \(rate)")
            steadyRates.append(measured.steady)
            if measured.steady >= 0.9 * Double(rate) { break }
        }
        #expect(
            steadyRates.max()! >= 0.9 * Double(rate),
            "steady part: \(steadyRates.map { Int($0) })/s for --rate \(rate), in every run"
        )
    }
}
