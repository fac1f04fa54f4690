import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// One provider token per signing key through the real `salvo send --protocol h2 --auth-key …`: two processes
/// started together with one `--token-cache` send with one token, and a run that mints its own token within 20
/// minutes of another's earns `TooManyProviderTokenUpdates`, which stops it at once with status 3.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(1)))
struct ProviderTokenCacheSendTests {
    typealias Sends = ProviderTokenFileSendTests

    static func arguments(_ setup: Sends.Setup, cache: String, report: String, extra: [String] = []) -> [String] {
        [
            "send", "tokens.csv", "--protocol", "h2", "--payload", "payload.json",
            "--gateway", "127.0.0.1:\(setup.simulator.http2Port!)", "--ca", CertificateFactory.sharedFolder.ca,
            "--server-name", "localhost", "--topic", CertificateFactory.sharedTopic,
            "--auth-key", setup.signingKey.path, "--key-id", DevelopmentSigningKey.keyID,
            "--team-id", DevelopmentSigningKey.teamID, "--token-cache", cache, "--connections", "2",
            "--report", report,
        ] + extra
    }

    /// Starts `salvo` in `folder` with its standard output and error together.
    static func launch(_ arguments: [String], in folder: String) throws -> TestProcess {
        guard let salvo = InterruptionTests.executable else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "salvo next to the tests"])
        }
        return try TestProcess(salvo, arguments, in: URL(fileURLWithPath: folder))
    }

    static func report(_ setup: Sends.Setup, _ name: String) throws -> JobReport {
        try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: URL(fileURLWithPath: setup.folder + "/" + name))
        )
    }

    @Test func twoProcessesStartedTogetherSendWithOneToken() async throws {
        let count = 1000
        let setup = try await Sends.start(count: count)
        defer { setup.remove() }
        // Two workers of one campaign started at the same moment, one key, one cache (in a folder not made yet).
        let workers = try (0..<2).map { index in
            try Self.launch(
                Self.arguments(
                    setup,
                    cache: "cache/provider-tokens.json",
                    report: "report-\(index).json",
                    extra: ["--partition", "\(index)/2"]
                ),
                in: setup.folder
            )
        }
        var confirmed = 0
        for (index, worker) in workers.enumerated() {
            let run = try await Sends.finish(worker)
            #expect(run.status == 0, "\(run.standardError)")
            #expect(!run.standardError.contains("TooManyProviderTokenUpdates"))
            // A JWT starts with the base64 of `{"alg"`: never printed.
            #expect(!run.standardError.contains("eyJhbGciOi"), "a token in the output")
            let report = try Self.report(setup, "report-\(index).json")
            #expect(report.stopped == nil && report.resent == 0)
            confirmed += report.confirmed
        }
        #expect(confirmed == count)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(setup.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == count)
        #expect(setup.simulator.acceptedProviderTokens == 1, "one token signed, however close the starts")
        var info = stat()
        #expect(stat(setup.folder + "/cache/provider-tokens.json", &info) == 0 && info.st_mode & 0o777 == 0o600)
        try await setup.simulator.shutdown()
    }

    @Test func aSecondTokenWithin20MinutesStopsTheRunWithStatus3AndNoRetries() async throws {
        let count = 300
        let setup = try await Sends.start(count: count)
        defer { setup.remove() }
        let first = try await Sends.finish(
            try Self.launch(Self.arguments(setup, cache: "first-cache.json", report: "first.json"), in: setup.folder)
        )
        #expect(first.status == 0, "\(first.standardError)")
        #expect(try Self.report(setup, "first.json").confirmed == count)
        // A run with a cache of its own (another machine, a cache path not shared) mints another token, in a later
        // second so that it is another token to the service too.
        try await Task.sleep(for: .milliseconds(1100))
        let second = try await Sends.finish(
            try Self.launch(Self.arguments(setup, cache: "second-cache.json", report: "second.json"), in: setup.folder)
        )
        #expect(second.status == 3, "\(second.standardError)")
        #expect(second.standardError.contains("TooManyProviderTokenUpdates"), "\(second.standardError)")
        #expect(second.standardError.contains("--token-cache"), "the message says what to do")
        let report = try Self.report(setup, "second.json")
        #expect(report.stopped?.contains("TooManyProviderTokenUpdates") == true, "\(report.stopped ?? "")")
        #expect(report.confirmed == 0)
        #expect(report.resent == 0, "no row is sent again")
        #expect(report.rejectedTotal <= 2, "one request per connection before the credentials pass: \(report)")
        #expect(report.notSent >= count - 2)
        #expect(setup.simulator.ledger.snapshot().accepted == count, "the first run's rows, once")
        #expect(setup.simulator.acceptedProviderTokens == 1)
        try await setup.simulator.shutdown()
    }
}
