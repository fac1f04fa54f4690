import APNSWire
import Foundation
import Logging
import NIOConcurrencyHelpers
import Prometheus
import SalvoBinary
import SalvoRows
import SalvoSend
import SalvoSimulator
import SalvoTestSupport
import SalvoTestTraits
import Testing

/// Keeps every log event, for tests.
final class LogRecorder: Sendable {
    struct Event: Sendable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    let events = NIOLockedValueBox<[Event]>([])

    var logger: Logger {
        Logger(label: "salvo.test") { _ in Handler(recorder: self) }
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = self.metadata
            if let extra = event.metadata { all.merge(extra) { $1 } }
            let metadata = all.mapValues { "\($0)" }
            self.recorder.events.withLockedValue {
                $0.append(Event(level: event.level, message: "\(event.message)", metadata: metadata))
            }
        }
    }
}

@Suite(.tags(.network), .runs(.network)) struct ConnectionLogTests {
    /// Connection events at info — connect, the error response with its status and identifier, the close, the
    /// reconnect with its delay — and nothing per row.
    @Test func aBinarySendLogsItsConnectionsNotItsRows() async throws {
        var generator = TokenGenerator(seed: 8)
        let tokens = (0..<3000).map { _ in generator.next() }
        var plan = FaultPlan()
        plan.invalidTokens = [tokens[1500].hexString]
        let setup = try await BinarySimulatorSetup.start("salvo-log", plan: plan)
        let simulator = setup.simulator
        let registry = PrometheusCollectorRegistry()
        let simulatorMetrics = SimulatorMetrics(
            simulator: simulator,
            factory: PrometheusMetricsFactory(registry: registry)
        )
        let input = try setup.tokenFile(tokens)
        let recorder = LogRecorder()
        var job = try setup.job(connections: 1)
        // The reconnects spaced as a real send spaces them.
        job.reconnect = .default
        job.logger = recorder.logger
        let result: SendResult
        do {
            result = try await BulkSend.prepare(SendRequest(files: [input], interface: .binary(job))).run()
        } catch {
            try await simulator.shutdown()
            throw error
        }
        simulatorMetrics.update()
        try await simulator.shutdown()
        #expect(result.report.rejected == ["InvalidToken": 1])

        let events = recorder.events.withLockedValue { $0 }
        let messages = events.map(\.message)
        #expect(messages.filter { $0 == "connected" }.count == 1 + result.report.reconnects)
        let answer = try #require(events.first { $0.message == "error response" && $0.metadata["status"] == "8" })
        #expect(answer.metadata["reason"] == "InvalidToken")
        #expect(answer.metadata["identifier"] == "1501")
        #expect(answer.metadata["shard"] == "0")
        let reconnect = try #require(events.first { $0.message == "reconnect" })
        #expect(reconnect.level == .info && reconnect.metadata["after-ms"] != nil)
        #expect(messages.contains("closed"))
        #expect(events.count < 30, "connection events only, never one per row: \(messages)")

        // The simulator's own metrics: what its ledger counted.
        let text = registry.emitToString()
        #expect(text.contains("salvo_simulator_accepted_total \(simulator.ledger.snapshot().accepted)"))
        #expect(text.contains(#"salvo_simulator_error_responses_total{status="8"} 1"#))
        #expect(text.contains("salvo_simulator_ledger_tokens \(tokens.count - 1)"))
    }
}
