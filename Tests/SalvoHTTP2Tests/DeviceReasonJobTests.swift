import APNSWire
import Crypto
import Foundation
import NIOSSL
import SalvoRows
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoHTTP2
@testable import SalvoSimulator

/// The HTTP/2 job against the simulator over TLS, for the device API's reasons added since 2020: an expired token
/// is a token gone (rejected, listed as unregistered, never retried), a key of the other environment stops the job
/// with every row unsent, as any refusal of the job's credentials does.
@Suite(.tags(.network), .runs(.network), .serialized, .timeLimit(.minutes(1)))
struct DeviceReasonJobTests {
    static let keyID = "ENVKEY1234"
    static let teamID = "DEF123GHIJ"

    struct Setup {
        let simulator: Simulator
        let certificates: CertificateFactory
        let signer: JWTSigner

        func job(connections: Int = 2) throws -> HTTP2JobConfiguration {
            var configuration = jobConfigurationForTests(
                port: self.simulator.http2Port!,
                authentication: .token(try ProviderToken(signer: self.signer)),
                connections: connections,
                trustRoots: .certificates([
                    try NIOSSLCertificate(bytes: Array(self.certificates.ca.certificatePEM.utf8), format: .pem)
                ])
            )
            configuration.client.serverName = "localhost"
            return configuration
        }
    }

    static func start(plan: FaultPlan, keyEnvironment: FaultPlan.Environment = .any) async throws -> Setup {
        let certificates = try CertificateFactory()
        let key = P256.Signing.PrivateKey()
        var configuration = SimulatorConfiguration(tls: .init(certificates))
        configuration.plan = plan
        configuration.maximumTokens = 10_000
        configuration.http2 = HTTP2EndpointConfiguration(
            providerKeys: [
                .init(
                    keyID: keyID,
                    teamID: teamID,
                    publicKey: Array(key.publicKey.rawRepresentation),
                    topics: [testTopic],
                    environment: keyEnvironment
                )
            ]
        )
        let simulator = try await Simulator.start(configuration)
        return Setup(
            simulator: simulator,
            certificates: certificates,
            signer: try JWTSigner(privateKey: key, keyID: keyID, teamID: teamID)
        )
    }

    @Test func expiredTokensAreGoneNotRetried() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 200, seed: 61, in: folder)
        let expired = Set(file.tokens.prefix(200).enumerated().filter { $0.offset % 10 == 3 }.map(\.element))
        var plan = FaultPlan()
        plan.expiredTokens = expired.map(\.hexString)
        let setup = try await Self.start(plan: plan)
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(configuration: setup.job(), source: file.source, summary: file.summary)
        } catch {
            try await setup.simulator.shutdown()
            throw error
        }
        let verdict = setup.simulator.verdict(expected: ExpectedTokens(file.tokens))
        try await setup.simulator.shutdown()
        #expect(result.stopped == nil && result.notSent == 0)
        #expect(result.report.rejected == ["ExpiredToken": expired.count])
        #expect(result.rejectedRows.allSatisfy { $0.status == 410 && $0.reason == "ExpiredToken" })
        #expect(Set(result.unregistered.map(\.token)) == Set(expired.map(\.hexString)))
        #expect(result.unregistered.allSatisfy { $0.reason == "ExpiredToken" && ($0.timestamp ?? 0) > 0 })
        #expect(result.report.resent == 0, "a token gone is never sent again")
        #expect(result.report.confirmed == 200 - expired.count)
        #expect(verdict.passed, "\(verdict.summary)")
        #expect(verdict.deliveredOnce == 200 - expired.count)
        #expect(verdict.uninstalledNeverDelivered == expired.count)
    }

    @Test func aKeyOfTheOtherEnvironmentStopsTheJobWithEveryRowUnsent() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try TokenFile(count: 50, seed: 62, in: folder)
        var plan = FaultPlan()
        plan.environment = .production
        let setup = try await Self.start(plan: plan, keyEnvironment: .sandbox)
        let result: HTTP2JobResult
        do {
            result = try await HTTP2Job.run(configuration: setup.job(), source: file.source, summary: file.summary)
        } catch {
            try await setup.simulator.shutdown()
            throw error
        }
        let accepted = setup.simulator.ledger.snapshot().accepted
        try await setup.simulator.shutdown()
        #expect(result.stopped?.reason == "BadEnvironmentKeyIdInToken")
        #expect(result.stopped?.message.contains("scoped to the other environment") == true, "\(result.stopped!)")
        #expect(result.report.confirmed == 0 && accepted == 0)
        #expect(result.rejectedRows.isEmpty, "the device never saw them: nothing is rejected")
        #expect(result.notSent == 50, "every row is left for a rerun with the right key")
        #expect(result.report.resent == 0)
    }
}
