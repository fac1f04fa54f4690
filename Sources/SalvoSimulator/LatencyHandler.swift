import DequeModule
import NIOCore

/// A network's distance: sits next to the socket (below TLS) and holds every byte `latency` (plus a seeded jitter
/// of up to `jitter`) in each direction, so that the handshake, SETTINGS, WINDOW_UPDATE and answers all arrive as
/// late as over a real network, not only the answers.
///
/// Order is kept: a batch is never due before the one ahead of it in the same direction, so jitter spreads the
/// delays without reordering bytes. Reads of one read cycle travel together, with their read-complete; the end of
/// the connection comes after the bytes before it, and a close waits for the writes queued ahead of it. One timer
/// per direction at a time, set for the head of its queue. Bandwidth is not modelled: the held bytes are the
/// bandwidth-delay product of an unlimited link. Confined to its channel's event loop.
final class LatencyHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private enum Inbound {
        case reads([NIOAny])
        case inactive
    }

    private enum Outbound {
        case write(NIOAny, EventLoopPromise<Void>?)
        case flush
        case close(CloseMode, EventLoopPromise<Void>?)
    }

    private let latency: Int64
    private let jitter: Int64
    private var random: SeededGenerator
    private var inbound = Deque<(due: NIODeadline, event: Inbound)>()
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
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.reading.append(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard !self.reading.isEmpty else { return }
        let reads = self.reading
        self.reading = []
        self.inbound.append((self.due(after: &self.lastInboundDue, now: context.eventLoop.now), .reads(reads)))
        self.armInbound(context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !self.reading.isEmpty { self.channelReadComplete(context: context) }
        guard !self.inbound.isEmpty else { return context.fireChannelInactive() }
        // The end of the stream travels behind the bytes before it, with no delay of its own.
        self.inbound.append((self.lastInboundDue, .inactive))
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
            switch first.event {
            case .reads(let reads):
                for read in reads { context.fireChannelRead(read) }
                context.fireChannelReadComplete()
            case .inactive:
                context.fireChannelInactive()
            }
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
