import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// `salvo simulate --control-port`: lets another process judge a running simulator, as `salvo soak --gateway`
/// does between its rounds. HTTP/1.1 on its own event loop thread:
///
/// - `GET /plan`: the fault plan (JSON);
/// - `GET /ledger`: the ledger's counters (`LedgerSnapshot`, JSON);
/// - `POST /reset`: a new, empty ledger (204);
/// - `POST /verdict` with the expected tokens as the body (one hex token per line, or CSV with a `token` column):
///   the `Verdict` (JSON).
///
/// Listens on 127.0.0.1 unless told otherwise: it can empty the ledger.
public final class SimulatorControlEndpoint: Sendable {
    public let port: Int
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup

    /// The most a `POST /verdict` body may hold: 4 M tokens of 65 bytes, about.
    static let maximumBody = 256 << 20

    private init(channel: any Channel, group: MultiThreadedEventLoopGroup) {
        self.channel = channel
        self.group = group
        self.port = channel.localAddress?.port ?? 0
    }

    public static func start(
        simulator: Simulator,
        host: String = "127.0.0.1",
        port: Int
    ) async throws
        -> SimulatorControlEndpoint
    {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandler(ControlRequestHandler(simulator: simulator))
                    }
                }
                .bind(host: host, port: port)
                .get()
            return SimulatorControlEndpoint(channel: channel, group: group)
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

/// One request at a time per connection; the body is gathered (bounded) before the answer.
private final class ControlRequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let simulator: Simulator
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    private var tooLarge = false

    init(simulator: Simulator) {
        self.simulator = simulator
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.body = context.channel.allocator.buffer(capacity: 0)
            self.tooLarge = false
        case .body(var part):
            if (self.body?.readableBytes ?? 0) + part.readableBytes > SimulatorControlEndpoint.maximumBody {
                self.tooLarge = true
            } else {
                self.body?.writeBuffer(&part)
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let (status, text) = self.answer(head, body: self.body)
            self.body = nil
            var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
            buffer.writeString(text)
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: status == .ok ? "application/json" : "text/plain")
            headers.add(name: "Content-Length", value: String(buffer.readableBytes))
            if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
            context.write(
                self.wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
                promise: nil
            )
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            let keepAlive = head.isKeepAlive
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                if !keepAlive { context.close(promise: nil) }
            }
        }
    }

    private func answer(_ head: HTTPRequestHead, body: ByteBuffer?) -> (HTTPResponseStatus, String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        func json(_ value: some Encodable) -> (HTTPResponseStatus, String) {
            guard let data = try? encoder.encode(value) else { return (.internalServerError, "cannot encode\n") }
            return (.ok, String(decoding: data, as: UTF8.self))
        }
        switch (head.method, head.uri) {
        case (.GET, "/plan"):
            return json(self.simulator.plan)
        case (.GET, "/ledger"):
            return json(self.simulator.ledger.snapshot())
        case (.POST, "/reset"):
            self.simulator.ledger.reset()
            return (.noContent, "")
        case (.POST, "/verdict"):
            if self.tooLarge {
                return (.payloadTooLarge, "at most \(SimulatorControlEndpoint.maximumBody) bytes of tokens\n")
            }
            let expected = (body ?? ByteBuffer()).withUnsafeReadableBytes { ExpectedTokens(csv: $0) }
            return json(self.simulator.verdict(expected: expected))
        default:
            return (.notFound, "GET /plan, GET /ledger, POST /reset, POST /verdict\n")
        }
    }
}
