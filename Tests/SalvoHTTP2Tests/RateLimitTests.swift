import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2

/// `--rate`: the token bucket with a fake clock, and real jobs over TLS with either engine whose rate measured at the
/// server is within 10 % of the cap.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1))) struct RateLimitTests {
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

    /// When an event loop got to run: a tick every 5 ms. A gap of more than 50 ms between ticks is time the loop
    /// could not run (the machine gave its thread no CPU, or it was busy catching up), and past the bucket's 50 ms
    /// of burst it is time the rate could not be kept whatever the client did. A client that waits on its own
    /// (a wake-up too late, tokens lost) leaves its loop free, and the ticks on time.
    final class LoopProbe: Sendable {
        private let ticks = NIOLockedValueBox<[ContinuousClock.Instant]>([])
        private let task = NIOLockedValueBox<RepeatedTask?>(nil)

        init(_ loop: any EventLoop) {
            let ticks = self.ticks
            let task = loop.scheduleRepeatedTask(initialDelay: .zero, delay: .milliseconds(5)) { _ in
                ticks.withLockedValue { $0.append(.now) }
            }
            self.task.withLockedValue { $0 = task }
        }

        func stop() { self.task.withLockedValue { $0?.cancel() } }

        /// The stretches within `from ... to` when the loop could not run, past the first 50 ms of each.
        func stalls(from: ContinuousClock.Instant, to: ContinuousClock.Instant) -> [Range<ContinuousClock.Instant>] {
            let ticks = self.ticks.withLockedValue { $0 }
            var stalls: [Range<ContinuousClock.Instant>] = []
            for (before, after) in zip(ticks, ticks.dropFirst()) where after - before > .milliseconds(50) {
                let start = max(before + .milliseconds(50), from)
                let end = min(after, to)
                if start < end { stalls.append(start..<end) }
            }
            return stalls
        }

        /// How long, within `from ... to`, at least one of `probes` could not run.
        static func stalled(
            _ probes: [LoopProbe],
            from: ContinuousClock.Instant,
            to: ContinuousClock.Instant
        ) -> Duration {
            let stalls = probes.flatMap { $0.stalls(from: from, to: to) }.sorted { $0.lowerBound < $1.lowerBound }
            var total = Duration.zero
            var covered: Range<ContinuousClock.Instant>?
            for stall in stalls {
                if let current = covered, stall.lowerBound <= current.upperBound {
                    covered = current.lowerBound..<max(current.upperBound, stall.upperBound)
                } else {
                    if let current = covered { total += current.upperBound - current.lowerBound }
                    covered = stall
                }
            }
            if let current = covered { total += current.upperBound - current.lowerBound }
            return total
        }
    }

    struct Measured {
        /// Rows over the time from the start of the job to the last arrival.
        var total: Double
        /// Arrivals between the 10th and 90th percentile, over the time between them.
        var steady: Double
        /// The same with the time the client's or the server's loop could not run (past 50 ms) taken out.
        var steadyWhileRunning: Double
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Runs `count` rows at `--rate` over TLS, the client's connections on one event loop and the server on another,
    /// both watched by a `LoopProbe`, and measures at the server. The steady part leaves out the connects, the
    /// handshakes and the first answer each connection waits for at one stream.
    static func measure(engine: HTTP2Engine, rate: Int, count: Int, seed: UInt64) async throws -> Measured {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: count, seed: seed, in: folder)
        let ledger = ServerLedger()
        let server = try await startServer { request in
            _ = ledger.request(request)
            ledger.delivered(request)
            return .ok(apnsID: nil)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let probes = [LoopProbe(group.next()), LoopProbe(server.eventLoopGroup.next())]
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
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(
                configuration: configuration,
                source: file.source,
                summary: file.summary,
                group: group
            )
        } catch {
            for probe in probes { probe.stop() }
            await server.stop()
            try? await group.shutdownGracefully()
            throw error
        }
        for probe in probes { probe.stop() }
        await server.stop()
        try? await group.shutdownGracefully()
        #expect(result.report.confirmed == count)
        let snapshot = ledger.snapshot
        #expect(snapshot.delivered.count == count && snapshot.delivered.values.allSatisfy { $0 == 1 })
        let arrivals = snapshot.times.values.flatMap { $0 }.sorted()
        guard arrivals.count == count else { return Measured(total: 0, steady: 0, steadyWhileRunning: 0) }
        let first = count / 10
        let last = count * 9 / 10
        let window = Self.seconds(arrivals[last] - arrivals[first])
        let stalled = Self.seconds(LoopProbe.stalled(probes, from: arrivals[first], to: arrivals[last]))
        return Measured(
            total: Double(count) / Self.seconds(arrivals[count - 1] - started),
            steady: Double(last - first) / window,
            steadyWhileRunning: Double(last - first) / max(window - stalled, 0.001)
        )
    }

    /// `--rate` over two connections for 2.5 s: the rate measured at the server is within 10 % of it.
    ///
    /// The upper bound holds whatever the load: the bucket starts empty when the job starts, so the last row cannot
    /// be sent before rows / rate has passed since, and load only lengthens that; in the steady part the bucket's
    /// burst (50 ms worth, only after a stall) and a late first arrival together add at most a few per cent.
    ///
    /// The lower bound is what load can break: a client or a server that cannot run falls behind, and the bucket
    /// gives back at most 50 ms of a stall. So it is checked on the time both event loops could run (`LoopProbe`):
    /// load takes its stalls out, while a client that waits on its own still fails. The rates are also well below
    /// what a debug build manages on two loaded cores (there, with the rest of the suite running, 2,000/s with the
    /// wire engine came out at 1,250/s, and `nio`, NIOHTTP2 at both ends, manages about 800/s alone), and, since
    /// load can only slow a run, the best of at most three runs must reach 90 %; every run must keep under 110 %.
    @Test(arguments: HTTP2Engine.allCases) func aJobOverTLSKeepsToItsRate(engine: HTTP2Engine) async throws {
        let rate = engine == .wire ? 600 : 300
        var measurements: [Measured] = []
        for attempt in 0..<3 {
            let measured = try await Self.measure(
                engine: engine,
                rate: rate,
                count: rate * 5 / 2,
                seed: 72 + UInt64(attempt)
            )
            #expect(measured.total < 1.1 * Double(rate), "whole job: \(measured.total)/s for --rate \(rate)")
            #expect(measured.steady < 1.1 * Double(rate), "steady part: \(measured.steady)/s for --rate \(rate)")
            measurements.append(measured)
            if measured.steadyWhileRunning >= 0.9 * Double(rate) { break }
        }
        #expect(
            measurements.map(\.steadyWhileRunning).max()! >= 0.9 * Double(rate),
            "steady part: \(measurements.map { "\(Int($0.steady))/s (\(Int($0.steadyWhileRunning))/s while running)" }) for --rate \(rate)"
        )
    }
}
