import APNSWire
import Foundation
import NIOConcurrencyHelpers
import NIOSSL
import Prometheus
import SalvoBinary
import SalvoHTTP2
import SalvoObservability
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

@Suite(.tags(.network), .runs(.network)) struct MetricsEndpointTests {
    /// A real send over TLS to the simulator, its metrics served by the endpoint: scraped while it runs, the
    /// counters are there; after it, they equal the report.
    @Test func metricsDuringASendAndEqualToItsReportAfter() async throws {
        var generator = TokenGenerator(seed: 5)
        let tokens = (0..<30_000).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.invalidTokens = [tokens[10], tokens[20_000]].map(\.hexString)
        // Far enough away that the send outlasts a few progress snapshots.
        plan.latencyMilliseconds = 40
        let setup = try await BinarySimulatorSetup.start("salvo-metrics", plan: plan)
        let simulator = setup.simulator
        let input = try setup.tokenFile(tokens)
        let job = try setup.job(connections: 2)

        let registry = PrometheusCollectorRegistry()
        let endpoint = try await MetricsEndpoint.start(registry: registry, port: 0)
        let metrics = JobMetrics(
            factory: PrometheusMetricsFactory(registry: registry),
            dimensions: [("protocol", "binary")]
        )
        let scraped = NIOLockedValueBox<String?>(nil)
        let port = endpoint.port
        let send = try await BulkSend.prepare(SendRequest(files: [input], interface: .binary(job)))
        let result: SendResult
        do {
            result = try await send.run(
                progress: { _ in
                    // Scrape once, from the job's own progress tick: the send is certainly running.
                    let first = scraped.withLockedValue { $0 == nil }
                    if first, let text = httpGet(port: port, path: "/metrics") {
                        scraped.withLockedValue { $0 = text }
                    }
                },
                metrics: metrics
            )
        } catch {
            await endpoint.stop()
            try await simulator.shutdown()
            throw error
        }
        let after = httpGet(port: port, path: "/metrics") ?? ""
        let missing = httpGet(port: port, path: "/other") ?? ""
        await endpoint.stop()
        try await simulator.shutdown()

        let during = try #require(scraped.withLockedValue { $0 })
        #expect(during.hasPrefix("HTTP/1.0 200") || during.hasPrefix("HTTP/1.1 200"))
        // Rows are validated as they are sent: while the send runs the gauge estimates them from what was read.
        let estimate = try #require(sample(during, "salvo_rows_valid", #"protocol="binary""#))
        #expect(abs(estimate - Double(tokens.count)) <= Double(tokens.count) / 10, "\(estimate)")
        #expect(during.contains("salvo_rows_confirmed_total"))
        #expect(missing.contains(" 404 "))

        let report = result.report
        let labels = #"protocol="binary""#
        #expect(sample(after, "salvo_rows_valid", labels) == Double(tokens.count))
        #expect(sample(after, "salvo_rows_confirmed_total", labels) == Double(report.confirmed))
        #expect(sample(after, "salvo_rows_delivered_total", labels) == Double(report.delivered))
        #expect(sample(after, "salvo_rows_presumed", labels) == Double(report.presumed))
        #expect(sample(after, "salvo_rows_resent_total", labels) == Double(report.resent))
        #expect(sample(after, "salvo_reconnects_total", labels) == Double(report.reconnects))
        #expect(sample(after, "salvo_notifications_written_total", labels) == Double(report.written))
        #expect(sample(after, "salvo_bytes_written_total", labels) == Double(report.bytesWritten))
        #expect(
            sample(after, "salvo_rows_rejected_total", #"protocol="binary",reason="InvalidToken""#)
                == Double(report.rejected["InvalidToken"] ?? -1)
        )
        #expect(report.rejected == ["InvalidToken": 2])
        #expect(report.written >= tokens.count)
    }

    @Test func aJSONLogLineEscapesItsFields() {
        let line = JSONLogHandler.line(
            level: .info,
            label: "salvo.shard",
            message: "reconnect after 50 ms\n\"quoted\"\u{1B}",
            metadata: ["shard": "1", "status": "8"]
        )
        #expect(line.hasSuffix("}\n"))
        #expect(!line.dropLast().contains("\n"), "one line")
        let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String]
        #expect(object?["message"] == "reconnect after 50 ms\n\"quoted\"\u{1B}")
        #expect(object?["level"] == "info")
        #expect(object?["label"] == "salvo.shard")
        #expect(object?["shard"] == "1" && object?["status"] == "8")
        #expect(object?["time"]?.hasSuffix("Z") == true)
    }

    @Test func theProcessIsSampled() {
        let sample = ProcessSample.now()
        #expect(sample.residentBytes > 1 << 20)
        #expect(sample.peakResidentBytes >= sample.residentBytes)
        #expect(sample.threads >= 1)
        #expect(sample.openDescriptors >= 3)
    }
}

@Suite(.tags(.network), .runs(.network)) struct HTTP2MetricsTests {
    /// Over HTTP/2 the answer latency is a timer: one sample per batch of answers, never one per request.
    @Test func answerLatencyIsSampledPerBatch() async throws {
        let folder = TestScratch.root.appendingPathComponent("salvo-h2m-\(UUID().uuidString)")
            .path
        let certificates = try CertificateFactory()
        let paths = try certificates.write(to: folder, topic: "com.example.salvo")
        let key = try DevelopmentSigningKey.ensure(in: paths.folder)
        var configuration = SimulatorConfiguration.testing(certificates)
        configuration.http2 = HTTP2EndpointConfiguration(providerKeys: [key.providerKey])
        let simulator = try await Simulator.start(configuration)
        var generator = TokenGenerator(seed: 12)
        let tokens = (0..<2000).map { _ in generator.next() }
        let input = folder + "/tokens.csv"
        try Data(("token\n" + tokens.map(\.hexString).joined(separator: "\n") + "\n").utf8)
            .write(to: URL(fileURLWithPath: input))
        let signer = try JWTSigner(
            p8File: key.path,
            keyID: DevelopmentSigningKey.keyID,
            teamID: DevelopmentSigningKey.teamID
        )
        var client = HTTP2ClientConfiguration(
            host: "127.0.0.1",
            port: try #require(simulator.http2Port),
            authentication: .token(try ProviderToken(signer: signer))
        )
        client.serverName = "localhost"
        client.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(paths.ca))
        let job = HTTP2JobConfiguration(
            client: client,
            headers: try APNSRequestHeaders(pushType: .alert, topic: "com.example.salvo"),
            payload: try Payload(json: #"{"aps":{"alert":"hi"}}"#)
        )
        let registry = PrometheusCollectorRegistry()
        let metrics = JobMetrics(
            factory: PrometheusMetricsFactory(registry: registry),
            dimensions: [("protocol", "h2")]
        )
        let result: SendResult
        do {
            result = try await BulkSend.prepare(SendRequest(files: [input], interface: .http2(job))).run(
                metrics: metrics
            )
        } catch {
            try await simulator.shutdown()
            throw error
        }
        try await simulator.shutdown()
        #expect(result.report.confirmed == tokens.count)
        let text = registry.emitToString()
        let samples = try #require(sample(text, "salvo_http2_answer_seconds_count", #"protocol="h2""#))
        #expect(samples >= 1)
        #expect(samples < Double(tokens.count), "one sample per batch of answers, not per request")
        #expect(sample(text, "salvo_rows_confirmed_total", #"protocol="h2""#) == Double(tokens.count))
    }
}
