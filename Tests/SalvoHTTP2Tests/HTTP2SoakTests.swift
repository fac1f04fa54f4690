import Foundation
import SalvoRows
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

/// A long HTTP/2 run against every fault the endpoint injects at once, off by default:
/// `SALVO_SOAK_TOKENS=200000 swift test --filter HTTP2SoakTests` (bounded by the suite's time limit).
@Suite(
    .tags(.network),
    .runs(.network),
    .serialized,
    .enabled(if: SoakSize.tokens != nil),
    .timeLimit(.minutes(30))
)
struct HTTP2SoakTests {
    @Test func everyFaultAtOnceLosesNothingAndDuplicatesNothing() async throws {
        let count = SoakSize.tokens ?? 0
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: count, seed: 31, in: folder)
        var plan = FaultPlan()
        plan.seed = 2026
        plan.invalidTokenFraction = 0.001
        plan.foreignTokenFraction = 0.001
        var faults = HTTP2EndpointConfiguration.Faults()
        faults.tooManyRequestsRate = 0.01
        faults.internalServerErrorRate = 0.005
        faults.serviceUnavailableRate = 0.01
        faults.goAwayAfterStreams = 20_000
        faults.shrinkAfterStreams = 5_000
        faults.shrinkTo = 50
        let setup = try await SimulatorEndpointTests.start(faults: faults, plan: plan)
        var configuration = setup.job(authentication: try setup.token(), connections: 4)
        configuration.retry.maximumAttempts = 20
        let result = try await HTTP2Job.run(configuration: configuration, source: file.source, summary: file.summary)
        try await setup.simulator.shutdown()

        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        #expect(result.stopped == nil && result.notSent == 0)
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(result.report.confirmed == verdict.deliveredOnce)
        #expect(result.report.rejectedTotal == verdict.invalidNeverDelivered)
        #expect(result.report.confirmed + result.report.rejectedTotal == count)
        #expect(result.report.reconnects > 0 && result.report.resent > 0)
        print("h2 soak \(count) tokens: \(verdict.summary) | \(result.report.summary)")
    }
}

enum SoakSize {
    /// Tokens per soak run, from `SALVO_SOAK_TOKENS`; nil (the default) skips the soak suites.
    static let tokens: Int? = ProcessInfo.processInfo.environment["SALVO_SOAK_TOKENS"].flatMap(Int.init)
}
