import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@testable import SalvoObservability

/// One request to 127.0.0.1:`port` over a plain socket (HTTP/1.0, bounded by a 5 s receive timeout): the status
/// and the body, or nil when nothing answers.
func controlRequest(
    port: Int,
    _ method: String,
    _ path: String,
    authorization: String? = nil,
    body: String = ""
) -> (status: Int, body: String)? {
    var head = "\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: \(body.utf8.count)\r\n"
    if let authorization { head += "Authorization: \(authorization)\r\n" }
    guard let text = plainExchange(port: port, request: head + "\r\n" + body, recordingFailures: true) else {
        return nil
    }
    let parts = text.components(separatedBy: "\r\n\r\n")
    guard let status = parts.first?.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return nil }
    return (status, parts.dropFirst().joined(separator: "\r\n\r\n"))
}

/// The simulator's control endpoint asks every request for its bearer token: without it (or with another) the
/// answer is 401 and nothing happens; with it, the endpoint works.
@Suite(.tags(.network), .runs(.network)) struct ControlEndpointTests {
    /// A simulator whose ledger holds three notifications (a real send over TLS), with its control endpoint.
    static func withFilledLedger(
        _ body: (Simulator, SimulatorControlEndpoint, ControlToken) async throws -> Void
    )
        async throws
    {
        let folder = TestScratch.root.appendingPathComponent("salvo-control-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let paths = CertificateFactory.sharedFolder
        let simulator = try await Simulator.start(SimulatorConfiguration.testing(CertificateFactory.shared))
        let token = ControlToken.random()
        let control: SimulatorControlEndpoint
        do {
            control = try await SimulatorControlEndpoint.start(simulator: simulator, port: 0, token: token)
        } catch {
            try await simulator.shutdown()
            throw error
        }
        do {
            var generator = TokenGenerator(seed: 23)
            let tokens = (0..<3).map { _ in generator.next() }
            let input = folder + "/tokens.csv"
            try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
                .write(to: URL(fileURLWithPath: input))
            var job = BinaryJobConfiguration(
                host: "127.0.0.1",
                port: simulator.gatewayPort,
                credentials: paths.clientCredentials,
                template: try FrameTemplate(command: .framed, payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)),
                connections: 1
            )
            job.settle = .milliseconds(100)
            let result = try await BulkSend.prepare(SendRequest(files: [input], interface: .binary(job))).run()
            #expect(result.report.delivered == 3)
            #expect(simulator.ledger.snapshot().accepted == 3)
            try await body(simulator, control, token)
        } catch {
            await control.stop()
            try await simulator.shutdown()
            throw error
        }
        await control.stop()
        try await simulator.shutdown()
    }

    @Test func aRequestWithoutTheTokenIsRefusedAndTheLedgerIsUntouched() async throws {
        try await Self.withFilledLedger { simulator, control, _ in
            for (method, path) in [("POST", "/reset"), ("GET", "/ledger"), ("GET", "/plan"), ("POST", "/verdict")] {
                let answer = try #require(controlRequest(port: control.port, method, path, body: "token\n"))
                #expect(answer.status == 401, "\(method) \(path)")
                #expect(!answer.body.contains("accepted"), "nothing of the ledger is told")
            }
            #expect(simulator.ledger.snapshot().accepted == 3, "the ledger was not reset")
        }
    }

    @Test func aRequestWithAnotherTokenIsRefused() async throws {
        try await Self.withFilledLedger { simulator, control, token in
            let other = ControlToken.random().text
            for authorization in [
                "Bearer \(other)", "Bearer \(token.text.dropLast())", "Bearer \(token.text)x",
                "Bearer \(token.text.uppercased())", "Basic \(token.text)", token.text, "Bearer",
                "Bearer  \(token.text)",
            ] {
                let answer = try #require(
                    controlRequest(port: control.port, "POST", "/reset", authorization: authorization)
                )
                #expect(answer.status == 401, "\(authorization)")
            }
            #expect(simulator.ledger.snapshot().accepted == 3)
        }
    }

    @Test func theRightTokenWorks() async throws {
        try await Self.withFilledLedger { simulator, control, token in
            let ledger = try #require(
                controlRequest(port: control.port, "GET", "/ledger", authorization: "Bearer \(token.text)")
            )
            #expect(ledger.status == 200)
            let snapshot = try JSONDecoder().decode(LedgerSnapshot.self, from: Data(ledger.body.utf8))
            #expect(snapshot.accepted == 3)
            // The scheme's case does not matter (RFC 9110 §11.1).
            let reset = try #require(
                controlRequest(port: control.port, "POST", "/reset", authorization: "bearer \(token.text)")
            )
            #expect(reset.status == 204)
            #expect(simulator.ledger.snapshot().accepted == 0)
        }
    }

    @Test func tokensCompareWholeAndAreWrittenForTheOwnerOnly() throws {
        let token = ControlToken.random()
        #expect(token.text.count == 64 && token.text.allSatisfy(\.isHexDigit))
        #expect(token != ControlToken.random())
        #expect(!"\(token)".contains(token.text), "the description never shows the secret")
        #expect(token.admits(authorization: ["Bearer \(token.text)"]))
        #expect(!token.admits(authorization: []))
        #expect(!token.admits(authorization: ["Bearer \(token.text)", "Bearer \(token.text)"]))
        #expect(ControlToken.constantTimeEqual(Array(token.text.utf8)[...], Array(token.text.utf8)))
        #expect(!ControlToken.constantTimeEqual(Array(token.text.utf8).dropLast(), Array(token.text.utf8)))
        #expect(!ControlToken.constantTimeEqual([], Array(token.text.utf8)))

        let folder = TestScratch.root.appendingPathComponent("salvo-token-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/" + ControlToken.fileName
        // A file that was there, readable by everyone, is replaced, not reused with its mode.
        #expect(
            FileManager.default.createFile(
                atPath: path,
                contents: Data("old\n".utf8),
                attributes: [.posixPermissions: 0o644]
            )
        )
        let mask = umask(0)
        defer { umask(mask) }
        try token.write(to: path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try ControlToken.read(from: path) == token)

        try Data("short\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: ControlTokenError.self) { try ControlToken.read(from: path) }
        #expect(throws: ControlTokenError.self) { try ControlToken.read(from: folder + "/missing") }
        #expect(throws: ControlTokenError.self) { try ControlToken("has a space in it, sixteen+") }
    }
}
