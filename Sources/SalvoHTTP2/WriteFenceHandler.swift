import NIOCore

/// The last look a gated job's connection takes before its bytes leave: at every flush, it asks the job's write gate
/// whether anything at all may still be written (`HTTP2WriteGate.forbidsEveryWrite`); once nothing may, the bytes
/// written since the last flush are dropped, every later write fails and the connection is closed.
///
/// The gate's row check (`HTTP2JobContext.admitted`) comes when a connection takes its rows; the frames of a row
/// taken may leave later — after the HTTP/2 flow-control window opens, or after the event loop's next turn. A worker
/// stopped in between (`SIGSTOP`, a stall past its lease) would send them on waking, after another worker took the
/// partition over; this handler stops them there. A stream cut short before its END_STREAM is never delivered, and
/// its row stays written in the journal: uncertain, as the taker counts it.
///
/// The pipeline's first handler, next to the socket (below TLS and any proxy's handlers), so that between its look
/// and the write system call there is only NIO's flush, not the flush's encryption too: a worker stopped in that
/// moment sends the flush on waking (docs/fleet.md, "What fencing cannot cover"); its rows were written in the
/// journal before, so a taker counts them uncertain. Added only when the job has a gate. Confined to its channel's
/// event loop.
final class WriteFenceHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let gate: any HTTP2WriteGate
    private var held = CircularBuffer<(data: NIOAny, promise: EventLoopPromise<Void>?)>(initialCapacity: 16)
    private var fenced = false

    init(gate: any HTTP2WriteGate) {
        self.gate = gate
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !self.fenced else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.held.append((data, promise))
    }

    func flush(context: ChannelHandlerContext) {
        guard !self.fenced else { return }
        // One question a flush, not one a frame: a flush carries a batch of rows.
        if self.gate.forbidsEveryWrite() {
            self.fenced = true
            self.failHeld()
            context.close(promise: nil)
            return
        }
        while let (data, promise) = self.held.popFirst() { context.write(data, promise: promise) }
        context.flush()
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Unflushed writes fail at a close, as the channel's own would.
        self.failHeld()
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.failHeld()
    }

    private func failHeld() {
        while let (_, promise) = self.held.popFirst() { promise?.fail(ChannelError.ioOnClosedChannel) }
    }
}
