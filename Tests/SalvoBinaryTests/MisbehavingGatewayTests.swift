import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Real TLS against gateways that misbehave: every wait ends after a stated time.
@Suite(.tags(.network), .runs(.network), .takesATurn) struct MisbehavingGatewayTests {
    static let paths = CertificateFactory.sharedFolder

    static func tokenFile(_ count: Int) throws -> String {
        let file = TestScratch.root.appendingPathComponent("salvo-mis-\(UUID().uuidString).csv")
        var generator = TokenGenerator(seed: 3)
        let lines = (0..<count).map { _ in generator.next().hexString }
        try Data(("token\n" + lines.joined(separator: "\n") + "\n").utf8).write(to: file)
        return file.path
    }

    static func configuration(port: Int, giveUpAfter: Duration = .seconds(2)) throws -> BinaryJobConfiguration {
        BinaryJobConfiguration(
            host: "127.0.0.1",
            port: port,
            credentials: GatewayCredentials(
                identity: .pem(certificateChainFile: paths.client, privateKeyFile: paths.clientKey),
                trustedCAFile: paths.ca
            ),
            template: try FrameTemplate(command: .framed, payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)),
            connections: 1,
            flush: FlushPolicy(bytes: 16 * 1024, delay: .microseconds(200)),
            reconnect: ReconnectPolicy(
                initialDelay: .milliseconds(5),
                maximumDelay: .milliseconds(50),
                minimumInterval: .zero,
                maximumAttempts: 3,
                giveUpAfter: giveUpAfter
            ),
            settle: .milliseconds(200),
            windowRows: 10_000,
            chunkRows: 256,
            answerTimeout: .seconds(1)
        )
    }

    static func run(_ configuration: BinaryJobConfiguration, file: String) async throws -> JobResult {
        let source = TokenSource(files: [file])
        let summary = try source.validate()
        let result = try await BinaryJob.run(
            configuration: configuration,
            source: source,
            summary: summary,
            inputRows: summary.validRows
        )
        // A job that stops returns its result; the cause is what these tests check.
        if let error = result.error { throw error }
        return result
    }

    @Test func aGatewayThatReadsAndNeverAnswersIsLeftAfterTheAnswerTimeout() async throws {
        let gateway = try MisbehavingGateway(.silent, paths: Self.paths)
        defer { gateway.stop() }
        let file = try Self.tokenFile(200)
        let clock = ContinuousClock()
        let started = clock.now
        let result = try await Self.run(try Self.configuration(port: gateway.port), file: file)
        let elapsed = clock.now - started
        // The answer timeout is 1 s here; the job is bounded (it once waited forever). Under a loaded test run the
        // job itself takes seconds.
        #expect(elapsed < .seconds(30), "the barrier waited \(elapsed)")
        #expect(result.report.unansweredBarriers == 1)
        #expect(result.report.presumed == 200, "every row was read by the gateway, long enough ago")
        #expect(result.report.confirmed == 0)
        #expect(gateway.plaintextBytesRead > 0)
    }

    @Test func aGatewayThatAnswersJunkEndsTheJobAtOnceWithTheCause() async throws {
        let gateway = try MisbehavingGateway(.junk(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)), paths: Self.paths)
        defer { gateway.stop() }
        let file = try Self.tokenFile(50)
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: JobError.self) {
            _ = try await Self.run(try Self.configuration(port: gateway.port, giveUpAfter: .seconds(60)), file: file)
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("not an APNs error response (first bytes 48545450") == true)
        // At once, against retrying until the 60 s give-up: a loaded test run adds seconds to the handshake.
        #expect(clock.now - started < .seconds(30))
        #expect(gateway.acceptedConnections == 1, "junk is not retried")
    }

    @Test func aNameThatDoesNotResolveStopsAtOnce() async throws {
        let file = try Self.tokenFile(5)
        var configuration = try Self.configuration(port: 2195, giveUpAfter: .seconds(60))
        configuration.host = "no-such-host.invalid"
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: JobError.self) {
            _ = try await Self.run(configuration, file: file)
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("cannot resolve host no-such-host.invalid") == true)
        // At once, against retrying until the 60 s give-up.
        #expect(clock.now - started < .seconds(30))
    }

    @Test func aPlainTextServiceOnThePortStopsAtOnce() async throws {
        // A TCP listener that answers in plain text: the TLS handshake meets bytes that are not TLS.
        let listener = try PlainTextListener(answer: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        defer { listener.stop() }
        let file = try Self.tokenFile(5)
        let clock = ContinuousClock()
        let started = clock.now
        let error = await #expect(throws: JobError.self) {
            _ = try await Self.run(try Self.configuration(port: listener.port, giveUpAfter: .seconds(60)), file: file)
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("is not a TLS handshake") == true, "\(String(describing: error))")
        // At once, against retrying until the 60 s give-up: a loaded test run adds seconds to the handshake.
        #expect(clock.now - started < .seconds(30))
    }
}
