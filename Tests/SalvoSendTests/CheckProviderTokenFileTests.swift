import Foundation
import SalvoHTTP2
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The real `salvo check --protocol h2 --provider-token-file`: the token file and the push type's rules are checked,
/// the handshake made, nothing sent.
@Suite(.tags(.process), .runs(.process)) struct CheckProviderTokenFileTests {
    @Test func aMintedTokenFilePassesAndAPushTypeWithoutItsTopicSuffixFails() async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-cptf-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let key = try DevelopmentSigningKey.ensure(in: folder.path)
        let signer = try JWTSigner(
            pem: try String(contentsOfFile: key.path, encoding: .utf8),
            keyID: DevelopmentSigningKey.keyID,
            teamID: DevelopmentSigningKey.teamID
        )
        let tokenFile = folder.appendingPathComponent("provider-token.json").path
        try ProviderTokenFile.write(
            ProviderTokenFileContents(signer: signer, issuedAt: Int64(Date().timeIntervalSince1970)),
            to: tokenFile
        )
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        func check(_ pushType: String) async throws -> (status: Int32, text: String)? {
            try await runSalvo(
                [
                    "check", "--protocol", "h2", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)",
                    "--server-name", "localhost", "--ca", CertificateFactory.sharedFolder.ca,
                    "--provider-token-file", tokenFile, "--topic", CertificateFactory.sharedTopic,
                    "--push-type", pushType,
                ],
                files: [:],
                folderPrefix: "salvo-cptf",
                readStandardError: false
            ).map { ($0.status, $0.text) }
        }
        let alert: (status: Int32, text: String)?
        let voip: (status: Int32, text: String)?
        do {
            alert = try await check("alert")
            voip = try await check("voip")
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()
        guard let alert, let voip else { return }
        #expect(alert.status == 0, "\(alert.text)")
        #expect(alert.text.contains("ok       provider token"), "\(alert.text)")
        #expect(alert.text.contains("ok       push type"), "\(alert.text)")
        #expect(alert.text.contains("ok       handshake h2"), "\(alert.text)")
        #expect(voip.status == 3, "\(voip.text)")
        #expect(voip.text.contains("FAIL     push type       --push-type voip needs a --topic ending in .voip"))
        #expect(simulator.ledger.snapshot().accepted == 0, "nothing was sent")
    }
}
