import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import SalvoTestSupport

/// The cheapest HTTP/2 server that still speaks the protocol: answers every request `:status 200` and nothing
/// else, so that a benchmark measures the client. TLS with ALPN `h2` on 127.0.0.1.
///
/// It never decodes a header block (a decoder that never reads headers needs no HPACK table, and the client's
/// encoder indexes as it would against APNs): it reads frames (`HTTP2FrameReader`), answers each stream that ends with a
/// 10-byte HEADERS frame (`0x88`, the static `:status 200`), acknowledges SETTINGS and PING, and tops up the
/// connection window. No validation and no ledger: the simulator's HTTP/2 endpoint is the strict peer.
///
/// With `silentAfterRequests`, each connection answers that many requests and then nothing more (no answers, no
/// PING acknowledgements), as a peer that vanished without closing: the client must notice and move on.
///
/// Thread-safe; each connection is confined to its event loop.
public final class HTTP2SinkServer: Sendable {
    public var port: Int { self.listener.port }
    private let listener: LoopbackListener
    private let answered: NIOLockedValueBox<Int>

    public init(
        certificateChain: [NIOSSLCertificate],
        privateKey: NIOSSLPrivateKey,
        maximumConcurrentStreams: Int = 100,
        silentAfterRequests: Int? = nil,
        threads: Int = 1
    ) async throws {
        let sslContext = try LoopbackListener.http2TLS(certificateChain: certificateChain, privateKey: privateKey)
        let answered = NIOLockedValueBox(0)
        self.listener = try await LoopbackListener(threads: threads) { channel in
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
        self.answered = answered
    }

    /// Requests answered so far.
    public var answeredCount: Int { self.answered.withLockedValue { $0 } }

    /// Closes the listener and every connection; a second call does nothing.
    public func stop() async {
        await self.listener.stop()
    }
}

/// One sink connection: `HTTP2FrameReader` cuts the frames, `HTTP2FrameWriter` writes the answers. Confined to
/// its channel's event loop.
final class SinkConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let maximumConcurrentStreams: Int
    private let answered: NIOLockedValueBox<Int>
    /// Requests this connection may still answer before it falls silent; nil: no limit.
    private var answersLeft: Int?
    private var reader = HTTP2FrameReader()
    private var input = ByteBuffer()
    private var output = ByteBuffer()
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
        HTTP2FrameWriter.settings(
            [(.maxConcurrentStreams, UInt32(self.maximumConcurrentStreams)), (.initialWindowSize, UInt32(1 << 20))],
            into: &out
        )
        HTTP2FrameWriter.windowUpdate(streamID: 0, increment: 1 << 30, into: &out)
        context.writeAndFlush(self.wrapOutboundOut(out), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var bytes = self.unwrapInboundIn(data)
        self.input.writeBuffer(&bytes)
        do {
            while !self.isSilent, let frame = try self.reader.next(from: &self.input) {
                switch frame {
                case .headers(let streamID, _, let endStream):
                    if endStream { self.answer(streamID) }
                case .data(let streamID, _, let endStream, let flowControlled):
                    self.consumed += flowControlled
                    if endStream { self.answer(streamID) }
                case .settings:
                    HTTP2FrameWriter.settingsAcknowledgement(into: &self.output)
                case .ping(let data):
                    HTTP2FrameWriter.pingAcknowledgement(data, into: &self.output)
                case .goAway:
                    context.close(promise: nil)
                    return
                case .settingsAcknowledged, .pingAcknowledged, .windowUpdate, .resetStream:
                    break
                }
            }
        } catch {
            context.close(promise: nil)
            return
        }
        if self.isSilent {
            self.input.clear()
        } else {
            self.input.discardReadBytes()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if self.consumed > 1 << 29 {
            HTTP2FrameWriter.windowUpdate(streamID: 0, increment: self.consumed, into: &self.output)
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

    private func answer(_ streamID: UInt32) {
        // HEADERS, END_STREAM | END_HEADERS, one byte: static table entry 8, `:status 200`.
        HTTP2FrameWriter.frameHeader(length: 1, type: 1, flags: 0x5, streamID: streamID, into: &self.output)
        self.output.writeInteger(UInt8(0x88))
        self.answeredInRead += 1
        if let left = self.answersLeft { self.answersLeft = left - 1 }
    }
}
