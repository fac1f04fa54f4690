import NIOCore
import NIOHTTP1
import NIOPosix

/// A small HTTP/1.1 server for what operators and tools ask a running process (metrics, a simulator's control):
/// one event loop thread of its own, so a busy job never delays an answer and an answer never touches the job's
/// threads. Each request's body is gathered (at most `maximumBody` bytes) and handed to `route` whole; the route
/// answers with a status, a content type and a body. NIOHTTP1 does the protocol; only the routing is ours.
public final class LocalHTTPServer: Sendable {
    /// What a route answers.
    public struct Response: Sendable {
        public var status: HTTPResponseStatus
        public var contentType: String
        public var body: [UInt8]
        /// More header fields (`WWW-Authenticate`, say).
        public var headers: [(String, String)] = []

        public init(status: HTTPResponseStatus, contentType: String = "text/plain; charset=utf-8", body: [UInt8]) {
            self.status = status
            self.contentType = contentType
            self.body = body
        }

        public init(status: HTTPResponseStatus, text: String, headers: [(String, String)] = []) {
            self.init(status: status, body: Array(text.utf8))
            self.headers = headers
        }
    }

    /// A request: its method, its path (with the query), and its body (nil when over the limit).
    public typealias Route = @Sendable (HTTPMethod, String, ByteBuffer?) -> Response

    /// Judges a request by its head before its body is read: nil lets it through to the route; an answer refuses
    /// it (its body is discarded unread, the route never runs).
    public typealias Admission = @Sendable (HTTPRequestHead) -> Response?

    public let port: Int
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup

    private init(channel: any Channel, group: MultiThreadedEventLoopGroup) {
        self.channel = channel
        self.group = group
        self.port = channel.localAddress?.port ?? 0
    }

    /// Listens on `host:port` (0: a free port, read back from `port`); `admit`, when given, sees every request's
    /// head first.
    public static func start(
        host: String,
        port: Int,
        maximumBody: Int = 1 << 20,
        admit: Admission? = nil,
        route: @escaping Route
    ) async throws -> LocalHTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.configureHTTPServerPipeline()
                        try sync.addHandler(RequestHandler(maximumBody: maximumBody, admit: admit, route: route))
                    }
                }
                .bind(host: host, port: port)
                .get()
            return LocalHTTPServer(channel: channel, group: group)
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

/// One request at a time per connection.
private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let maximumBody: Int
    private let admit: LocalHTTPServer.Admission?
    private let route: LocalHTTPServer.Route
    private var head: HTTPRequestHead?
    private var body: ByteBuffer?
    /// The answer to a request refused by `admit`, sent once its body has gone by.
    private var refusal: LocalHTTPServer.Response?

    init(maximumBody: Int, admit: LocalHTTPServer.Admission?, route: @escaping LocalHTTPServer.Route) {
        self.maximumBody = maximumBody
        self.admit = admit
        self.route = route
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            self.refusal = self.admit?(head)
            self.body = self.refusal == nil ? context.channel.allocator.buffer(capacity: 0) : nil
        case .body(var part):
            guard self.refusal == nil else { return }
            if let held = self.body?.readableBytes, held + part.readableBytes <= self.maximumBody {
                self.body?.writeBuffer(&part)
            } else {
                self.body = nil
            }
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let response = self.refusal ?? self.route(head.method, head.uri, self.body)
            self.refusal = nil
            self.body = nil
            var buffer = context.channel.allocator.buffer(capacity: response.body.count)
            buffer.writeBytes(response.body)
            var headers = HTTPHeaders()
            for (name, value) in response.headers { headers.add(name: name, value: value) }
            headers.add(name: "Content-Type", value: response.contentType)
            headers.add(name: "Content-Length", value: String(buffer.readableBytes))
            if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
            let responseHead = HTTPResponseHead(version: head.version, status: response.status, headers: headers)
            context.write(self.wrapOutboundOut(.head(responseHead)), promise: nil)
            context.write(self.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            let keepAlive = head.isKeepAlive
            context.writeAndFlush(self.wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in
                if !keepAlive { context.close(promise: nil) }
            }
        }
    }
}
