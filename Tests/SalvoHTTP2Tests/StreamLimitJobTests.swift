import APNSWire
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

/// Apple's stream limits in real jobs over TLS to the simulator, with either engine: the simulator refuses
/// (REFUSED_STREAM) every stream opened above the limit it announced and counts them, so a job that follows the
/// limit as it changes earns none, and every row is delivered once.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1))) struct StreamLimitJobTests {
    /// Runs `count` rows with token authentication and returns the result and the simulator's refused streams.
    static func run(
        engine: HTTP2Engine,
        count: Int,
        seed: UInt64,
        connections: Int,
        faults: HTTP2EndpointConfiguration.Faults,
        invalid: Int = 0
    ) async throws -> (result: HTTP2JobResult, verdict: Verdict, refusedStreams: Int, invalid: [DeviceToken]) {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: count, seed: seed, in: folder)
        // Invalid tokens spread through the file, so that rejections come while many streams are in flight.
        let step = invalid > 0 ? count / invalid : 0
        let invalidTokens = invalid > 0 ? (0..<invalid).map { file.tokens[$0 * step + step / 2] } : []
        var plan = FaultPlan()
        plan.seed = seed
        plan.invalidTokens = invalidTokens.map(\.hexString)
        let setup = try await SimulatorEndpointTests.start(faults: faults, plan: plan)
        var configuration = setup.job(engine: engine, authentication: try setup.token(), connections: connections)
        // A debug build on loaded cores can take seconds to answer a thousand streams: no deadline may cut them, or
        // rows in flight go again and the counts below mean nothing.
        configuration.client.requestTimeout = .seconds(30)
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(
                configuration: configuration,
                source: file.source,
                summary: file.summary
            )
        } catch {
            try? await setup.simulator.shutdown()
            throw error
        }
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        let refused = setup.simulator.ledger.snapshot().refusedStreams
        try await setup.simulator.shutdown()
        return (result, verdict, refused, invalidTokens)
    }

    /// A token connection starts at 1 stream and gets 1,000 after its first accepted request (raised); after 100
    /// requests the limit drops to 3 with hundreds of streams in flight (lowered), and after 900 it is 1,000
    /// again (raised): the job never opens a stream above the limit.
    @Test(arguments: HTTP2Engine.allCases) func aLimitRaisedLoweredAndRaisedAgainMidJobIsNeverExceeded(
        engine: HTTP2Engine
    ) async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.shrinkAfterStreams = 100
        faults.shrinkTo = 3
        faults.restoreAfterStreams = 900
        let count = 1600
        let run = try await Self.run(engine: engine, count: count, seed: 91, connections: 1, faults: faults)
        #expect(run.result.stopped == nil)
        #expect(run.result.report.confirmed == count)
        #expect(run.refusedStreams == 0, "streams opened above the announced limit")
        #expect(run.result.report.resent == 0, "\(run.result.connectionErrors)")
        #expect(run.verdict.passed, "\(run.verdict.summary)")
        #expect(run.verdict.deliveredOnce == count)
    }

    /// Token authentication: each connection is announced 1 stream until its first request is accepted. The
    /// simulator holds the client to it (from the client's SETTINGS acknowledgement, which comes before any
    /// request), so no refusal means no connection had a second stream open before its first 200.
    @Test(arguments: HTTP2Engine.allCases) func aTokenConnectionKeepsToOneStreamUntilItsFirstAcceptedRequest(
        engine: HTTP2Engine
    ) async throws {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.tokenConnectionsStartWithOneStream = true
        let count = 600
        let run = try await Self.run(engine: engine, count: count, seed: 92, connections: 3, faults: faults)
        #expect(run.result.stopped == nil)
        #expect(run.result.report.confirmed == count)
        #expect(run.refusedStreams == 0)
        #expect(run.result.report.resent == 0, "\(run.result.connectionErrors)")
        #expect(run.verdict.passed, "\(run.verdict.summary)")
        #expect(run.verdict.deliveredOnce == count)
    }

    /// As APNs has been seen to do: a rejected request drops the limit to 1, the next accepted one restores it.
    /// A job with invalid tokens spread through it delivers every valid row once, rejects the invalid ones once,
    /// and never opens a stream above the dropped limit.
    @Test(arguments: HTTP2Engine.allCases) func aDropToOneAfterEachRejectionIsFollowed(engine: HTTP2Engine) async throws
    {
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.dropToOneAfterRejection = true
        let count = 2000
        let run = try await Self.run(
            engine: engine,
            count: count,
            seed: 93,
            connections: 2,
            faults: faults,
            invalid: 8
        )
        #expect(run.result.stopped == nil)
        #expect(run.result.report.confirmed == count - run.invalid.count)
        #expect(run.result.report.rejected == ["BadDeviceToken": run.invalid.count])
        #expect(Set(run.result.rejectedRows.map(\.token)) == Set(run.invalid.map(\.hexString)))
        #expect(run.refusedStreams == 0)
        #expect(run.result.report.resent == 0, "\(run.result.connectionErrors)")
        #expect(run.verdict.passed, "\(run.verdict.summary)")
        #expect(run.verdict.deliveredOnce == count - run.invalid.count)
        #expect(run.verdict.invalidNeverDelivered == run.invalid.count)
    }
}
