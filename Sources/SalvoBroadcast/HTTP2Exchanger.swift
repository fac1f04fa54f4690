import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import SalvoHTTP2
import SalvoProxy

/// Where a channel or broadcast client connects and how it proves who it is.
public struct HTTP2Endpoint: Sendable {
    public var host: String
    public var port: Int
    /// The name the server's certificate must carry and `:authority`; the host when nil.
    public var serverName: String?
    /// A client certificate or a provider token (sent as `authorization: bearer …`).
    public var authentication: APNSAuthentication
    public var trustRoots: NIOSSLTrustRoots = .default
    /// The TCP connect and the TLS handshake, each.
    public var connectTimeout: Duration = .seconds(10)
    /// How long a request waits for its answer before its stream is cancelled and its outcome is unknown.
    public var requestTimeout: Duration = .seconds(15)
    /// The proxy the connection goes through; nil for a direct connection.
    public var proxy: ProxyConfiguration?

    public init(host: String, port: Int, serverName: String? = nil, authentication: APNSAuthentication) {
        self.host = host
        self.port = port
        self.serverName = serverName
        self.authentication = authentication
    }

    public var address: String { "\(self.host):\(self.port)" }
}

/// What became of one request.
public enum HTTP2Exchange: Sendable {
    /// The server answered.
    case answered(HTTP2Response)
    /// The server said it did not process the request (`REFUSED_STREAM`, or a stream past a GOAWAY's last id): it
    /// may be sent again.
    case notProcessed(String)
    /// No answer (a timeout, a lost connection): the server may or may not have acted on it.
    case lost(String)
}

/// One HTTP/2 connection over TLS (ALPN `h2`) on which requests go out as streams and come back as whole answers:
/// the thin driver the channel and broadcast commands share. Every wait is bounded: the connect and handshake by
/// `connectTimeout`, each request by `requestTimeout` (then its stream is reset and its outcome is `.lost`).
///
/// The connection is the bulk client's (`HTTP2ConnectionFactory`: the proxy tunnel, TLS, the server-name check). With token authentication each
/// request carries the shared `ProviderToken`'s current bearer; an `ExpiredProviderToken` answer renews it once and
/// sends the request again (a 403 was not acted on).
public final class HTTP2Exchanger: Sendable {
    private let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    public let endpoint: HTTP2Endpoint

    private init(channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer, endpoint: HTTP2Endpoint) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.endpoint = endpoint
    }

    /// Connects, shakes hands and checks that `h2` was negotiated.
    ///
    /// - Throws: `ChannelFailure` (status nil) saying why: credentials that do not load, a host that cannot be
    ///   reached, a handshake refused, no `h2`, a timeout.
    public static func connect(_ endpoint: HTTP2Endpoint) async throws(ChannelFailure) -> HTTP2Exchanger {
        var client = HTTP2ClientConfiguration(
            host: endpoint.host,
            port: endpoint.port,
            authentication: endpoint.authentication
        )
        client.serverName = endpoint.serverName
        client.trustRoots = endpoint.trustRoots
        client.connectTimeout = endpoint.connectTimeout
        client.proxy = endpoint.proxy
        // The ALPN check is `HandshakeWait`'s, which names it.
        let factory: HTTP2ConnectionFactory
        do {
            factory = try HTTP2ConnectionFactory(client, checksALPN: false)
        } catch {
            throw ChannelFailure(status: nil, reason: error.message)
        }
        let address = endpoint.address
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let handshake = eventLoop.makePromise(of: Void.self)
        let ready = eventLoop.makePromise(of: NIOHTTP2Handler.StreamMultiplexer.self)
        var events = HTTP2ConnectionFactory.Events { message in
            handshake.fail(ChannelFailure(status: nil, reason: "\(address): \(message)"))
        }
        events.failed = events.refused
        // HTTP/2 is in the pipeline from the start (its preface waits in the TLS handler for the handshake), so the
        // server's first SETTINGS always find it.
        let connecting = factory.connect(on: eventLoop, events: events) { sync in
            try sync.addHandler(HandshakeWait(address: address, promise: handshake))
            var connection = NIOHTTP2Handler.ConnectionConfiguration()
            connection.initialSettings = [
                HTTP2Setting(parameter: .enablePush, value: 0),
                HTTP2Setting(parameter: .maxConcurrentStreams, value: 0),
                HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
            ]
            let multiplexer = try sync.configureHTTP2Pipeline(
                mode: .client,
                connectionConfiguration: connection,
                streamConfiguration: .init()
            ) { stream in stream.close() }
            ready.succeed(multiplexer)
        }
        let channel: any Channel
        do {
            channel = try await connecting.get()
        } catch {
            handshake.fail(error)
            ready.fail(error)
            throw ChannelFailure(status: nil, reason: factory.describe(connectError: error).message)
        }
        let deadline = eventLoop.scheduleTask(in: TimeAmount(endpoint.connectTimeout)) {
            handshake.fail(
                ChannelFailure(status: nil, reason: "\(address): no TLS handshake within \(endpoint.connectTimeout)")
            )
        }
        defer { deadline.cancel() }
        do {
            try await handshake.futureResult.get()
            let multiplexer = try await ready.futureResult.get()
            return HTTP2Exchanger(channel: channel, multiplexer: multiplexer, endpoint: endpoint)
        } catch {
            try? await channel.close()
            if let failure = error as? ChannelFailure { throw failure }
            throw ChannelFailure(status: nil, reason: "\(address): \(error)")
        }
    }

    /// Whether the connection is still open.
    public var isActive: Bool { self.channel.isActive }

    /// Closes the connection (requests in flight end `.lost`).
    public func close() async {
        try? await self.channel.close()
    }

    /// Sends `request` and waits (at most `requestTimeout`) for its whole answer.
    public func exchange(_ request: HTTP2Request) async -> HTTP2Exchange {
        let bearer = self.endpoint.authentication.providerToken?.current()
        let first = await self.send(request, bearer: bearer)
        guard case .answered(let response) = first, response.status == 403, let bearer,
            let token = self.endpoint.authentication.providerToken,
            response.failure(unless: 0)?.reason == "ExpiredProviderToken"
        else { return first }
        guard case .renewed = token.renew(after: bearer) else { return first }
        return await self.send(request, bearer: token.current())
    }

    private func send(_ request: HTTP2Request, bearer: ProviderToken.Bearer?) async -> HTTP2Exchange {
        let eventLoop = self.channel.eventLoop
        let promise = eventLoop.makePromise(of: HTTP2Exchange.self)
        var headers = HPACKHeaders()
        headers.add(name: ":method", value: request.method)
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: self.endpoint.serverName ?? self.endpoint.host)
        headers.add(name: ":path", value: request.path)
        if let bearer { headers.add(name: "authorization", value: bearer.authorization) }
        for header in request.headers { headers.add(name: header.name, value: header.value) }
        if !request.body.isEmpty { headers.add(name: "content-length", value: String(request.body.count)) }
        let body = request.body
        let head = HTTP2Frame.FramePayload.headers(.init(headers: headers, endStream: body.isEmpty))
        let timeout = self.endpoint.requestTimeout
        let multiplexer = self.multiplexer
        eventLoop.execute {
            guard self.channel.isActive else {
                promise.succeed(.notProcessed("the connection is closed"))
                return
            }
            multiplexer.createStreamChannel { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(ExchangeHandler(promise: promise))
                }
            }.whenComplete { result in
                switch result {
                case .failure(let error):
                    promise.succeed(.notProcessed("no stream could be opened: \(error)"))
                case .success(let stream):
                    stream.write(head, promise: nil)
                    if !body.isEmpty {
                        let data = HTTP2Frame.FramePayload.data(
                            .init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)
                        )
                        stream.write(data, promise: nil)
                    }
                    stream.flush()
                    let deadline = stream.eventLoop.scheduleTask(in: TimeAmount(timeout)) {
                        promise.succeed(.lost("no answer within \(timeout)"))
                        stream.close(promise: nil)
                    }
                    promise.futureResult.whenComplete { _ in deadline.cancel() }
                }
            }
        }
        // The promise is completed exactly once by whichever comes first: the answer, the stream's end, the deadline.
        return (try? await promise.futureResult.get()) ?? .lost("the request was dropped")
    }
}

/// Completes `promise` when the TLS handshake has negotiated `h2`; fails it on an error or an early close.
private final class HandshakeWait: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer

    private let address: String
    private let promise: EventLoopPromise<Void>

    init(address: String, promise: EventLoopPromise<Void>) {
        self.address = address
        self.promise = promise
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            if negotiated == "h2" {
                self.promise.succeed(())
                context.fireUserInboundEventTriggered(event)
                context.pipeline.syncOperations.removeHandler(self, promise: nil)
                return
            }
            self.promise.fail(
                ChannelFailure(
                    status: nil,
                    reason: "\(self.address) did not negotiate HTTP/2 (ALPN \(negotiated ?? "none"))"
                )
            )
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.promise.fail(ChannelFailure(status: nil, reason: "\(self.address): \(error)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.promise.fail(
            ChannelFailure(status: nil, reason: "\(self.address) closed the connection during the handshake")
        )
        context.fireChannelInactive()
    }
}

/// Collects one stream's answer (HEADERS, DATA, trailers) and completes the exchange once.
private final class ExchangeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload

    private let promise: EventLoopPromise<HTTP2Exchange>
    private var status: Int?
    private var headers: [HTTP2Request.Header] = []
    private var body: [UInt8] = []
    private var done = false
    /// An answer larger than this is cut (APNs' bodies are a few hundred bytes; `all-channels` of 10,000 ids
    /// about 300 KB).
    private let maximumBody = 4 << 20

    init(promise: EventLoopPromise<HTTP2Exchange>) {
        self.promise = promise
    }

    private func finish(_ exchange: HTTP2Exchange) {
        guard !self.done else { return }
        self.done = true
        self.promise.succeed(exchange)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .headers(let frame):
            if let status = frame.headers.first(name: ":status").flatMap({ Int($0) }) {
                // An informational answer (1xx) precedes the real one.
                if status >= 200 { self.status = status }
            }
            for field in frame.headers where !field.name.hasPrefix(":") {
                self.headers.append(.init(field.name, field.value))
            }
            if frame.endStream { self.complete(context: context) }
        case .data(let frame):
            if case .byteBuffer(let bytes) = frame.data, self.body.count < self.maximumBody {
                self.body.append(contentsOf: bytes.readableBytesView)
            }
            if frame.endStream { self.complete(context: context) }
        default:
            break
        }
    }

    private func complete(context: ChannelHandlerContext) {
        guard let status = self.status else {
            self.finish(.lost("the stream ended without a status"))
            return
        }
        self.finish(.answered(HTTP2Response(status: status, headers: self.headers, body: self.body)))
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let closed = error as? NIOHTTP2Errors.StreamClosed, closed.errorCode == .refusedStream {
            self.finish(.notProcessed("the server refused the stream"))
        } else {
            self.finish(.lost("\(error)"))
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.finish(.lost("the stream closed before its answer"))
        context.fireChannelInactive()
    }
}
