import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// A small HTTP/2 server on 127.0.0.1 whose answers a closure decides: the scriptable peer of the client's tests
/// and `salvo-bench h2 --server nio` (statuses, resets, GOAWAY after N streams, a shrinking
/// `SETTINGS_MAX_CONCURRENT_STREAMS`, slow answers). Not APNs' rules: those are the simulator's.
///
/// TLS with ALPN `h2` (a client that offers no ALPN may speak HTTP/2 all the same), and mutual TLS when
/// `clientTrustRoots` is set; or cleartext HTTP/2 with prior knowledge (`Options.cleartext`). Thread-safe; each connection is confined to
/// its event loop, and the responder is called there.
public final class HTTP2LoopbackServer: Sendable {
    /// A received request.
    public struct Request: Sendable {
        public var path: String
        public var headers: HPACKHeaders
        public var body: ByteBuffer
        /// Which accepted connection (0, 1, …) and which request on it (0, 1, …).
        public var connection: Int
        public var ordinal: Int
        public var streamID: HTTP2StreamID

        /// The first value of a header.
        public func header(_ name: String) -> String? { self.headers.first(name: name) }
    }

    /// What to do with a request.
    public enum Action: Sendable {
        case respond(status: Int, headers: [(String, String)], body: [UInt8])
        /// RST_STREAM with this code.
        case reset(HTTP2ErrorCode)
        /// No answer at all (the client's deadline must fire).
        case ignore
        /// Answer after a while.
        indirect case delayed(TimeAmount, Action)

        /// 200 with this `apns-id`.
        public static func ok(apnsID: String?) -> Action {
            .respond(status: 200, headers: apnsID.map { [("apns-id", $0)] } ?? [], body: [])
        }
    }

    /// Connection-level behaviour.
    public struct Options: Sendable {
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` announced at the start.
        public var maximumConcurrentStreams = 1000
        /// After this many requests on a connection, announce this smaller limit.
        public var shrinkStreams: (afterRequests: Int, to: Int)?
        /// After this many requests on a connection, answer the last of them and send GOAWAY naming it; later
        /// streams are dropped unanswered.
        public var goAwayAfterRequests: Int?
        /// HTTP/2 with prior knowledge over plain TCP, no TLS (the TLS identity is not used): the peer of the
        /// client's cleartext mode.
        public var cleartext = false
        /// `SETTINGS_HEADER_TABLE_SIZE` announced at the start (nil: none, so HPACK's 4,096 bytes): the most the
        /// client's encoder may keep in the table this server decodes with.
        public var headerTableSize: Int?

        public init() {}
    }

    public typealias Responder = @Sendable (Request) -> Action

    /// The port the server listens on.
    public var port: Int { self.listener.port }
    /// The server's event loops.
    public var eventLoopGroup: MultiThreadedEventLoopGroup { self.listener.group }
    private let listener: LoopbackListener
    private let counters: NIOLockedValueBox<(connections: Int, requests: Int, pings: Int, alpnH2: Int)>

    /// Starts a server on 127.0.0.1 (any free port).
    ///
    /// - Parameters:
    ///   - certificateChain, privateKey: the server's TLS identity.
    ///   - clientTrustRoots: when set, clients must present a certificate these roots verify.
    ///   - threads: event loop threads.
    public init(
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        clientTrustRoots: NIOSSLTrustRoots? = nil,
        options: Options = Options(),
        threads: Int = 1,
        responder: @escaping Responder
    ) async throws {
        let sslContext = try LoopbackListener.http2TLS(
            certificateChain: certificateChain,
            privateKey: privateKey,
            clientTrustRoots: clientTrustRoots
        )
        let counters = NIOLockedValueBox((connections: 0, requests: 0, pings: 0, alpnH2: 0))
        self.listener = try await LoopbackListener(threads: threads) { channel in
            let index = counters.withLockedValue { value -> Int in
                value.connections += 1
                return value.connections - 1
            }
            return channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                if !options.cleartext { try sync.addHandler(NIOSSLServerHandler(context: sslContext)) }
                var settings = [
                    HTTP2Setting(parameter: .maxConcurrentStreams, value: options.maximumConcurrentStreams),
                    HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                    HTTP2Setting(parameter: .maxHeaderListSize, value: 16 << 10),
                ]
                if let size = options.headerTableSize {
                    settings.append(HTTP2Setting(parameter: .headerTableSize, value: size))
                }
                try sync.addHandler(
                    NIOHTTP2Handler(
                        mode: .server,
                        initialSettings: settings,
                        headerBlockValidation: .disabled,
                        contentLengthValidation: .disabled
                    )
                )
                try sync.addHandler(
                    LoopbackConnectionHandler(
                        connection: index,
                        options: options,
                        counters: counters,
                        responder: responder
                    )
                )
            }
        }
        self.counters = counters
    }

    /// Connections accepted so far.
    public var connectionCount: Int { self.counters.withLockedValue { $0.connections } }
    /// Requests received so far (answered or not).
    public var requestCount: Int { self.counters.withLockedValue { $0.requests } }
    /// PING frames received so far (NIOHTTP2 answers them).
    public var pingCount: Int { self.counters.withLockedValue { $0.pings } }
    /// Connections whose TLS handshake chose `h2` with ALPN (the others, over TLS, came without an ALPN offer).
    public var alpnH2ConnectionCount: Int { self.counters.withLockedValue { $0.alpnH2 } }

    /// Stops listening, closes every connection and its threads.
    public func stop() async {
        await self.listener.stop()
    }
}

/// One server connection: gathers each request's headers and body, asks the responder, writes the answers and
/// flushes once per read batch.
///
/// Confined to its channel's event loop.
final class LoopbackConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Partial {
        var headers: HPACKHeaders
        var body: ByteBuffer?
    }

    private let connection: Int
    private let options: HTTP2LoopbackServer.Options
    private let counters: NIOLockedValueBox<(connections: Int, requests: Int, pings: Int, alpnH2: Int)>
    private let responder: HTTP2LoopbackServer.Responder
    private var partials: [HTTP2StreamID: Partial] = [:]
    private var ordinal = 0
    private var goAwayStreamID: HTTP2StreamID?
    private var needsFlush = false
    private let windowTarget = 1 << 20

    init(
        connection: Int,
        options: HTTP2LoopbackServer.Options,
        counters: NIOLockedValueBox<(connections: Int, requests: Int, pings: Int, alpnH2: Int)>,
        responder: @escaping HTTP2LoopbackServer.Responder
    ) {
        self.connection = connection
        self.options = options
        self.counters = counters
        self.responder = responder
    }

    func channelActive(context: ChannelHandlerContext) {
        let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: self.windowTarget))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            self.partials[frame.streamID] = Partial(headers: headers.headers, body: nil)
            if headers.endStream { self.complete(frame.streamID, context: context) }
        case .data(let data):
            guard var partial = self.partials[frame.streamID] else { return }
            if case .byteBuffer(let bytes) = data.data {
                if partial.body == nil {
                    partial.body = bytes
                } else {
                    var body = partial.body!
                    partial.body = nil
                    body.writeImmutableBuffer(bytes)
                    partial.body = body
                }
            }
            self.partials[frame.streamID] = partial
            if data.endStream { self.complete(frame.streamID, context: context) }
        case .ping(_, ack: false):
            self.counters.withLockedValue { $0.pings += 1 }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.needsFlush {
            self.needsFlush = false
            context.flush()
        }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted(negotiatedProtocol: "h2") = event {
            self.counters.withLockedValue { $0.alpnH2 += 1 }
        }
        if let window = event as? NIOHTTP2WindowUpdatedEvent, window.streamID == .rootStream,
            let size = window.inboundWindowSize, size < self.windowTarget / 2
        {
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .windowUpdate(windowSizeIncrement: self.windowTarget - size)
            )
            context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        if error is NIOHTTP2Errors.StreamError { return }
        // After our GOAWAY, NIOHTTP2 reports the client's frames for dropped streams as errors; the streams up to
        // the last stream id still get their answers, so the connection stays until the client closes it.
        if self.goAwayStreamID != nil { return }
        context.flush()
        context.close(promise: nil)
    }

    private func complete(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let partial = self.partials.removeValue(forKey: streamID) else { return }
        // After GOAWAY, later streams are dropped: the client must send them again elsewhere.
        if let last = self.goAwayStreamID, streamID > last { return }
        self.counters.withLockedValue { $0.requests += 1 }
        let ordinal = self.ordinal
        self.ordinal += 1
        let request = HTTP2LoopbackServer.Request(
            path: partial.headers.first(name: ":path") ?? "",
            headers: partial.headers,
            body: partial.body ?? ByteBuffer(),
            connection: self.connection,
            ordinal: ordinal,
            streamID: streamID
        )
        self.perform(self.responder(request), on: streamID, context: context)
        if let shrink = self.options.shrinkStreams, ordinal + 1 == shrink.afterRequests {
            let settings = HTTP2Frame(
                streamID: .rootStream,
                payload: .settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: shrink.to)]))
            )
            context.write(self.wrapOutboundOut(settings), promise: nil)
            self.needsFlush = true
        }
        if let limit = self.options.goAwayAfterRequests, ordinal + 1 == limit {
            // Streams up to this one are still answered when their bodies arrive (NIOHTTP2 sends DATA frames in no
            // fixed stream order); later ones are dropped, and the client must send them again elsewhere.
            let last = streamID
            self.goAwayStreamID = last
            let frame = HTTP2Frame(
                streamID: .rootStream,
                payload: .goAway(lastStreamID: last, errorCode: .noError, opaqueData: nil)
            )
            // Out at once: the client's frames for the dropped streams, still in this read, make NIOHTTP2 raise a
            // connection error, and the answers must be on the wire before that.
            context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        }
    }

    private func perform(
        _ action: HTTP2LoopbackServer.Action,
        on streamID: HTTP2StreamID,
        context: ChannelHandlerContext
    ) {
        switch action {
        case .respond(let status, let extra, let body):
            var headers = HPACKHeaders([(":status", String(status))])
            // Response values (apns-id) are unique: kept out of the HPACK dynamic table.
            for (name, value) in extra { headers.add(name: name, value: value, indexing: .nonIndexable) }
            let headersFrame = HTTP2Frame(
                streamID: streamID,
                payload: .headers(.init(headers: headers, endStream: body.isEmpty))
            )
            context.write(self.wrapOutboundOut(headersFrame), promise: nil)
            if !body.isEmpty {
                let data = HTTP2Frame(
                    streamID: streamID,
                    payload: .data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true))
                )
                context.write(self.wrapOutboundOut(data), promise: nil)
            }
            self.needsFlush = true
        case .reset(let code):
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(code))), promise: nil)
            self.needsFlush = true
        case .ignore:
            break
        case .delayed(let delay, let action):
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let boundContext = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: delay) {
                bound.value.perform(action, on: streamID, context: boundContext.value)
                boundContext.value.flush()
            }
        }
    }
}
