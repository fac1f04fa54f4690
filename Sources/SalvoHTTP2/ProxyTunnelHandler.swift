import NIOCore
import SalvoProxy

/// Opens a tunnel through a proxy before anything else speaks on the connection: first in the pipeline, it holds
/// `channelActive` back from the handlers behind it (TLS, HTTP/2), drives `ProxyHandshake` over the TCP connection to
/// the proxy, and once the tunnel is open passes `channelActive` on, hands on whatever the proxy sent after its
/// answer, and leaves the pipeline. So the TLS handshake and everything after it run exactly as on a direct
/// connection.
///
/// A proxy that says nothing for `timeout` after the connect fails the tunnel (`.timeout`). Confined to its
/// channel's event loop.
final class ProxyTunnelHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var handshake: ProxyHandshake
    private let timeout: Duration
    private let onOpen: (String) -> Void
    private let onFailure: (ProxyFailure) -> Void
    private var open = false
    private var failed = false
    /// This side closed the connection (the job stopped): its end is no failure of the proxy's.
    private var closing = false
    private var deadline: Scheduled<Void>?
    /// Writes from behind before the tunnel is open (none is expected: they wait for `channelActive`).
    private var pending: [(NIOAny, EventLoopPromise<Void>?)] = []

    /// - Parameters:
    ///   - onOpen: the tunnel is open, with `ProxyHandshake.summary`.
    ///   - onFailure: the tunnel could not be opened; the connection is closed after it.
    init(
        handshake: ProxyHandshake,
        timeout: Duration,
        onOpen: @escaping (String) -> Void,
        onFailure: @escaping (ProxyFailure) -> Void
    ) {
        self.handshake = handshake
        self.timeout = timeout
        self.onOpen = onOpen
        self.onFailure = onFailure
    }

    func channelActive(context: ChannelHandlerContext) {
        let first = self.handshake.start()
        context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: first)), promise: nil)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        self.deadline = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(self.timeout)) {
            let (handler, context) = loopBound.value
            guard !handler.open, !handler.failed else { return }
            handler.fail(handler.handshake.timedOut(after: "\(handler.timeout)"), context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.open else {
            context.fireChannelRead(data)
            return
        }
        guard !self.failed else { return }
        let bytes = self.unwrapInboundIn(data)
        self.step(self.handshake.receive(bytes.readableBytesView), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.open && !self.failed && !self.closing {
            self.step(self.handshake.receive(EmptyCollection<UInt8>()), context: context)
        }
        self.deadline?.cancel()
        context.fireChannelInactive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard self.open else {
            self.pending.append((data, promise))
            return
        }
        context.write(data, promise: promise)
    }

    func flush(context: ChannelHandlerContext) {
        if self.open { context.flush() }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if !self.open { self.closing = true }
        context.close(mode: mode, promise: promise)
    }

    private func step(_ step: ProxyHandshake.Step, context: ChannelHandlerContext) {
        switch step {
        case .read:
            break
        case .write(let bytes):
            context.writeAndFlush(self.wrapOutboundOut(context.channel.allocator.buffer(bytes: bytes)), promise: nil)
        case .failed(let failure):
            self.fail(failure, context: context)
        case .open(let leftover):
            self.open = true
            self.deadline?.cancel()
            self.onOpen(self.handshake.summary)
            for (data, promise) in self.pending { context.write(data, promise: promise) }
            self.pending = []
            context.flush()
            context.fireChannelActive()
            if !leftover.isEmpty {
                context.fireChannelRead(self.wrapInboundOut(context.channel.allocator.buffer(bytes: leftover)))
                context.fireChannelReadComplete()
            }
            context.pipeline.syncOperations.removeHandler(self, promise: nil)
        }
    }

    private func fail(_ failure: ProxyFailure, context: ChannelHandlerContext) {
        self.failed = true
        self.deadline?.cancel()
        for (_, promise) in self.pending { promise?.fail(ChannelError.ioOnClosedChannel) }
        self.pending = []
        self.onFailure(failure)
        context.close(promise: nil)
    }
}
