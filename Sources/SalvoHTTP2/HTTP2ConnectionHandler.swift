import APNSWire
import NIOCore
import NIOHPACK
import NIOHTTP2
import SalvoEngine

/// Drives one HTTP/2 connection's `HTTP2ConnectionStateMachine`: turns frames, channel events and timers into
/// the machine's events (with the time read from the clock), and carries out the actions it answers with:
/// writes requests (HEADERS + DATA on new streams, one flush per batch), PINGs and resets, hands results to the
/// job, asks the pool for a replacement, closes.
///
/// Sits behind `NIOHTTP2Handler` (frame level, no stream channels: a stream is a dictionary entry in the
/// machine, not a child channel). Confined to its channel's event loop; not `Sendable`.
final class HTTP2ConnectionHandler: ChannelInboundHandler, HTTP2ConnectionDriver {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// Called on the event loop when the connection takes no more rows (GOAWAY, stream ids used up): the pool
    /// opens a replacement.
    var onGoAway: (() -> Void)?
    /// Called on the event loop when the server's first SETTINGS arrive: TLS and HTTP/2 are up.
    var onReady: (() -> Void)?
    /// Whether the server's SETTINGS have arrived on this connection.
    var isReady: Bool { self.machine.isReady }
    /// Whether the connection read any answer.
    var answered: Bool { self.machine.answers > 0 }
    /// Why this connection failed before it was ready in a way retrying cannot heal, if it did.
    var hopeless: String?
    /// Whether the connection closed because the job had no row left for it.
    var finished: Bool { self.machine.finished }

    private let job: HTTP2JobContext
    private var machine: HTTP2ConnectionStateMachine
    private var context: ChannelHandlerContext?
    private var timer: Scheduled<Void>?
    private var wakeUp: Scheduled<Void>?
    /// Inbound connection window target; WINDOW_UPDATE tops it up when half is used.
    private let windowTarget = 1 << 20

    /// - Parameters:
    ///   - firstStreamID: the first stream's id: 1, or near the end of the id space in tests.
    ///   - random: this connection's generator (backoff jitter).
    init(job: HTTP2JobContext, firstStreamID: Int32 = 1, random: SplitMix64) {
        self.job = job
        self.machine = HTTP2ConnectionStateMachine(
            configuration: job.connectionConfiguration,
            outcomes: job.emptyOutcomes,
            firstStreamID: firstStreamID,
            random: random,
            now: .now()
        )
    }

    /// What the `NIOHTTP2Handler` in front of this one is set up with: push off, 1 MiB stream windows, and answers'
    /// header blocks read up to `HTTP2AnswerDecoder.maximumHeaderList` bytes over as many CONTINUATION frames as that
    /// takes (a larger header block than APNs sends is read, not a connection error that loses the answers).
    static var `protocol`: NIOHTTP2Handler.ConnectionConfiguration {
        var configuration = NIOHTTP2Handler.ConnectionConfiguration()
        configuration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 0),
            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HTTP2AnswerDecoder.maximumHeaderList),
        ]
        // Enough CONTINUATION frames of 1 KiB for the whole list: a server may cut its blocks small.
        configuration.maximumSequentialContinuationFrames = HTTP2AnswerDecoder.maximumHeaderList / 1024
        // The request headers are built by `HTTP2RequestTemplate`, valid by construction; checking them again costs
        // a few percent per request.
        configuration.headerBlockValidation = .disabled
        configuration.contentLengthValidation = .disabled
        return configuration
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelActive(context: ChannelHandlerContext) {
        self.machine.opened(now: .now())
        self.scheduleTick(context: context)
        // The first WINDOW_UPDATE raises the connection window from 64 KiB, so error bodies never stall.
        let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: self.windowTarget))
        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        self.wakeUp?.cancel()
        self.wakeUp = nil
        self.perform(self.machine.closed(now: .now()))
        self.job.connectionClosed(ObjectIdentifier(self))
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = self.unwrapInboundIn(data)
        let now = NIODeadline.now()
        let id = Int32(Int(frame.streamID))
        switch frame.payload {
        case .headers(let headers):
            let fields = headers.headers
            self.perform(
                self.machine.headersReceived(
                    streamID: id,
                    status: fields.first(name: ":status").flatMap { Int($0) },
                    apnsID: fields.first(name: "apns-id"),
                    retryAfter: fields.first(name: "retry-after").flatMap { Int64($0) },
                    endStream: headers.endStream,
                    now: now
                )
            )
        case .data(let data):
            guard case .byteBuffer(let bytes) = data.data else { return self.machine.frameReceived(now: now) }
            self.perform(self.machine.dataReceived(streamID: id, bytes: bytes, endStream: data.endStream, now: now))
        case .rstStream(let code):
            self.perform(self.machine.streamClosed(streamID: id, code: code, now: now))
        case .settings(.settings(let settings)):
            let maximum = settings.last { $0.parameter == .maxConcurrentStreams }?.value
            let window = settings.last { $0.parameter == .initialWindowSize }?.value
            self.perform(
                self.machine.settingsReceived(maximumConcurrentStreams: maximum, initialWindowSize: window, now: now)
            )
        case .goAway(let lastStreamID, _, let opaqueData):
            let reason = opaqueData.flatMap { APNSErrorBody(jsonBytes: Array($0.readableBytesView))?.reason }
            self.perform(self.machine.goAwayReceived(lastStreamID: Int32(Int(lastStreamID)), reason: reason, now: now))
        case .ping(_, ack: true):
            self.perform(self.machine.pingAcknowledged(now: now))
        default:
            self.machine.frameReceived(now: now)
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.perform(self.machine.readComplete())
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.writeRequests() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // NIOHTTP2 raises a few events per stream (created, window updated, closed); ours is the last handler,
        // so the per-stream ones stop here rather than walk on to the pipeline's tail.
        switch event {
        case let closed as StreamClosedEvent:
            // A stream the protocol layer closed before its answer reached us (a stream error, or the streams a
            // GOAWAY cut off); a stream that got its answer is already gone from the machine.
            let id = Int32(Int(closed.streamID))
            self.perform(self.machine.streamClosed(streamID: id, code: closed.reason ?? .cancel, now: .now()))
        case let window as NIOHTTP2WindowUpdatedEvent:
            if window.streamID == .rootStream, let size = window.inboundWindowSize, size < self.windowTarget / 2 {
                let increment = self.windowTarget - size
                let frame = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
                context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
            }
        case is NIOHTTP2StreamCreatedEvent:
            break
        default:
            context.fireUserInboundEventTriggered(event)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // Stream errors only end their stream (the StreamClosedEvent settles it); anything else ends the
        // connection.
        if error is NIOHTTP2Errors.StreamError { return }
        if self.hopeless == nil && !self.isReady {
            self.hopeless = HTTP2ConnectFailure.hopeless(connectionError: error)
        }
        self.perform(self.machine.failed("\(error)", now: .now()))
    }

    /// Carries out the machine's actions, in the order `Actions` documents.
    private func perform(_ actions: HTTP2ConnectionStateMachine.Actions) {
        guard let context = self.context else { return }
        for id in actions.resetStreams {
            let frame = HTTP2Frame(streamID: HTTP2StreamID(id), payload: .rstStream(.cancel))
            context.write(self.wrapOutboundOut(frame), promise: nil)
        }
        if actions.sendPing {
            let frame = HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false))
            context.write(self.wrapOutboundOut(frame), promise: nil)
        }
        if actions.sendPing || !actions.resetStreams.isEmpty { context.flush() }
        if let note = actions.note { self.job.noteConnectionError(note) }
        if let stop = actions.stopJob { self.job.work.stop(stop) }
        if let renewal = actions.renewToken {
            let result = self.job.token?.renew(after: renewal.bearer) ?? .refused("no provider token to renew")
            self.perform(self.machine.tokenRenewed(renewal, result: result, now: .now()))
        }
        // The results go back before the connection closes, so the job never finishes without them.
        if actions.giveBack, let results = self.machine.takeResults() {
            self.job.record(results, from: ObjectIdentifier(self))
        }
        if actions.ready {
            self.onReady?()
            self.onReady = nil
        }
        if actions.retire {
            self.onGoAway?()
            self.onGoAway = nil
        }
        if actions.close { context.close(promise: nil) }
        if actions.writeRequests { self.writeRequests() }
    }

    /// Takes as many rows as the machine has room for and writes them, then flushes once.
    private func writeRequests() {
        guard let context = self.context else { return }
        // Nothing in flight here and no row left for any connection: this one closes now, not with the last.
        if self.machine.openStreams == 0, self.job.work.noRowsLeft {
            self.perform(self.machine.noRowsLeft(now: .now()))
            return
        }
        let room = self.machine.roomToWrite(isWritable: context.channel.isWritable)
        guard room > 0 else { return }
        let now = NIODeadline.now()
        let (items, rateLimited, nextDelayed) = self.job.take(room: room, now: now)
        guard !items.isEmpty else {
            guard !self.job.work.isDone else { return }
            self.scheduleWakeUp(at: self.machine.noRowsReady(now: now, nextDelayed: nextDelayed))
            return
        }
        let bearer = self.job.token?.current()
        let (first, actions) = self.machine.writing(items, bearer: bearer, now: now)
        let payload = HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(self.job.template.payload), endStream: true))
        var id = Int(first)
        for item in items {
            let streamID = HTTP2StreamID(Int32(id))
            let headers = self.job.template.headers(
                token: item.row.token,
                authorization: bearer?.authorization,
                bodyLength: item.payload?.readableBytes
            )
            context.write(
                self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))),
                promise: nil
            )
            // A row's own body (a payload template's rendering), or the job's one payload.
            let body = item.payload.map { HTTP2Frame.FramePayload.data(.init(data: .byteBuffer($0), endStream: true)) }
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: body ?? payload)), promise: nil)
            id += 2
        }
        context.flush()
        self.perform(actions)
        // Held back by the rate: look again when the bucket has refilled, not only when answers come.
        if rateLimited, let slot = self.job.nextRateSlot(now: now) {
            self.scheduleWakeUp(at: self.machine.noRowsReady(now: now, nextDelayed: slot))
        }
    }

    private func scheduleWakeUp(at deadline: NIODeadline?) {
        guard let deadline, let context = self.context else { return }
        self.wakeUp = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) {
            self.wakeUp = nil
            self.perform(self.machine.wokeUp())
        }
    }

    /// One timer per connection, not one per request.
    private func scheduleTick(context: ChannelHandlerContext) {
        self.timer = context.eventLoop.assumeIsolated().scheduleTask(in: self.machine.tickInterval) {
            guard self.machine.state != .closed else { return }
            self.perform(self.machine.tick(now: .now()))
            if let context = self.context { self.scheduleTick(context: context) }
        }
    }
}
