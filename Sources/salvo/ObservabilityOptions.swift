import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import NIOConcurrencyHelpers
import Prometheus
import SalvoBinary
import SalvoConsole
import SalvoObservability
import SalvoRows

extension LogFormat: ExpressibleByArgument {}
extension Logger.Level: @retroactive ExpressibleByArgument {}

/// What a long-running command exposes to operators (shared by `send`, `demo`, `soak` and `simulate`): the
/// Prometheus endpoint and the logs.
struct ObservabilityOptions: ParsableArguments {
    @Option(
        name: .customLong("metrics-port"),
        help: "Serve Prometheus metrics at http://HOST:PORT/metrics while the command runs (0: any free port)."
    )
    var metricsPort: Int?

    @Option(name: .customLong("metrics-host"), help: "The address --metrics-port listens on (0.0.0.0 in a pod).")
    var metricsHost: String = "127.0.0.1"

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .warning

    @Option(name: .customLong("log-format"), help: "text or json (one object per line), on standard error.")
    var logFormat: LogFormat = .text

    func validate() throws {
        if let port = self.metricsPort, !(0...65535).contains(port) {
            throw ValidationError("--metrics-port is 0 to 65535 (got \(port))")
        }
    }

    /// Sets up logging (once per process) and, with `--metrics-port`, the endpoint; stop the result when done.
    func start(label: String) async throws -> Observability {
        Observability.bootstrapLogging(format: self.logFormat, level: self.logLevel)
        let logger = Logger(label: label)
        guard let port = self.metricsPort else { return Observability(logger: logger, endpoint: nil) }
        let registry = PrometheusCollectorRegistry()
        let endpoint: MetricsEndpoint
        do {
            endpoint = try await MetricsEndpoint.start(registry: registry, host: self.metricsHost, port: port)
        } catch {
            throw UserError("--metrics-port \(port) on \(self.metricsHost): cannot listen: \(error)")
        }
        FileHandle.standardError.write(
            Data("metrics: http://\(self.metricsHost):\(endpoint.port)/metrics\n".utf8)
        )
        return Observability(logger: logger, endpoint: endpoint)
    }
}

/// The running side of `ObservabilityOptions`.
struct Observability: Sendable {
    let logger: Logger
    let endpoint: MetricsEndpoint?

    /// Where metrics go: the endpoint's registry, or nowhere.
    var factory: (any MetricsFactory)? {
        self.endpoint.map { PrometheusMetricsFactory(registry: $0.registry) }
    }

    /// A job's metrics, when there is an endpoint to read them.
    func jobMetrics(dimensions: [(String, String)] = []) -> JobMetrics? {
        self.factory.map { JobMetrics(factory: $0, dimensions: dimensions) }
    }

    func stop() async {
        await self.endpoint?.stop()
    }

    private static let bootstrapped = NIOLockedValueBox(false)

    static func bootstrapLogging(format: LogFormat, level: Logger.Level) {
        let first = Self.bootstrapped.withLockedValue { done in
            defer { done = true }
            return !done
        }
        if first { LoggingSystem.bootstrap(format: format, level: level) }
    }
}
