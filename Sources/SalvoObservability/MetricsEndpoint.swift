import NIOHTTP1
import Prometheus

/// `GET /metrics` in Prometheus' text format, for `--metrics-port`: the registry rendered on every request
/// (a `LocalHTTPServer`); anything else is answered 404.
public final class MetricsEndpoint: Sendable {
    public let registry: PrometheusCollectorRegistry
    private let server: LocalHTTPServer

    /// The port it listens on (the one chosen by the system when 0 was asked).
    public var port: Int { self.server.port }

    private init(registry: PrometheusCollectorRegistry, server: LocalHTTPServer) {
        self.registry = registry
        self.server = server
    }

    /// Listens on `host:port` (127.0.0.1 by default; `0.0.0.0` to be scraped from elsewhere, as in a pod).
    public static func start(
        registry: PrometheusCollectorRegistry,
        host: String = "127.0.0.1",
        port: Int
    ) async throws -> MetricsEndpoint {
        let server = try await LocalHTTPServer.start(host: host, port: port, maximumBody: 0) { method, uri, _ in
            guard method == .GET, uri == "/metrics" || uri.hasPrefix("/metrics?") else {
                return LocalHTTPServer.Response(status: .notFound, text: "not found: GET /metrics\n")
            }
            return LocalHTTPServer.Response(
                status: .ok,
                contentType: "text/plain; version=0.0.4; charset=utf-8",
                body: registry.emitToBuffer()
            )
        }
        return MetricsEndpoint(registry: registry, server: server)
    }

    public func stop() async {
        await self.server.stop()
    }
}
