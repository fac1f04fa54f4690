import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL

/// The cheapest HTTP/2 server that still speaks the protocol: answers every request `:status 200` and nothing
/// else, so that a benchmark measures the client. TLS with ALPN `h2` on 127.0.0.1.
///
/// It never decodes a header block (a decoder that never reads headers needs no HPACK table, and the client's
/// encoder indexes as it would against APNs): it reads frame headers, answers each stream that ends with a
/// 10-byte HEADERS frame (`0x88`, the static `:status 200`), acknowledges SETTINGS and PING, and tops up the
/// connection window. No validation and no ledger: the simulator's HTTP/2 endpoint is the strict peer.
///
/// With `silentAfterRequests`, each connection answers that many requests and then nothing more (no answers, no
/// PING acknowledgements), as a peer that vanished without closing: the client must notice and move on.
///
/// Thread-safe; each connection is confined to its event loop.
public final class HTTP2SinkServer: Sendable {
    public let port: Int
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup
    private let answered: NIOLockedValueBox<Int>
    private let stopped = NIOLockedValueBox(false)

    public init(
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        maximumConcurrentStreams: Int = 100,
        silentAfterRequests: Int? = nil,
        threads: Int = 1
    ) async throws {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificateChain.map { .certificate($0) },
            privateKey: .privateKey(privateKey)
        )
        tls.applicationProtocols = ["h2"]
        tls.minimumTLSVersion = .tlsv12
        let sslContext = try NIOSSLContext(configuration: tls)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        let answered = NIOLockedValueBox(0)
        do {
            self.channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                        try channel.pipeline.syncOperations.addHandler(
                            SinkConnectionHandler(
                                maximumConcurrentStreams: maximumConcurrentStreams,
                                silentAfterRequests: silentAfterRequests,
                                answered: answered
                            )
                        )
                    }
                }
                .bind(host: "127.0.0.1", port: 0)
                .get()
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        self.group = group
        self.answered = answered
        self.port = self.channel.localAddress?.port ?? 0
    }

    /// Requests answered so far.
    public var answeredCount: Int { self.answered.withLockedValue { $0 } }

    /// Closes the listener and every connection; a second call does nothing.
    public func stop() async {
        let first = self.stopped.withLockedValue { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? await self.channel.close()
        try? await self.group.shutdownGracefully()
    }
}

/// One sink connection. Confined to its channel's event loop.
final class SinkConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    private let maximumConcurrentStreams: Int
    private let answered: NIOLockedValueBox<Int>
    /// Requests this connection may still answer before it falls silent; nil: no limit.
    private var answersLeft: Int?
    private var input = ByteBuffer()
    private var output = ByteBuffer()
    private var sawPreface = false
    private var answeredInRead = 0
    private var consumed = 0

    init(maximumConcurrentStreams: Int, silentAfterRequests: Int?, answered: NIOLockedValueBox<Int>) {
        self.maximumConcurrentStreams = maximumConcurrentStreams
        self.answersLeft = silentAfterRequests
        self.answered = answered
    }

    /// Whether the connection has fallen silent: it reads and drops everything.
    private var isSilent: Bool { self.answersLeft.map { $0 <= 0 } ?? false }

    func channelActive(context: ChannelHandlerContext) {
        var out = context.channel.allocator.buffer(capacity: 64)
        // SETTINGS: MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE 1 MiB.
        Self.frameHeader(length: 12, type: 4, flags: 0, stream: 0, into: &out)
        for (id, value) in [(UInt16(3), UInt32(self.maximumConcurrentStreams)), (4, UInt32(1 << 20))] {
            out.writeInteger(id)
            out.writeInteger(value)
        }
        Self.windowUpdate(1 << 30, into: &out)
        context.writeAndFlush(self.wrapOutboundOut(out), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        self.input.writeBuffer(&bytes)
        if !self.sawPreface {
            guard self.input.readableBytes >= Self.preface.count else { return }
            guard self.input.readBytes(length: Self.preface.count) == Self.preface else {
                context.close(promise: nil)
                return
            }
            self.sawPreface = true
        }
        while self.input.readableBytes >= 9, !self.isSilent {
            let start = self.input.readerIndex
            let length = Int(self.input.getInteger(at: start, as: UInt32.self)! >> 8)
            guard self.input.readableBytes >= 9 + length else { break }
            let type = self.input.getInteger(at: start + 3, as: UInt8.self)!
            let flags = self.input.getInteger(at: start + 4, as: UInt8.self)!
            let stream = self.input.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF
            switch type {
            case 0, 1:  // DATA, HEADERS
                if type == 0 { self.consumed += length }
                if flags & 0x1 != 0 { self.answer(stream) }
            case 4 where flags & 0x1 == 0:  // SETTINGS: acknowledge
                Self.frameHeader(length: 0, type: 4, flags: 1, stream: 0, into: &self.output)
            case 6 where flags & 0x1 == 0:  // PING: answer with its data
                Self.frameHeader(length: 8, type: 6, flags: 1, stream: 0, into: &self.output)
                self.output.writeImmutableBuffer(self.input.getSlice(at: start + 9, length: 8)!)
            case 7:  // GOAWAY
                context.close(promise: nil)
                return
            default:
                break
            }
            self.input.moveReaderIndex(forwardBy: 9 + length)
        }
        if self.isSilent {
            self.input.clear()
        } else {
            self.input.discardReadBytes()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.consumed > 1 << 29 {
            Self.windowUpdate(UInt32(self.consumed), into: &self.output)
            self.consumed = 0
        }
        if self.output.readableBytes > 0 {
            context.writeAndFlush(self.wrapOutboundOut(self.output), promise: nil)
            self.output = context.channel.allocator.buffer(capacity: 4096)
        }
        if self.answeredInRead > 0 {
            let count = self.answeredInRead
            self.answered.withLockedValue { $0 += count }
            self.answeredInRead = 0
        }
        context.fireChannelReadComplete()
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        context.close(promise: nil)
    }

    private func answer(_ stream: UInt32) {
        // HEADERS, END_STREAM | END_HEADERS, one byte: static table entry 8, `:status 200`.
        Self.frameHeader(length: 1, type: 1, flags: 0x5, stream: stream, into: &self.output)
        self.output.writeInteger(UInt8(0x88))
        self.answeredInRead += 1
        if let left = self.answersLeft { self.answersLeft = left - 1 }
    }

    private static func windowUpdate(_ increment: UInt32, into buffer: inout ByteBuffer) {
        self.frameHeader(length: 4, type: 8, flags: 0, stream: 0, into: &buffer)
        buffer.writeInteger(increment & 0x7FFF_FFFF)
    }

    private static func frameHeader(
        length: Int,
        type: UInt8,
        flags: UInt8,
        stream: UInt32,
        into buffer: inout ByteBuffer
    ) {
        buffer.writeInteger(UInt32(length) << 8 | UInt32(type))
        buffer.writeInteger(flags)
        buffer.writeInteger(stream)
    }
}
