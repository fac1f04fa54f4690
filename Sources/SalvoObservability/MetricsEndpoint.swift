import NIOCore
import NIOHTTP1
import NIOPosix
import Prometheus

/// `GET /metrics` in Prometheus' text format, for `--metrics-port`: a small HTTP/1.1 server on NIO that renders a
/// `PrometheusCollectorRegistry` on every request. Anything else is answered 404. One event loop thread of its
/// own, so a busy send never delays a scrape and a scrape never touches the send's threads.
public final class MetricsEndpoint: Sendable {
    public let registry: PrometheusCollectorRegistry
    /// The port it listens on (the one chosen by the system when 0 was asked).
    public let port: Int
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup

    private init(registry: PrometheusCollectorRegistry, channel: any Channel, group: MultiThreadedEventLoopGroup) {
        self.registry = registry
        self.channel = channel
        self.group = group
        self.port = channel.localAddress?.port ?? 0
    }

    /// Listens on `host:port` (127.0.0.1 by default; `0.0.0.0` to be scraped from elsewhere, as in a pod).
    public static func start(
        registry: PrometheusCollectorRegistry,
        host: String = "127.0.0.1",
        port: Int
    ) async throws -> MetricsEndpoint {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandler(MetricsRequestHandler(registry: registry))
                    }
                }
                .bind(host: host, port: port)
                .get()
            return MetricsEndpoint(registry: registry, channel: channel, group: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    public func stop() async {
        try? await self.channel.close()
        try? await self.group.shutdownGracefully()
    }
}

/// Answers one request at a time on its connection: the registry's text for `GET /metrics`, 404 for the rest.
private final class MetricsRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let registry: PrometheusCollectorRegistry
    private var head: HTTPRequestHead?

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let found = head.method == .GET && (head.uri == "/metrics" || head.uri.hasPrefix("/metrics?"))
            var body = context.channel.allocator.buffer(capacity: 4096)
            if found {
                body.writeBytes(self.registry.emitToBuffer())
            } else {
                body.writeString("not found: GET /metrics\n")
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: found ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain")
            headers.add(name: "Content-Length", value: String(body.readableBytes))
            if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
            let response = HTTPResponseHead(version: head.version, status: found ? .ok : .notFound, headers: headers)
            context.write(self.wrapOutboundOut(.head(response)), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            let keepAlive = head.isKeepAlive
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                if !keepAlive { context.close(promise: nil) }
            }
        }
    }
}
