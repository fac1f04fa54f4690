import APNSWire
import Foundation
import NIOConcurrencyHelpers
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

/// Rows refused for the provider token never reached a device: they are never counted as rejected, and a job
/// stopped by such a refusal lists them, with every row it did not send, in its unsettled rows, so that sending
/// those rows again delivers every token once.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(2)))
struct ProviderTokenRefusalTests {
    /// The rows a job left unsettled, as the unsettled file holds them (a token file of its own).
    static func unsettledFile(_ result: HTTP2JobResult, in folder: TemporaryFolder, name: String) throws -> String {
        var csv = UnsettledRow.csvHeader + "\n"
        for row in result.unsettledRows { csv += row.csvLine + "\n" }
        let path = folder.file(name)
        try csv.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A job sends with a token of its own; mid-job another process signs a newer token with the same key, and the
    /// job's next token (it renews at `refreshAfter`) comes less than 20 minutes after that one: the simulator
    /// answers `TooManyProviderTokenUpdates`, and the job stops. The rows answered before were delivered; every
    /// other row (refused for the token, given back, never taken) is in the unsettled rows, none is rejected; sent
    /// again with the other process's token, every token of the input is delivered exactly once.
    @Test(arguments: HTTP2Engine.allCases) func aJobStoppedByTooManyProviderTokenUpdatesListsEveryRowItDidNotDeliver(
        engine: HTTP2Engine
    ) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let setup = try await SimulatorEndpointTests.start()
        let wall = Int64(Date().timeIntervalSince1970)
        // The job's token is 30 minutes old at first (the simulator takes up to an hour); it renews at 20 minutes.
        let jobClock = NIOLockedValueBox(wall - 30 * 60)
        let jobToken = try ProviderToken(
            signer: setup.signer,
            refreshAfter: 20 * 60,
            clock: { jobClock.withLockedValue { $0 } }
        )
        let file = try TokenFile(count: 4000, seed: 91, in: folder)
        var configuration = setup.job(engine: engine, authentication: .token(jobToken), connections: 2)
        // Slow enough that the other process signs while rows are still to be sent, on a loaded machine too (the job
        // would take 10 s; it stops at the refusal, a moment after the other process's row).
        configuration.client.rate = 400
        let confirmed = NIOLockedValueBox(0)
        async let stoppedJob = HTTP2Job.run(
            configuration: configuration,
            source: file.source,
            summary: file.summary,
            progressInterval: .milliseconds(10),
            progress: { progress in confirmed.withLockedValue { $0 = progress.report.confirmed } }
        )
        try await eventually(
            "the job delivered rows before the other process signed",
            timeout: .seconds(10),
            every: .milliseconds(5)
        ) { confirmed.withLockedValue { $0 } >= 150 }

        // The other process: a token 21 minutes younger than the job's, accepted, with a row of its own.
        let otherIssuedAt = wall - 9 * 60
        let otherToken = try ProviderToken(signer: setup.signer, clock: { otherIssuedAt })
        let otherFile = try TokenFile(count: 1, seed: 92, in: folder)
        let other = try await HTTP2Job.run(
            configuration: setup.job(engine: engine, authentication: .token(otherToken), connections: 1),
            source: otherFile.source,
            summary: otherFile.summary
        )
        #expect(other.stopped == nil && other.report.confirmed == 1)
        // The job's clock reaches its token's renewal: the new token is 4 minutes younger than the other one's.
        jobClock.withLockedValue { $0 = wall - 5 * 60 }

        let stopped = try await stoppedJob
        #expect(stopped.stopped?.reason == "TooManyProviderTokenUpdates")
        #expect(stopped.report.rejectedTotal == 0, "\(stopped.report.rejected)")
        #expect(stopped.report.uncertain == 0)
        let delivered = Set(stopped.deliveries.map(\.token.hexString))
        let unsettled = stopped.unsettledRows.map(\.token)
        #expect(stopped.report.confirmed == delivered.count && delivered.count >= 150)
        #expect(delivered.count < file.tokens.count, "the refusal stopped the job before its end")
        // Every row either delivered or unsettled, never both, none twice.
        #expect(Set(unsettled).count == unsettled.count)
        #expect(delivered.isDisjoint(with: unsettled))
        #expect(delivered.union(unsettled) == Set(file.tokens.map(\.hexString)))
        #expect(stopped.unsettledRows.allSatisfy { $0.outcome == .unsent })
        #expect(stopped.notSent == unsettled.count)

        // Sent again with the token the other process shares: every token of the input, once.
        let path = try Self.unsettledFile(stopped, in: folder, name: "unsettled.csv")
        let again = TokenSource(files: [path])
        let summary = try again.validate()
        #expect(summary.validRows == unsettled.count)
        let shared = try ProviderToken(signer: setup.signer, clock: { otherIssuedAt })
        let resent = try await HTTP2Job.run(
            configuration: setup.job(engine: engine, authentication: .token(shared)),
            source: again,
            summary: summary
        )
        #expect(resent.stopped == nil && resent.report.confirmed == unsettled.count)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens + otherFile.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == file.tokens.count + 1)
        try await setup.simulator.shutdown()
    }
}
