import Foundation
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Output paths are checked before the first connection: the real `salvo` against a live simulator exits 3 and the
/// simulator sees no connection at all, so a user who fixes the path and runs again sends nothing twice.
@Suite(.tags(.process), .runs(.process)) struct OutputPathTests {
    @Test(arguments: [
        (["--report", "missing-folder/report.json"], "cannot create the file"),
        (["--rejects", "tokens.csv"], "is an input file"),
        (["--report", "out.json", "--rejects", "out.json"], "both name"),
    ])
    func aBadOutputIsRefusedBeforeAnyConnection(outputs: [String], message: String) async throws {
        let paths = CertificateFactory.sharedFolder
        var configuration = SimulatorConfiguration.testing(CertificateFactory.shared)
        configuration.http2 = HTTP2EndpointConfiguration()
        let simulator = try await Simulator.start(configuration)
        let tokens = "token\n" + String(repeating: "ab", count: 32) + "\n"
        for arguments in [
            ["--gateway", "127.0.0.1:\(simulator.gatewayPort)"],
            [
                "--protocol", "h2", "--gateway", "127.0.0.1:\(simulator.http2Port ?? 0)", "--server-name", "localhost",
                "--topic", CertificateFactory.sharedTopic,
            ],
        ] {
            let command = [
                "send", "tokens.csv", "--payload", "payload.json", "--cert", paths.client, "--key", paths.clientKey,
                "--ca", paths.ca, "--quiet",
            ]
            let result = try await runSalvo(
                command + arguments + outputs,
                files: ["tokens.csv": tokens, "payload.json": #"{"aps":{"alert":"hi"}}"#],
                folderPrefix: "salvo-out",
                readStandardError: true
            )
            guard let (status, error) = result else { break }
            #expect(status == 3, "\(error)")
            #expect(error.contains(message), "\(error)")
        }
        let ledger = simulator.ledger.snapshot()
        try await simulator.shutdown()
        #expect(ledger.connectionsAccepted == 0, "no connection before the outputs were checked")
        #expect(ledger.accepted == 0)
    }
}
