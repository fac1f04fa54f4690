import DequeModule
import NIOCore

/// A network's distance: sits next to the socket (below TLS) and holds every byte `latency` (plus a seeded jitter
/// of up to `jitter`) in each direction, so that the handshake, SETTINGS, WINDOW_UPDATE and answers all arrive as
/// late as over a real network, not only the answers.
///
/// Order is kept: a batch is never due before the one ahead of it in the same direction, so jitter spreads the
/// delays without reordering bytes. Reads of one read cycle travel together, with their read-complete; a close
/// waits for the writes queued ahead of it. One timer per direction at a time, set for the head of its queue.
/// Bandwidth is not modelled: the held bytes are the bandwidth-delay product of an unlimited link.
///
/// When the peer closes, NIO closes the channel at once (no half-closure) and removes its handlers on the next pass
/// of the event loop, so nothing held can wait for its time: the reads still held go up at once, then the end of
/// the connection (the last bytes before a close lose their delay, never their contents). Writes and closes still
/// held when the handler is removed fail (`ChannelError.ioOnClosedChannel`) or complete, so no promise is left
/// behind. Confined to its channel's event loop.
final class LatencyHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Outbound {
        case write(NIOAny, EventLoopPromise<Void>?)
        case flush
        case close(CloseMode, EventLoopPromise<Void>?)
    }

    private let latency: Int64
    private let jitter: Int64
    private var random: SeededGenerator
    /// Read cycles held, each with its reads.
    private var inbound = Deque<(due: NIODeadline, reads: [NIOAny])>()
    private var outbound = Deque<(due: NIODeadline, event: Outbound)>()
    private var reading: [NIOAny] = []
    private var lastInboundDue = NIODeadline.uptimeNanoseconds(0)
    private var lastOutboundDue = NIODeadline.uptimeNanoseconds(0)
    private var inboundTimer: Scheduled<Void>?
    private var outboundTimer: Scheduled<Void>?
    private var removed = false

    /// - Parameters:
    ///   - latencyMilliseconds: the one-way delay.
    ///   - jitterMilliseconds: the most added on top, drawn uniformly per batch.
    ///   - random: this connection's generator (the plan's seed and the connection's serial number).
    init(latencyMilliseconds: Int, jitterMilliseconds: Int, random: SeededGenerator) {
        self.latency = Int64(max(0, latencyMilliseconds)) * 1_000_000
        self.jitter = Int64(max(0, jitterMilliseconds)) * 1_000_000
        self.random = random
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.removed = true
        self.inboundTimer?.cancel()
        self.outboundTimer?.cancel()
        // The channel is gone: the writes held for their time can never be written, and a close held behind them
        // has happened.
        let held = self.outbound
        self.outbound.removeAll()
        for entry in held {
            switch entry.event {
            case .write(_, let promise): promise?.fail(ChannelError.ioOnClosedChannel)
            case .flush: break
            case .close(_, let promise): promise?.succeed()
            }
        }
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.reading.append(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !self.reading.isEmpty else { return }
        let reads = self.reading
        self.reading = []
        self.inbound.append((self.due(after: &self.lastInboundDue, now: context.eventLoop.now), reads))
        self.armInbound(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The channel is closed and its handlers go on the next pass of the loop: what is held goes up now, in
        // order, then the end.
        self.inboundTimer?.cancel()
        self.inboundTimer = nil
        let held = self.inbound
        self.inbound.removeAll()
        for entry in held {
            for read in entry.reads { context.fireChannelRead(read) }
            context.fireChannelReadComplete()
        }
        if !self.reading.isEmpty {
            let reads = self.reading
            self.reading = []
            for read in reads { context.fireChannelRead(read) }
            context.fireChannelReadComplete()
        }
        context.fireChannelInactive()
    }

    private func armInbound(context: ChannelHandlerContext) {
        guard self.inboundTimer == nil, let first = self.inbound.first else { return }
        self.inboundTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: first.due) {
            self.inboundTimer = nil
            self.deliverInbound(context: context)
        }
    }

    private func deliverInbound(context: ChannelHandlerContext) {
        guard !self.removed else { return }
        let now = context.eventLoop.now
        while let first = self.inbound.first, first.due <= now {
            self.inbound.removeFirst()
            for read in first.reads { context.fireChannelRead(read) }
            context.fireChannelReadComplete()
            if self.removed { return }
        }
        self.armInbound(context: context)
    }

    // MARK: Outbound

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Writes wait for their flush: the batch leaves when it is flushed, and is due one latency later.
        self.outbound.append((.distantFuture, .write(data, promise)))
    }

    func flush(context: ChannelHandlerContext) {
        let due = self.due(after: &self.lastOutboundDue, now: context.eventLoop.now)
        var index = self.outbound.endIndex
        while index > self.outbound.startIndex {
            index -= 1
            guard self.outbound[index].due == .distantFuture else { break }
            self.outbound[index].due = due
        }
        self.outbound.append((due, .flush))
        self.armOutbound(context: context)
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        guard self.outbound.contains(where: { $0.due != .distantFuture }) else {
            return context.close(mode: mode, promise: promise)
        }
        // FIN travels behind the bytes already on their way.
        self.outbound.append((self.lastOutboundDue, .close(mode, promise)))
    }

    private func armOutbound(context: ChannelHandlerContext) {
        guard self.outboundTimer == nil, let first = self.outbound.first, first.due != .distantFuture else { return }
        self.outboundTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: first.due) {
            self.outboundTimer = nil
            self.deliverOutbound(context: context)
        }
    }

    private func deliverOutbound(context: ChannelHandlerContext) {
        guard !self.removed else { return }
        let now = context.eventLoop.now
        while let first = self.outbound.first, first.due <= now {
            self.outbound.removeFirst()
            switch first.event {
            case .write(let data, let promise): context.write(data, promise: promise)
            case .flush: context.flush()
            case .close(let mode, let promise): context.close(mode: mode, promise: promise)
            }
            if self.removed { return }
        }
        self.armOutbound(context: context)
    }

    // MARK: Time

    /// When a batch sent now arrives: now + latency + jitter, never before the batch ahead of it.
    private func due(after last: inout NIODeadline, now: NIODeadline) -> NIODeadline {
        let extra = self.jitter > 0 ? Int64(self.random.next() % UInt64(self.jitter + 1)) : 0
        let due = max(now + .nanoseconds(self.latency + extra), last)
        last = due
        return due
    }
}
