import Foundation
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// The real `salvo check` executable: exit 0 when a send would start, 3 when it would not, and `--json` for scripts.
@Suite(.tags(.process), .runs(.process)) struct CheckCommandTests {
    private struct Output: Decodable {
        struct Check: Decodable {
            var name: String
            var status: String
            var detail: String
        }
        var wouldStart: Bool
        var checks: [Check]
    }

    /// Runs `salvo` in a fresh folder holding `tokens.csv` and `payload.json`; its status and standard output.
    private func salvo(_ arguments: [String]) async throws -> (status: Int32, output: String)? {
        try await runSalvo(
            arguments,
            files: [
                "tokens.csv": "token\n" + String(repeating: "ab", count: 32) + "\nbad\n",
                "payload.json": #"{"aps":{"alert":"hi"}}"#,
            ],
            folderPrefix: "salvo-check",
            readStandardError: false
        ).map { ($0.status, $0.text) }
    }

    private func arguments(port: Int, _ extra: [String] = []) -> [String] {
        let paths = CertificateFactory.sharedFolder
        return [
            "check", "tokens.csv", "--payload", "payload.json", "--gateway", "127.0.0.1:\(port)",
            "--cert", paths.client, "--key", paths.clientKey, "--ca", paths.ca, "--topic",
            CertificateFactory.sharedTopic,
        ] + extra
    }

    @Test func goodCredentialsAgainstTheSimulatorExit0WithATable() async throws {
        let simulator = try await Simulator.start(.testing(CertificateFactory.shared))
        let result = try await self.salvo(self.arguments(port: simulator.gatewayPort))
        try await simulator.shutdown()
        guard let (status, output) = result else { return }
        #expect(status == 0, "\(output)")
        #expect(output.contains("ok       handshake binary"), "\(output)")
        #expect(output.contains("WARNING  bad rows"), "\(output)")
        #expect(output.contains("tokens.csv:3"), "the bad row's line: \(output)")
        #expect(output.hasSuffix("a send would start\n"), "\(output)")
        #expect(simulator.ledger.snapshot().accepted == 0, "nothing was sent")
    }

    @Test func aClosedPortExits3AndSaysWhyInJSON() async throws {
        // Port 9 (discard) on the loopback: nothing listens.
        guard let (status, output) = try await self.salvo(self.arguments(port: 9, ["--json", "--timeout", "5"])) else {
            return
        }
        #expect(status == 3, "\(output)")
        let decoded = try JSONDecoder().decode(Output.self, from: Data(output.utf8))
        #expect(!decoded.wouldStart)
        let handshake = try #require(decoded.checks.first { $0.name == "handshake binary" })
        #expect(handshake.status == "fail")
        #expect(decoded.checks.filter { $0.status == "fail" }.count == 1, "only the handshake: \(output)")
    }

    @Test func anExpiredCertificateExits3WithoutAHandshake() async throws {
        let paths = CertificateFactory.sharedFolder
        let arguments = [
            "check", "--gateway", "127.0.0.1:9", "--cert", paths.expiredClient, "--key", paths.expiredClientKey,
            "--no-handshake",
        ]
        guard let (status, output) = try await self.salvo(arguments) else { return }
        #expect(status == 3, "\(output)")
        #expect(output.contains("FAIL     expiry"), "\(output)")
        #expect(!output.contains("handshake"), "\(output)")
    }
}
