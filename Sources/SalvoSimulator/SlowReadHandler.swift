import NIOCore

/// A slow reader: sits below TLS and holds every read request for `delay`, while the channel's
/// receive allocator caps each socket read at the chunk size and one read per cycle. The sender's
/// socket buffer fills and its writes stall, as with an overloaded gateway.
///
/// It throttles below TLS because the TLS handler asks for more ciphertext at once whenever a
/// read ends inside a record; delaying only the application's reads would not slow the socket.
/// The handshake is slowed too. Confined to its channel's event loop.
final class SlowReadHandler: ChannelOutboundHandler {
    typealias OutboundIn = NIOAny

    private let delay: TimeAmount
    private var readScheduled = false
    private var removed = false

    init(delayMilliseconds: Int) {
        self.delay = .milliseconds(Int64(max(0, delayMilliseconds)))
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.removed = true
    }

    func read(context: ChannelHandlerContext) {
        // Read requests arriving while one is held are the same request: NIO reads once either way.
        guard !self.readScheduled else { return }
        self.readScheduled = true
        context.eventLoop.assumeIsolated().scheduleTask(in: self.delay) {
            self.readScheduled = false
            if !self.removed { context.read() }
        }
    }
}
