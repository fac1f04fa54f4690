import APNSWire
import Crypto
import Foundation
import SalvoBinary
import SalvoHTTP2
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import Testing

#if canImport(Glibc)
import Glibc
import SalvoTestTraits
#endif

/// One provider token for a fleet: the real `salvo token mint` writes it, `salvo send --provider-token-file` workers
/// send it over TLS to the simulator's HTTP/2 endpoint, which sees one token in all; a token APNs calls expired with
/// no newer one in the file stops the job with status 3.
@Suite(.tags(.process), .runs(.process), .serialized, .timeLimit(.minutes(1)))
struct ProviderTokenFileSendTests {
    struct Run {
        var status: Int32
        var standardError: String
    }

    struct Setup {
        let folder: String
        let simulator: Simulator
        let signingKey: DevelopmentSigningKey
        let tokens: [DeviceToken]

        func remove() { try? FileManager.default.removeItem(atPath: self.folder) }

        func sendArguments(tokenFile: String, report: String, extra: [String] = []) -> [String] {
            [
                "send", "tokens.csv", "--protocol", "h2", "--payload", "payload.json",
                "--gateway", "127.0.0.1:\(self.simulator.http2Port!)", "--ca", CertificateFactory.sharedFolder.ca,
                "--server-name", "localhost", "--topic", CertificateFactory.sharedTopic,
                "--provider-token-file", tokenFile, "--connections", "2", "--report", report, "--quiet",
            ] + extra
        }
    }

    static func start(count: Int, clock: any SimulatorClock = SystemClock()) async throws -> Setup {
        let folder = TestScratch.path + "/salvo-token-file-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let signingKey = try DevelopmentSigningKey.ensure(in: folder)
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.clock = clock
        var providerKey = signingKey.providerKey
        providerKey.topics = [CertificateFactory.sharedTopic]
        configuration.http2 = HTTP2EndpointConfiguration(providerKeys: [providerKey])
        let simulator = try await Simulator.start(configuration)
        var generator = TokenGenerator(seed: 16)
        let tokens = (0..<count).map { _ in generator.next() }
        try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
            .write(to: URL(fileURLWithPath: folder + "/tokens.csv"))
        try Data(#"{"aps":{"alert":"hi"}}"#.utf8).write(to: URL(fileURLWithPath: folder + "/payload.json"))
        return Setup(folder: folder, simulator: simulator, signingKey: signingKey, tokens: tokens)
    }

    /// Starts `salvo` with `arguments` in `folder`, its standard error kept.
    static func launch(_ arguments: [String], in folder: String) throws -> TestProcess {
        guard let salvo = InterruptionTests.executable else {
            throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: "salvo next to the tests"])
        }
        return try TestProcess(salvo, arguments, in: URL(fileURLWithPath: folder), output: .standardErrorOnly)
    }

    /// Waits (30 s at most) for a launched `salvo` and returns its status and standard error.
    static func finish(_ run: TestProcess) async throws -> Run {
        let status = try await run.wait(seconds: 30)
        return Run(status: status, standardError: run.standardError)
    }

    static func salvo(_ arguments: [String], in folder: String) async throws -> Run {
        try await Self.finish(try Self.launch(arguments, in: folder))
    }

    @Test func twoWorkersSendEveryRowWithTheOneMintedToken() async throws {
        let count = 1200
        let setup = try await Self.start(count: count)
        defer { setup.remove() }
        let mint = try await Self.salvo(
            [
                "token", "mint", "--auth-key", setup.signingKey.path, "--key-id", DevelopmentSigningKey.keyID,
                "--team-id", DevelopmentSigningKey.teamID, "--out", "token.json",
            ],
            in: setup.folder
        )
        #expect(mint.status == 0, "\(mint.standardError)")
        let written = try ProviderTokenFileContents(
            parsing: Array(try Data(contentsOf: URL(fileURLWithPath: setup.folder + "/token.json"))),
            path: "token.json"
        )
        #expect(!mint.standardError.contains(written.token), "the token is never printed")
        var info = stat()
        #expect(stat(setup.folder + "/token.json", &info) == 0 && info.st_mode & 0o777 == 0o600)

        // Two workers of one campaign, as two pods of an Indexed Job, both reading the one file.
        let workers = try (0..<2).map { index in
            try Self.launch(
                setup.sendArguments(
                    tokenFile: "token.json",
                    report: "report-\(index).json",
                    extra: ["--partition", "\(index)/2"]
                ),
                in: setup.folder
            )
        }
        var confirmed = 0
        for (index, worker) in workers.enumerated() {
            let run = try await Self.finish(worker)
            #expect(run.status == 0, "\(run.standardError)")
            let report = try JSONDecoder().decode(
                JobReport.self,
                from: Data(contentsOf: URL(fileURLWithPath: setup.folder + "/report-\(index).json"))
            )
            confirmed += report.confirmed
        }
        #expect(confirmed == count)
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(setup.tokens))
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == count)
        #expect(setup.simulator.acceptedProviderTokens == 1)
        try await setup.simulator.shutdown()
    }

    @Test func aMissingOrStaleFileIsRefusedBeforeConnecting() async throws {
        let setup = try await Self.start(count: 10)
        defer { setup.remove() }
        let missing = try await Self.salvo(
            setup.sendArguments(tokenFile: "absent.json", report: "report.json"),
            in: setup.folder
        )
        #expect(missing.status == 3)
        #expect(missing.standardError.contains("absent.json"), "\(missing.standardError)")

        let key = try P256.Signing.PrivateKey(
            pemRepresentation: String(contentsOfFile: setup.signingKey.path, encoding: .utf8)
        )
        let signer = try JWTSigner(
            privateKey: key,
            keyID: DevelopmentSigningKey.keyID,
            teamID: DevelopmentSigningKey.teamID
        )
        let now = Int64(Date().timeIntervalSince1970)
        try ProviderTokenFile.write(
            ProviderTokenFileContents(signer: signer, issuedAt: now - 61 * 60),
            to: setup.folder + "/stale.json"
        )
        let stale = try await Self.salvo(
            setup.sendArguments(tokenFile: "stale.json", report: "report.json"),
            in: setup.folder
        )
        #expect(stale.status == 3)
        #expect(stale.standardError.contains("stale.json") && stale.standardError.contains("60 minutes"))
        #expect(setup.simulator.ledger.snapshot().accepted == 0)

        // The key is never written over by its own token.
        let keyText = try String(contentsOfFile: setup.signingKey.path, encoding: .utf8)
        let overKey = try await Self.salvo(
            [
                "token", "mint", "--auth-key", setup.signingKey.path, "--key-id", DevelopmentSigningKey.keyID,
                "--team-id", DevelopmentSigningKey.teamID, "--out", setup.signingKey.path,
            ],
            in: setup.folder
        )
        #expect(overKey.status == 3)
        #expect(try String(contentsOfFile: setup.signingKey.path, encoding: .utf8) == keyText)
        try await setup.simulator.shutdown()
    }

    @Test func expiryWithNoNewerTokenInTheFileStopsTheJob() async throws {
        // The gateway's clock is 15 minutes ahead: a token 50 minutes old here is 65 minutes old there.
        let now = UInt32(Date().timeIntervalSince1970)
        let setup = try await Self.start(count: 400, clock: ManualClock(now: now + 15 * 60))
        defer { setup.remove() }
        let key = try P256.Signing.PrivateKey(
            pemRepresentation: String(contentsOfFile: setup.signingKey.path, encoding: .utf8)
        )
        let signer = try JWTSigner(
            privateKey: key,
            keyID: DevelopmentSigningKey.keyID,
            teamID: DevelopmentSigningKey.teamID
        )
        try ProviderTokenFile.write(
            ProviderTokenFileContents(signer: signer, issuedAt: Int64(now) - 50 * 60),
            to: setup.folder + "/token.json"
        )
        let run = try await Self.salvo(
            setup.sendArguments(tokenFile: "token.json", report: "report.json"),
            in: setup.folder
        )
        #expect(run.status == 3, "\(run.standardError)")
        let report = try JSONDecoder().decode(
            JobReport.self,
            from: Data(contentsOf: URL(fileURLWithPath: setup.folder + "/report.json"))
        )
        #expect(report.stopped?.contains("ExpiredProviderToken") == true, "\(report.stopped ?? "")")
        #expect(report.confirmed == 0)
        // Stopped at the first answers, not after one refused request per row.
        #expect(report.rejectedTotal < 10, "\(report)")
        try await setup.simulator.shutdown()
    }
}
