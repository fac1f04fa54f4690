import APNSWire
import Foundation
import SalvoBinary
import SalvoRows
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Synchronization
import Testing

/// Real TLS against gateways that misbehave: every wait ends after a stated time. The jobs run on a clock of the
/// test's (`ManualJobClock`): a timeout is reached by moving the clock, not by waiting for it, and a job that must stop
/// at once is shown to stop with its clock standing still (no retry, backoff or give-up on the way).
@Suite(.tags(.network), .runs(.network)) struct MisbehavingGatewayTests {
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

    static func run(
        _ configuration: BinaryJobConfiguration,
        file: String,
        stop: JobStop? = nil
    ) async throws -> JobResult {
        let source = TokenSource(files: [file])
        let summary = try source.validate()
        let result = try await BinaryJob.run(
            configuration: configuration,
            source: source,
            summary: summary,
            inputRows: summary.validRows,
            stop: stop
        )
        // A job that stops returns its result; the cause is what these tests check.
        if let error = result.error { throw error }
        return result
    }

    /// A job running in a task of its own, on a clock the test moves.
    struct Running: Sendable {
        let clock: ManualJobClock
        let task: Task<JobResult, any Error>
        private let done: Flag
        private let stop: JobStop

        init(_ configuration: BinaryJobConfiguration, file: String) {
            let clock = ManualJobClock()
            var configured = configuration
            configured.clock = clock
            let job = configured
            let done = Flag()
            let stop = JobStop(grace: .zero)
            self.clock = clock
            self.done = done
            self.stop = stop
            self.task = Task {
                defer { done.set() }
                return try await MisbehavingGatewayTests.run(job, file: file, stop: stop)
            }
        }

        var ended: Bool { self.done.isSet }

        /// The job's result, or what stopped it; a job that has not ended by then is stopped first (a second request
        /// stops it at once), so that a failed test does not leave it running.
        func result() async throws -> JobResult {
            if !self.ended {
                self.stop.request(reason: "the test gave up on it")
                self.stop.request(reason: "the test gave up on it")
            }
            return try await self.task.value
        }
    }

    final class Flag: Sendable {
        private let value = Mutex(false)
        var isSet: Bool { self.value.withLock { $0 } }
        func set() { self.value.withLock { $0 = true } }
    }

    /// Runs a job whose clock never moves: a job that ends this way needed no timer, backoff or give-up to get there
    /// (one that waited for any would never end, and is stopped once the bound has passed).
    static func runWithTheClockStill(_ configuration: BinaryJobConfiguration, file: String) async throws -> JobResult {
        let job = Running(configuration, file: file)
        try await eventually("the job ended with its clock standing still", timeout: .seconds(30)) { job.ended }
        #expect(job.clock.elapsed == .zero)
        return try await job.result()
    }

    @Test func aGatewayThatReadsAndNeverAnswersIsLeftAfterTheAnswerTimeout() async throws {
        let gateway = try MisbehavingGateway(.silent, paths: Self.paths)
        defer { gateway.stop() }
        let file = try Self.tokenFile(200)
        let configuration = try Self.configuration(port: gateway.port)
        let rowBytes = 200 * configuration.template.frameByteCount
        let job = Running(configuration, file: file)
        // Every row and the barrier go out with the clock still: the input ends, so nothing waits for a flush delay.
        // The barrier read too, its answer timeout runs from 0 on the job's clock, however late it went out in real
        // time.
        let barrierBytes = try #require(BarrierFrame.byteCount(for: .framed))
        try await eventually("the gateway read every row and the barrier", timeout: .seconds(30)) {
            gateway.plaintextBytesRead >= rowBytes + barrierBytes
        }
        // The answer timeout is 1 s here: short of it the job still waits for the barrier's answer.
        job.clock.advance(by: .milliseconds(900))
        #expect(!job.ended, "left before the answer timeout")
        // Past it the connection is left (the job is bounded: it once waited forever). The clock moves 5 ms a look,
        // and the looks are 50 ms apart: a job on a loaded machine keeps up with it (a clock that ran ahead of the
        // job timed out a second barrier before the job could end).
        try await eventually(
            "the job ended once its clock passed the answer timeout",
            timeout: .seconds(60),
            every: .milliseconds(50)
        ) {
            job.clock.advance(by: .milliseconds(5))
            return job.ended
        }
        let result = try await job.result()
        #expect(job.clock.elapsed >= .seconds(1), "the answer timeout ran on the job's clock")
        #expect(result.report.unansweredBarriers == 1)
        #expect(result.report.presumed == 200, "every row was read by the gateway, long enough ago")
        #expect(result.report.confirmed == 0)
        #expect(gateway.plaintextBytesRead > 0)
    }

    /// A port that refuses every connect is retried (with backoff) until the give-up deadline has passed on the job's
    /// clock with no row settled: 60 s of it here, in a few seconds of real time.
    @Test func aPortThatRefusesEveryConnectIsGivenUpAtTheDeadline() async throws {
        let port = try ClosedPort()
        defer { port.close() }
        let file = try Self.tokenFile(5)
        let job = Running(try Self.configuration(port: port.port, giveUpAfter: .seconds(60)), file: file)
        try await eventually("the job gave up", timeout: .seconds(60)) {
            job.clock.advance(by: .seconds(1))
            return job.ended
        }
        let error = await #expect(throws: JobError.self) { _ = try await job.result() }
        #expect(error?.code == .unreachable)
        #expect(
            error?.message.contains("failed connects in a row and no row settled for") == true,
            "\(String(describing: error))"
        )
        #expect(job.clock.elapsed >= .seconds(60), "not before the deadline")
    }

    @Test func aGatewayThatAnswersJunkEndsTheJobAtOnceWithTheCause() async throws {
        let gateway = try MisbehavingGateway(.junk(Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)), paths: Self.paths)
        defer { gateway.stop() }
        let file = try Self.tokenFile(50)
        let configuration = try Self.configuration(port: gateway.port, giveUpAfter: .seconds(60))
        let error = await #expect(throws: JobError.self) {
            _ = try await Self.runWithTheClockStill(configuration, file: file)
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("not an APNs error response (first bytes 48545450") == true)
        #expect(gateway.acceptedConnections == 1, "junk is not retried")
    }

    @Test func aNameThatDoesNotResolveStopsAtOnce() async throws {
        let file = try Self.tokenFile(5)
        var configuration = try Self.configuration(port: 2195, giveUpAfter: .seconds(60))
        configuration.host = "no-such-host.invalid"
        let error = await #expect(throws: JobError.self) {
            _ = try await Self.runWithTheClockStill(configuration, file: file)
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("cannot resolve host no-such-host.invalid") == true)
    }

    @Test func aPlainTextServiceOnThePortStopsAtOnce() async throws {
        // A TCP listener that answers in plain text: the TLS handshake meets bytes that are not TLS.
        let listener = try PlainTextListener(answer: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        defer { listener.stop() }
        let file = try Self.tokenFile(5)
        let configuration = try Self.configuration(port: listener.port, giveUpAfter: .seconds(60))
        let error = await #expect(throws: JobError.self) {
            _ = try await Self.runWithTheClockStill(configuration, file: file)
        }
        #expect(error?.code == .unreachable)
        #expect(error?.message.contains("is not a TLS handshake") == true, "\(String(describing: error))")
    }
}
